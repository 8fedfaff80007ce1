"""rollwright.yaml `atlas`: how the atlas layout reads a fleet, and the `.Capabilities` charts
see (also the `kubeVersion` / `apiVersions` keys of atlas helmfiles)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from shared.engine.config.parsing import StrictModel


class Capabilities(StrictModel):
    """What `.Capabilities` tells charts: the cluster's Kubernetes version and extra APIs.
    Also the `kubeVersion` / `apiVersions` keys of atlas helmfiles and their releases."""

    kube_version: str | None = Field(
        default=None,
        alias="kubeVersion",
        description="Kubernetes version of the cluster (`v1.31.2`), as `helm template "
        "--kube-version`. Also checked against a chart's `kubeVersion` constraint.",
    )
    api_versions: list[str] | None = Field(
        default=None,
        alias="apiVersions",
        description="Extra API versions (`monitoring.coreos.com/v1`, or "
        "`monitoring.coreos.com/v1/ServiceMonitor`), as `helm template --api-versions`.",
    )

    @field_validator("kube_version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        # `kubeVersion: 1.30` is a float in YAML; a version is text.
        return (
            str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        )


class ClusterCapabilities(Capabilities):
    roots: list[str] = Field(
        description="Globs of root ids (`prod/*`) these capabilities apply to; the last "
        "matching entry wins."
    )


class AtlasSettings(StrictModel):
    """How the atlas layout reads a fleet (docs/formats/atlas.md)."""

    namespaces: Literal["atlas", "template-first"] = Field(
        default="atlas",
        description="`atlas`: a release's namespace is `apps[].namespace`, else the "
        "deployment's `settings.namespace`, else the template release's `namespace:`, else "
        "the deployment name (ATLAS). `template-first`: the template release's `namespace:` "
        "wins over the deployment's (rollwright's earlier rule).",
    )
    group_values: Literal["innermost", "all"] = Field(
        default="innermost",
        alias="groupValues",
        description="`innermost`: a cluster reads the group.values.* and apps/ of its parent "
        "directory only (ATLAS). `all`: of every group directory above it, outermost first.",
    )
    capabilities: Capabilities = Field(
        default_factory=Capabilities,
        description="Fleet-wide `.Capabilities` (below a template's and a release's own).",
    )
    clusters: list[ClusterCapabilities] = Field(
        default_factory=list,
        description="Per-cluster `.Capabilities`, over the fleet-wide ones.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="The environment Go templates see through `env` and `requiredEnv`: "
        "renders never read the worker's own environment.",
    )
