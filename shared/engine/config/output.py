"""rollwright.yaml `output` and `render`: how rendered resources are named, and which ones a
render keeps."""

from __future__ import annotations

from pydantic import Field, field_validator

from shared.engine.config.parsing import StrictModel
from shared.engine.manifests import documents


class OutputSettings(StrictModel):
    pattern: str = Field(
        default=documents.DEFAULT_PATTERN,
        description="File name of each rendered resource, relative to the root directory. "
        "Fields: " + ", ".join(sorted(documents.PATTERN_FIELDS)),
    )

    @field_validator("pattern")
    @classmethod
    def _check_pattern(cls, value: str) -> str:
        problem = documents.validate_pattern(value)
        if problem:
            raise ValueError(problem)
        return value


class RenderSettings(StrictModel):
    crds: bool = Field(default=True, description="Render CRDs from charts' crds/ folders.")
    hooks: bool = Field(
        default=True,
        description="Render Helm hook resources under hooks/ (as `helm template` and Argo CD "
        "do); false drops them unless a release says `hooks: true`.",
    )
    tests: bool = Field(default=False, description="Keep Helm test resources (tests/).")
    cluster_scoped_kinds: list[str] = Field(
        default_factory=list,
        alias="clusterScopedKinds",
        description="Extra cluster-scoped kinds (beyond Kubernetes' own and CRDs in the render).",
    )
