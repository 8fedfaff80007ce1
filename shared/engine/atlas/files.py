"""The files of an atlas fleet: names, places and the pydantic models that parse them.

    deployments/global.values.{sops.yaml,yaml,yaml.gotmpl}
    deployments/apps/<deployment>/deployment.yaml (+ values.*)     every cluster
    deployments/<group>/group.values.*, apps/...                    clusters under the group
    deployments/<group>/<cluster>/cluster.values.*, apps/...        one cluster (a root)
    templates/<template>/helmfile.yaml.gotmpl (or helmfile.yaml)    app templates

The models are the single source of truth for `docs/schemas/atlas-*.json` (see
`shared.engine.schemas`); unknown keys are errors so that typos never pass silently.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEPLOYMENTS = "deployments"
TEMPLATES = "templates"
APPS = "apps"
DEPLOYMENT_FILE = "deployment.yaml"
HELMFILES = ("helmfile.yaml.gotmpl", "helmfile.yaml")

# Per level, lowest precedence first: SOPS < plain YAML < Go-templated YAML.
VALUE_SUFFIXES = (".sops.yaml", ".yaml", ".yaml.gotmpl")
GLOBAL_STEM = "global.values"
GROUP_STEM = "group.values"
CLUSTER_STEM = "cluster.values"
DEPLOYMENT_STEM = "values"


def join(*parts: str) -> str:
    """Repo-relative POSIX path from parts, skipping empty ones. Plain string work: the
    render path joins paths thousands of times and pathlib would dominate it."""
    return "/".join(p for p in parts if p)


def level_names(stem: str) -> tuple[str, ...]:
    """File names of one level in merge order (`cluster.values.sops.yaml`, ...)."""
    return tuple(stem + suffix for suffix in VALUE_SUFFIXES)


GLOBAL_FILES = frozenset(level_names(GLOBAL_STEM))
GROUP_FILES = frozenset(level_names(GROUP_STEM))
CLUSTER_FILES = frozenset(level_names(CLUSTER_STEM))

# Instance and release names end up in Helm release names and Kubernetes object names.
_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
_DIR_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


NameStyle = Literal["prefix", "suffix"]


class AppInstance(_Strict):
    """One entry of `apps:` in deployment.yaml: an instance of an app template."""

    template: str = Field(
        pattern=_DIR_NAME, description="App template: a directory under templates/."
    )
    name: str | None = Field(
        default=None,
        pattern=_NAME,
        description="Instance name (default: the template name). Release names become "
        "`<name>-<release>` (nameStyle prefix) or `<release>-<name>` (suffix) unless the "
        "instance name equals the template or the release name.",
    )
    nameStyle: NameStyle | None = Field(
        default=None, description="Overrides the deployment's nameStyle for this instance."
    )
    variant: str = Field(default="default", description="Value of the `variant` release label.")
    namespace: str | None = Field(
        default=None,
        description="Namespace of the instance's releases unless the template sets one.",
    )
    values: dict[str, Any] | list[dict[str, Any]] = Field(
        default_factory=dict,
        description="Instance values (level 3), a mapping or a list of mappings merged in order.",
    )
    secrets: list[str] = Field(
        default_factory=list,
        description="SOPS files (level 5), relative to the deployment directory and inside it.",
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Extra release labels (the common atlas labels win over them).",
    )
    jsonPatches: list[dict[str, Any]] = Field(
        default_factory=list,
        description="RFC 6902 patches ({target, patch}) run after the template's patches on "
        "the objects of all the instance's releases; each must match at least one object.",
    )
    strategicMergePatches: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Strategic merge patches run after the template's patches on the objects "
        "of all the instance's releases; each must match at least one object.",
    )
    disabled: bool = Field(default=False, description="Skip this instance entirely.")

    @property
    def instance_name(self) -> str:
        return self.name or self.template


class DeploymentFile(_Strict):
    """`apps/<deployment>/deployment.yaml`."""

    nameStyle: NameStyle = Field(
        default="prefix", description="How instance names combine with release names."
    )
    namespace: str | None = Field(
        default=None,
        description="Default namespace of every instance (default: the deployment name).",
    )
    apps: list[AppInstance] = Field(description="App template instances of this deployment.")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Free-form metadata for deployment automation (ATLAS); not used to render.",
    )


class HelmRepository(_Strict):
    name: str
    url: str
    oci: bool = Field(default=False, description="An OCI registry: `name/chart` → oci://url/chart.")


def _stringify(value: Any) -> Any:
    # `version: 1.2` is a float in YAML; a chart version is always a string.
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class HelmRelease(_Strict):
    """One release of a template's helmfile (helmfile release syntax, rendering subset)."""

    name: str = Field(pattern=_NAME)
    chart: str = Field(
        description="Local path relative to the template directory (a chart, a kustomization "
        "or a directory of manifests), `repo/chart` with a `repositories:` entry, or oci://."
    )
    version: str | None = None
    namespace: str | None = None
    values: list[str | dict[str, Any]] = Field(
        default_factory=list,
        description="Values files (relative to the template directory; `.gotmpl` rendered) "
        "and inline mappings, merged in order (level 2).",
    )
    secrets: list[str] = Field(
        default_factory=list, description="SOPS files relative to the template directory."
    )
    labels: dict[str, str] = Field(default_factory=dict)
    jsonPatches: list[dict[str, Any] | str] = Field(
        default_factory=list, description="RFC 6902 patches, inline or as files."
    )
    strategicMergePatches: list[dict[str, Any] | str] = Field(
        default_factory=list, description="Strategic merge patches, inline or as files."
    )
    remove_labels: list[str] = Field(
        default_factory=list, description="Label keys removed from every rendered object."
    )
    crds: bool = Field(default=True, description="Render the chart's crds/ folder.")
    hooks: bool = Field(default=False, description="Keep Helm hook resources.")
    tests: bool = Field(default=False, description="Keep Helm test resources.")
    # Deploy-time helmfile settings: accepted so existing templates validate, no effect on
    # the rendered manifests (Argo CD / Flux do the applying).
    createNamespace: bool | None = None
    needs: list[str] | None = None
    wait: bool | None = None
    waitForJobs: bool | None = None
    timeout: int | None = None
    atomic: bool | None = None
    skipSchemaValidation: bool | None = None

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        return _stringify(value)


class HelmfileTemplate(_Strict):
    """`templates/<template>/helmfile.yaml.gotmpl` after Go template rendering."""

    repositories: list[HelmRepository] = Field(default_factory=list)
    releases: list[HelmRelease] = Field(default_factory=list)


VALUES_SCHEMA: dict[str, Any] = {
    "title": "atlas values file",
    "description": "global.values.*, group.values.*, cluster.values.*, a deployment's values.* "
    "and template values files: any mapping. The `atlas` key is reserved and always replaced.",
    "type": "object",
}

FILE_SCHEMAS: dict[str, type[BaseModel] | dict[str, Any]] = {
    "atlas-deployment": DeploymentFile,
    "atlas-helmfile": HelmfileTemplate,
    "atlas-values": VALUES_SCHEMA,
}
