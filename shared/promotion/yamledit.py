"""Editing a human-written YAML file in place: comments, order, quoting and blank lines kept.

rollwright commits changes to values files people maintain (graduation folds a patch into
them). Re-dumping the parsed data would rewrite the whole file and drop every comment, so
`edit` loads the text with ruamel.yaml's round-trip mode and changes only the nodes whose
value differs between `old` (the file's meaning today) and `new` (its meaning wanted):
changed scalars are replaced, mappings are edited key by key (new keys appended, removed keys
deleted), lists item by item (items appended or dropped at the end). Everything else is left
as ruamel read it, so it is written back the same.

Meaning is PyYAML's (YAML 1.1, as the render engine reads values): `old` and `new` are plain
data as `yamldoc.loads` gives, the diff is taken between them, and the edited text is parsed
again with `yamldoc.loads` and must equal `new` exactly (types included). When it does not,
or the file uses something an in-place edit cannot map safely (duplicate keys, merge keys,
a top level that is not a mapping), `edit` returns None and the caller re-serialises the
data as before.

Preserved: comments (head, inline, between keys), blank lines, key order, quoting of
untouched strings (and of a replaced string whose old value was quoted), block scalars,
flow collections, number spellings (`0x1F`, `1.50`), `null`/`~`, `True`/`yes`-style booleans
and timestamps as written, a header up to `---`. Not preserved: indentation is re-emitted
with the file's most common mapping indent and sequence indent/offset (a file mixing styles
is normalised), spacing after `key:`, plain scalars folded over several lines (joined onto
one). See docs/promotion.md.
"""

from __future__ import annotations

import io
import math
import re
from collections import Counter
from difflib import SequenceMatcher
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError, RoundTripConstructor
from ruamel.yaml.error import CommentMark, MarkedYAMLError, YAMLError
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.scalarstring import (
    DoubleQuotedScalarString,
    ScalarString,
    SingleQuotedScalarString,
)
from ruamel.yaml.tokens import CommentToken

from shared.engine import yamldoc
from shared.engine.errors import FleetError

__all__ = ["edit", "same"]

_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_STR = "tag:yaml.org,2002:str"
_FLOAT = "tag:yaml.org,2002:float"

# Default layout (the fleet examples'): 2-space mappings, dashes indented under their key.
_MAPPING, _SEQUENCE, _OFFSET = 2, 4, 2
# Lines before an explicit `---` (comments, directives): ruamel drops comments there.
_HEADER = re.compile(r"\A(?:(?:[ \t]*(?:#[^\n]*)?|%[^\n]*)\n)*---[ \t]*\n")


class _Verbatim:
    """A scalar written back exactly as it was read (ruamel would respell it: `~` and
    `null` as empty, `True` as `true`, timestamps in its own format). Only untouched nodes
    hold one; the diff works on PyYAML's data, never on these."""

    __slots__ = ("tag", "text")

    def __init__(self, tag: str, text: str) -> None:
        self.tag = tag
        self.text = text


def _construct_verbatim(constructor: Any, node: Any) -> _Verbatim:
    return _Verbatim(node.tag, node.value)


def _represent_verbatim(representer: Any, data: _Verbatim) -> Any:
    return representer.represent_scalar(data.tag, data.text)


class _Constructor(RoundTripConstructor):
    pass


class _Representer(RoundTripRepresenter):
    pass


for _tag in (_NULL, _BOOL, _TIMESTAMP):
    _Constructor.add_constructor(_tag, _construct_verbatim)
_Representer.add_representer(_Verbatim, _represent_verbatim)

_RESOLVER: Any = yaml.resolver.Resolver()  # PyYAML's (YAML 1.1) implicit tags


def _yaml(mapping: int = _MAPPING, sequence: int = _SEQUENCE, offset: int = _OFFSET) -> YAML:
    y = YAML(typ="rt", pure=True)
    y.Constructor = _Constructor
    y.Representer = _Representer
    y.preserve_quotes = True
    y.width = 1 << 20  # never fold long lines
    y.indent(mapping=mapping, sequence=sequence, offset=offset)
    return y


def edit(text: str, source: str, old: Any, new: Any) -> str | None:
    """`text` (whose meaning, read by `yamldoc.loads`, is `old`) changed to mean `new`, every
    node that keeps its value left as written. None when that cannot be done safely (the
    caller writes the data in full). FleetError for text ruamel cannot parse (file and line)
    and for a SOPS-encrypted document, which is never rewritten."""
    if isinstance(old, dict) and isinstance(old.get("sops"), dict):
        raise FleetError(
            "the file is SOPS-encrypted (it has a top-level `sops` key); rollwright never "
            "edits an encrypted file",
            path=source,
        )
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None
    crlf = "\r\n" in text
    if crlf:
        text = text.replace("\r\n", "\n")
    match = _HEADER.match(text)
    header, body = (match.group(0), text[match.end() :]) if match else ("", text)
    try:
        doc = _yaml().load(body)
    except DuplicateKeyError:
        return None  # PyYAML keeps the last value, ruamel refuses: no safe mapping
    except MarkedYAMLError as err:
        raise syntax_error(err, source, header.count("\n")) from None
    except YAMLError as err:
        raise FleetError(f"YAML syntax error: {err}", path=source) from None
    if not isinstance(doc, CommentedMap):
        return None
    indents = _indents(doc)  # before the edit: new nodes have no positions
    try:
        result = _apply(doc, old, new)
    except _Unmappable:
        return None
    out = io.StringIO()
    try:
        _yaml(*indents).dump(result, out)
    except YAMLError:
        return None  # a value ruamel cannot represent
    edited = header + out.getvalue()
    if crlf:
        edited = edited.replace("\n", "\r\n")
    try:
        meaning = yamldoc.loads(edited, source)
    except FleetError:
        return None
    return edited if same(meaning, new) else None


def syntax_error(err: MarkedYAMLError, source: str, skipped: int) -> FleetError:
    mark = err.problem_mark or err.context_mark
    message = f"YAML syntax error: {err.problem or str(err).splitlines()[0]}"
    if err.context:
        message += f" ({err.context})"
    line = mark.line + 1 + skipped if mark is not None else None
    return FleetError(message, path=source, line=line)


def same(a: Any, b: Any) -> bool:
    """Equal as YAML data: same types all the way down (`1`, `1.0` and `True` differ),
    mappings in any order, NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


class _Unmappable(Exception):
    """ruamel's nodes do not line up with PyYAML's data here (merge keys, duplicates)."""


def _apply(node: Any, old: Any, new: Any) -> Any:
    """The node to hold `new` where `node` holds `old`: `node` itself when unchanged or
    edited in place, else a fresh node."""
    if same(old, new):
        return node
    if isinstance(new, (dict, list)) and not new:
        # Emptied: ruamel would leave the comment of the line that opened the collection
        # where `{}` / `[]` must go, so the empty collection is a fresh node.
        return _fresh(new, node)
    if isinstance(old, dict) and isinstance(new, dict) and isinstance(node, CommentedMap):
        _edit_map(node, old, new)
        return node
    if isinstance(old, list) and isinstance(new, list) and isinstance(node, CommentedSeq):
        _edit_seq(node, old, new)
        return node
    return _fresh(new, node)


def _edit_map(node: CommentedMap, old: dict[Any, Any], new: dict[Any, Any]) -> None:
    if getattr(node, "merge", None) or len(node) != len(old):
        raise _Unmappable
    # PyYAML's keys and ruamel's line up by position (each read the same key nodes in
    # order); their values may differ (`yes:` is True for one, "yes" for the other).
    keys = dict(zip(old, list(node), strict=True))
    for key in old:
        if key not in new:
            _delete(node, keys[key])
    for key, value in new.items():
        if key in keys:
            _replace(node, keys[key], _apply(node[keys[key]], old[key], value))
        else:
            _append(node, _fresh(key, None), _fresh(value, None))


def _edit_seq(node: CommentedSeq, old: list[Any], new: list[Any]) -> None:
    if len(node) != len(old):
        raise _Unmappable
    # Align the lists so an item inserted or removed keeps the others (and their comments)
    # in place; work from the end so earlier indices stay valid.
    matcher = SequenceMatcher(None, [_canon(v) for v in old], [_canon(v) for v in new], False)
    for tag, i1, i2, j1, j2 in reversed(matcher.get_opcodes()):
        if tag == "equal":
            continue
        paired = min(i2 - i1, j2 - j1)
        for i in range(i2 - 1, i1 + paired - 1, -1):
            _delete(node, i)
        for offset, value in enumerate(new[j1 + paired : j2]):
            _insert(node, i1 + paired + offset, _fresh(value, None))
        for k in range(paired):
            _replace(node, i1 + k, _apply(node[i1 + k], old[i1 + k], new[j1 + k]))


def _canon(value: Any) -> Any:
    """A hashable stand-in for plain data, equal exactly when `same` says so."""
    if isinstance(value, dict):
        items = ((type(k).__name__, repr(k), _canon(v)) for k, v in value.items())
        return ("map", tuple(sorted(items, key=lambda item: item[:2])))
    if isinstance(value, list):
        return ("seq", tuple(_canon(v) for v in value))
    return (type(value).__name__, repr(value))


def _fresh(value: Any, was: Any) -> Any:
    """A new node for plain `value`; a string keeps the quoting of the string it replaces."""
    if isinstance(value, dict):
        out = CommentedMap()
        for k, v in value.items():
            out[_fresh(k, None)] = _fresh(v, None)
        return out
    if isinstance(value, list):
        return CommentedSeq(_fresh(v, None) for v in value)
    if value is None:
        return _Verbatim(_NULL, "null")
    if isinstance(value, float):
        # ruamel writes 1e20 as `1e+20`, a string to YAML 1.1: spell it as PyYAML does.
        return _Verbatim(_FLOAT, yaml.safe_dump(value).split("\n", 1)[0])
    if isinstance(value, str):
        if isinstance(was, ScalarString) and type(was) is not ScalarString:
            return type(was)(value)
        # ruamel resolves plain text as YAML 1.2; PyYAML reads `yes`, `on`, `1_000`, `0o7`
        # as YAML 1.1: quote what would not come back as this string.
        if _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) != _STR:
            return SingleQuotedScalarString(value)
        if "\n" not in value:
            # ruamel writes plain what YAML 1.2 allows (`:0`, say); PyYAML may not read it
            # back: quote the way PyYAML itself would inside a flow collection (the stricter
            # context, and the node may land in one).
            style = yaml.safe_dump([value], default_flow_style=True, width=1 << 20)[1:2]
            if style == "'":
                return SingleQuotedScalarString(value)
            if style == '"':
                return DoubleQuotedScalarString(value)
    return value


# --- moving comment lines with the nodes they follow ------------------------------------------
# ruamel keeps the comment lines (and blank lines) after a node's last line on that line's
# token: `ca.items[key][2]` in a mapping, `ca.items[index][0]` in a sequence, the first line
# being the node's inline comment. Lines that introduce the next sibling must stay before it
# when the node before them is replaced, deleted or followed by an appended node.


def _slot(container: Any, key: Any) -> int:
    return 2 if isinstance(container, CommentedMap) else 0


def _tail(container: Any, key: Any) -> tuple[Any, Any]:
    """The (container, key) whose token holds the lines after `container[key]`."""
    while True:
        value = container[key]
        if not isinstance(value, (CommentedMap, CommentedSeq)) or not value:
            return container, key
        if value.fa.flow_style():
            return container, key
        key = list(value)[-1] if isinstance(value, CommentedMap) else len(value) - 1
        container = value


def _take_following(container: Any, key: Any) -> tuple[str, int] | None:
    """Remove and return the lines after the inline comment at (container, key)."""
    entry = container.ca.items.get(key)
    token = entry[_slot(container, key)] if entry else None
    if token is None or "\n" not in token.value:
        return None
    inline, rest = token.value.split("\n", 1)
    if not rest:
        return None
    token.value = inline + "\n"
    return rest, token.column


def _give_following(container: Any, key: Any, taken: tuple[str, int] | None) -> None:
    if taken is None:
        return
    rest, column = taken
    entry = container.ca.items.setdefault(key, [None, None, None, None])
    index = _slot(container, key)
    token = entry[index]
    if token is None:
        entry[index] = CommentToken("\n" + rest, CommentMark(column))
    else:
        value = token.value if token.value.endswith("\n") else token.value + "\n"
        token.value = value + rest


def _replace(container: Any, key: Any, value: Any) -> None:
    current = container[key]
    if value is current:
        return
    taken = _take_following(*_tail(container, key))
    if isinstance(container, CommentedSeq):
        # A list item is its value: its inline comment goes with it (a key's stays).
        container.ca.items.pop(key, None)
    container[key] = value
    _give_following(*_tail(container, key), taken)


def _delete(container: Any, key: Any) -> None:
    keys = list(container) if isinstance(container, CommentedMap) else list(range(len(container)))
    position = keys.index(key)
    taken = _take_following(*_tail(container, key))
    del container[key]
    if position > 0:
        _give_following(*_tail(container, keys[position - 1]), taken)
    elif taken is not None:
        # The first entry: its lines go after the line that opens the collection, whose
        # token ruamel keeps (shared with the parent's key) as the collection's comment[0].
        rest, column = taken
        comment = container.ca.comment
        if comment is None:
            container.ca.comment = comment = [None, None]
        if comment[0] is None:
            comment[0] = CommentToken("\n" + rest, CommentMark(column))
        else:
            value = comment[0].value
            comment[0].value = (value if value.endswith("\n") else value + "\n") + rest


def _append(container: CommentedMap, key: Any, value: Any) -> None:
    last = list(container)[-1] if container else None
    taken = _take_following(*_tail(container, last)) if last is not None else None
    container[key] = value
    _give_following(*_tail(container, key), taken)


def _insert(container: CommentedSeq, index: int, value: Any) -> None:
    """`value` before item `index` (or at the end): the lines before that item (kept after
    the item before it) stay just before it."""
    taken = _take_following(*_tail(container, index - 1)) if index > 0 else None
    container.insert(index, value)
    _give_following(*_tail(container, index), taken)


# --- indentation -----------------------------------------------------------------------------


def _indents(doc: CommentedMap) -> tuple[int, int, int]:
    """The most common (mapping indent, sequence indent, dash offset) of the block
    collections in `doc`, from ruamel's line/column records; defaults where none."""
    maps: Counter[int] = Counter()
    seqs: Counter[tuple[int, int]] = Counter()

    def walk(node: Any) -> None:
        if isinstance(node, CommentedMap):
            for key, value in node.items():
                block = isinstance(value, (CommentedMap, CommentedSeq)) and value
                if block and not value.fa.flow_style():
                    line, column = node.lc.key(key)
                    if isinstance(value, CommentedMap):
                        first = value.lc.key(next(iter(value)))
                        if first[0] > line:
                            maps[first[1] - column] += 1
                    else:
                        seqs[(value.lc.item(0)[1] - column, value.lc.col - column)] += 1
                walk(value)
        elif isinstance(node, CommentedSeq):
            for value in node:
                walk(value)

    walk(doc)
    mapping = maps.most_common(1)[0][0] if maps else _MAPPING
    sequence, offset = seqs.most_common(1)[0][0] if seqs else (_SEQUENCE, _OFFSET)
    if mapping < 1:
        mapping = _MAPPING
    if offset < 0 or sequence < offset + 2:
        sequence, offset = _SEQUENCE, _OFFSET
    return mapping, sequence, offset
