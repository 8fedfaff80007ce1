"""rollwright.yaml `schemas`: whether rendered objects are checked against the Kubernetes
schemas (and the CRDs the render carries), per root, and the Kubernetes version of roots that
declare none (docs/formats/rollwright-yaml.md)."""

from __future__ import annotations

import fnmatch
from typing import Any, Literal

from pydantic import Field, field_validator

from shared.engine.config.parsing import StrictModel

SchemaMode = Literal["strict", "warn", "off"]


def _mode_text(value: Any) -> Any:
    # `mode: off` is the boolean false in YAML 1.1, which the fleet's files are read as.
    return "off" if value is False else value


def _version_text(value: Any) -> Any:
    # `kubeVersion: 1.30` is a float in YAML; a version is text.
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class SchemaRule(StrictModel):
    roots: list[str] = Field(
        description="Globs of root ids (`legacy/*`; `*` matches across `/`) the mode applies to."
    )
    mode: SchemaMode = Field(description="`strict`, `warn` or `off` for these roots.")

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return _mode_text(value)


class SchemaSettings(StrictModel):
    """How rendered objects are checked against the API server's schemas."""

    mode: SchemaMode = Field(
        default="strict",
        description="`strict`: an object the API server would refuse (a wrong type, an "
        "unknown field, a missing required field) refuses the root's render. `warn`: the "
        "same findings are warnings. `off`: no check. Kinds with no schema (no built-in "
        "kind, no CRD in the render) are named as unchecked in `strict` and `warn`.",
    )
    kube_version: str | None = Field(
        default=None,
        alias="kubeVersion",
        description="Kubernetes version whose schemas check atlas releases that declare "
        "none (`atlas.capabilities`, a helmfile's `kubeVersion`). Default: the version Helm "
        "assumes without `--kube-version`, which their charts see too. helmfile-layout "
        "releases use their `kubeversion` files, else kube-renderer's v1.25.0.",
    )
    rules: list[SchemaRule] = Field(
        default_factory=list,
        description="Per-root modes; the last rule whose `roots` match a root wins, roots no "
        "rule matches get `mode`.",
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return _mode_text(value)

    @field_validator("kube_version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        return _version_text(value)

    def mode_for(self, root: str) -> SchemaMode:
        mode = self.mode
        for rule in self.rules:
            if any(fnmatch.fnmatchcase(root, glob) for glob in rule.roots):
                mode = rule.mode
        return mode
