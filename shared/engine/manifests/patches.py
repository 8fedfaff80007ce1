"""Post-render patches on Kubernetes objects: RFC 6902 JSON patches and strategic merge patches.

Both follow helmfile's release syntax:

    jsonPatches:
      - target: {group: apps, version: v1, kind: Deployment, name: web, namespace: x}
        patch:
          - {op: replace, path: /spec/replicas, value: 3}
    strategicMergePatches:
      - apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        spec: {template: {spec: {containers: [{name: web, image: web:2}]}}}

A patch that matches no rendered object is an error: a silent no-op hides typos.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch

from shared.engine import suggest
from shared.engine.errors import FleetError
from shared.engine.manifests.documents import Resource

# Merge keys of lists Kubernetes merges item by item (patchMergeKey in the API types).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "envFrom": "",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "tolerations": "",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "conditions": "type",
    "finalizers": "",
}
# Lists whose items carry another merge key in some kinds: Service ports merge by `port`.
ALT_MERGE_KEYS: dict[str, str] = {"ports": "port"}
# Lists of scalars Kubernetes merges as sets.
SCALAR_SET_KEYS = frozenset({"finalizers"})


@dataclass(frozen=True)
class PatchOrigin:
    """Where one patch entry was written, for its errors: the file, the entry's line and the
    line of each of its operations (jsonPatches; empty when unknown)."""

    path: str
    line: int | None = None
    op_lines: tuple[int | None, ...] = ()


# Keys of a jsonPatches target (kustomize's selector, as helmfile passes it on). Each value is a
# regular expression matched against the whole field, as kustomize does: `name: web-.*`.
TARGET_KEYS = ("group", "version", "kind", "name", "namespace")


def _target_matchers(
    target: dict[str, Any], where: str, origin: str, line: int | None = None
) -> dict[str, re.Pattern[str]]:
    unknown = sorted(str(k) for k in target if k not in TARGET_KEYS)
    if unknown:
        hints = "".join(suggest.hint(key, TARGET_KEYS) for key in unknown)
        raise FleetError(
            f"{where}: unknown target key(s) {unknown}{hints}; known: {list(TARGET_KEYS)}",
            path=origin,
            line=line,
        )
    matchers: dict[str, re.Pattern[str]] = {}
    for key in TARGET_KEYS:
        value = target.get(key)
        if value is None:
            continue
        try:
            matchers[key] = re.compile(f"(?:{value})")
        except re.error as err:
            raise FleetError(
                f"{where}: target {key} {value!r} is not a valid regular expression: {err}",
                path=origin,
                line=line,
            ) from None
    return matchers


def _fields(res: Resource) -> dict[str, str]:
    return {
        "group": res.group,
        "version": res.api_version.rpartition("/")[2],
        "kind": res.kind,
        "name": res.name,
        "namespace": res.namespace,
    }


def _matches(res: Resource, matchers: dict[str, re.Pattern[str]]) -> bool:
    fields = _fields(res)
    return all(m.fullmatch(fields[key]) for key, m in matchers.items())


def apply_release_patches(
    resources: list[Resource],
    json_patches: list[dict[str, Any]],
    strategic_merge_patches: list[dict[str, Any]],
    *,
    origin: str,
    json_origins: Sequence[PatchOrigin] = (),
    strategic_origins: Sequence[PatchOrigin] = (),
) -> None:
    """Apply a release's patches to its rendered objects, in place.

    JSON patches run first, then strategic merge patches, each in the order given. A strategic
    merge patch whose top level says `$patch: delete` removes the object from the release.
    `json_origins` / `strategic_origins` (one per entry) say where each entry was written, so
    an error names its file and line, down to the failing operation; without them, `origin`.
    """
    for index, entry in enumerate(json_patches):
        place = json_origins[index] if index < len(json_origins) else PatchOrigin(origin)
        _apply_json_patch(resources, entry, f"jsonPatches[{index}]", place)
    for index, patch in enumerate(strategic_merge_patches):
        place = strategic_origins[index] if index < len(strategic_origins) else PatchOrigin(origin)
        _apply_strategic_merge_patch(resources, patch, f"strategicMergePatches[{index}]", place)


def _apply_json_patch(
    resources: list[Resource], entry: Any, where: str, place: PatchOrigin
) -> None:
    """One `jsonPatches` entry on every object its target matches."""
    if not isinstance(entry, dict) or not isinstance(entry.get("target"), dict):
        raise FleetError(
            f"{where}: needs a 'target' mapping and a 'patch' list",
            path=place.path,
            line=place.line,
        )
    ops = entry.get("patch")
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise FleetError(
            f"{where}: 'patch' must be a list of operations", path=place.path, line=place.line
        )
    matchers = _target_matchers(entry["target"], where, place.path, place.line)
    hits = [r for r in resources if _matches(r, matchers)]
    if not hits:
        raise FleetError(
            f"{where}: no rendered object matches target {_describe(entry['target'])}"
            + _target_hint(entry["target"], resources),
            path=place.path,
            line=place.line,
        )
    for res in hits:
        res.doc = _json_patched(res, ops, where, place)


def _json_patched(
    res: Resource, ops: list[dict[str, Any]], where: str, place: PatchOrigin
) -> dict[str, Any]:
    patched: Any = res.doc
    # One operation at a time (the same result as the whole list) to say which failed.
    for k, op in enumerate(ops):
        try:
            patched = jsonpatch.apply_patch(patched, [op])
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
            op_line = place.op_lines[k] if k < len(place.op_lines) else place.line
            raise FleetError(
                f"{where}: patch[{k}] ({op.get('op')} {op.get('path')}): applying to "
                f"{res.kind} {res.name!r}: {_reason(err)}",
                path=place.path,
                line=op_line,
            ) from None
    if not isinstance(patched, dict):
        raise FleetError(
            f"{where}: applying to {res.kind} {res.name!r} left no Kubernetes object",
            path=place.path,
            line=place.line,
        )
    return patched


def _apply_strategic_merge_patch(
    resources: list[Resource], patch: Any, where: str, place: PatchOrigin
) -> None:
    """One `strategicMergePatches` entry on the object it names; `$patch: delete` at its top
    level removes the object from `resources`."""
    if (
        not isinstance(patch, dict)
        or not patch.get("kind")
        or not isinstance(patch.get("metadata"), dict)
        or not patch["metadata"].get("name")
    ):
        raise FleetError(
            f"{where}: needs apiVersion, kind and metadata.name",
            path=place.path,
            line=place.line,
        )
    meta = patch["metadata"]
    target = {
        "kind": re.escape(str(patch["kind"])),
        "name": re.escape(str(meta["name"])),
    }
    if meta.get("namespace"):
        target["namespace"] = re.escape(str(meta["namespace"]))
    matchers = _target_matchers(target, where, place.path, place.line)
    api_version = str(patch.get("apiVersion") or "")
    hits = [
        r
        for r in resources
        if _matches(r, matchers) and (not api_version or r.api_version == api_version)
    ]
    if not hits:
        raise FleetError(
            f"{where}: no rendered object is {api_version + ' ' if api_version else ''}"
            f"{patch['kind']} {meta['name']!r}"
            + (f" in namespace {meta['namespace']!r}" if meta.get("namespace") else "")
            + _target_hint({"kind": patch["kind"], "name": meta["name"]}, resources),
            path=place.path,
            line=place.line,
        )
    for res in hits:
        try:
            merged = strategic_merge(res.doc, patch)
        except ValueError as err:
            raise FleetError(f"{where}: {err}", path=place.path, line=place.line) from None
        if merged is None:
            resources.remove(res)
        else:
            res.doc = merged


def _reason(err: Exception) -> str:
    """jsonpatch's message without the document it prints after " in " (a whole object,
    values and all: noise at best in an error people read)."""
    text = str(err)
    if isinstance(err, jsonpatch.JsonPatchTestFailed):
        return "the value at the path differs from the test operation's value"
    return re.split(r" in [\[{]", text, maxsplit=1)[0]


def _target_hint(target: dict[str, Any], resources: list[Resource]) -> str:
    """` (did you mean kind 'Deployment'?)` when a literal kind or name is one slip away from
    what the release rendered."""
    for key, field_name in (("kind", "kind"), ("name", "name")):
        wanted = target.get(key)
        if not isinstance(wanted, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", wanted):
            continue  # a regular expression, not a misspelt name
        found = suggest.closest(wanted, {_fields(r)[field_name] for r in resources})
        if found is not None:
            return f" (did you mean {key} {found!r}?)"
    return ""


def _describe(target: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in target.items()) + "}"


def strategic_merge(doc: Any, patch: Any, key: str = "") -> Any:
    """Kubernetes strategic merge of `patch` into `doc` (a new object is returned).

    Maps merge recursively; `null` deletes a key; `$patch: replace` replaces a map and
    `$patch: delete` removes it (None is returned for a deleted top level); lists with a known
    merge key merge item by item (an item with `$patch: delete` removes the match, an item
    `{$patch: replace}` makes the list replace the original), scalar set lists union, other
    lists are replaced. Other `$` directives raise ValueError rather than leak into output.
    Neither argument is changed, and the result shares no mutable part with `patch`.
    """
    if isinstance(patch, dict):
        _check_directives(patch)
        directive = patch.get("$patch", "merge")
        if directive == "delete":
            return None
        out = dict(doc) if isinstance(doc, dict) and directive == "merge" else {}
        for k, v in patch.items():
            if k == "$patch":
                continue
            merged = None if v is None else strategic_merge(out.get(k), v, k)
            if merged is None:
                out.pop(k, None)  # `k: null` or `k: {$patch: delete}`
            else:
                out[k] = merged
        return out
    if isinstance(patch, list):
        base = doc if isinstance(doc, list) else []
        if any(_is_replace_marker(item) for item in patch):
            base = []
            patch = [item for item in patch if not _is_replace_marker(item)]
        merge_key = MERGE_KEYS.get(key)
        if merge_key:
            return _merge_list(base, patch, merge_key, ALT_MERGE_KEYS.get(key))
        if key in SCALAR_SET_KEYS:
            return [copy.deepcopy(x) for x in base] + [
                copy.deepcopy(p) for p in patch if p not in base
            ]
        # Replaced wholesale: each item is new content, merged onto nothing.
        return [x for x in (strategic_merge(None, item) for item in patch) if x is not None]
    return copy.deepcopy(patch)


def _check_directives(patch: dict[str, Any]) -> None:
    for k in patch:
        if isinstance(k, str) and k.startswith("$") and k != "$patch":
            raise ValueError(f"unsupported strategic merge directive {k!r}")
    directive = patch.get("$patch", "merge")
    if directive not in ("merge", "replace", "delete"):
        raise ValueError(f"unknown $patch directive {directive!r} (merge, replace or delete)")


def _is_replace_marker(item: Any) -> bool:
    return isinstance(item, dict) and item == {"$patch": "replace"}


def _merge_list(doc: list[Any], patch: list[Any], merge_key: str, alt_key: str | None) -> list[Any]:
    out = [copy.deepcopy(item) for item in doc]
    for item in patch:
        key = merge_key
        if isinstance(item, dict) and key not in item and alt_key and alt_key in item:
            key = alt_key
        index = None
        if isinstance(item, dict) and key in item:
            index = next(
                (
                    i
                    for i, cur in enumerate(out)
                    if isinstance(cur, dict) and cur.get(key) == item[key]
                ),
                None,
            )
        merged = strategic_merge(None if index is None else out[index], item)
        if index is None:
            if merged is not None:
                out.append(merged)
        elif merged is None:
            out.pop(index)  # `{name: x, $patch: delete}`
        else:
            out[index] = merged
    return out
