"""What Argo CD does with a dimensions root's published chart, done once before publishing.

The ApplicationSet that deploys a root renders its published chart again with Helm, passing
the cluster's values (`valuesObject: {cluster: {...}}`); the ApplicationSets in it then reach
their controller, which reads their templates as Go templates (`goTemplate: true`). A value
escaped one level too few or too many leaves a live `{{ index .metadata.annotations … }}` in
the chart, which Helm stops on, or an ApplicationSet template that does not parse. Either
fails on the cluster after publishing; here the root refuses, at the user's values file.

The chart is rendered with Helm's engine with the cluster keys the layout knows (`type` and
one per dimension, already in the chart's values.yaml) and a placeholder for every other
`.Values.cluster.<key>` its templates read (keys only the ApplicationSet fills: `name`, a
project id). ApplicationSet fields the controller templates (`template`, `templatePatch`,
`generators`) are parsed with Helm's parser, which knows Argo CD's function library (sprig)
but `normalize` and `slugify`, read as any other function for parsing.
"""

from __future__ import annotations

import re
from typing import Any

from shared.engine import yamldoc
from shared.engine.dimensions.files import FleetFiles
from shared.engine.dimensions.merge import nodes_above
from shared.engine.dimensions.models import DEFAULTS_FILES, VALUES_FILE, Component
from shared.engine.dimensions.sequence import Place
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.helm import reads
from shared.engine.helm.engine import parse_template, render_chart_files
from shared.engine.tree import join

PUBLISHED = "published chart"
PLACEHOLDER = "rollwright-placeholder"
# Functions of the ApplicationSet controller's templates that Helm's library lacks.
_ARGOCD_ONLY = re.compile(r"\b(normalize|slugify)\b")
_TEMPLATED = ("template", "templatePatch", "generators")


def check(
    files: FleetFiles,
    components: list[Component],
    place: Place,
    chart: dict[str, bytes],
    root: str,
) -> None:
    """Render the published `chart` as Argo CD will and parse its ApplicationSets'
    templates; raise a FleetError at the user's values file when either fails."""
    by_name = {c.name: c for c in components}
    tracer = _Tracer(files, place)
    try:
        rendered = render_chart_files(
            chart,
            {"cluster": placeholders(chart)},
            release=root.replace("/", "-"),
            namespace="argocd",
            source=PUBLISHED,
        )
    except FleetError as err:
        name = err.path.removeprefix(f"{PUBLISHED}/templates/").removesuffix(".yaml")
        comp = by_name.get(name)
        if comp is None or err.line is None:
            raise err.within("Argo CD cannot render the published chart") from None
        line = chart[f"templates/{name}.yaml"].decode().splitlines()[err.line - 1]
        path, where = tracer.place(comp, _line_key(line))
        raise FleetError(
            f"{comp.kind} {comp.name!r}: Argo CD cannot render the published chart "
            f"(templates/{name}.yaml line {err.line}: templating left in a value once "
            "rollwright removed one level of escaping): "
            + err.problem.message.removeprefix("rendering chart: "),
            path=path,
            line=where,
        ) from None
    problems: list[Problem] = []
    for name, text in sorted(rendered.templates.items()):
        comp = by_name.get(name.rsplit("/", 1)[-1].removesuffix(".yaml"))
        if comp is None:
            continue
        try:
            docs = yamldoc.loads_all(text, name)
        except FleetError as err:
            path, _ = tracer.place(comp, None)
            raise FleetError(
                f"{comp.kind} {comp.name!r}: Argo CD's render of the published chart is not "
                f"YAML: {err.problem.message}",
                path=path,
            ) from None
        if comp.section == "applicationsets":
            for doc in docs:
                problems += _check_appset(doc, comp, tracer, root)
    if problems:
        raise FleetErrors(problems)


def placeholders(chart: dict[str, bytes]) -> dict[str, Any]:
    """A placeholder for every `.Values.cluster.<key…>` the chart's templates read that its
    values.yaml does not set: what only the ApplicationSet fills in."""
    known = yamldoc.loads(chart.get("values.yaml", b"").decode(), "values.yaml") or {}
    cluster = known.get("cluster") if isinstance(known.get("cluster"), dict) else {}
    found: dict[str, Any] = {}
    paths: set[tuple[str, ...]] = set()
    for name, data in chart.items():
        if name.startswith("templates/"):
            try:
                paths |= reads.chart_template(data.decode()).paths
            except FleetError:
                continue  # a template that cannot be read: the render names it
    for path in sorted(paths, key=len):
        if len(path) < 2 or path[0] != "cluster":
            continue
        have: Any = cluster
        into = found
        for i, key in enumerate(path[1:], 1):
            have = have.get(key) if isinstance(have, dict) else None
            last = i == len(path) - 1
            if last:
                if have is None and key not in into:
                    into[key] = f"{PLACEHOLDER}-{key}"
            else:
                nxt = into.setdefault(key, {})
                if not isinstance(nxt, dict):
                    break
                into = nxt
    return found


def _check_appset(doc: Any, comp: Component, tracer: _Tracer, root: str) -> list[Problem]:
    """The fields the ApplicationSet controller templates, parsed as Go templates."""
    if not isinstance(doc, dict) or doc.get("kind") != "ApplicationSet":
        return []
    spec = doc.get("spec")
    if not isinstance(spec, dict) or spec.get("goTemplate") is not True:
        return []
    problems = []
    for field in _TEMPLATED:
        for keys, leaf in yamldoc.walk_leaves(spec.get(field), (field,)):
            if not isinstance(leaf, str) or "{{" not in leaf:
                continue
            try:
                parse_template(_ARGOCD_ONLY.sub("list", leaf), source="spec")
            except FleetError as err:
                names = [k for k in keys if isinstance(k, str)]
                exact = (comp.section, comp.name, *keys)
                path, line = tracer.place(comp, names[-1] if names else None, exact)
                dotted = ".".join(str(k) for k in ("spec", *keys))
                reason = err.problem.message
                problems.append(
                    Problem(
                        path,
                        line,
                        f'rendering root "{root}": ApplicationSet {comp.name!r}: {dotted} '
                        "does not "
                        f"parse as the Go template its controller reads (goTemplate: true): "
                        f"{reason}",
                    )
                )
    return problems


def _line_key(line: str) -> str | None:
    match = re.match(r"\s*(?:-\s+)*([^\s:'\"{][^:]*?|'[^']*'|\"[^\"]*\"):(?:\s|$)", line)
    return match.group(1).strip("'\"") if match else None


class _Tracer:
    """Which of a component's values files (at a root's place) writes a key."""

    def __init__(self, files: FleetFiles, place: Place) -> None:
        self.files = files
        self.at = place

    def place(
        self, comp: Component, key: str | None, exact: tuple[str | int, ...] = ()
    ) -> tuple[str, int | None]:
        """The file and line that set `exact` (a key path of the file), else the first
        key `key` of the highest-precedence file that has one, else the component's
        values.yaml."""
        candidates = [join("config", comp.ctype, DEFAULTS_FILES[comp.section])]
        candidates += self.files.level_files(comp, ())
        for node in nodes_above(self.at):
            candidates += self.files.level_files(comp, node)
        fallback = join(comp.dir, VALUES_FILE)
        if key is None:
            return fallback, None
        for rel in reversed(candidates):  # the highest precedence first
            if rel.endswith(".sops.yaml") or not self.files.tree.is_file(rel):
                continue
            text = self.files.text(rel)
            try:
                data = yamldoc.loads(text, rel)
            except FleetError:
                continue
            if exact and _has(data, exact):
                return rel, yamldoc.key_line(text, exact)
            for keys, _ in yamldoc.walk_leaves(data):
                if key in keys:
                    return rel, yamldoc.key_line(text, keys[: keys.index(key) + 1])
        return fallback, None


def _has(data: Any, keys: tuple[str | int, ...]) -> bool:
    for key in keys:
        in_map = isinstance(data, dict) and key in data
        in_list = isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data)
        if not (in_map or in_list):
            return False
        data = data[key]
    return True
