"""Version patches of the dimensions layout: the file model, dependencies, order and merge.

A patch file looks like this (pointers and the body are relative to a root's `applications`
map, so a dependency can look at another application of the same cluster type):

    metadata:
      id: hypershift-v4.18
      description: Upgrade hypershift-operator to v4.18.0
      dependencies:
        - /cert-manager/source/targetRevision: ">=v1.13.0"
        - /prometheus/syncPolicy/automated/selfHeal: true
      merge_strategy:
        /hypershift-operator/syncPolicy/syncOptions: append
    patch:
      hypershift-operator:
        source: {targetRevision: v4.18.0}

A dependency is met when the merged tree (after values and the patches applied before this one)
holds the expected value at the pointer: exact equality, or a semantic-version comparison
written as `">=v4.17.0"` (operators `>=`, `>`, `<=`, `<`, `==`, `!=`, leading `v` optional on
both sides). Which layout directories make a patch active is
`shared.engine.dimensions.layout`'s concern.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import semver
from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.engine import yamldoc
from shared.engine.config.parsing import parse_model
from shared.engine.errors import FleetError
from shared.engine.values import (
    MergeStrategy,
    deep_merge,
    get_pointer,
    leaf_pointers,
    parse_pointer,
)

Operator = Literal[">=", "<=", ">", "<", "==", "!="]

_COMPARISON = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(\S+)\s*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _check_pointer(pointer: str) -> str:
    if not pointer.startswith("/") or pointer == "/":
        raise ValueError(
            f"{pointer!r} is not a JSON pointer into the applications "
            "(write /<application>/<key>/...)"
        )
    return pointer


class PatchMetadata(_Strict):
    id: str = Field(
        min_length=1,
        description="Unique id of the patch in the fleet; its copies in node patches/ "
        "directories carry the same id.",
    )
    description: str = Field(default="", description="What the patch changes and why.")
    dependencies: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Conditions on the merged applications, each `/app/json/pointer: value` or "
        "`/app/json/pointer: '>=v1.2.3'` (also >, <, <=, ==, !=). The patch is applied at a "
        "root only when all hold there.",
    )
    merge_strategy: dict[str, MergeStrategy] = Field(
        default_factory=dict,
        description="JSON pointer (from the applications map) → `append` or `replace` (the "
        "default) for lists the patch changes.",
    )

    @field_validator("dependencies")
    @classmethod
    def _check_dependencies(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for entry in value:
            if not entry:
                raise ValueError("a dependency is a mapping `/app/pointer: expected value`")
            for pointer, expected in entry.items():
                _check_pointer(str(pointer))
                Requirement.parse(expected)  # raises ValueError on a bad version
        return value

    @field_validator("merge_strategy")
    @classmethod
    def _check_strategies(cls, value: dict[str, MergeStrategy]) -> dict[str, MergeStrategy]:
        for pointer in value:
            _check_pointer(pointer)
        return value


class PatchFile(_Strict):
    """A patch file: staged in `<app>/patches/`, active when copied to `<node>/patches/`."""

    metadata: PatchMetadata
    patch: dict[str, dict[str, Any]] = Field(
        description="Values laid over the merged applications, keyed by application name."
    )


def parse_version(text: str) -> semver.Version:
    """A semantic version; a leading `v` and missing minor/patch (`v1.13`) are accepted."""
    return semver.Version.parse(text.strip().removeprefix("v"), optional_minor_and_patch=True)


@dataclass(frozen=True)
class Requirement:
    """What a dependency expects: a version comparison, or exactly `value`."""

    value: Any
    operator: Operator | None = None
    version: semver.Version | None = None

    @classmethod
    def parse(cls, expected: Any) -> Requirement:
        if isinstance(expected, str):
            match = _COMPARISON.match(expected)
            if match:
                op, text = match.groups()
                try:
                    version = parse_version(text)
                except ValueError:
                    raise ValueError(
                        f"{expected!r}: {text!r} is not a semantic version (like v1.2.3)"
                    ) from None
                return cls(value=expected, operator=op, version=version)  # type: ignore[arg-type]
        return cls(value=expected)

    def check(self, found: Any) -> bool:
        if self.operator is None or self.version is None:
            # bool is an int in Python; `true` must not equal `1`.
            if isinstance(found, bool) != isinstance(self.value, bool):
                return False
            return bool(found == self.value)
        if isinstance(found, bool) or not isinstance(found, str | int | float):
            return False
        try:
            actual = parse_version(str(found))
        except ValueError:
            return False
        cmp = actual.compare(self.version)
        return {
            ">=": cmp >= 0,
            "<=": cmp <= 0,
            ">": cmp > 0,
            "<": cmp < 0,
            "==": cmp == 0,
            "!=": cmp != 0,
        }[self.operator]

    def describe(self) -> str:
        if self.operator is not None:
            return str(self.value).strip()
        return _show(self.value)


_MISSING = object()


@dataclass(frozen=True)
class Dependency:
    pointer: str
    requirement: Requirement
    keys: tuple[str | int, ...]  # where it is written in the patch file, for line numbers

    def unmet(self, applications: Mapping[str, Any]) -> str | None:
        """None when met, else what was found instead (for messages)."""
        found = get_pointer(applications, self.pointer, _MISSING)
        if found is _MISSING:
            return "nothing is set there"
        if self.requirement.check(found):
            return None
        if self.requirement.operator is not None and not _is_version(found):
            return f"found {_show(found)}, which is not a semantic version"
        return f"found {_show(found)}"

    def describe(self) -> str:
        return f"{self.pointer} {self.requirement.describe()}"


def _is_version(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return False
    try:
        parse_version(str(value))
    except ValueError:
        return False
    return True


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    return yamldoc.dumps(value).strip().removesuffix("...").strip() if value is not None else "null"


@dataclass(frozen=True)
class Patch:
    """One patch file as loaded from one place in the tree."""

    id: str
    path: str  # repo-relative file
    text: str
    content: dict[str, Any]  # the whole parsed file, to compare copies with the staged file
    body: dict[str, Any]
    dependencies: tuple[Dependency, ...]
    merge_strategy: dict[str, MergeStrategy]
    # Where the body is written in the file: under `patch:`, or (the generator's spelling)
    # under the component's section, `applications:` or `applicationsets:`.
    body_keys: tuple[str, ...] = ("patch",)

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def line(self, keys: tuple[str | int, ...]) -> int | None:
        return yamldoc.key_line(self.text, keys)

    def body_line(self, pointer: str) -> int | None:
        """The line of what the body writes at `pointer` (/<name>/...)."""
        return self.line((*self.body_keys, *parse_pointer(pointer)))

    def writes(self) -> set[str]:
        """Pointers the patch sets (lists count as one leaf: they are replaced or appended)."""
        return leaf_pointers(self.body)

    def unmet(self, applications: Mapping[str, Any]) -> list[tuple[Dependency, str]]:
        out = []
        for dep in self.dependencies:
            found = dep.unmet(applications)
            if found is not None:
                out.append((dep, found))
        return out

    def apply(self, applications: Mapping[str, Any]) -> dict[str, Any]:
        return deep_merge(applications, self.body, strategies=self.merge_strategy)


def load_patch(text: str, source: str) -> Patch:
    """Parse a patch file; bad content raises `FleetErrors` with path:line problems."""
    data = yamldoc.loads(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FleetError(
            f"expected a mapping with metadata: and patch:, found {yamldoc.type_name(data)}",
            path=source,
            line=1,
        )
    model = parse_model(PatchFile, data, text=text, source=source)
    deps = []
    for i, entry in enumerate(model.metadata.dependencies):
        for pointer, expected in entry.items():
            deps.append(
                Dependency(
                    pointer=str(pointer),
                    requirement=Requirement.parse(expected),
                    keys=("metadata", "dependencies", i, str(pointer)),
                )
            )
    body = data.get("patch") or {}
    return Patch(
        id=model.metadata.id,
        path=source,
        text=text,
        content=data,
        body={k: (v if v is not None else {}) for k, v in body.items()},
        dependencies=tuple(deps),
        merge_strategy=dict(model.metadata.merge_strategy),
    )


def _related(a: str, b: str) -> bool:
    """One pointer is the other or lies under it."""
    ta, tb = parse_pointer(a), parse_pointer(b)
    n = min(len(ta), len(tb))
    return ta[:n] == tb[:n]


def order(patches: Sequence[Patch]) -> list[Patch]:
    """Dependency order, keeping the given order (file-name order) wherever it is free.

    A patch whose dependency looks at a path another patch writes comes after that patch, so
    `>=v1.13` can see the version the other patch brings. A cycle is an error naming the files.
    """
    n = len(patches)
    writes = [p.writes() for p in patches]
    after: list[set[int]] = [set() for _ in range(n)]  # after[i]: patches i must follow
    for i, p in enumerate(patches):
        for j in range(n):
            if i != j and any(
                _related(dep.pointer, w) for dep in p.dependencies for w in writes[j]
            ):
                after[i].add(j)
    done: list[int] = []
    placed: set[int] = set()
    while len(done) < n:
        ready = [i for i in range(n) if i not in placed and after[i] <= placed]
        if not ready:
            stuck = [patches[i] for i in range(n) if i not in placed]
            names = ", ".join(f"{p.path} ({p.id})" for p in stuck)
            raise FleetError(
                f"patches depend on each other's changes in a cycle: {names}", path=stuck[0].path
            )
        done.append(ready[0])
        placed.add(ready[0])
    return [patches[i] for i in done]


def overlap(a: Patch, b: Patch) -> list[str]:
    """Pointers both patches set (the same leaf, or one under the other), sorted.

    Two patches that both append to the same list do not overlap: appends compose.
    """
    out = set()
    for pa in a.writes():
        for pb in b.writes():
            if not _related(pa, pb):
                continue
            if pa == pb and a.merge_strategy.get(pa) == "append" == b.merge_strategy.get(pb):
                continue
            out.add(pa if len(pa) >= len(pb) else pb)
    return sorted(out)


@dataclass(frozen=True)
class Outcome:
    """What happened to one active patch at one root."""

    patch: Patch
    unmet: tuple[tuple[Dependency, str], ...]

    @property
    def applied(self) -> bool:
        return not self.unmet


def apply_all(
    applications: dict[str, Any], patches: Sequence[Patch]
) -> tuple[dict[str, Any], list[Outcome]]:
    """Apply `patches` (already ordered) whose dependencies hold on the tree built so far."""
    outcomes = []
    for patch in patches:
        unmet = patch.unmet(applications)
        if not unmet:
            applications = patch.apply(applications)
        outcomes.append(Outcome(patch, tuple(unmet)))
    return applications, outcomes
