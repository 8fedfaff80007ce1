"""The files of the dimensions layout and their pydantic models (docs/formats/dimensions.md).

    config/config.yaml                               dimensions, sequence, cluster_types
    config/<type>/application-defaults.yaml          defaults: under every application
    config/<type>/applicationset-defaults.yaml       defaults: under every ApplicationSet
    config/<type>/<name>/metadata.yaml, OWNERS
    config/<type>/<name>/values.yaml                 applications: {<name>: ...}
                                                     (or applicationsets: {<name>: ...})
    config/<type>/<name>/<node>/values.yaml          overrides, a node being one place of
                                                     the sequence at any depth
    config/<type>/<name>/patches/*.yaml              staged patches (not applied)
    config/<type>/<name>/<node>/patches/*.yaml       active for every root under <node>

The generator's spelling (the design document's author's own repository) reads the same tree
with other names; `spelling` tells which one a repository is written in:

    config/<type>/defaults.yaml                      applications.default,
                                                     applicationsets.default
    config/<type>/<name>/<node>/override.yaml        a node's values
    config/<type>/<name>/patch-NNN.yaml              staged (not applied)
    config/<type>/<name>/<node>/patch-NNN.yaml       applied at <node>, after its override

The models define the formats: they parse the files (`extra="forbid"`, so an unknown key is an
error with its line) and the JSON Schemas in docs/schemas are generated from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.engine.dimensions import patches
from shared.engine.tree import join

CONFIG_FILE = "config/config.yaml"
DEFAULT_DIMENSIONS = ("environments", "sectors", "regions")
METADATA_FILE = "metadata.yaml"
OWNERS_FILE = "OWNERS"
VALUES_FILE = "values.yaml"
SOPS_VALUES_FILE = "values.sops.yaml"
# Within one level the encrypted file comes first, so plain values win (as in atlas).
LEVEL_FILES = (SOPS_VALUES_FILE, VALUES_FILE)
PATCHES_DIR = "patches"
# The generator's spelling (docs/formats/dimensions.md, "The generator's spelling").
AUTHOR_DEFAULTS_FILE = "defaults.yaml"
OVERRIDE_FILE = "override.yaml"
AUTHOR_PATCH_PREFIX = "patch-"
AUTHOR_PATCH_SUFFIX = ".yaml"  # the generator globs patch-*.yaml: a .yml is never read
# Keys of a sequence node besides its children (the next dimension's list).
NODE_KEYS = ("name", "promotion", "soak")

NAME_PATTERN = r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$"
_NAME = NAME_PATTERN
Name = Annotated[
    str,
    Field(
        pattern=_NAME,
        description="Lowercase letters, digits, '-' and '.'; used in paths and object names.",
    ),
]
# A dimension name is a key of config.yaml and (singular) of `.Values.cluster`, so templates
# can write `.Values.cluster.zone`: an identifier.
DIMENSION_NAME = r"^[a-z][a-z0-9_]*$"
DimensionName = Annotated[
    str,
    Field(
        pattern=DIMENSION_NAME,
        description="A level of the sequence, plural by convention (environments, regions, "
        "zones); lowercase letters, digits and '_'.",
    ),
]
Promotion = Literal["automated", "manual"]
Soak = Annotated[
    str,
    Field(
        pattern=r"^([0-9]+[smhd])+$",
        description="How long a patch must stay healthy here before it moves on, e.g. 30m, 1h, "
        "2d, 1h30m.",
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- config/config.yaml --------------------------------------------------------------------


class SequenceNode(BaseModel):
    """One node of the sequence. Its children are listed under the next dimension's name
    (`sectors:` below an environment); a node of the last dimension has none."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, list[SequenceNode]] = Field(init=False)

    name: Name
    promotion: Promotion | None = Field(
        default=None,
        description="How a patch enters this node: automated (the default) or manual "
        "(a Promote click).",
    )
    soak: Soak | None = None

    def children(self) -> list[SequenceNode]:
        return [child for nodes in (self.model_extra or {}).values() for child in nodes]


class ClusterTypeSpec(_Strict):
    name: Name
    applications: list[Name] = Field(
        default_factory=list,
        description="Applications of this type: directories config/<type>/<app>/. Without "
        "applications and applicationsets, the type's directories are discovered (the "
        "generator's way): each one whose values.yaml defines applications.<name> or "
        "applicationsets.<name>.",
    )
    applicationsets: list[Name] = Field(
        default_factory=list,
        description="ApplicationSets of this type: directories config/<type>/<name>/ whose "
        "values define applicationsets.<name>.",
    )
    appVersion: Annotated[str, Field(strict=True)] | None = Field(
        default=None, description="appVersion of the rendered charts of this type (a string)."
    )

    @property
    def lists(self) -> bool:
        """True when config.yaml lists the type's components (else they are discovered)."""
        return bool({"applications", "applicationsets"} & self.model_fields_set)

    def components(self) -> list[Component]:
        """Applications, then ApplicationSets, in the order of config.yaml (discovered ones
        by name)."""
        return [Component(self.name, a, "applications") for a in self.applications] + [
            Component(self.name, s, "applicationsets") for s in self.applicationsets
        ]


class DimensionsConfig(_Strict):
    """`config/config.yaml`."""

    dimensions: list[DimensionName] = Field(
        default_factory=lambda: list(DEFAULT_DIMENSIONS),
        min_length=1,
        description="The levels of the sequence in order, outermost first (default: "
        "environments, sectors, regions). Any names, any depth of 1 or more.",
    )
    sequence: dict[DimensionName, list[SequenceNode]] = Field(
        description="The nodes of the first dimension in promotion order, under its name; "
        "each node lists its children under the next dimension's name."
    )
    cluster_types: list[ClusterTypeSpec] = Field(default_factory=list)


# --- applications --------------------------------------------------------------------------

_StrMap = dict[str, str]


class Application(_Strict):
    """Fields of one Argo CD Application, as written in defaults, values and patch bodies.

    Every field is optional in each file; `null` removes what a lower level set.
    """

    namespace: str | None = Field(
        default=None, description="Namespace of the Application object (default argocd)."
    )
    project: str | None = Field(default=None, description="Argo CD project (default default).")
    source: dict[str, Any] | None = None
    sources: list[Any] | None = None
    destination: dict[str, Any] | None = None
    syncPolicy: dict[str, Any] | None = None
    ignoreDifferences: list[Any] | None = None
    revisionHistoryLimit: Annotated[int, Field(strict=True)] | None = None
    info: list[Any] | None = None
    finalizers: list[str] | None = None
    additionalAnnotations: _StrMap | None = None
    additionalLabels: _StrMap | None = None


# --- ApplicationSets (argoproj.io/v1alpha1, the fields of Argo CD's API) --------------------


class Generator(BaseModel):
    """One generator: one of Argo CD's generator kinds (their bodies are free-form)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    clusters: dict[str, Any] | None = None
    list_: dict[str, Any] | None = Field(default=None, alias="list")
    git: dict[str, Any] | None = None
    matrix: dict[str, Any] | None = None
    merge: dict[str, Any] | None = None
    scmProvider: dict[str, Any] | None = None
    pullRequest: dict[str, Any] | None = None
    clusterDecisionResource: dict[str, Any] | None = None
    plugin: dict[str, Any] | None = None
    selector: dict[str, Any] | None = None


class TemplateMeta(_Strict):
    name: str | None = None
    namespace: str | None = None
    labels: _StrMap | None = None
    annotations: _StrMap | None = None
    finalizers: list[str] | None = None


class TemplateSpec(_Strict):
    """The Application spec of the template (Argo CD's ApplicationSpec)."""

    project: str | None = None
    source: dict[str, Any] | None = None
    sources: list[Any] | None = None
    sourceHydrator: dict[str, Any] | None = None
    destination: dict[str, Any] | None = None
    syncPolicy: dict[str, Any] | None = None
    ignoreDifferences: list[Any] | None = None
    info: list[Any] | None = None
    revisionHistoryLimit: Annotated[int, Field(strict=True)] | None = None


class Template(_Strict):
    metadata: TemplateMeta | None = None
    spec: TemplateSpec | None = None


class AppSetSyncPolicy(_Strict):
    applicationsSync: Literal["create-only", "create-update", "create-delete", "sync"] | None = None
    preserveResourcesOnDeletion: bool | None = None


class AppSetStrategy(_Strict):
    type: Literal["AllAtOnce", "RollingSync"] | None = None
    rollingSync: dict[str, Any] | None = None
    deletionOrder: Literal["AllAtOnce", "Reverse"] | None = None


class IgnoreApplicationDifferences(_Strict):
    name: str | None = None
    jsonPointers: list[str] | None = None
    jqPathExpressions: list[str] | None = None


class PreservedFields(_Strict):
    annotations: list[str] | None = None
    labels: list[str] | None = None


class ApplicationSet(_Strict):
    """Fields of one Argo CD ApplicationSet, as written in defaults, values and patch bodies:
    the object's metadata as for applications, then the ApplicationSet spec's fields.

    Every field is optional in each file; `null` removes what a lower level set.
    `generators` and `template` are required in the merged result.
    """

    namespace: str | None = Field(
        default=None, description="Namespace of the ApplicationSet object (default argocd)."
    )
    additionalAnnotations: _StrMap | None = None
    additionalLabels: _StrMap | None = None
    finalizers: list[str] | None = None
    goTemplate: bool | None = None
    goTemplateOptions: list[str] | None = None
    generators: list[Generator] | None = None
    strategy: AppSetStrategy | None = None
    syncPolicy: AppSetSyncPolicy | None = None
    template: Template | None = None
    templatePatch: str | None = None
    ignoreApplicationDifferences: list[IgnoreApplicationDifferences] | None = None
    preservedFields: PreservedFields | None = None
    applyNestedSelectors: bool | None = None


Section = Literal["applications", "applicationsets"]
# Per-type defaults laid under every application / ApplicationSet.
DEFAULTS_FILES: dict[Section, str] = {
    "applications": "application-defaults.yaml",
    "applicationsets": "applicationset-defaults.yaml",
}


@dataclass(frozen=True)
class Component:
    """An application or an ApplicationSet of a cluster type: a directory of its own."""

    ctype: str
    name: str
    section: Section

    @property
    def dir(self) -> str:
        return join("config", self.ctype, self.name)

    @property
    def kind(self) -> str:
        return "application" if self.section == "applications" else "ApplicationSet"


# --- application files ---------------------------------------------------------------------


class ApplicationDefaults(_Strict):
    """`config/<type>/application-defaults.yaml`."""

    defaults: Application | None = Field(
        default=None, description="Laid under every application of the cluster type."
    )


class ApplicationSetDefaults(_Strict):
    """`config/<type>/applicationset-defaults.yaml`."""

    defaults: ApplicationSet | None = Field(
        default=None, description="Laid under every ApplicationSet of the cluster type."
    )


DEFAULTS_MODELS: dict[Section, type[BaseModel]] = {
    "applications": ApplicationDefaults,
    "applicationsets": ApplicationSetDefaults,
}


class AuthorApplicationDefaults(_Strict):
    default: Application | None = Field(
        default=None, description="Laid under every application of the cluster type."
    )


class AuthorApplicationSetDefaults(_Strict):
    default: ApplicationSet | None = Field(
        default=None, description="Laid under every ApplicationSet of the cluster type."
    )


class AuthorDefaults(_Strict):
    """`config/<type>/defaults.yaml`, the generator's spelling of the two defaults files."""

    applications: AuthorApplicationDefaults | None = None
    applicationsets: AuthorApplicationSetDefaults | None = None


AUTHOR_DEFAULTS_MODELS: dict[Section, type[BaseModel]] = {
    "applications": AuthorApplicationDefaults,
    "applicationsets": AuthorApplicationSetDefaults,
}


class ValuesFile(_Strict):
    """`values.yaml` / `values.sops.yaml` at any level of an application or ApplicationSet."""

    applications: dict[str, Application | None] | None = Field(
        default=None,
        description="In an application's directory: exactly one key, the application.",
    )
    applicationsets: dict[str, ApplicationSet | None] | None = Field(
        default=None,
        description="In an ApplicationSet's directory: exactly one key, the ApplicationSet.",
    )


class AppMetadata(_Strict):
    """`config/<type>/<name>/metadata.yaml`."""

    name: Name = Field(description="The application name; must match its directory.")
    description: str = ""
    owners: list[str] = Field(default_factory=list, description="Teams or people (e-mail).")
    documentation: str | None = Field(default=None, description="Link to runbooks or docs.")


class OwnersOptions(_Strict):
    no_parent_owners: bool = False


class Owners(_Strict):
    """`OWNERS` (Kubernetes style)."""

    approvers: list[str] = Field(default_factory=list)
    reviewers: list[str] = Field(default_factory=list)
    emeritus_approvers: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)
    options: OwnersOptions | None = None


class DimensionsPatchFile(patches.PatchFile):
    patch: dict[str, Application] = Field(  # type: ignore[assignment]
        description="Values laid over the merged applications: exactly one key, the "
        "application whose directory holds the patch."
    )


class ApplicationSetPatchFile(patches.PatchFile):
    patch: dict[str, ApplicationSet] = Field(  # type: ignore[assignment]
        description="Values laid over the merged ApplicationSets: exactly one key, the "
        "ApplicationSet whose directory holds the patch."
    )


PATCH_MODELS: dict[Section, type[BaseModel]] = {
    "applications": DimensionsPatchFile,
    "applicationsets": ApplicationSetPatchFile,
}


class AuthorPatchMetadata(_Strict):
    description: str = Field(default="", description="What the patch changes and why.")


class AuthorPatchFile(_Strict):
    """`patch-NNN.yaml`, the generator's spelling of a patch: its id is its file name (per
    application), its body a values file's (`applications: {<name>: ...}`)."""

    metadata: AuthorPatchMetadata | None = None
    applications: dict[str, Application] | None = Field(
        default=None,
        description="In an application's directory: exactly one key, the application.",
    )
    applicationsets: dict[str, ApplicationSet] | None = Field(
        default=None,
        description="In an ApplicationSet's directory: exactly one key, the ApplicationSet.",
    )


DIMENSIONS_SCHEMAS: dict[str, type[BaseModel] | dict[str, Any]] = {
    "dimensions-config": DimensionsConfig,
    "dimensions-application-defaults": ApplicationDefaults,
    "dimensions-applicationset-defaults": ApplicationSetDefaults,
    "dimensions-metadata": AppMetadata,
    "dimensions-owners": Owners,
    "dimensions-patch": DimensionsPatchFile,
    "dimensions-applicationset-patch": ApplicationSetPatchFile,
    "dimensions-values": ValuesFile,
    "dimensions-author-defaults": AuthorDefaults,
    "dimensions-author-patch": AuthorPatchFile,
}
