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

import posixpath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.engine.config.atlas import Capabilities
from shared.engine.errors import FleetError

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
    # Validators are built on first use (start-up time: `roots --changed` may parse none).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


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
        description="Extra release labels, any scalar read as text (`bootstrap: true`); the "
        "common atlas labels win over them.",
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

    @field_validator("labels", mode="before")
    @classmethod
    def _label_values(cls, value: Any) -> Any:
        return _labels(value)

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
        description="rollwright's spelling of `settings.namespace` (the two may not differ).",
    )
    apps: list[AppInstance] = Field(description="App template instances of this deployment.")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Metadata for deployment automation (ATLAS): free-form, except "
        "`namespace`, the deployment-wide namespace default.",
    )

    @property
    def settings_namespace(self) -> str | None:
        """The deployment-wide namespace: `settings.namespace` (ATLAS) or `namespace`."""
        found = self.settings.get("namespace")
        return str(found) if found not in (None, "") else self.namespace


def _stringify(value: Any) -> Any:
    # `version: 1.2` is a float in YAML; a chart version is always a string.
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def label_text(value: Any) -> str:
    """A label value as helmfile reads it into a string map: `true` → "true", `3` → "3"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _labels(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): label_text(v) for k, v in value.items()}
    return value


def refuse(message: str) -> Any:
    """A validator for a helmfile key rollwright cannot honour: set at all, it is an error
    (with `message`), never silently ignored."""

    def check(value: Any) -> Any:
        if value is not None:
            raise ValueError(message)
        return value

    return check


def refuse_true(message: str) -> Any:
    """Like `refuse`, for a switch: `false` (helmfile's default) is accepted."""

    def check(value: Any) -> Any:
        if value:
            raise ValueError(message)
        return value

    return check


POST_RENDERER = (
    "postRenderer is refused, as ATLAS refuses it: the post-render slot belongs to secret "
    "redaction (helm 4 cannot chain post-renderers), and a render runs no commands; use "
    "jsonPatches or strategicMergePatches"
)
NO_VERIFY = "chart signature verification is not supported (pinned versions are cached by digest)"
NO_DEVEL = "devel (pre-release versions in ranges) is not supported: pin the version you mean"
CREDENTIALS = (
    "credentials never come from the fleet repository: give them to the worker in "
    "ROLLWRIGHT_CHART_CREDENTIALS (docs/formats/atlas.md, Chart repositories)"
)
TLS_FILES = (
    "TLS files never come from the fleet repository: the worker's CA bundle (SSL_CERT_FILE) "
    "serves every repository"
)


class HelmRepository(_Strict):
    """An entry of a helmfile's `repositories:` (helmfile's fields)."""

    name: str
    url: str
    oci: bool = Field(default=False, description="An OCI registry: `name/chart` → oci://url/chart.")
    plainHttp: bool = Field(
        default=False, description="Talk plain HTTP to this OCI registry (helmfile's key)."
    )
    passCredentials: bool | None = Field(
        default=None, description="Accepted: credentials come from the worker's environment."
    )
    managed: str | None = Field(default=None, description="Accepted, no effect (helmfile's).")
    username: Any = None
    password: Any = None
    certFile: Any = None
    keyFile: Any = None
    caFile: Any = None
    insecureSkipTLSVerify: Any = None
    skipTLSVerify: Any = None
    verify: Any = None
    keyring: Any = None

    _no_credentials = field_validator("username", "password")(refuse(CREDENTIALS))
    _no_tls_files = field_validator("certFile", "keyFile", "caFile")(refuse(TLS_FILES))
    _tls = field_validator("insecureSkipTLSVerify", "skipTLSVerify")(
        refuse_true("skipping TLS verification is not supported: trust the CA instead")
    )
    _verify = field_validator("verify")(refuse_true(NO_VERIFY))
    _keyring = field_validator("keyring")(refuse(NO_VERIFY))


class SetValue(_Strict):
    """An entry of `set:` / `setString:` (helm's `--set name=value`, `--set-file`)."""

    name: str = Field(description="A `--set` path: `image.tag`, `args[0]`, `a\\.b`.")
    value: Any = Field(default=None, description="The value, as helm parses `--set` text.")
    values: list[Any] | None = Field(default=None, description="A list value: `name={a,b}`.")
    file: str | None = Field(
        default=None, description="`--set-file`: the content of a file relative to the template."
    )


class DeployTime(_Strict):
    """helmfile keys that matter only when helmfile installs releases: accepted, no effect
    on the rendered manifests (Argo CD / Flux do the applying)."""

    createNamespace: bool | None = None
    needs: list[str] | None = None
    wait: bool | None = None
    waitForJobs: bool | None = None
    waitRetries: int | None = None
    timeout: int | None = None
    atomic: bool | None = None
    cleanupOnFail: bool | None = None
    recreatePods: bool | None = None
    force: bool | None = None
    historyMax: int | None = None
    disableValidation: bool | None = None
    disableOpenAPIValidation: bool | None = None
    kubeContext: str | None = None
    reuseValues: bool | None = None
    deleteWait: bool | None = None
    deleteTimeout: int | None = None


class Rendering(DeployTime):
    """Keys a release shares with `helmDefaults`."""

    skipSchemaValidation: bool | None = Field(
        default=None,
        description="Skip the chart's values.schema.json. ATLAS's default is true (it injects "
        "`atlas` and the hierarchy into every release); an explicit false validates.",
    )
    skipDeps: bool | None = Field(
        default=None,
        description="Do not fetch Chart.yaml dependencies missing from charts/ (they are then "
        "an error, as in Helm).",
    )
    postRenderer: Any = None
    postRendererArgs: Any = None
    verify: bool | None = None
    keyring: Any = None
    devel: bool | None = None
    enableDNS: bool | None = None

    _post = field_validator("postRenderer", "postRendererArgs")(refuse(POST_RENDERER))
    _verify = field_validator("verify")(refuse_true(NO_VERIFY))
    _keyring = field_validator("keyring")(refuse(NO_VERIFY))
    _devel = field_validator("devel")(refuse_true(NO_DEVEL))
    _dns = field_validator("enableDNS")(
        refuse_true("enableDNS is refused: renders look nothing up on the network")
    )


class HelmDefaults(Rendering):
    """`helmDefaults:` of a template: defaults of every release in it."""


class HelmRelease(Rendering, Capabilities):
    """One release of a template's helmfile (helmfile release syntax)."""

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
    set: list[SetValue] = Field(
        default_factory=list, description="helm `--set` values, over every values level."
    )
    setString: list[SetValue] = Field(
        default_factory=list, description="helm `--set-string` values (always strings)."
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Release labels; any scalar, read as text."
    )
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
    hooks: bool | None = Field(
        default=None,
        description="Helm hook resources, written under hooks/: rendered unless false "
        "(default: rollwright.yaml render.hooks, itself true).",
    )
    tests: bool = Field(default=False, description="Keep Helm test resources.")
    installed: Any = None
    condition: Any = None
    transformers: Any = None
    forceNamespace: Any = None
    valuesTemplate: Any = None
    setTemplate: Any = None
    missingFileHandler: Any = None

    _switches = field_validator("installed", "condition")(
        refuse(
            "ATLAS strips installed/condition (a deployment.yaml entry is the intent to "
            "deploy); rollwright refuses them so nothing is silently skipped or kept: use "
            "apps[].disabled"
        )
    )
    _transformers = field_validator("transformers")(
        refuse("kustomize transformers are not supported: use jsonPatches or strategicMergePatches")
    )
    _force_namespace = field_validator("forceNamespace")(
        refuse("forceNamespace is not supported: set the release namespace")
    )
    _templates = field_validator("valuesTemplate", "setTemplate")(
        refuse("valuesTemplate/setTemplate are not supported: use values and set")
    )
    _missing = field_validator("missingFileHandler")(
        refuse("missingFileHandler is not supported: a missing values file is always an error")
    )

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        return _stringify(value)

    @field_validator("labels", mode="before")
    @classmethod
    def _label_values(cls, value: Any) -> Any:
        return _labels(value)

    @field_validator("hooks", mode="before")
    @classmethod
    def _hooks(cls, value: Any) -> Any:
        if isinstance(value, list):
            raise ValueError(
                "helmfile lifecycle hooks (events and commands) are not supported: a render "
                "runs no commands (`hooks: true|false` keeps or drops the chart's Helm hooks)"
            )
        return value


class HelmfileTemplate(Capabilities):
    """`templates/<template>/helmfile.yaml.gotmpl` after Go template rendering. Its own
    `kubeVersion` / `apiVersions` are the defaults of its releases (helmfile's)."""

    model_config = ConfigDict(defer_build=True)  # as `_Strict` (start-up time)

    repositories: list[HelmRepository] = Field(default_factory=list)
    releases: list[HelmRelease] = Field(default_factory=list)
    helmDefaults: HelmDefaults = Field(default_factory=HelmDefaults)
    commonLabels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels of every release of this template (below the release's own).",
    )
    templates: dict[str, Any] | None = Field(
        default=None, description="Accepted: a place for YAML anchors (helmfile's)."
    )

    @field_validator("commonLabels", mode="before")
    @classmethod
    def _label_values(cls, value: Any) -> Any:
        return _labels(value)


VALUES_SCHEMA: dict[str, Any] = {
    "title": "atlas values file",
    "description": "global.values.*, group.values.*, cluster.values.*, a deployment's values.* "
    "and template values files: any mapping. The `atlas` key is reserved and always replaced.",
    "type": "object",
}

ATLAS_SCHEMAS: dict[str, type[BaseModel] | dict[str, Any]] = {
    "atlas-deployment": DeploymentFile,
    "atlas-helmfile": HelmfileTemplate,
    "atlas-values": VALUES_SCHEMA,
}


def resolve_path(
    base: str,
    rel: str,
    *,
    what: str,
    inside: str | None = None,
    line: int | None = None,
    origin: str = "",
) -> str:
    """A path relative to `base` as a repo path: inside the repo, inside `inside` when
    given, and never under deployments/ for template references (see docs: affected)."""
    if rel.startswith("/"):
        raise FleetError(
            f"{what} {rel!r}: absolute paths are not allowed; use a path relative to {base}",
            path=origin,
            line=line,
        )
    path = posixpath.normpath(posixpath.join(base, rel))
    if path == ".." or path.startswith("../"):
        raise FleetError(f"{what} {rel!r} points outside the repository", path=origin, line=line)
    if inside is not None:
        if path != inside and not path.startswith(inside + "/"):
            raise FleetError(f"{what} {rel!r} must stay inside {inside}/", path=origin, line=line)
    elif path == DEPLOYMENTS or path.startswith(DEPLOYMENTS + "/"):
        raise FleetError(
            f"{what} {rel!r}: templates may not read files under {DEPLOYMENTS}/ (values "
            "there are layered by the hierarchy)",
            path=origin,
            line=line,
        )
    return path
