"""Values keys the fleet sets that nothing reads: typos such as `imgae:` for `image:`.

A key is *unread* when no release it reaches reads it: not the release's chart templates
(with its subcharts, `shared.engine.charts.reads`), not the Go templates its values pass
through (app templates and values templates, `shared.engine.helm.reads`). A key in
`global.values.yaml` that one chart reads is read; one that no release of any cluster reads
is reported once, at its file and line, with the roots it reaches and the closest key the
templates do read ("did you mean").

Only values files and inline values of the fleet are checked (levels template to set); chart
defaults are the chart's own business. The analysis errs towards "read": a template whose
reads cannot be told (`toYaml .Values`, an unreadable template) reads every key of its
release, and a fleet with a release that cannot be planned is not analysed at all (its errors
come first, and its files' keys would be reported wrongly).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from shared.engine import render, yamldoc
from shared.engine.atlas.planner import Planner
from shared.engine.atlas.plans import ReleasePlan
from shared.engine.atlas.values import LEVELS, Layer
from shared.engine.charts.reads import chart_reads
from shared.engine.errors import FleetError, Problem
from shared.engine.helm.engine import charts_unchanged
from shared.engine.helm.reads import Path, Reads, chart_template, merge, values_template
from shared.engine.suggest import closest

# The levels whose keys the fleet writes: not the chart's defaults, not the metadata
# rollwright sets.
CHECKED = frozenset(LEVELS) - {"chart", "atlas"}


@dataclass(frozen=True)
class Unread:
    """One unread key: the problem `validate` prints and the roots it reaches."""

    problem: Problem
    roots: frozenset[str]


@dataclass
class _Source:
    """What is known of one values source (a file, or an inline mapping) over the fleet."""

    shape: dict[str, Any] = field(default_factory=dict)  # keys seen, merged over instances
    full: set[Path] = field(default_factory=set)  # read with everything below
    partial: set[Path] = field(default_factory=set)  # something below is read
    reads: dict[Reads, None] = field(default_factory=dict)  # distinct reads of its receivers
    defaults: dict[int, dict[str, Any]] = field(default_factory=dict)  # receivers' chart defaults
    releases: set[str] = field(default_factory=set)
    roots: set[str] = field(default_factory=set)
    line_keys: tuple[str | int, ...] = ()  # where its mapping starts in the file
    helmfile_line: ReleasePlan | None = None  # inline helmfile values: lines from its text


def unread_keys(planner: Planner, *, strict: bool) -> list[Unread]:
    """Every unread key of the fleet; content problems under `strict`, else warnings."""
    sources: dict[str, _Source] = {}
    memo = _Memo()
    for root in planner.roots():
        try:
            plans = planner.plans(root)
            for plan in plans:
                with planner.naming(plan), charts_unchanged():
                    layers, values = planner.resolve_values(plan)
                    reads = _release_reads(planner, root, plan, layers, values, memo)
                chart = next((ly.data for ly in layers if ly.level == "chart"), None)
                for layer in layers:
                    if layer.level in CHECKED:
                        _receive(sources, plan, root, layer, reads, chart)
        except FleetError:
            return []  # reported by validate and by the render; keys cannot be judged
    found: list[Unread] = []
    for name, source in sources.items():
        for path in _unread(source.shape, (), source):
            found.append(
                Unread(_problem(planner, name, source, path, strict), frozenset(source.roots))
            )
    return sorted(found, key=lambda u: u.problem)


@dataclass
class _Memo:
    """What one analysis reads once: each chart (by source and dependency settings) and each
    Go template (by text)."""

    charts: dict[tuple[Any, ...], Reads] = field(default_factory=dict)
    templates: dict[str, Reads] = field(default_factory=dict)

    def template(self, text: str) -> Reads:
        found = self.templates.get(text)
        if found is None:
            found = self.templates[text] = values_template(text)
        return found


def _release_reads(
    planner: Planner,
    root: str,
    plan: ReleasePlan,
    layers: list[Layer],
    values: dict[str, Any],
    memo: _Memo,
) -> Reads:
    parts: list[Reads] = []
    if plan.source.kind in ("chart", "remote-chart"):
        spec = planner.spec(root, plan, values)
        key = (spec.source, spec.skip_deps, spec.repositories, spec.origin)
        found = memo.charts.get(key)
        if found is None:
            _, path = render.prepared_chart(spec, planner.tree, planner.resolver)
            found = memo.charts[key] = chart_reads(path, plan.source.describe())
        parts.append(found)
    helmfile = plan.instance.helmfile
    if helmfile.path.endswith(".gotmpl"):
        parts.append(memo.template(helmfile.source_text))
    for layer in layers:
        rel = layer.source
        if rel.endswith(".gotmpl") and "#" not in rel:
            parts.append(memo.template(planner.files.text(rel)))
    reads = merge(parts)
    if reads.tpl:
        # `tpl` renders value strings: what they name is read too.
        strings = [v for _, v in yamldoc.walk_leaves(values) if isinstance(v, str) and "{{" in v]
        reads = reads | merge(chart_template(s) for s in strings)
    return reads


def _receive(
    sources: dict[str, _Source],
    plan: ReleasePlan,
    root: str,
    layer: Layer,
    reads: Reads,
    chart: dict[str, Any] | None,
) -> None:
    key = _source_key(plan, layer)
    source = sources.get(key)
    if source is None:
        source = sources[key] = _Source()
        source.line_keys, source.helmfile_line = _anchor(plan, layer)
    source.releases.add(plan.id)
    source.roots.add(root)
    if chart is not None:
        source.defaults.setdefault(id(chart), chart)
    _shape(source.shape, layer.data)
    if reads in source.reads:
        return  # the same keys judged by the same reads already
    source.reads[reads] = None
    _mark(layer.data, (), reads, source)


def _source_key(plan: ReleasePlan, layer: Layer) -> str:
    if layer.level == "instance":
        # One `apps[i].values` mapping of a list of them: tell them apart.
        listed = plan.instance.instance.values
        if isinstance(listed, list):
            index = next((j for j, item in enumerate(listed) if item is layer.data), 0)
            return f"{layer.source}[{index}]"
    return layer.source


def _anchor(plan: ReleasePlan, layer: Layer) -> tuple[tuple[str | int, ...], ReleasePlan | None]:
    """Where the layer's mapping starts in its file: keys from the file's top, and the plan
    when the file is a helmfile whose rendered text gives the lines."""
    _, sep, inline = layer.source.partition("#")
    if not sep:
        return (), None
    keys: list[str | int] = []
    for name, index in re.findall(r"([A-Za-z]+)(?:\[(\d+)\])?", inline):
        keys.append(name)
        if index:
            keys.append(int(index))
    if layer.level == "instance" and isinstance(plan.instance.instance.values, list):
        listed = plan.instance.instance.values
        keys.append(next((j for j, item in enumerate(listed) if item is layer.data), 0))
    if layer.level == "set":
        return tuple(keys), plan  # the entry's line: its `name` holds the whole path
    return tuple(keys), plan if layer.source.startswith(plan.instance.helmfile.path) else None


def _shape(shape: dict[str, Any], data: dict[str, Any]) -> None:
    for key, value in data.items():
        if isinstance(value, dict) and value:
            child = shape.get(key)
            if not isinstance(child, dict):
                child = shape[key] = {}
            _shape(child, value)
        else:
            shape.setdefault(key, None)


def _mark(data: dict[str, Any], path: Path, reads: Reads, source: _Source) -> None:
    for key, value in data.items():
        here = (*path, str(key))
        if here in source.full:
            continue
        if reads.covers(here):
            source.full.add(here)
        elif reads.reaches(here):
            source.partial.add(here)
            if isinstance(value, dict):
                _mark(value, here, reads, source)
            else:
                source.full.add(here)  # a scalar where maps are read: a type question


def _unread(shape: dict[str, Any], path: Path, source: _Source) -> list[Path]:
    out: list[Path] = []
    for key, child in shape.items():
        here = (*path, str(key))
        if here in source.full:
            continue
        if here in source.partial:
            if isinstance(child, dict):
                out.extend(_unread(child, here, source))
            continue
        out.append(here)
    return out


def _problem(planner: Planner, name: str, source: _Source, path: Path, strict: bool) -> Problem:
    rel = name.split("#", 1)[0]
    keys = (*source.line_keys, *path)
    if source.helmfile_line is not None:
        line = source.helmfile_line.instance.helmfile.line(keys, needle=f"{path[-1]}:")
    else:
        line = _line(planner, rel, keys)
    releases = sorted(source.releases)
    shown = ", ".join(releases[:3]) + (
        f" and {len(releases) - 3} more" if len(releases) > 3 else ""
    )
    who = (
        f"release {shown}"
        if len(releases) == 1
        else f"the {len(releases)} releases it reaches: {shown}"
    )
    candidates: set[str] = set()
    for reads in source.reads:
        candidates |= reads.keys_at(path[:-1])
    for defaults in source.defaults.values():
        node: Any = defaults
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            candidates |= {str(k) for k in node}
    guess = closest(path[-1], candidates)
    hint = f" (did you mean {'.'.join((*path[:-1], guess))!r}?)" if guess else ""
    message = f"values key {'.'.join(path)!r} is not read by any template of {who}{hint}"
    return Problem(rel, line, message, hygiene=not strict)


def _line(planner: Planner, rel: str, keys: tuple[str | int, ...]) -> int | None:
    try:
        text = planner.files.text(rel)
    except FleetError:
        return None
    line = yamldoc.key_line(text, keys)
    if line is not None:
        return line
    # A Go template that is not YAML before it runs: the key as written, in order.
    found, start = None, 0
    lines = text.splitlines()
    for key in keys:
        if not isinstance(key, str):
            continue
        pattern = re.compile(rf"^\s*(-\s+)?{re.escape(key)}\s*:")
        for i in range(start, len(lines)):
            if pattern.match(lines[i]):
                found, start = i + 1, i + 1
                break
        else:
            return found
    return found


def roots_of(unread: list[Unread], root: str | None) -> list[Problem]:
    """The problems of `unread` that reach `root` (None: all)."""
    return [u.problem for u in unread if root is None or root in u.roots]
