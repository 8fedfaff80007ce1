"""One release, ready to render: where its manifests come from (`ChartSource`) and everything
the render needs (`ReleaseSpec`). The layouts build these; `shared.engine.render` renders them
and `shared.engine.charts.remote` fetches remote chart sources."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from shared.engine.manifests.patches import PatchOrigin

SourceKind = Literal["chart", "remote-chart", "kustomize", "manifests"]


@dataclass(frozen=True)
class ChartSource:
    """Where a release's manifests come from.

    `path` is repo-relative for local sources; remote charts carry `ref` (`repo/chart` or
    `oci://host/path/chart`), `version` and, for HTTP repositories, `repo_url`.
    """

    kind: SourceKind
    path: str = ""
    ref: str = ""
    version: str | None = None
    repo_url: str | None = None
    plain_http: bool = False  # an OCI registry spoken to over HTTP (helmfile's plainHttp)

    def describe(self) -> str:
        if self.kind == "remote-chart":
            return f"{self.ref}@{self.version or 'latest'}"
        return self.path


@dataclass(frozen=True)
class Repository:
    """A named chart repository (a helmfile `repositories:` entry)."""

    name: str
    url: str  # https://… for HTTP repositories, oci://… for registries
    plain_http: bool = False


@dataclass
class ReleaseSpec:
    """One release of one root, ready to render. `values` are final (plaintext)."""

    root: str
    deployment: str
    name: str
    namespace: str
    source: ChartSource
    values: dict[str, Any]
    origin: str  # repo-relative file that declared the release, for error messages
    origin_line: int | None = None  # the release's line in `origin` (None: unknown)
    labels: dict[str, str] = field(default_factory=dict)
    json_patches: list[dict[str, Any]] = field(default_factory=list)
    strategic_merge_patches: list[dict[str, Any]] = field(default_factory=list)
    # Where each patch entry was written (file, line, lines of its operations): errors name it.
    json_patch_origins: list[PatchOrigin] = field(default_factory=list)
    strategic_patch_origins: list[PatchOrigin] = field(default_factory=list)
    remove_labels: list[str] = field(default_factory=list)
    crds: bool = True
    hooks: bool | None = None  # None: the fleet's render.hooks
    tests: bool = False
    kube_version: str | None = None  # `.Capabilities.KubeVersion`; None: Helm's default
    api_versions: tuple[str, ...] = ()  # extra `.Capabilities.APIVersions`
    skip_schema_validation: bool = False
    skip_deps: bool = False  # Chart.yaml dependencies missing from charts/ are not fetched
    # Chart repositories the release's helmfile names: `@name` / `alias:name` dependencies
    repositories: tuple[Repository, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.deployment}/{self.name}" if self.deployment else self.name
