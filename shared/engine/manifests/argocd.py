"""Argo CD's API schema for Applications and ApplicationSets, and checking objects against it.

`argocd_api.json` (beside this module) holds the definitions `v1alpha1Application` and
`v1alpha1ApplicationSet` reach in Argo CD's REST API description (`assets/swagger.json` of
argoproj/argo-cd, Apache-2.0), cut to those and nothing else. Regenerate it with

    python -m shared.engine.manifests.argocd path/to/swagger.json \
        shared/engine/manifests/argocd_api.json

(tests/engine/test_argocd_schema.py checks it against the copy the project keeps as reference).

`check(obj, kind)` finds every field Argo CD does not know (with the closest known name) and
every value of the wrong type, as `Mismatch(path, message)`. The API description is the gRPC
gateway's view; three of its types are something else in a manifest and are read as such:
`runtimeRawExtension`, `v1JSON` and `v1FieldsV1` (free-form JSON, e.g. `helm.valuesObject`),
`intstrIntOrString` (an integer or a string), `v1Time` (a string). `null` is accepted anywhere
(Kubernetes reads it as "unset").
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from shared.engine import yamldoc
from shared.engine.suggest import hint

API_VERSION = "argoproj.io/v1alpha1"
KINDS = {"Application": "v1alpha1Application", "ApplicationSet": "v1alpha1ApplicationSet"}
SCHEMA_FILE = "argocd_api.json"
FREE_FORM = frozenset({"runtimeRawExtension", "v1JSON", "v1FieldsV1"})
# Every object carries these beside the fields of its definition.
_OBJECT_KEYS = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}}

Key = str | int


@dataclass(frozen=True)
class Mismatch:
    """One field of an object that Argo CD would not accept as written."""

    path: tuple[Key, ...]
    message: str
    unknown: bool = False  # an unknown field (rather than a value of the wrong type)


@cache
def definitions() -> dict[str, Any]:
    text = (resources.files("shared.engine.manifests") / SCHEMA_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def is_argocd(doc: Any) -> bool:
    """Whether a rendered document is an Argo CD Application or ApplicationSet."""
    return (
        isinstance(doc, dict) and doc.get("apiVersion") == API_VERSION and doc.get("kind") in KINDS
    )


def check_object(doc: dict[str, Any]) -> list[Mismatch]:
    """Mismatches of a whole Application or ApplicationSet (`is_argocd(doc)`)."""
    name = KINDS[str(doc["kind"])]
    schema = dict(definitions()[name])
    schema["properties"] = {**_OBJECT_KEYS, **schema.get("properties", {})}
    return check(doc, schema)


def check_definition(value: Any, name: str) -> list[Mismatch]:
    """Mismatches of `value` as the definition `name` (e.g. `v1alpha1ApplicationSource`)."""
    return check(value, {"$ref": f"#/definitions/{name}"})


def check(value: Any, schema: dict[str, Any], path: tuple[Key, ...] = ()) -> list[Mismatch]:
    if value is None:
        return []
    ref = schema.get("$ref")
    if ref is not None:
        name = str(ref).rsplit("/", 1)[-1]
        if name in FREE_FORM:
            return []
        if name == "intstrIntOrString":
            if isinstance(value, str) or _is_int(value):
                return []
            return [Mismatch(path, f"expected an integer or a string, found {_kind(value)}")]
        return check(value, definitions()[name], path)
    kind = schema.get("type", "object")
    if kind == "object":
        if not isinstance(value, dict):
            return [Mismatch(path, f"expected a mapping, found {_kind(value)}")]
        extra = schema.get("additionalProperties")
        properties: dict[str, Any] = schema.get("properties") or {}
        if extra is not None:
            out: list[Mismatch] = []
            for key, item in value.items():
                out += check(item, extra, (*path, str(key)))
            return out
        if not properties:
            return []  # an object the API leaves open
        found: list[Mismatch] = []
        for key, item in value.items():
            sub = properties.get(str(key))
            if sub is None:
                message = "unknown field" + hint(str(key), properties)
                found.append(Mismatch((*path, str(key)), message, unknown=True))
            else:
                found += check(item, sub, (*path, str(key)))
        return found
    if kind == "array":
        if not isinstance(value, list):
            return [Mismatch(path, f"expected a list, found {_kind(value)}")]
        items = schema.get("items") or {}
        listed: list[Mismatch] = []
        for i, item in enumerate(value):
            listed += check(item, items, (*path, i))
        return listed
    if kind == "string" and not isinstance(value, str):
        return [Mismatch(path, f"expected a string, found {_kind(value)}")]
    if kind == "integer" and not _is_int(value):
        return [Mismatch(path, f"expected an integer, found {_kind(value)}")]
    if kind == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        return [Mismatch(path, f"expected a number, found {_kind(value)}")]
    if kind == "boolean" and not isinstance(value, bool):
        return [Mismatch(path, f"expected a boolean, found {_kind(value)}")]
    return []


def describe(mismatch: Mismatch, prefix: Sequence[Key] = ()) -> str:
    """`unknown key 'spec/source/targetRevison' (did you mean 'targetRevision'?)` or
    `spec/revisionHistoryLimit: expected an integer, found a string`."""
    where = "/".join(str(p) for p in (*prefix, *mismatch.path))
    if mismatch.unknown:
        tail = mismatch.message.removeprefix("unknown field")
        return f"unknown key {where!r}{tail}"
    return f"{where}: {mismatch.message}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return yamldoc.type_name(value)


def extract(swagger: dict[str, Any]) -> dict[str, Any]:
    """The definitions the two kinds reach, from Argo CD's whole API description."""
    every: dict[str, Any] = swagger["definitions"]
    kept: dict[str, Any] = {}
    todo = list(KINDS.values())
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        kept[name] = every[name]
        todo += sorted(_refs(every[name]))
    return dict(sorted(kept.items()))


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {str(node["$ref"]).rsplit("/", 1)[-1]} if "$ref" in node else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return {name for value in node for name in _refs(value)}
    return set()


def render_schema(swagger_path: Path) -> str:
    data = extract(json.loads(swagger_path.read_text(encoding="utf-8")))
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print(
            "usage: python -m shared.engine.manifests.argocd SWAGGER.json OUT.json", file=sys.stderr
        )
        return 2
    Path(argv[1]).write_text(render_schema(Path(argv[0])), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
