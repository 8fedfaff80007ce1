"""`rollwright.yaml` at the root of a fleet repo: layout choice and render settings.

Every key is optional; without the file the layout is detected (`config/config.yaml` →
dimensions, `deployments/` → atlas). Unknown keys are errors, so typos do not pass silently.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared import manifests, yamldoc
from shared.errors import FleetError, FleetErrors, Problem
from shared.tree import Tree

CONFIG_FILE = "rollwright.yaml"

M = TypeVar("M", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class OutputSettings(_Strict):
    pattern: str = Field(
        default=manifests.DEFAULT_PATTERN,
        description="File name of each rendered resource, relative to the root directory. "
        "Fields: " + ", ".join(sorted(manifests.PATTERN_FIELDS)),
    )

    @field_validator("pattern")
    @classmethod
    def _check_pattern(cls, value: str) -> str:
        problem = manifests.validate_pattern(value)
        if problem:
            raise ValueError(problem)
        return value


class RenderSettings(_Strict):
    crds: bool = Field(default=True, description="Render CRDs from charts' crds/ folders.")
    hooks: bool = Field(default=False, description="Keep Helm hook resources (hooks/).")
    tests: bool = Field(default=False, description="Keep Helm test resources (tests/).")
    cluster_scoped_kinds: list[str] = Field(
        default_factory=list,
        alias="clusterScopedKinds",
        description="Extra cluster-scoped kinds (beyond Kubernetes' own and CRDs in the render).",
    )


class ExtraInput(_Strict):
    path: str = Field(description="Glob of repo paths (fnmatch, `**` allowed).")
    roots: list[str] = Field(
        default_factory=lambda: ["*"], description="Globs of root ids affected by those paths."
    )


class AffectedSettings(_Strict):
    extra_inputs: list[ExtraInput] = Field(
        default_factory=list,
        alias="extraInputs",
        description="Files outside the fleet inputs whose change should re-render roots.",
    )


class GitPublishSettings(_Strict):
    repository: str = Field(
        default="",
        description="Repository to publish to: `owner/name`, a clone URL, or empty for the "
        "fleet repo itself.",
    )
    branch: str = Field(default="rendered", description="Branch that receives the renders.")
    path: str = Field(
        default="{root}/",
        description="Where a root's tree goes in that branch; `{root}` is the root id. Only "
        "this subtree is replaced.",
    )


class S3PublishSettings(_Strict):
    bucket: str = Field(default="", description="Bucket (the worker's S3 endpoint and keys).")
    prefix: str = Field(
        default="{root}/", description="Key prefix per root; `{root}` is the root id."
    )


class PublishSettings(_Strict):
    """Where approved renders go (docs/publishing.md)."""

    target: Literal["blob", "git", "s3"] = Field(
        default="blob",
        description="`blob`: the service's blob store (embedded stack); `git`: a branch or "
        "repository Argo CD / Flux syncs; `s3`: a prefix for Flux Bucket sources.",
    )
    secrets: Literal["refuse", "sops"] = Field(
        default="refuse",
        description="A render with secret values: `refuse` to publish it, or `sops` to "
        "re-encrypt those documents for the recipients in the fleet's .sops.yaml.",
    )
    git: GitPublishSettings = Field(default_factory=GitPublishSettings)
    s3: S3PublishSettings = Field(default_factory=S3PublishSettings)


class PreviewSettings(_Strict):
    """Pull request previews (docs/previews.md). Owned by the preview work."""


class RolloutSettings(_Strict):
    """Patch promotion (docs/promotion.md). Owned by the promotion work."""


class FleetConfig(_Strict):
    """The whole `rollwright.yaml`."""

    layout: Literal["atlas", "dimensions"] | None = Field(
        default=None, description="Fleet layout; detected when absent."
    )
    output: OutputSettings = Field(default_factory=OutputSettings)
    render: RenderSettings = Field(default_factory=RenderSettings)
    affected: AffectedSettings = Field(default_factory=AffectedSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    preview: PreviewSettings = Field(default_factory=PreviewSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)


def load(tree: Tree) -> FleetConfig:
    if not tree.is_file(CONFIG_FILE):
        return FleetConfig()
    text = tree.read_text(CONFIG_FILE)
    data = yamldoc.loads(text, CONFIG_FILE) or {}
    return parse_model(FleetConfig, data, text=text, source=CONFIG_FILE)


def parse_model(model: type[M], data: Any, *, text: str, source: str) -> M:
    """Validate `data` with a pydantic model; errors become `path:line: message` problems."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise FleetErrors(validation_problems(err, text=text, source=source)) from None


def validation_problems(err: ValidationError, *, text: str, source: str) -> list[Problem]:
    problems = []
    for item in err.errors():
        loc = tuple(p for p in item["loc"] if isinstance(p, str | int))
        # pydantic adds the union member / validator name to loc; keep real keys only
        line = yamldoc.key_line(text, loc)
        where = "/".join(str(p) for p in loc) or "(top level)"
        kind = item["type"]
        if kind == "extra_forbidden":
            message = f"unknown key {where!r}"
        elif kind == "missing":
            message = f"missing required key {where!r}"
        else:
            message = f"{where}: {item['msg']}"
        problems.append(Problem(source, line, message))
    return problems


def require(condition: bool, message: str, *, path: str, line: int | None = None) -> None:
    if not condition:
        raise FleetError(message, path=path, line=line)
