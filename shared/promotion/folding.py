"""Folding a graduating patch into the values files of its application: the body laid into the
application's base `values.yaml`, and into node `values.yaml` files where they override a path
the patch sets. Files are edited in place, comments and layout kept (`yamledit`)."""

from __future__ import annotations

import copy
from typing import Any

from shared.engine import yamldoc
from shared.engine.dimensions import patches
from shared.engine.dimensions.models import DEFAULTS_FILES, Section
from shared.engine.tree import Tree, join
from shared.engine.values import escape_pointer_token, get_pointer, parse_pointer
from shared.promotion import yamledit


def app_defaults(tree: Tree, ctype: str, section: Section) -> dict[str, Any]:
    rel = join("config", ctype, DEFAULTS_FILES[section])
    if not tree.is_file(rel):
        return {}
    data = yamldoc.loads(tree.read_text(rel), rel) or {}
    return dict(data.get("defaults") or {})


def load_values_file(tree: Tree, rel: str) -> tuple[str | None, Any]:
    """The file's text (None when there is none) and its data as the render engine reads it."""
    if not tree.is_file(rel):
        return None, {}
    text = tree.read_text(rel)
    return text, yamldoc.loads(text, rel)


def application_values(data: Any, section: Section, app: str) -> dict[str, Any]:
    apps = (data.get(section) if isinstance(data, dict) else None) or {}
    return dict(apps.get(app) or {})


def dump_values_file(
    text: str | None, rel: str, data: Any, section: Section, app: str, values: dict[str, Any]
) -> bytes:
    """The file with the application's values set to `values`: edited in place, comments and
    layout kept (shared/promotion/yamledit.py), or written in full when it cannot be (no file yet,
    duplicate or merge keys; the file then means exactly the same)."""
    out = dict(data) if isinstance(data, dict) else {}
    apps = dict(out.get(section) or {})
    apps[app] = values
    out[section] = apps
    if text is not None:
        edited = yamledit.edit(text, rel, data, out)
        if edited is not None:
            return edited.encode()
    return yamldoc.dumps(out).encode()


_ABSENT = object()


def fold(
    values: dict[str, Any],
    patch: patches.Patch,
    app: str,
    *,
    lower: dict[str, Any],
    everywhere: bool,
) -> dict[str, Any]:
    """`values` (one application's, at one level) with the patch body laid in.

    `everywhere`: set every path the patch sets (the base level). Otherwise only paths this
    level already overrides (a value on the path, or a non-mapping above it), because those
    would beat the folded base. `lower` holds what is in force below this level ({app: ...}),
    for appends.
    """
    out = copy.deepcopy(values)
    body = {app: patch.body.get(app, {})}
    done: set[str] = set()
    for pointer in sorted(patch.writes()):
        tokens = parse_pointer(pointer)
        if tokens[0] != app or any(pointer.startswith(f"{d}/") for d in done):
            continue
        rel = tokens[1:]
        # Where does this level cut the path (a non-mapping at a prefix)?
        node: Any = out
        cut = None
        for i, token in enumerate(rel[:-1]):
            node = node.get(token, _ABSENT) if isinstance(node, dict) else _ABSENT
            if node is _ABSENT:
                break
            if not isinstance(node, dict):
                cut = i + 1
                break
        if cut is not None:
            prefix = _pointer([app, *rel[:cut]])
            _set(out, rel[:cut], copy.deepcopy(get_pointer(body, prefix)))
            done.add(prefix)
            continue
        here = get_pointer(out, _pointer(rel), _ABSENT)
        if here is _ABSENT and not everywhere:
            continue
        value = get_pointer(body, pointer)
        if isinstance(value, dict) and not value:
            if not isinstance(here, dict):
                _set(out, rel, {})
            continue
        if patch.merge_strategy.get(pointer) == "append" and isinstance(value, list):
            current = here if here is not _ABSENT else get_pointer(lower, pointer, _ABSENT)
            if isinstance(current, list):
                value = current + value
        _set(out, rel, copy.deepcopy(value))
    return out


def _pointer(tokens: list[str]) -> str:
    return "".join(f"/{escape_pointer_token(t)}" for t in tokens)


def _set(tree: dict[str, Any], tokens: list[str], value: Any) -> None:
    node = tree
    for token in tokens[:-1]:
        child = node.get(token)
        if not isinstance(child, dict):
            child = {}
            node[token] = child
        node = child
    node[tokens[-1]] = value
