"""Reading YAML from the fleet repo: fast on the render path, with line numbers for errors.

Documents are loaded with libyaml when available. Line numbers are only needed when something
is wrong, so they come from a second, node-level parse (`key_line`) done on demand.

Speed without new semantics: rendering parses and re-dumps every rendered manifest, and
PyYAML spends most of that time in its generic Python layers (tag resolution by regular
expressions for every scalar, generator-based construction, per-type dispatch when
representing). The fast paths keep libyaml's scanner, parser and emitter and PyYAML's own
resolver and scalar constructors, so YAML 1.1 meaning (`yes`/`on` booleans, octal and
sexagesimal numbers, timestamps, last duplicate key wins) and every byte written are
PyYAML's; they only replace the generic layers for plain trees:
- `loads_all`: tag resolution memoised per plain scalar text; documents made of maps,
  lists and core-tag scalars built by a direct walk over the composed nodes; anything else
  (aliases, merge keys `<<`, `=` keys, `!!set`/`!!omap` and unknown tags, non-scalar keys)
  loaded again by plain PyYAML;
- `Similar`: a stream that differs from the previous one of the same template only in
  one-word scalars is built from the previous documents, those scalars resolved by PyYAML's
  resolver and constructors;
- `dumps`: the block layout written directly with each distinct scalar's text asked of
  libyaml once (see `_emit_block`); where that writer cannot be sure (anchors, multi-line
  or wrapping scalars, other types) the exact nodes `SafeRepresenter` builds go to
  libyaml's emitter, and types it does not know to plain PyYAML.
tests/engine/test_yamldoc.py checks all of them against plain PyYAML, byte for byte and on
generated and mutated documents.
"""

from __future__ import annotations

import io
import pickle
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from shared.engine.errors import FleetError

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
# Scalar tags whose SafeConstructor result is immutable (so it can be cached and shared).
_SCALAR_TAGS = frozenset(
    {
        _INT,
        _BOOL,
        _NULL,
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:timestamp",
        "tag:yaml.org,2002:binary",
    }
)
# Bounded caches: entries for short texts only, cleared when full.
_CACHE_LIMIT = 50_000
_CACHED_TEXT = 200

# plain scalar text -> tag, as yaml.resolver.Resolver decides it
_resolved: dict[str, str] = {}
# (tag, scalar text) -> constructed value, for the immutable scalar tags above
_scalars: dict[tuple[str, str], Any] = {}


_base_resolve: Any = yaml.resolver.Resolver.resolve


def _resolve(self: Any, kind: Any, value: Any, implicit: Any) -> Any:
    """`Resolver.resolve` for classes without path resolvers, memoised for plain scalars.

    Without path resolvers the answer is: for a plain scalar, the first implicit resolver
    matching its text, else `str`; for any other scalar `str`; for collections `map` and
    `seq`. libyaml calls this once per node when loading and twice per scalar when dumping.
    """
    if kind is _ScalarNode:
        if not implicit[0]:
            return _STR
        tag = _resolved.get(value)
        if tag is None:
            tag = _base_resolve(self, kind, value, implicit)
            if len(value) <= _CACHED_TEXT:
                if len(_resolved) >= _CACHE_LIMIT:
                    _resolved.clear()
                _resolved[value] = tag
        return tag
    return _base_resolve(self, kind, value, implicit)


_ScalarNode = yaml.ScalarNode


class _FastLoader(_Loader):  # type: ignore[valid-type,misc]
    resolve = _resolve


class _FastDumper(_Dumper):  # type: ignore[valid-type,misc]
    resolve = _resolve


assert not _FastLoader.yaml_path_resolvers and not _FastDumper.yaml_path_resolvers


class _Fallback(Exception):
    """The tree needs something the direct walk does not do: use plain PyYAML."""


def syntax_error(err: yaml.YAMLError, source: str, text: str | None = None) -> FleetError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    line = (mark.line + 1) if mark else None
    column = _tab_column(text, mark, str(problem)) if mark is not None and text else None
    if column is not None:
        return FleetError(
            f"YAML syntax error: a tab character at column {column}: YAML indents with "
            "spaces, never tabs",
            path=source,
            line=line,
        )
    message = f"YAML syntax error: {problem}"
    if context:
        message += f" ({context})"
    return FleetError(message, path=source, line=line)


def _tab_column(text: str, mark: Any, problem: str) -> int | None:
    """The 1-based column of the tab PyYAML stumbled on, when a tab is what it stumbled on:
    the character at its mark, one in the indentation of the line it stopped at, or one on
    that line when its message names a tab (PyYAML's own words for a tab that starts a line
    are "found character that cannot start any token")."""
    lines = text.split("\n")
    if not 0 <= mark.line < len(lines):
        return None
    row: str = lines[int(mark.line)]
    at = row[mark.column] if 0 <= mark.column < len(row) else ""
    if at == "\t":
        return int(mark.column) + 1
    indent = row[: len(row) - len(row.lstrip(" \t"))]
    if "\t" in indent:  # the line's indentation has one: what the parser tripped over
        return indent.index("\t") + 1
    if "tab" in problem and "\t" in row:
        return row.index("\t") + 1
    return None


# PyYAML's constructors raise plain Python errors for explicit tags on bad scalars
# (`!!int abc`, `!!float x`); they are fleet mistakes too, never a traceback.
_VALUE_ERRORS = (ValueError, TypeError, OverflowError)


def value_error(err: Exception, source: str) -> FleetError:
    return FleetError(f"YAML value error: {err}", path=source)


def loads(text: str, source: str) -> Any:
    """Parse one YAML document; `source` (a repo-relative path) names it in errors."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        raise syntax_error(err, source, text) from None
    except _VALUE_ERRORS as err:
        raise value_error(err, source) from None


def loads_all(text: str, source: str) -> list[Any]:
    """Parse a multi-document stream, dropping empty documents (PyYAML's meaning)."""
    try:
        try:
            docs = _fast_load_all(text)
        except _Fallback:
            docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as err:
        raise syntax_error(err, source, text) from None
    except _VALUE_ERRORS as err:
        raise value_error(err, source) from None
    return [d for d in docs if d is not None]


def _fast_load_all(text: str, slots: list[_Slot] | None = None) -> list[Any]:
    """The documents of `text`; with `slots`, also where single-line scalars sit (see
    `Similar`). `_Fallback` when PyYAML's own construction is needed."""
    loader = _FastLoader(text)
    constructor = yaml.constructor.SafeConstructor.yaml_constructors
    seen: set[int] = set()
    lines = text.split("\n") if slots is not None else []

    def scalar(node: Any) -> Any:
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag not in _SCALAR_TAGS:
            raise _Fallback
        key = (tag, node.value)
        try:
            return _scalars[key]
        except KeyError:
            pass
        value = constructor[tag](loader, node)
        if len(node.value) <= _CACHED_TEXT:
            if len(_scalars) >= _CACHE_LIMIT:
                _scalars.clear()
            _scalars[key] = value
        return value

    def build(node: Any, path: tuple[Any, ...] | None) -> Any:
        cls = type(node)
        if cls is yaml.ScalarNode:
            if path is not None and slots is not None:
                _record(node, path, lines, slots)
            return scalar(node)
        # A node reached twice is an alias: PyYAML shares (and may recurse into) the object.
        if id(node) in seen:
            raise _Fallback
        seen.add(id(node))
        if cls is yaml.MappingNode:
            if node.tag != _MAP:
                raise _Fallback
            mapping: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                # Merge keys (`<<`), `=` keys and non-scalar keys take PyYAML's slow path.
                if type(key_node) is not yaml.ScalarNode or key_node.tag not in _KEY_TAGS:
                    raise _Fallback
                key = scalar(key_node)
                if path is not None and key in mapping:
                    raise _Duplicate  # the slot of the first value would not be the value
                mapping[key] = build(value_node, None if path is None else (*path, key))
            return mapping
        if cls is yaml.SequenceNode and node.tag == _SEQ:
            if path is None:
                return [build(child, None) for child in node.value]
            return [build(child, (*path, i)) for i, child in enumerate(node.value)]
        raise _Fallback

    try:
        docs: list[Any] = []
        while loader.check_node():
            node = loader.get_node()
            seen.clear()  # anchors do not cross documents; ids of freed nodes are reused
            docs.append(build(node, None if slots is None else (len(docs),)))
        return docs
    finally:
        loader.dispose()


class _Duplicate(Exception):
    """A mapping repeats a key: no slots for this text."""


def _load_without_slots(text: str, *, retry_fast: bool) -> list[Any]:
    """The documents when the slotted fast load gave up: the fast loader again without slots
    after a duplicate key (`retry_fast`), else, or when that gives up too, PyYAML's own."""
    if retry_fast:
        try:
            return _fast_load_all(text)
        except _Fallback:
            pass
    return list(yaml.load_all(text, Loader=_Loader))


@dataclass(frozen=True)
class _Slot:
    """A scalar alone at the end of its line: `prefix` (indentation, key or dash) then the
    value's text in `style` (plain, or quoted without escapes), nothing after it."""

    line: int
    path: tuple[Any, ...]  # document index (in the unfiltered stream), then keys/indices
    prefix: str
    style: str  # "", '"' or "'"


def _record(node: Any, path: tuple[Any, ...], lines: list[str], slots: list[_Slot]) -> None:
    start, end = node.start_mark, node.end_mark
    if start.line != end.line or len(path) < 2:
        return
    line = lines[start.line]
    rest = line[start.column :]
    value = node.value
    style = node.style or ""
    if style == "":
        expected = value
        if node.tag != _resolve(_RESOLVER, yaml.ScalarNode, value, (True, False)):
            return  # an explicit tag
    elif style in "\"'" and style not in value and "\\" not in value:
        expected = style + value + style
    else:
        return
    if rest == expected and end.column == len(line):
        slots.append(_Slot(start.line, path, line[: start.column], style))


_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
# Plain scalars a slot accepts: one word that cannot start or end YAML structure (no
# spaces, `#`, quotes, brackets, `&*!|>%@`, leading `-?:` or trailing `:`).
SAFE_PLAIN = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./+=@~:-]*(?<!:)")
_NOT_THERE = object()


def _slot_value(slot: _Slot, line: str) -> Any:
    """The value `line` puts in `slot`, or `_NOT_THERE` when the line may mean more."""
    if not line.startswith(slot.prefix):
        return _NOT_THERE
    rest = line[len(slot.prefix) :]
    if slot.style == "":
        if not SAFE_PLAIN.fullmatch(rest):
            return _NOT_THERE
        tag = _resolve(_RESOLVER, yaml.ScalarNode, rest, (True, False))
        if tag == _STR:
            return rest
        if tag not in _SCALAR_TAGS:
            return _NOT_THERE
        key = (tag, rest)
        found = _scalars.get(key, _NOT_THERE)
        if found is _NOT_THERE:
            try:
                found = _CONSTRUCTOR.yaml_constructors[tag](
                    _CONSTRUCTOR, yaml.ScalarNode(tag, rest)
                )
            except (yaml.YAMLError, ValueError, TypeError):
                return _NOT_THERE
        return found
    quote = slot.style
    inner = rest[1:-1]
    if (
        len(rest) < 2
        or rest[0] != quote
        or rest[-1] != quote
        or quote in inner
        or "\\" in inner
        or not inner.isprintable()
    ):
        return _NOT_THERE
    return inner


@dataclass
class _Skeleton:
    lines: list[str]
    blob: bytes  # the documents (unfiltered), pickled
    slots: dict[int, _Slot]

    def patch(self, text: str) -> list[Any] | None:
        """The documents of `text` when it differs from this skeleton's text only in the
        values of slots, else None."""
        lines = text.split("\n")
        if len(lines) != len(self.lines):
            return None
        changes = []
        for i in [i for i, (a, b) in enumerate(zip(self.lines, lines, strict=True)) if a != b]:
            slot = self.slots.get(i)
            if slot is None:
                return None
            value = _slot_value(slot, lines[i])
            if value is _NOT_THERE:
                return None
            changes.append((slot.path, value))
        docs: list[Any] = pickle.loads(self.blob)  # our own bytes, from this process
        for path, value in changes:
            node = docs
            for step in path[:-1]:
                node = node[step]
            node[path[-1]] = value
        return docs


_OTHER_BREAKS = ("\r", "\x85", "\u2028", "\u2029")


class Similar:
    """`loads_all` for streams that come again and again with a few values changed, such as
    one chart template rendered for many releases. The last text of each `key` is kept
    with the places of its one-line scalars; a text that differs from it only in such
    values (each one word that cannot change the structure, or quoted without escapes) is
    built from the kept documents with those values replaced, resolved exactly as PyYAML
    resolves them. Anything else is parsed in full. tests/engine/test_yamldoc.py compares the two
    on many mutated documents."""

    def __init__(self, max_keys: int = 4096) -> None:
        self.max_keys = max_keys
        self.skeletons: dict[str, _Skeleton] = {}

    def loads_all(self, text: str, source: str, key: str) -> list[Any]:
        plain_breaks = not any(b in text for b in _OTHER_BREAKS)
        skeleton = self.skeletons.get(key)
        if skeleton is not None and plain_breaks:
            docs = skeleton.patch(text)
            if docs is not None:
                return [d for d in docs if d is not None]
        slots: list[_Slot] = []
        try:
            try:
                docs = _fast_load_all(text, slots if plain_breaks else None)
            except (_Duplicate, _Fallback) as first:
                plain_breaks = False
                docs = _load_without_slots(text, retry_fast=isinstance(first, _Duplicate))
        except yaml.YAMLError as err:
            raise syntax_error(err, source, text) from None
        except _VALUE_ERRORS as err:
            raise value_error(err, source) from None
        if plain_breaks:
            if len(self.skeletons) >= self.max_keys:
                self.skeletons.clear()
            self.skeletons[key] = _Skeleton(
                text.split("\n"),
                pickle.dumps(docs, protocol=pickle.HIGHEST_PROTOCOL),
                {slot.line: slot for slot in slots},
            )
        return [d for d in docs if d is not None]

    def clear(self) -> None:
        self.skeletons.clear()


_KEY_TAGS = _SCALAR_TAGS | {_STR}


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
    if type(data) is dict or type(data) is list:
        text = _emit_block(data)
        if text is not None:
            return text
    return _emit_nodes(data)


def _emit_nodes(data: Any) -> str:
    """`dumps` through SafeRepresenter-identical nodes and libyaml's emitter."""
    try:
        node = _represent(data)
    except _Fallback:
        return reference_dumps(data)
    stream = io.StringIO()
    dumper = _FastDumper(stream, default_flow_style=False, sort_keys=False, allow_unicode=True)
    try:
        dumper.open()
        dumper.serialize(node)
        dumper.close()
    finally:
        dumper.dispose()
    return stream.getvalue()


def reference_dumps(data: Any) -> str:
    """Plain PyYAML: the reference `dumps` must match byte for byte."""
    text: str = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )
    return text


def reference_loads_all(text: str) -> list[Any]:
    """Plain PyYAML: the reference `loads_all` must match."""
    return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]


# --- the block emitter ----------------------------------------------------------------------
#
# Manifests are maps and lists of short scalars. Their layout in PyYAML's block style is
# simple (two-space indents, sequences inside maps not indented, `- ` items that open a map
# or a list on the same line, `{}`/`[]` for empty collections); what is hard is each
# scalar's quoting. That is asked of libyaml itself, once per distinct scalar: the scalar is
# dumped alone as a key (`x: null`) and as a value (`k: x`), and the text libyaml chose is
# reused wherever the scalar comes again. A scalar is only reused where libyaml could not
# have wrapped it (no space in it, or it ends by column 80); scalars that need several
# lines, long keys, shared containers (anchors) and other types go the `_emit_nodes` way.

_WIDTH = 80
# (type, value) -> (text as a key, text as a value); None where the scalar is not simple
_scalar_texts: dict[tuple[type, Any], tuple[str | None, str | None]] = {}
_SCALAR_TYPES = (str, int, bool, float, type(None))


def _probe(value: Any) -> tuple[str | None, str | None]:
    key_text: str | None = None
    value_text: str | None = None
    try:
        as_key = _emit_nodes({value: None})
        as_value = _emit_nodes({"k": value})
    except (yaml.YAMLError, TypeError, ValueError):
        return None, None
    # One line each (splitlines knows every line break libyaml may write, U+2028 included:
    # a text that spans lines depends on its indentation and is not reused).
    if len(as_key.splitlines()) == 1 and as_key.endswith(": null\n") and as_key[0] != "?":
        key_text = as_key[: -len(": null\n")]
    if len(as_value.splitlines()) == 1 and as_value.startswith("k: "):
        value_text = as_value[3:-1]
    return key_text, value_text


# str -> (text as a key, text as a value): the common case, without a type in the key
_str_texts: dict[str, tuple[str | None, str | None]] = {}


def _scalar(value: Any) -> tuple[str | None, str | None]:
    cls = type(value)
    if cls is str:
        found = _str_texts.get(value)
        if found is None:
            found = _probe(value)
            if len(value) <= _CACHED_TEXT:
                if len(_str_texts) >= _CACHE_LIMIT:
                    _str_texts.clear()
                _str_texts[value] = found
        return found
    # By type (1, 1.0 and True are equal keys) and, for floats, by repr (0.0 == -0.0).
    key = (cls, repr(value) if cls is float else value)
    found = _scalar_texts.get(key)
    if found is None:
        found = _probe(value)
        if len(_scalar_texts) >= _CACHE_LIMIT:
            _scalar_texts.clear()
        _scalar_texts[key] = found
    return found


def _emit_block(data: dict[Any, Any] | list[Any]) -> str | None:
    """`_emit_nodes(data)` for plain trees, or None when this writer cannot be sure.

    A scalar's text is reused only where libyaml could not have broken it: it has no space,
    or it ends by column 80 (libyaml breaks only at a space past column 80)."""
    if not data:
        return "{}\n" if type(data) is dict else "[]\n"
    block = _Block()
    ok = block.mapping(data, 0, False) if isinstance(data, dict) else block.sequence(data, 0, False)
    return "".join(block.out) if ok else None


def _key_text(key: Any) -> str | None:
    """A mapping key's text, or None where it is not a simple scalar."""
    texts = _str_texts.get(key) if type(key) is str else None
    if texts is None:
        if type(key) not in _SCALAR_TYPES:
            return None
        texts = _scalar(key)
    return texts[0]


def _value_text(value: Any, cls: type) -> str | None:
    """A scalar value's text (`cls` is its type), or None where it is not a simple scalar."""
    texts = _str_texts.get(value) if cls is str else None
    if texts is None:
        if cls not in _SCALAR_TYPES:
            return None
        texts = _scalar(value)
    return texts[1]


class _Block:
    """The lines `_emit_block` writes. `mapping` and `sequence` write a collection at
    `indent` (`inline`: its first line goes after a `- ` already written) and answer False
    where this writer cannot be sure, which abandons the whole text."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.seen: set[int] = set()

    def mapping(self, node: dict[Any, Any], indent: int, inline: bool) -> bool:
        if id(node) in self.seen:
            return False  # shared: an anchor
        self.seen.add(id(node))
        put = self.out.append
        pad = " " * indent
        first = inline
        for k, v in node.items():
            key = _key_text(k)
            if key is None or len(key) >= 120:
                return False
            if first:
                first = False
            else:
                put(pad)
            put(key)
            cls = type(v)
            if cls is dict:
                if not v:
                    put(": {}\n")
                else:
                    put(":\n")
                    if not self.mapping(v, indent + 2, False):
                        return False
                continue
            if cls is list:
                if not v:
                    put(": []\n")
                else:
                    put(":\n")
                    if not self.sequence(v, indent, False):  # not indented inside a map
                        return False
                continue
            text = _value_text(v, cls)
            if text is None or (indent + len(key) + 2 + len(text) > _WIDTH and " " in text):
                return False
            put(": ")
            put(text)
            put("\n")
        return True

    def sequence(self, node: list[Any], indent: int, inline: bool) -> bool:
        if id(node) in self.seen:
            return False
        self.seen.add(id(node))
        put = self.out.append
        pad = " " * indent
        first = inline
        for item in node:
            if first:
                first = False
            else:
                put(pad)
            put("- ")
            cls = type(item)
            if cls is dict:
                if not item:
                    put("{}\n")
                elif not self.mapping(item, indent + 2, True):
                    return False
                continue
            if cls is list:
                if not item:
                    put("[]\n")
                elif not self.sequence(item, indent + 2, True):
                    return False
                continue
            text = _value_text(item, cls)
            if text is None or (indent + 2 + len(text) > _WIDTH and " " in text):
                return False
            put(text)
            put("\n")
        return True


def _represent(data: Any) -> Any:
    """The node tree `SafeRepresenter.represent_data` builds with default_flow_style=False,
    for trees of plain JSON-like types; `_Fallback` for anything else."""
    nodes: dict[int, Any] = {}
    scalar_node = yaml.ScalarNode
    floats = yaml.representer.SafeRepresenter.represent_float

    def node(value: Any) -> Any:
        cls = type(value)
        if cls is str:
            return scalar_node(_STR, value)
        if cls is dict or cls is list:
            # Like SafeRepresenter: a container met again (same object) becomes an alias.
            found = nodes.get(id(value))
            if found is not None:
                return found
            items: list[Any] = []
            out: yaml.Node
            if cls is dict:
                out = yaml.MappingNode(_MAP, items, flow_style=False)
                nodes[id(value)] = out
                for k, v in value.items():
                    items.append((node(k), node(v)))
            else:
                out = yaml.SequenceNode(_SEQ, items, flow_style=False)
                nodes[id(value)] = out
                for v in value:
                    items.append(node(v))
            return out
        if cls is bool:
            return scalar_node(_BOOL, "true" if value else "false")
        if cls is int:
            return scalar_node(_INT, str(value))
        if value is None:
            return scalar_node(_NULL, "null")
        if cls is float:
            return floats(_FLOATS, value)
        raise _Fallback

    return node(data)


# represent_float only formats the number (no alias bookkeeping for floats).
_FLOATS = yaml.representer.SafeRepresenter()


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


@lru_cache(maxsize=32)
def _composed(text: str) -> yaml.Node | None:
    """The text's node tree, composed once: a file's lines are asked for key after key (each
    release of a long helmfile), and composing is the cost."""
    try:
        return yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        return None


@lru_cache(maxsize=256)
def _key_line(text: str, keys: tuple[str | int, ...]) -> int | None:
    node = _composed(text)
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
