"""Secret reference files, as Commodore writes them before Kapitan compiles: every
`?{vaultkv:<secret path>/<key>}` in the cluster's parameters (the cluster target's keys that
belong to no component, and each component target's own key) becomes
`catalog/refs/<secret path>/<key>`, pointing Kapitan at Vault without holding a secret.

Only `vaultkv` references are supported, as with Commodore."""

from __future__ import annotations

import re
from base64 import b64encode
from typing import Any

from shared.engine.commodore.workdir import BOOTSTRAP, Workdir, parameters_key
from shared.engine.commodore.yamlout import commodore_yaml
from shared.engine.errors import FleetError

_REF = re.compile(r"\?{([^}]+)\}")


def _find(prefix: str, value: Any, found: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _find(f"{prefix}/{key}", item, found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _find(f"{prefix}[{index}]", item, found)
    elif isinstance(value, str):
        for match in _REF.finditer(value):
            found.setdefault(match.group(1), prefix)


def write_refs(workdir: Workdir, nodes: dict[str, dict[str, Any]], aliases: dict[str, str]) -> None:
    """`aliases`: instance → component."""
    found: dict[str, str] = {}  # "type:ref" -> the parameter it was first seen in
    cluster = nodes[BOOTSTRAP]["parameters"]
    keys = {parameters_key(c) for c in aliases.values()}
    for key in set(cluster) - keys:
        _find(key, cluster[key], found)
    for alias, component in aliases.items():
        key = parameters_key(component)
        _find(key, nodes[alias]["parameters"].get(key), found)
    if not found:
        return
    for refstr, where in sorted(found.items()):
        kind, _, rest = refstr.partition(":")
        ref = rest.split(":")[0]
        if kind != "vaultkv":
            raise FleetError(
                f"parameter {where!r}: secret reference type {kind!r} is not supported "
                "(Commodore writes vaultkv references only)"
            )
        if "/" not in ref:
            raise FleetError(
                f"parameter {where!r}: vaultkv reference {ref!r} needs <secret path>/<key>"
            )
        vault = ((cluster.get("kapitan") or {}).get("secrets") or {}).get("vaultkv")
        if vault is None:
            raise FleetError(
                f"parameter {where!r} holds a vaultkv reference but "
                "'parameters.kapitan.secrets.vaultkv' is not set"
            )
        secret, key = ref.rsplit("/", 1)
        data = {
            "data": b64encode(f"{secret}:{key}".encode()).decode("utf-8"),
            "encoding": "original",
            "type": kind,
            "vault_params": vault,
        }
        file = workdir.refs / ref
        if not file.resolve().is_relative_to(workdir.refs.resolve()):
            raise FleetError(f"parameter {where!r}: vaultkv reference {ref!r} leaves refs/")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(commodore_yaml(data))
