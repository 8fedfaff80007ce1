"""rollwright.yaml `preview`: the noise rules of pull request previews and `rollwright diff`
(docs/previews.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from shared.engine.config.parsing import StrictModel


class NoiseRuleSettings(StrictModel):
    """One noise rule: exactly one of `label`, `annotation`, `key`, `pointer`."""

    label: str | None = Field(
        default=None, description="Glob of a label key under any `metadata.labels`."
    )
    annotation: str | None = Field(
        default=None, description="Glob of an annotation key under any `metadata.annotations`."
    )
    key: str | None = Field(default=None, description="Glob of a mapping key at any depth.")
    pointer: str | None = Field(
        default=None,
        description="JSON pointer from the document's top (`/spec/replicas`); `*` globs one "
        "segment.",
    )
    kinds: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs of the document kinds the rule applies to (default: all).",
    )

    @model_validator(mode="after")
    def _one_target(self) -> NoiseRuleSettings:
        given = [name for name, value in self._targets() if value is not None]
        if len(given) != 1:
            raise ValueError(
                "a noise rule needs exactly one of label, annotation, key, pointer"
                + (f" (got {', '.join(given)})" if given else "")
            )
        if self.pointer is not None and not self.pointer.startswith("/"):
            raise ValueError("pointer must start with '/' (a JSON pointer)")
        return self

    def _targets(self) -> list[tuple[str, str | None]]:
        return [
            ("label", self.label),
            ("annotation", self.annotation),
            ("key", self.key),
            ("pointer", self.pointer),
        ]

    def target(self) -> tuple[Literal["label", "annotation", "key", "pointer"], str]:
        """(which kind of rule, its pattern)."""
        for name, value in self._targets():
            if value is not None:
                return name, value  # type: ignore[return-value]
        raise AssertionError("validated: one target is set")


class PreviewSettings(StrictModel):
    """Pull request previews and `rollwright diff` (docs/previews.md)."""

    default_noise: bool = Field(
        default=True,
        alias="defaultNoise",
        description="Hide the built-in noise: labels `helm.sh/chart` and "
        "`app.kubernetes.io/version`, annotations `checksum/*`, `caBundle` fields.",
    )
    noise: list[NoiseRuleSettings] = Field(
        default_factory=list,
        description="More noise rules: a changed resource whose only differences match them "
        "is hidden from previews and listed as hidden.",
    )
