"""Planning an atlas root: the parsed files and resolved releases it is rendered from.

`AtlasLayout` (shared.engine.atlas.layout) builds these per root: a `LoadedDeployment` per
deployment.yaml, an `InstancePlan` per enabled `apps:` entry (its environment and rendered helmfile)
and a `ReleasePlan` per template release (name, namespace, labels, chart source, values sources,
patches). Values themselves are computed later, from the plan, by `shared.engine.atlas.values`.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from shared.engine import yamldoc
from shared.engine.atlas.discovery import Cluster, DeploymentDef
from shared.engine.atlas.files import (
    DEPLOYMENTS,
    AppInstance,
    DeploymentFile,
    HelmfileTemplate,
    HelmRelease,
)
from shared.engine.atlas.values import Layer, LevelSource, TemplateValue
from shared.engine.errors import FleetError
from shared.engine.render import ChartSource, SourceKind
from shared.engine.tree import Tree


@dataclass(frozen=True)
class LoadedDeployment:
    """A parsed deployment.yaml."""

    defn: DeploymentDef
    path: str
    text: str
    model: DeploymentFile

    def line(self, *keys: str | int) -> int | None:
        return yamldoc.key_line(self.text, keys)


@dataclass(frozen=True)
class Helmfile:
    """A template's helmfile as rendered for one instance."""

    template: str
    path: str  # templates/<t>/helmfile.yaml.gotmpl
    source_text: str
    text: str  # after Go templating
    model: HelmfileTemplate

    @property
    def dir(self) -> str:
        return posixpath.dirname(self.path)

    def line(self, keys: tuple[str | int, ...], needle: str | None = None) -> int | None:
        """Line of `keys` in the source file: found by `needle` when templating moved lines."""
        if needle and self.text != self.source_text:
            hits = [i + 1 for i, ln in enumerate(self.source_text.splitlines()) if needle in ln]
            if len(hits) == 1:
                return hits[0]
        return yamldoc.key_line(self.text, keys)


@dataclass
class InstancePlan:
    """One entry of a deployment's `apps:` on one cluster, with its environment."""

    cluster: Cluster
    deployment: LoadedDeployment
    index: int
    instance: AppInstance
    namespace: str
    atlas: dict[str, Any]  # the atlas context without `cwd`
    levels: list[LevelSource]
    env: dict[str, Any]
    env_layers: list[Layer]
    helmfile: Helmfile

    @property
    def where(self) -> str:
        return f"apps[{self.index}]"


@dataclass
class ReleaseParts:
    """What one release of a rendered helmfile reads: the same for every instance that
    renders the helmfile to the same text. Shared between plans: read only."""

    source: ChartSource
    template_values: list[TemplateValue] = field(default_factory=list)
    template_secrets: list[str] = field(default_factory=list)
    json_patches: list[dict[str, Any]] = field(default_factory=list)
    strategic_merge_patches: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ReleasePlan:
    """One release of one root, everything but its values resolved."""

    id: str
    name: str
    namespace: str
    labels: dict[str, str]
    source: ChartSource
    index: int  # position in the helmfile's releases
    release: HelmRelease
    instance: InstancePlan
    template_values: list[TemplateValue] = field(default_factory=list)
    template_secrets: list[str] = field(default_factory=list)
    json_patches: list[dict[str, Any]] = field(default_factory=list)
    strategic_merge_patches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def deployment(self) -> str:
        return self.instance.deployment.defn.name

    @property
    def template(self) -> str:
        return self.instance.helmfile.template


def release_name(instance: AppInstance, style: str, release: str) -> str:
    """The release name on the cluster: the template's name, munged with the instance name
    unless the instance is unnamed (named after its template) or named like the release."""
    name = instance.instance_name
    if instance.name is None or name in (instance.template, release):
        return release
    return f"{name}-{release}" if style == "prefix" else f"{release}-{name}"


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


def chart_source(tree: Tree, hf: Helmfile, i: int, rel: HelmRelease) -> ChartSource:
    """Where release `i` of a helmfile comes from: a remote chart, or a local chart,
    kustomization or manifests directory relative to the template directory."""
    chart = rel.chart
    line = hf.line(("releases", i, "chart"), chart)
    where = f"releases[{i}].chart"
    if chart.startswith("oci://"):
        return ChartSource("remote-chart", ref=chart, version=rel.version)
    repos = {r.name: r for r in hf.model.repositories}
    first, sep, rest = chart.partition("/")
    if sep and first in repos and not chart.startswith("."):
        repo = repos[first]
        if repo.oci:
            url = repo.url.removeprefix("oci://").rstrip("/")
            return ChartSource("remote-chart", ref=f"oci://{url}/{rest}", version=rel.version)
        return ChartSource("remote-chart", ref=chart, version=rel.version, repo_url=repo.url)
    path = resolve_path(hf.dir, chart, what=f"{where}: chart", origin=hf.path, line=line)
    kind = local_kind(tree, path)
    if kind is not None:
        return ChartSource(kind, path=path)
    if sep and not chart.startswith("."):
        known = ", ".join(sorted(repos)) or "none"
        raise FleetError(
            f"{where}: chart {chart!r}: no directory {path} and no repository named "
            f"{first!r} in repositories: (known: {known})",
            path=hf.path,
            line=line,
        )
    raise FleetError(
        f"{where}: chart {chart!r} not found: no directory {path}", path=hf.path, line=line
    )


def local_kind(tree: Tree, path: str) -> SourceKind | None:
    """What a local chart path holds: a chart, a kustomization or plain manifests."""
    if tree.is_file(path):
        return "chart" if path.endswith(".tgz") else None
    if not tree.is_dir(path):
        return None
    names = set(tree.listdir(path))
    if "Chart.yaml" in names:
        return "chart"
    if names & {"kustomization.yaml", "kustomization.yml", "Kustomization"}:
        return "kustomize"
    return "manifests"


def patch_shape_problem(entry: dict[str, Any], *, strategic: bool) -> str | None:
    if strategic:
        meta = entry.get("metadata")
        if not entry.get("kind") or not isinstance(meta, dict) or not meta.get("name"):
            return "a strategic merge patch needs kind and metadata.name"
        return None
    if not isinstance(entry.get("target"), dict) or not isinstance(entry.get("patch"), list):
        return "a JSON patch needs a 'target' mapping and a 'patch' list"
    return None
