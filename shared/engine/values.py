"""Layered values: deep merge (lists replaced unless a strategy says append) and JSON pointers."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Literal

MergeStrategy = Literal["replace", "append"]


def deep_merge(
    base: Mapping[str, Any],
    override: Mapping[str, Any],
    *,
    strategies: Mapping[str, MergeStrategy] | None = None,
    _path: str = "",
) -> dict[str, Any]:
    """A new mapping: `override` laid over `base`.

    Maps merge key by key; anything else (lists included) is replaced, except lists at a JSON
    pointer whose strategy is `append`. Neither input is modified and the result shares no
    mutable containers with them, so callers may keep merging into it.
    """
    out: dict[str, Any] = {k: _copy(v) for k, v in base.items()}
    for key, value in override.items():
        path = f"{_path}/{escape_pointer_token(str(key))}"
        current = out.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            out[key] = deep_merge(current, value, strategies=strategies, _path=path)
        elif (
            strategies
            and isinstance(current, list)
            and isinstance(value, list)
            and strategies.get(path) == "append"
        ):
            out[key] = current + [_copy(v) for v in value]
        else:
            out[key] = _copy(value)
    return out


def merge_all(layers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = deep_merge(merged, layer)
    return merged


def _copy(value: Any) -> Any:
    if isinstance(value, dict | list):
        return copy.deepcopy(value)
    return value


def escape_pointer_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def parse_pointer(pointer: str) -> list[str]:
    """RFC 6901 tokens of `pointer` ("" is the whole document)."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer {pointer!r} must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


_MISSING = object()


def get_pointer(tree: Any, pointer: str, default: Any = _MISSING) -> Any:
    node = tree
    for token in parse_pointer(pointer):
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            if default is _MISSING:
                raise KeyError(pointer)
            return default
    return node


def has_pointer(tree: Any, pointer: str) -> bool:
    return get_pointer(tree, pointer, _MISSING_SENTINEL) is not _MISSING_SENTINEL


_MISSING_SENTINEL = object()


def leaf_pointers(tree: Any, prefix: str = "") -> set[str]:
    """JSON pointers of every leaf; a list counts as one leaf (lists are replaced whole)."""
    out: set[str] = set()
    if isinstance(tree, Mapping) and tree:
        for key, value in tree.items():
            out |= leaf_pointers(value, f"{prefix}/{escape_pointer_token(str(key))}")
    else:
        out.add(prefix)
    return out
