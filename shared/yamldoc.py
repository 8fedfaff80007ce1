"""Reading YAML from the fleet repo: fast on the render path, with line numbers for errors.

Documents are loaded with libyaml when available. Line numbers are only needed when something
is wrong, so they come from a second, node-level parse (`key_line`) done on demand.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from shared.errors import FleetError

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _syntax_error(err: yaml.YAMLError, source: str) -> FleetError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    message = f"YAML syntax error: {problem}"
    if context:
        message += f" ({context})"
    return FleetError(message, path=source, line=(mark.line + 1) if mark else None)


def loads(text: str, source: str) -> Any:
    """Parse one YAML document; `source` (a repo-relative path) names it in errors."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        raise _syntax_error(err, source) from None


def loads_all(text: str, source: str) -> list[Any]:
    """Parse a multi-document stream, dropping empty documents."""
    try:
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as err:
        raise _syntax_error(err, source) from None


def load_file(path: Path, source: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FleetError("file not found", path=source) from None
    except UnicodeDecodeError:
        raise FleetError("not valid UTF-8 text", path=source) from None
    return loads(text, source)


def load_mapping(path: Path, source: str) -> dict[str, Any]:
    """A YAML file whose top level must be a mapping; an empty file is `{}`."""
    data = load_file(path, source)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FleetError(
            f"expected a mapping at the top level, found {type_name(data)}", path=source, line=1
        )
    return data


def dumps(data: Any) -> str:
    """Block-style YAML that keeps the mapping order it was given."""
    text: str = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )
    return text


def dumps_all(docs: list[Any]) -> str:
    return "---\n".join(dumps(d) for d in docs)


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def key_line(text: str, keys: tuple[str | int, ...]) -> int | None:
    """1-based line of the deepest node reachable along `keys` in `text` (best effort)."""
    return _key_line(text, tuple(keys))


@lru_cache(maxsize=256)
def _key_line(text: str, keys: tuple[str | int, ...]) -> int | None:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    line: int = node.start_mark.line + 1
    for key in keys:
        found = None
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                    found = (k.start_mark.line + 1, v)
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(key, int)
            and 0 <= key < len(node.value)
        ):
            child = node.value[key]
            found = (child.start_mark.line + 1, child)
        if found is None:
            return line
        line, node = found
    return line


def file_key_line(path: Path, keys: tuple[str | int, ...]) -> int | None:
    try:
        return key_line(path.read_text(encoding="utf-8"), keys)
    except (OSError, UnicodeDecodeError):
        return None


def walk_leaves(
    data: Any, prefix: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every leaf (scalar or empty container) with its key path."""
    if isinstance(data, dict) and data:
        for k, v in data.items():
            yield from walk_leaves(v, (*prefix, k))
    elif isinstance(data, list) and data:
        for i, v in enumerate(data):
            yield from walk_leaves(v, (*prefix, i))
    else:
        yield prefix, data
