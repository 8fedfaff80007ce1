"""Rendered objects against the schemas the API server checks them with.

Kubernetes' own kinds are checked against the OpenAPI schemas of the cluster's version that
the `kubernetes-validate` package ships inside its wheel (its `-local-strict` set: unknown
fields are refused, as `kubectl apply`'s default strict field validation does); nothing is
downloaded. Custom resources are checked against the `openAPIV3Schema` of the CRDs the same
render carries, read as the API server reads a structural schema (`nullable`,
`x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields`; fields a schema does not
list are unknown). A kind with neither is *unchecked*, which callers name rather than pass.

    schemas = Schemas.for_version("v1.31.2", crds)
    schemas.check(doc)   # [Violation(path=("spec", "replicas"), ...)], or None: no schema
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import jsonschema
import jsonschema_rs
import kubernetes_validate.utils as kv
from packaging.version import Version
from referencing import Registry, Resource

from shared.engine.manifests import argocd

Key = str | int


@dataclass(frozen=True)
class Violation:
    """One field of an object the API server would refuse."""

    path: tuple[Key, ...]
    message: str
    value: Any = None  # the value at `path` (None: a field that is missing or not allowed)


@dataclass(frozen=True)
class SchemaVersion:
    """The schema set checked for a Kubernetes version: `used` is the shipped version closest
    below it; `note` says when the cluster's version is outside what the package ships."""

    asked: str
    used: str
    note: str = ""


def versions() -> list[str]:
    """The Kubernetes versions (`1.33.0`) whose schemas the installed package ships."""
    return _versions()


@cache
def _versions() -> list[str]:
    return list(dict.fromkeys(kv.all_versions()))


@cache  # once per version: every render of a root asks for it
def schema_version(kube_version: str) -> SchemaVersion:
    """The shipped schema set for `kube_version` (`v1.31.2`, `1.31`): the newest not newer
    than it; outside the shipped range, the nearest end, with a note saying so."""
    shipped = versions()
    asked = _minor(kube_version)
    older = [v for v in shipped if _minor(v) <= asked]
    if not older:
        return SchemaVersion(
            kube_version,
            shipped[0],
            f"Kubernetes {kube_version} is older than the oldest schemas rollwright ships "
            f"({_short(shipped[0])}): checked against {_short(shipped[0])}",
        )
    used = older[-1]
    if asked > _minor(shipped[-1]):
        return SchemaVersion(
            kube_version,
            used,
            f"Kubernetes {kube_version} is newer than the newest schemas rollwright ships "
            f"({_short(used)}): checked against {_short(used)}",
        )
    return SchemaVersion(kube_version, used)


def _minor(version: str) -> Version:
    match = re.match(r"v?(\d+)\.(\d+)", version.strip())
    if not match:
        raise ValueError(f"{version!r} is not a Kubernetes version (v1.31.2)")
    return Version(f"{match[1]}.{match[2]}")


def _short(version: str) -> str:
    return str(_minor(version))


_SHIPPED_REF = "/api/_definitions.json#/$defs/"  # how the schemas refer to shared definitions


@cache
def _shipped_definitions(version: str) -> dict[str, Any]:
    """The shared `_definitions.json` of a schema set, loaded once per process."""
    defs: dict[str, Any] = kv.schema_contents(
        f"kubernetes-json-schema/v{version}-local-strict/_definitions.json", version
    )
    return defs


def builtin_kinds() -> frozenset[tuple[str, str]]:
    """Kubernetes' own kinds, as (API group, kind) (`("apps", "Deployment")`, `("", "Pod")`):
    those of the newest schema set the package ships."""
    return _builtin_kinds(versions()[-1])


@cache
def _builtin_kinds(version: str) -> frozenset[tuple[str, str]]:
    found = set()
    for definition in _shipped_definitions(version)["$defs"].values():
        for entry in definition.get("x-kubernetes-group-version-kind") or []:
            found.add((str(entry.get("group") or ""), str(entry.get("kind") or "")))
    return frozenset(found)


@cache
def _registry(version: str) -> Registry:
    registry: Registry = Resource.from_contents(_shipped_definitions(version)) @ Registry()
    return registry


@dataclass(frozen=True)
class _Checker:
    """A schema twice: `fast` answers "valid?" in microseconds (Rust's jsonschema-rs; a
    built-in kind's schema with the definitions it reaches inlined), `full` names every
    violation with its path when the answer is no (Python's jsonschema). `fast` is None when
    jsonschema-rs cannot compile the schema (a CRD's pattern Rust reads otherwise)."""

    fast: Any
    full: jsonschema.protocols.Validator

    def errors(self, doc: dict[str, Any]) -> list[jsonschema.ValidationError]:
        if self.fast is not None and self.fast.is_valid(doc):
            return []
        return _leaves(self.full.iter_errors(doc))

    @classmethod
    def of(
        cls, schema: dict[str, Any], full: jsonschema.protocols.Validator, draft: Any
    ) -> _Checker:
        try:
            fast = draft(schema)
        except (jsonschema_rs.ValidationError, ValueError):
            fast = None
        return cls(fast, full)


@cache
def _builtin(version: str, kind: str, api_version: str) -> _Checker | None:
    """The validators of a built-in kind, or None when the set has no schema for it."""
    # The package's file names: `rbac.authorization.k8s.io/v1` → `rbac-v1`.
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    name = f"kubernetes-json-schema/v{version}-local-strict/{kind.lower()}-{api}.json"
    try:
        schema = kv.schema_contents(name, version)
    except FileNotFoundError:
        return None
    # The file names a kind by its lowercase name and group prefix: make sure it is this
    # kind (`apps/v1` and a custom `apps.example.com/v1` share the file name).
    gvk = schema.get("x-kubernetes-group-version-kind") or []
    if gvk and not any(_gvk_matches(entry, kind, api_version) for entry in gvk):
        return None
    registry = Resource.from_contents(schema) @ _registry(version)
    full = jsonschema.Draft202012Validator(schema, registry=registry)
    return _Checker.of(_inlined(schema, version), full, jsonschema_rs.Draft202012Validator)


def _inlined(schema: dict[str, Any], version: str) -> dict[str, Any]:
    """`schema` with the shared definitions it reaches (and only those) as its own `$defs`."""
    shared = _shipped_definitions(version)["$defs"]
    reached: dict[str, Any] = {}
    pending = [schema]
    # The kind's file refers to them by the shared file's name, they to each other locally.
    refs = re.compile(r'"\$ref": "(?:' + re.escape(_SHIPPED_REF) + r'|#/\$defs/)([^"]+)"')
    while pending:
        text = json.dumps(pending.pop())
        for name in refs.findall(text):
            if name not in reached:
                reached[name] = shared[name]
                pending.append(shared[name])
    whole = json.dumps({**schema, "$defs": reached}).replace(f'"{_SHIPPED_REF}', '"#/$defs/')
    inlined: dict[str, Any] = json.loads(whole)
    return inlined


def _gvk_matches(entry: dict[str, Any], kind: str, api_version: str) -> bool:
    group = entry.get("group") or ""
    wanted = f"{group}/{entry.get('version')}" if group else str(entry.get("version"))
    return entry.get("kind") == kind and wanted == api_version


class Schemas:
    """Validators for one render: the built-in kinds of one Kubernetes version and the
    custom kinds of the CRDs the render carries."""

    def __init__(self, version: SchemaVersion, crds: list[dict[str, Any]]) -> None:
        self.version = version
        self._custom: dict[tuple[str, str], _Checker | None] = {}
        for crd in crds:
            self._add_crd(crd)

    @classmethod
    def for_version(cls, kube_version: str, crds: list[dict[str, Any]]) -> Schemas:
        return cls(schema_version(kube_version), crds)

    def _add_crd(self, crd: dict[str, Any]) -> None:
        spec = crd.get("spec")
        if not isinstance(spec, dict):
            return
        group = spec.get("group")
        names = spec.get("names")
        kind = names.get("kind") if isinstance(names, dict) else None
        if not isinstance(group, str) or not isinstance(kind, str):
            return
        shared = (spec.get("validation") or {}).get("openAPIV3Schema")  # v1beta1
        for entry in spec.get("versions") or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                continue
            schema = (entry.get("schema") or {}).get("openAPIV3Schema") or shared
            key = (f"{group}/{entry['name']}", kind)
            if not isinstance(schema, dict):
                self._custom[key] = None
                continue
            read = structural(schema, top=True)
            full = jsonschema.Draft4Validator(read)
            self._custom[key] = _Checker.of(read, full, jsonschema_rs.Draft4Validator)

    def is_custom(self, api_version: str, kind: str) -> bool:
        return (api_version, kind) in self._custom

    def check(self, doc: dict[str, Any]) -> list[Violation] | None:
        """The violations of `doc`, [] when it conforms, None when no schema knows its kind
        (or Argo CD's schema checks it elsewhere)."""
        kind = doc.get("kind")
        api_version = doc.get("apiVersion")
        if not isinstance(kind, str) or not isinstance(api_version, str):
            return None
        if (api_version, kind) in self._custom:
            checker = self._custom[(api_version, kind)]
        elif argocd.is_argocd(doc):
            return []  # checked against Argo CD's own API schema (render.check_argocd)
        else:
            checker = _builtin(self.version.used, kind, api_version)
        if checker is None:
            return None
        found: dict[tuple[Key, ...], Violation] = {}
        for err in checker.errors(doc):
            violation = _violation(err)
            found.setdefault(violation.path, violation)  # each field once
        return sorted(found.values(), key=lambda v: [str(p) for p in v.path])


def is_crd(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and doc.get("kind") == "CustomResourceDefinition"
        and str(doc.get("apiVersion", "")).startswith("apiextensions.k8s.io/")
    )


def _leaves(errors: Any) -> list[jsonschema.ValidationError]:
    """The most precise errors: for `oneOf`/`anyOf` (int-or-string, nullable references), the
    branch that went deepest."""
    out: list[jsonschema.ValidationError] = []
    for err in errors:
        best = jsonschema.exceptions.best_match(err.context) if err.context else None
        out.append(best if best is not None else err)
    return out


def _violation(err: jsonschema.ValidationError) -> Violation:
    path = tuple(err.absolute_path)
    rule: Any = err.schema
    if err.validator == "additionalProperties":
        known = rule.get("properties") or {} if isinstance(rule, dict) else {}
        extra = sorted(
            key
            for key in (err.instance if isinstance(err.instance, dict) else {})
            if key not in known
        )
        keys = ", ".join(repr(k) for k in extra)
        return Violation(
            (*path, extra[0]) if extra else path, f"unknown field{'s' * (len(extra) > 1)} {keys}"
        )
    if err.validator == "required":
        missing = re.match(r"'([^']+)' is a required property", err.message)
        name = missing[1] if missing else err.message
        return Violation((*path, name), "required field is missing")
    if err.validator == "type":
        wanted: Any = err.validator_value
        kinds = " or ".join(wanted) if isinstance(wanted, list) else str(wanted)
        wrong = _type_name(err.instance)
        return Violation(path, f"must be {_article(kinds)}, not {wrong}", err.instance)
    if err.validator == "enum":
        options: Any = err.validator_value
        allowed = ", ".join(repr(v) for v in options)
        return Violation(path, f"must be one of {allowed}", err.instance)
    return Violation(path, _message(err), err.instance)


def _message(err: jsonschema.ValidationError) -> str:
    # jsonschema quotes the instance first ("'x' is not ..."): say what is wrong, not the
    # value again (it could be long, or derived from a secret).
    text = err.message
    shown = repr(err.instance)
    return text.removeprefix(shown).strip() if text.startswith(shown) else text


def _article(kinds: str) -> str:
    return ("an " if kinds[:1] in "aeiou" else "a ") + kinds


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "a mapping" if isinstance(value, dict) else type(value).__name__


def structural(schema: dict[str, Any], *, top: bool = False) -> dict[str, Any]:
    """A CRD's `openAPIV3Schema` as JSON Schema, read as the API server reads it: `nullable`
    admits null, `x-kubernetes-int-or-string` an integer or a string, and a field an object's
    `properties` do not list is unknown unless `x-kubernetes-preserve-unknown-fields` (or
    `additionalProperties`) keeps it. At the top, `apiVersion`, `kind` and `metadata` are
    every object's."""
    out: dict[str, Any] = _structural(copy.deepcopy(schema))
    if top:
        props = out.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props["metadata"] = {"type": "object"}
    return out


def _structural(node: Any) -> Any:
    if isinstance(node, list):
        return [_structural(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _structural(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    out.pop("nullable", None)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not preserve
        and not node.get("x-kubernetes-embedded-resource")
    ):
        out["additionalProperties"] = False
    for key in ("properties", "patternProperties", "definitions"):
        if isinstance(node.get(key), dict):
            out[key] = {k: _structural(v) for k, v in node[key].items()}
    return out
