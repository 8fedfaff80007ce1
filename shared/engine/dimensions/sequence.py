"""`config/config.yaml` of the dimensions layout: the dimensions, the sequence and the cluster
types.

The dimensions are data: `dimensions: [environments, sectors, regions]` (the default) names
the levels in order, and `sequence` nests by those names, each node listing its children under
the next dimension's name. Any names and any depth of 1 or more work:

    dimensions: [environments, regions]
    sequence:
      environments:
        - name: integration
          regions: [{name: us-central1}, {name: europe-west1}]

A **node** is a path of names from the top (`integration`, `integration/us-central1`); a
**place** is a node of the last dimension, and a root is `<type>/<place>`. Each dimension has a
singular **key** (`regions` → `region`): the cluster value `.Values.cluster.region`, the word in
messages and what `rollout.step` may name.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from shared.engine import yamldoc
from shared.engine.config.parsing import parse_model
from shared.engine.dimensions.models import (
    CONFIG_FILE,
    DEFAULT_DIMENSIONS,
    DIMENSION_NAME,
    NODE_KEYS,
    PATCHES_DIR,
    DimensionsConfig,
    Promotion,
)
from shared.engine.errors import FleetError, FleetErrors, Problem

Place = tuple[str, ...]


def singular(name: str) -> str:
    """`regions` → `region`, `availabilities` → `availability`; other names stay."""
    if name.endswith("ies") and len(name) > 3:
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith("ss") and len(name) > 1:
        return name[:-1]
    return name


@dataclass(frozen=True)
class Dimension:
    name: str  # as written in config.yaml: "regions"
    key: str  # singular: "region"

    @property
    def a(self) -> str:
        """With its article, for messages: "a region", "an environment"."""
        return f"{'an' if self.key[0] in 'aeiou' else 'a'} {self.key}"


@dataclass(frozen=True)
class Node:
    """One node of the sequence, e.g. (env,), (env, sector) or (env, sector, region)."""

    path: tuple[str, ...]
    promotion: Promotion
    soak: str | None

    @property
    def id(self) -> str:
        return "/".join(self.path)


class Sequence:
    """The dimensions and the nodes of the sequence, in promotion order."""

    def __init__(self, dimensions: list[Dimension], nodes: list[Node]) -> None:
        self.dimensions = dimensions
        self.depth = len(dimensions)
        self.nodes = nodes  # each node, then its children (depth first): promotion order
        self.places: list[Place] = [n.path for n in nodes if len(n.path) == self.depth]
        self._children: dict[tuple[str, ...], list[str]] = {(): []}
        for n in nodes:
            self._children.setdefault(n.path[:-1], []).append(n.path[-1])
            self._children.setdefault(n.path, [])

    def is_node(self, path: tuple[str, ...]) -> bool:
        """True for () (the top) and every node of the sequence."""
        return path in self._children

    def children(self, node: tuple[str, ...]) -> list[str]:
        """Names of the node's children, in order ([] for a place or an unknown node)."""
        return list(self._children.get(node, []))

    def places_under(self, node: tuple[str, ...]) -> list[Place]:
        return [p for p in self.places if p[: len(node)] == node]

    def dimension(self, depth: int) -> Dimension:
        """The dimension of nodes at `depth` (1 = the outermost)."""
        return self.dimensions[depth - 1]

    def cluster(self, ctype: str, place: Place) -> dict[str, str]:
        """`.Values.cluster` of a root: its type, then one key per dimension."""
        out = {"type": ctype}
        out.update({d.key: name for d, name in zip(self.dimensions, place, strict=True)})
        return out

    def level_depth(self, name: str) -> int | None:
        """The depth a dimension name (singular or as written) stands for, else None."""
        for i, d in enumerate(self.dimensions):
            if name in (d.name, d.key):
                return i + 1
        return None


def parse(data: dict[str, Any], text: str) -> tuple[DimensionsConfig, Sequence]:
    """Check and parse config/config.yaml; every problem found raises at once (FleetErrors)."""
    dims = data.get("dimensions", list(DEFAULT_DIMENSIONS))
    problems: list[Problem] = []
    cleaned = data
    if _is_names(dims):
        problems += _check_dimensions(dims, text)
        cleaned = copy.deepcopy(data)
        problems += _check_sequence(cleaned, dims, text)
    try:
        spec = parse_model(DimensionsConfig, cleaned, text=text, source=CONFIG_FILE)
    except FleetErrors as err:
        raise FleetErrors(problems + err.problems) from None
    if problems:
        raise FleetErrors(problems)
    dimensions = [Dimension(name, singular(name)) for name in spec.dimensions]
    nodes: list[Node] = []

    def walk(items: list[Any], parent: tuple[str, ...]) -> None:
        for item in items:
            path = (*parent, item.name)
            nodes.append(Node(path, item.promotion or "automated", item.soak))
            walk(item.children(), path)

    walk(spec.sequence[spec.dimensions[0]], ())
    _check_names(spec, dimensions, text)
    return spec, Sequence(dimensions, nodes)


def _is_names(value: Any) -> bool:
    """Dimension names the sequence can be checked against (else the model reports them)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str) and re.match(DIMENSION_NAME, v) for v in value)
    )


def _check_dimensions(dims: list[str], text: str) -> list[Problem]:
    problems = []
    keys: dict[str, str] = {}
    for i, name in enumerate(dims):
        line = yamldoc.key_line(text, ("dimensions", i))
        key = singular(name)
        if name in NODE_KEYS or key in NODE_KEYS:
            problems.append(
                Problem(CONFIG_FILE, line, f"dimension name {name!r} is reserved (a node key)")
            )
        elif key == "type":
            problems.append(
                Problem(
                    CONFIG_FILE,
                    line,
                    f"dimension name {name!r} is reserved: .Values.cluster.type is the "
                    "cluster type",
                )
            )
        elif key in keys:
            problems.append(
                Problem(
                    CONFIG_FILE,
                    line,
                    f"dimension {name!r} repeats {keys[key]!r} (both are .Values.cluster.{key})",
                )
            )
        keys.setdefault(key, name)
    return problems


@dataclass
class _Level:
    """What the sequence's nodes at one depth hold where dims[depth] belongs."""

    present: int = 0  # nodes holding the dimension's key
    missing: list[Problem] = field(default_factory=list)  # nodes without it
    unknown: list[tuple[str, Problem]] = field(default_factory=list)  # other keys, by name


def _check_sequence(data: dict[str, Any], dims: list[str], text: str) -> list[Problem]:
    """Keys of `sequence` and of its nodes against the dimensions. Unknown keys are reported
    and removed from `data`, so the model checks the rest. A dimension no node uses, where
    every node has one other key instead (`region` listed, `regions:` written), is one
    problem at the dimension's line rather than two at every node."""
    sequence = data.get("sequence")
    if not isinstance(sequence, dict):
        return []
    levels: dict[int, _Level] = {}

    def check(container: dict[str, Any], loc: tuple[str | int, ...], depth: int) -> None:
        """`container`: `sequence` (depth 0) or a node at `depth`; its child key (if any)
        must be dims[depth]."""
        level = levels.setdefault(depth, _Level())
        child = dims[depth] if depth < len(dims) else None
        allowed = {child} if depth == 0 else {*NODE_KEYS, child}
        for key in list(container):
            if key not in allowed:
                keys = (*loc, str(key))
                where = "/".join(str(k) for k in keys)
                line = yamldoc.key_line(text, keys)
                problem = Problem(CONFIG_FILE, line, f"unknown key {where!r}")
                level.unknown.append((str(key), problem))
                del container[key]
        if child is None:
            return
        where = "/".join(str(k) for k in (*loc, child))
        line = yamldoc.key_line(text, (*loc, child))
        items = container.get(child)
        if items is None:
            level.missing.append(Problem(CONFIG_FILE, line, f"missing required key {where!r}"))
            return
        level.present += 1
        if isinstance(items, list):
            if not items:
                what = singular(child)
                problems.append(Problem(CONFIG_FILE, line, f"{where}: needs at least one {what}"))
            for i, item in enumerate(items):
                if isinstance(item, dict):
                    check(item, (*loc, child, i), depth + 1)

    problems: list[Problem] = []
    check(sequence, ("sequence",), 0)
    for depth, level in sorted(levels.items()):
        renamed = _renamed(level, dims, depth, text) if "dimensions" in data else None
        if renamed is not None:
            problems.append(renamed)
            continue
        problems += level.missing + [problem for _, problem in level.unknown]
    return sorted(problems, key=lambda p: p.line or 0)


def _renamed(level: _Level, dims: list[str], depth: int, text: str) -> Problem | None:
    """dims[depth] is named otherwise in the whole sequence: no node holds it, and every node
    (two or more) lacks it and holds the same other key instead, one no dimension has."""
    others = {key for key, _ in level.unknown}
    if level.present or len(level.missing) < 2 or len(others) != 1:
        return None  # one node proves nothing: its own two problems say enough
    (written,) = others
    if len(level.unknown) != len(level.missing) or written in dims:
        return None  # another dimension's key: a level skipped, said at every node
    name = dims[depth]
    holders = "the sequence" if depth == 0 else f"each of its {dims[depth - 1]}"
    return Problem(
        CONFIG_FILE,
        yamldoc.key_line(text, ("dimensions", depth)),
        f"dimension {name!r} is not what the sequence calls it: {holders} holds "
        f"{written!r}, none {name!r} (did you mean {written!r}?)",
    )


def _check_names(spec: DimensionsConfig, dimensions: list[Dimension], text: str) -> None:
    problems = []

    def unique(names: list[str], keys: tuple[str | int, ...], what: str, node: bool) -> None:
        seen: set[str] = set()
        for i, name in enumerate(names):
            line = yamldoc.key_line(text, (*keys, i, "name"))
            if name in seen:
                problems.append(Problem(CONFIG_FILE, line, f"duplicate {what} {name!r}"))
            seen.add(name)
            if name == PATCHES_DIR and node:
                problems.append(Problem(CONFIG_FILE, line, f"{what} name {name!r} is reserved"))

    def walk(items: list[Any], keys: tuple[str | int, ...], depth: int) -> None:
        unique([n.name for n in items], keys, dimensions[depth].key, True)
        if depth + 1 < len(dimensions):
            child = dimensions[depth + 1].name
            for i, item in enumerate(items):
                walk((item.model_extra or {}).get(child, []), (*keys, i, child), depth + 1)

    first = dimensions[0].name
    walk(spec.sequence[first], ("sequence", first), 0)
    types = spec.cluster_types
    unique([t.name for t in types], ("cluster_types",), "cluster type", False)
    for ti, t in enumerate(types):
        seen: dict[str, str] = {}
        for section in ("applications", "applicationsets"):
            for ai, name in enumerate(getattr(t, section)):
                line = yamldoc.key_line(text, ("cluster_types", ti, section, ai))
                what = "application" if section == "applications" else "ApplicationSet"
                if name in seen:
                    message = f"duplicate {what} {name!r}"
                    if seen[name] != section:
                        message = (
                            f"{name!r} is listed both as an application and as an "
                            "ApplicationSet (each has a directory of its own)"
                        )
                    problems.append(Problem(CONFIG_FILE, line, message))
                seen.setdefault(name, section)
    if problems:
        raise FleetErrors(problems)


def require_mapping(data: Any, rel: str) -> dict[str, Any]:
    """The top level of a YAML file as a mapping ({} for an empty file)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FleetError(
            f"expected a mapping at the top level, found {yamldoc.type_name(data)}",
            path=rel,
            line=1,
        )
    return data
