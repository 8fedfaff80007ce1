"""A root's rendered objects against the API server's schemas, as problems users can act on.

Layouts hand over every object of a root with where it came from (`Rendered`: the release,
the file that declared it, the values files its values were merged from); this module checks
them with `shared.engine.manifests.schema` (the built-in kinds of the root's Kubernetes
version, the CRDs the render itself carries) and words what it finds: the root, the release,
the object (kind, namespace/name) and the field path, at the values file and line that wrote
the value when the value is taken verbatim from one (a scalar equal to exactly one leaf of
the release's values files, preferring a leaf of the same key), else at the file that
declared the release. Kinds no schema knows are named once per root as unchecked.

rollwright.yaml `schemas` sets the mode per root: `strict` refuses (`Outcome.refusals`),
`warn` turns the findings into warnings, `off` checks nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from shared.engine import yamldoc
from shared.engine.config.fleet import FleetConfig
from shared.engine.errors import FleetError, Problem
from shared.engine.helm.engine import default_kube_version
from shared.engine.manifests import schema
from shared.engine.manifests.schema import Schemas, Violation
from shared.engine.tree import Tree


@dataclass(frozen=True)
class ValuesFile:
    """A values file of the fleet a release's values were merged from; `read` gives its
    text (None when it cannot be read as plain YAML: an encrypted file)."""

    path: str
    read: Callable[[], str | None]

    @classmethod
    def at(cls, tree: Tree, rel: str) -> ValuesFile:
        """The file `rel` of `tree`, read only when a value is traced."""

        def read() -> str | None:
            try:
                return tree.read_text(rel)
            except (OSError, UnicodeDecodeError):
                return None

        return cls(rel, read)


@dataclass(frozen=True)
class Rendered:
    """One rendered object of a root and where it came from."""

    doc: dict[str, Any]
    release: str
    origin: str  # the file that declared the release
    origin_line: int | None = None
    kube_version: str | None = None  # the release's `.Capabilities.KubeVersion`; None: default
    values_files: tuple[ValuesFile, ...] = ()  # lowest precedence first
    source: str = ""  # what wrote it, as render errors name it (`chart:templates/x.yaml`)


@dataclass
class Outcome:
    refusals: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


@cache
def _helm_default() -> str:
    return default_kube_version()


def check_root(root: str, objects: list[Rendered], config: FleetConfig) -> Outcome:
    """The root's objects checked under its mode. A release that declares no Kubernetes
    version is checked against rollwright.yaml `schemas.kubeVersion`, else the version Helm
    assumes without `--kube-version` (the one its charts saw)."""
    mode = config.schemas.mode_for(root)

    def default() -> str:
        return config.schemas.kube_version or _helm_default()

    outcome = Outcome()
    if mode == "off" or not objects:
        return outcome
    crds = [r.doc for r in objects if schema.is_crd(r.doc)]
    by_version: dict[str, Schemas] = {}
    unchecked: dict[tuple[str, str], list[Rendered]] = {}
    prefix = f'rendering root "{root}": '
    for obj in objects:
        version = obj.kube_version or default()
        schemas = by_version.get(version)
        if schemas is None:
            schemas = by_version[version] = Schemas.for_version(version, crds)
            if schemas.version.note:
                note = prefix + schemas.version.note
                outcome.warnings.append(Problem(obj.origin, obj.origin_line, note, hygiene=True))
        found = schemas.check(obj.doc)
        if found is None:
            key = (str(obj.doc.get("apiVersion")), str(obj.doc.get("kind")))
            unchecked.setdefault(key, []).append(obj)
            continue
        for violation in found:
            path, line = _place(obj, violation)
            source = f" ({obj.source})" if obj.source else ""
            message = f"{prefix}release {obj.release!r} renders {_describe(obj.doc)}{source}: "
            message += f"{_dotted(violation.path)}: {violation.message}"
            if path != obj.origin:
                declared = f"{obj.origin}:{obj.origin_line}" if obj.origin_line else obj.origin
                message += f" (the release is declared in {declared})"
            problem = Problem(path, line, message, hygiene=mode == "warn")
            (outcome.refusals if mode == "strict" else outcome.warnings).append(problem)
    for (api_version, kind), objs in sorted(unchecked.items()):
        first = objs[0]
        count = f"{len(objs)} objects" if len(objs) > 1 else "1 object"
        releases = sorted({o.release for o in objs})
        outcome.warnings.append(
            Problem(
                first.origin,
                first.origin_line,
                f"{prefix}{count} of kind {kind} ({api_version}, release "
                f"{', '.join(repr(r) for r in releases)}) not checked: no schema (Kubernetes "
                f"{schema.schema_version(first.kube_version or default()).used.removesuffix('.0')} "
                "has no such kind and the render carries no CRD for it)",
                hygiene=True,
            )
        )
    return outcome


def _describe(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = str(meta.get("name") or "") if meta else ""
    namespace = str(meta.get("namespace") or "") if meta else ""
    return f"{doc.get('kind')} {(namespace + '/' if namespace else '') + name!r}"


def _dotted(path: tuple[schema.Key, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the object)"


def _place(obj: Rendered, violation: Violation) -> tuple[str, int | None]:
    """The values file and line that wrote the violating value verbatim, else the file
    that declared the release."""
    value = violation.value
    if value is None or isinstance(value, dict | list) or value == "":
        return obj.origin, obj.origin_line
    names = [p for p in violation.path if isinstance(p, str)]
    last = names[-1] if names else None
    same_key: list[tuple[str, str, tuple[str | int, ...]]] = []
    any_key: list[tuple[str, str, tuple[str | int, ...]]] = []
    for vf in reversed(obj.values_files):  # highest precedence first
        text = vf.read()
        if text is None:
            continue
        try:
            data = yamldoc.loads(text, vf.path)
        except FleetError:  # reported where the file is read
            continue
        for keys in _equal_leaves(data, value):
            if keys and keys[-1] == last:
                same_key.append((vf.path, text, keys))
            any_key.append((vf.path, text, keys))
    found = same_key[0] if same_key else (any_key[0] if len(any_key) == 1 else None)
    if found is None:
        return obj.origin, obj.origin_line
    path, text, keys = found
    return path, yamldoc.key_line(text, keys)


def _equal_leaves(data: Any, value: Any) -> Iterator[tuple[str | int, ...]]:
    for keys, leaf in yamldoc.walk_leaves(data):
        if type(leaf) is type(value) and leaf == value:
            yield tuple(keys)
