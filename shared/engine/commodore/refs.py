"""Secret reference files, as Commodore writes them before Kapitan compiles: every
`?{vaultkv:<secret path>/<key>}` in the cluster's parameters (the cluster target's keys that
belong to no component, and each component target's own key) becomes
`catalog/refs/<secret path>/<key>`, pointing Kapitan at Vault without holding a secret.

Only `vaultkv` references are supported, as with Commodore."""

from __future__ import annotations

import re
from base64 import b64encode
from typing import Any

import yaml

from shared.engine.commodore.workdir import BOOTSTRAP, Workdir, parameters_key
from shared.engine.commodore.yamlout import commodore_yaml
from shared.engine.errors import FleetError
from shared.engine.secrets.redact import is_secret_object

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


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # how PyYAML tells UTF-16 from UTF-8
# A value that is one compiled reference and nothing else: `?{vaultkv:<path>:<hash8>}`.
_COMPILED_REF = re.compile(r"\A\?\{[a-z0-9]+:[^{}\s]+\}\Z")


def references_only(data: bytes) -> bool:
    """True for a file whose `v1` Secrets hold nothing but compiled references in `data` and
    `stringData`: a pointer into Vault, not a secret. False for any literal value, and for a
    file that is no YAML."""
    if b"Secret" not in data and b"\\" not in data and not data.startswith(_UTF16_BOMS):
        # No kind can read `Secret` without those bytes: only an escape (`\`) or UTF-16
        # could spell it otherwise. Most files of a catalog are not parsed again.
        return False
    try:
        docs = [d for d in yaml.safe_load_all(data) if d is not None]
    except yaml.YAMLError:
        return False
    secrets = [d for d in docs if is_secret_object(d)]
    if not secrets:
        return False
    for doc in secrets:
        for field in ("data", "stringData"):
            values = doc.get(field) or {}
            if not isinstance(values, dict):
                return False
            if not all(isinstance(v, str) and _COMPILED_REF.match(v) for v in values.values()):
                return False
    return True
