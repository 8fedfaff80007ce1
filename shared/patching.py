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
from typing import Any

import jsonpatch

from shared.errors import FleetError
from shared.manifests import Resource

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
# Lists of scalars Kubernetes merges as sets.
SCALAR_SET_KEYS = frozenset({"finalizers"})


def _matches(res: Resource, target: dict[str, Any]) -> bool:
    for key, actual in (
        ("kind", res.kind),
        ("name", res.name),
        ("namespace", res.namespace),
        ("group", res.group),
    ):
        if key in target and target[key] is not None and str(target[key]) != actual:
            return False
    if target.get("version"):
        version = res.api_version.rpartition("/")[2]
        if str(target["version"]) != version:
            return False
    return True


def apply_release_patches(
    resources: list[Resource],
    json_patches: list[dict[str, Any]],
    strategic_merge_patches: list[dict[str, Any]],
    *,
    origin: str,
) -> None:
    for index, entry in enumerate(json_patches):
        where = f"jsonPatches[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("target"), dict):
            raise FleetError(f"{where}: needs a 'target' mapping and a 'patch' list", path=origin)
        ops = entry.get("patch")
        if not isinstance(ops, list):
            raise FleetError(f"{where}: 'patch' must be a list of operations", path=origin)
        hits = [r for r in resources if _matches(r, entry["target"])]
        if not hits:
            raise FleetError(
                f"{where}: no rendered object matches target {entry['target']}", path=origin
            )
        for res in hits:
            try:
                res.doc = jsonpatch.apply_patch(res.doc, ops)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
                raise FleetError(
                    f"{where}: applying to {res.kind} {res.name!r}: {err}", path=origin
                ) from None
    for index, patch in enumerate(strategic_merge_patches):
        where = f"strategicMergePatches[{index}]"
        if not isinstance(patch, dict) or not isinstance(patch.get("metadata"), dict):
            raise FleetError(f"{where}: needs apiVersion, kind and metadata.name", path=origin)
        target = {
            "kind": patch.get("kind"),
            "name": patch["metadata"].get("name"),
            "namespace": patch["metadata"].get("namespace"),
        }
        api_version = str(patch.get("apiVersion") or "")
        hits = [
            r
            for r in resources
            if _matches(r, target) and (not api_version or r.api_version == api_version)
        ]
        if not hits:
            raise FleetError(
                f"{where}: no rendered object is {patch.get('kind')} "
                f"{patch['metadata'].get('name')!r}",
                path=origin,
            )
        for res in hits:
            res.doc = strategic_merge(res.doc, patch)


def strategic_merge(doc: Any, patch: Any, key: str = "") -> Any:
    """Kubernetes strategic merge of `patch` into `doc` (a new object is returned).

    Maps merge recursively; `null` deletes a key; `$patch: replace` replaces a map and
    `$patch: delete` removes it; lists with a known merge key merge item by item (an item with
    `$patch: delete` removes the match), scalar set lists union, other lists are replaced.
    """
    if isinstance(patch, dict):
        directive = patch.get("$patch")
        if directive == "replace":
            return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
        if directive == "delete":
            return None
        if not isinstance(doc, dict):
            doc = {}
        out = dict(doc)
        for k, v in patch.items():
            if k == "$patch":
                continue
            if v is None:
                out.pop(k, None)
                continue
            merged = strategic_merge(out.get(k), v, k)
            if merged is None and isinstance(v, dict) and v.get("$patch") == "delete":
                out.pop(k, None)
            else:
                out[k] = merged
        return out
    if isinstance(patch, list) and isinstance(doc, list):
        merge_key = MERGE_KEYS.get(key)
        if merge_key:
            return _merge_list(doc, patch, merge_key)
        if key in SCALAR_SET_KEYS:
            return list(doc) + [p for p in patch if p not in doc]
    return copy.deepcopy(patch)


def _merge_list(doc: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    out = [copy.deepcopy(item) for item in doc]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            out.append(copy.deepcopy(item))
            continue
        index = next(
            (
                i
                for i, cur in enumerate(out)
                if isinstance(cur, dict) and cur.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
        elif index is None:
            out.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            out[index] = strategic_merge(out[index], item)
    return out
