"""What one release of an app template's rendered helmfile reads: its chart source, values
and secrets files, post-render patches (with where each was written) and `set:` entries.
`ReleaseReader` reads them once per helmfile text: most instances render a template alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.engine import yamldoc
from shared.engine.atlas.files import HelmRelease, SetValue, label_text, resolve_path
from shared.engine.atlas.plans import Helmfile, ReleaseParts
from shared.engine.atlas.values import Layer, TemplateValue, ValueFiles, jsonable
from shared.engine.errors import FleetError
from shared.engine.helm.engine import parse_set, satisfies
from shared.engine.manifests.patches import PatchOrigin
from shared.engine.release import ChartSource, SourceKind
from shared.engine.tree import Tree


class ReleaseReader:
    """Reads the releases of rendered helmfiles in one tree, each (helmfile text, release)
    once."""

    def __init__(self, tree: Tree, files: ValueFiles) -> None:
        self.tree = tree
        self.files = files
        self._cache: dict[tuple[str, str, int], ReleaseParts] = {}

    def parts(self, hf: Helmfile, i: int) -> ReleaseParts:
        """What release `i` of a rendered helmfile reads, whichever instance rendered it
        (kept per helmfile text: most instances render a template to the same text)."""
        key = (hf.path, hf.text, i)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        rel = hf.model.releases[i]
        parts = ReleaseParts(chart_source(self.tree, hf, i, rel))
        for j, entry in enumerate(rel.values):
            keys: tuple[str | int, ...] = ("releases", i, "values", j)
            if isinstance(entry, dict):
                source = f"{hf.path}#releases[{i}].values[{j}]"
                parts.template_values.append(TemplateValue(source, entry))
            else:
                where = f"releases[{i}].values[{j}]"
                path = self._template_file(hf, entry, keys, where, "values file")
                parts.template_values.append(TemplateValue(path))
        for j, entry in enumerate(rel.secrets):
            keys = ("releases", i, "secrets", j)
            where = f"releases[{i}].secrets[{j}]"
            parts.template_secrets.append(
                self._template_file(hf, entry, keys, where, "secrets file")
            )
        for entry, place in self._patches(hf, i, "jsonPatches", rel.jsonPatches):
            parts.json_patches.append(entry)
            parts.json_patch_origins.append(place)
        for entry, place in self._patches(
            hf, i, "strategicMergePatches", rel.strategicMergePatches
        ):
            parts.strategic_merge_patches.append(entry)
            parts.strategic_patch_origins.append(place)
        for kind in ("set", "setString"):
            for j, entry in enumerate(getattr(rel, kind)):
                parts.overrides.append(self._set_layer(hf, i, kind, j, entry))
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = parts
        return parts

    def _template_file(
        self, hf: Helmfile, entry: str, keys: tuple[str | int, ...], where: str, what: str
    ) -> str:
        line = hf.line(keys, entry)
        path = resolve_path(hf.dir, entry, what=f"{where}: {what}", origin=hf.path, line=line)
        if not self.files.exists(path):
            raise FleetError(
                f"{where}: {what} {entry!r} not found ({path})", path=hf.path, line=line
            )
        return path

    def _set_layer(self, hf: Helmfile, i: int, kind: str, j: int, entry: SetValue) -> Layer:
        """One `set:` / `setString:` entry as helm parses `--set name=value` (or
        `--set-string`, `--set-file`): a layer over every values level."""
        where = f"releases[{i}].{kind}[{j}]"
        line = hf.line(("releases", i, kind, j))
        given = [key for key in ("value", "values", "file") if getattr(entry, key) is not None]
        if len(given) != 1:
            got = ", ".join(given) or "none"
            raise FleetError(
                f"{where}: needs exactly one of value, values, file (got {got})",
                path=hf.path,
                line=line,
            )
        if entry.file is not None:
            keys = ("releases", i, kind, j, "file")
            path = self._template_file(hf, entry.file, keys, where, "file")
            # --set-file takes the file's text as it is: parse the path, then put the text in.
            data = set_leaf(
                self._parse_set(hf, where, line, entry.name, "x", True), self.files.text(path)
            )
        else:
            text = (
                "{" + ",".join(set_text(v) for v in entry.values) + "}"
                if entry.values is not None
                else set_text(entry.value)
            )
            data = self._parse_set(hf, where, line, entry.name, text, kind == "setString")
        return Layer(f"{hf.path}#{where}", "set", jsonable(data))

    @staticmethod
    def _parse_set(
        hf: Helmfile, where: str, line: int | None, name: str, text: str, string: bool
    ) -> dict[str, Any]:
        try:
            return parse_set(f"{name}={text}", string=string)
        except FleetError as err:
            raise FleetError(f"{where}: {err.problem.message}", path=hf.path, line=line) from None

    def _patches(
        self, hf: Helmfile, i: int, kind: str, entries: list[dict[str, Any] | str]
    ) -> list[tuple[dict[str, Any], PatchOrigin]]:
        """The entries, each with where it was written (an inline entry's line in the
        helmfile, a patch file's item's line in that file) and its operations' lines."""
        out: list[tuple[dict[str, Any], PatchOrigin]] = []
        for j, entry in enumerate(entries):
            if isinstance(entry, dict):
                keys: tuple[str | int, ...] = ("releases", i, kind, j)
                # Called at once (not kept): the loop's `keys` is the one meant.
                out.append((entry, _origin(entry, hf.path, lambda *k: hf.line((*keys, *k)))))  # noqa: B023
                continue
            where = f"releases[{i}].{kind}[{j}]"
            path = self._template_file(hf, entry, ("releases", i, kind, j), where, "patch file")
            text = self.files.text(path)
            data = yamldoc.loads(text, path)
            items = data if isinstance(data, list) else [data]
            for n, item in enumerate(items):
                if not isinstance(item, dict):
                    raise FleetError(
                        f"a patch file holds a mapping or a list of mappings, found "
                        f"{yamldoc.type_name(item)}",
                        path=path,
                        line=1,
                    )
                top: tuple[int, ...] = (n,) if isinstance(data, list) else ()

                def line_of(
                    *k: str | int, top: tuple[int, ...] = top, text: str = text
                ) -> int | None:
                    return yamldoc.key_line(text, (*top, *k))

                out.append((item, _origin(item, path, line_of)))
        return out


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
            ref = f"{oci_url(repo.url)}/{rest}"
            return ChartSource(
                "remote-chart", ref=ref, version=rel.version, plain_http=repo.plainHttp
            )
        return ChartSource("remote-chart", ref=chart, version=rel.version, repo_url=repo.url)
    path = resolve_path(hf.dir, chart, what=f"{where}: chart", origin=hf.path, line=line)
    kind = local_kind(tree, path)
    if kind == "chart" and rel.version:
        _check_local_version(tree, hf, i, path, rel.version)
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


def _check_local_version(tree: Tree, hf: Helmfile, i: int, path: str, asked: str) -> None:
    """A local chart renders as it is: a `version` it does not meet would be ignored, so it
    is refused (a `.tgz` archive is not opened for this)."""
    if not tree.is_file(f"{path}/Chart.yaml"):
        return
    meta = yamldoc.loads(tree.read_text(f"{path}/Chart.yaml"), f"{path}/Chart.yaml")
    have = str(meta.get("version") or "") if isinstance(meta, dict) else ""
    line = hf.line(("releases", i, "version"), f"version: {asked}")
    try:
        met = bool(have) and satisfies(asked, have)
    except FleetError as err:
        message = f"releases[{i}].version: {err.problem.message}"
        raise FleetError(message, path=hf.path, line=line) from None
    if not met:
        raise FleetError(
            f"releases[{i}].version: {asked!r} but the local chart {path} is version "
            f"{have or '(none)'!r} (its Chart.yaml): a local chart renders as it is, so the "
            "version would be ignored; make them agree or drop `version`",
            path=hf.path,
            line=line,
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


def _origin(entry: dict[str, Any], path: str, line_of: Callable[..., int | None]) -> PatchOrigin:
    """Where a patch entry is: its line, and for a JSON patch each operation's line."""
    ops = entry.get("patch")
    op_lines = tuple(line_of("patch", k) for k in range(len(ops))) if isinstance(ops, list) else ()
    return PatchOrigin(path, line_of(), op_lines)


def oci_url(url: str) -> str:
    return "oci://" + url.removeprefix("oci://").rstrip("/")


def set_text(value: Any) -> str:
    """A `set:` value as helmfile passes it to `--set`: its text, with the characters
    `--set` splits on escaped."""
    text = label_text(value)
    for char in ("\\", ",", "{", "}"):
        text = text.replace(char, "\\" + char)
    return text


def set_leaf(tree: Any, value: str) -> Any:
    """`tree` (one `--set` path) with its single leaf replaced by `value`."""
    if isinstance(tree, dict):
        return {k: set_leaf(v, value) for k, v in tree.items()}
    if isinstance(tree, list):
        return [None if v is None else set_leaf(v, value) for v in tree]
    return value
