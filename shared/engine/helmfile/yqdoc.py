"""YAML documents as yq v4 reads and writes them.

kube-renderer passes every rendered stream through mikefarah/yq (v4.35, on go-yaml v3), and
its output files are yq's bytes. This module reproduces the three things yq does to a file:

- its *leading content*: the lines before a file's first document that are blank, comments
  or `---` are kept verbatim and printed again before that document (a `---` line as a
  document separator, or nothing with `-N`);
- go-yaml v3's decoding into nodes (styles kept, comments attached) and its encoder with
  yq's two-space indentation (sequences indented under their key, empty collections as
  `{}`/`[]`, scalar styles re-chosen exactly as go-yaml's emitter chooses them);
- the printer's separators between documents and files.

What is reproduced is the subset rendered Kubernetes manifests use: block and flow maps and
sequences, plain, quoted, literal and folded scalars, and comments before a document's
content. Where go-yaml's placement of a comment, an anchor or a tag would decide the bytes
and this module cannot be sure of it, reading refuses (`NotReproduced`) rather than write
something yq would not.
"""

from __future__ import annotations

import bisect
import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import yaml

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SEPARATOR = "$yqDocSeperator$"  # yq's own spelling, kept so the logic reads like yq's
_COMMENT_LINE = re.compile(r"^\s*#")
_DIRECTIVE_LINE = re.compile(r"^\s*%YA")
_COMMENT = re.compile(r"(?:^|(?<=[ \t]))#", re.M)
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False}
_BOOLS["FALSE"] = False
_BREAKS = "\n\r\x85\u2028\u2029"
_SIMPLE_KEY_MAX = 128


class NotReproduced(Exception):
    """yq's bytes for this input are not reproduced here: the render refuses."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line  # 1-based line of the input text, when known


@dataclass
class Scalar:
    value: str
    style: str = ""  # "" plain, "'", '"', "|", ">"

    def resolved(self) -> Any:
        """The value as yq's operators see it: null, a boolean, or text."""
        if self.style == "":
            if self.value in _NULLS:
                return None
            if self.value in _BOOLS:
                return _BOOLS[self.value]
        return self.value


@dataclass
class Mapping:
    pairs: list[tuple[Scalar, Node]] = field(default_factory=list)
    flow: bool = False

    def get(self, key: str) -> Node | None:
        for k, v in self.pairs:
            if k.value == key:
                return v
        return None


@dataclass
class Sequence:
    items: list[Node] = field(default_factory=list)
    flow: bool = False


Node = Scalar | Mapping | Sequence


@dataclass
class Document:
    node: Node | None  # None: a document with no content
    head: list[str] = field(default_factory=list)  # comment lines before its content
    leading: str = ""  # yq's leading content (the first document of a file only)
    index: int = 0  # its position among the file's documents
    file: int = 0  # the position of its file among the files yq read


# --- reading ---------------------------------------------------------------------------------


def leading_content(text: str) -> tuple[str, int]:
    """yq's leading content of `text` and where the rest begins (`processReadStream`)."""
    out: list[str] = []
    pos = 0
    while len(text) - pos >= 3:
        peek = text[pos : pos + 3]
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos : end + 1]
        if peek[0] == "\n":
            out.append("\n")
        elif peek == "---":
            out.append(SEPARATOR + "\n")
        elif _COMMENT_LINE.match(peek) or _DIRECTIVE_LINE.match(peek):
            out.append(line)
        else:
            break
        pos += len(line)
    return "".join(out), pos


def read(text: str, file: int = 0) -> list[Document]:
    """The documents yq decodes from one file's text."""
    leading, offset = leading_content(text)
    docs = _parse(text, offset)
    for doc in docs:
        doc.file = file
    if docs:
        docs[0].leading = leading
    elif leading:
        docs = [Document(None, leading=leading, file=file)]
    return docs


def _parse(text: str, offset: int) -> list[Document]:
    rest = text[offset:]
    if not rest.strip():
        return []
    base_line = text.count("\n", 0, offset)
    with _read_lock:
        read = _read.get(rest)
    if read is None:
        try:
            events = list(yaml.parse(rest, Loader=_Loader))
            spans = _scalar_spans(rest, events)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            line = base_line + mark.line + 1 if mark is not None else None
            raise NotReproduced(f"not valid YAML: {getattr(err, 'problem', err)}", line) from None
        read = (events, _comments(rest, spans))
        with _read_lock:
            if len(_read) >= _READ_KEPT:
                _read.pop(next(iter(_read)))
            _read[rest] = read
    builder = _Builder(rest, base_line, read[1])
    return builder.documents(read[0])  # fresh nodes: callers change them


# A release's pipeline reads the same text more than once (a split piece, then the same piece
# appended to its file): the events and comments of the last texts read are kept (events are
# only read; `_Builder` makes new nodes each time). Errors are not kept. Activities render
# on several threads, hence the lock.
_READ_KEPT = 64
_read: dict[str, tuple[list[Any], list[int]]] = {}
_read_lock = threading.Lock()


def _scalar_spans(text: str, events: list[Any]) -> list[tuple[int, int]]:
    """Where each scalar of `text` is, as (start, end) of its token: a scalar event begins
    and ends where its token does unless an anchor or a tag comes first, so only then are
    the tokens scanned again. Scalars the parser supplies (an empty value) take no room."""
    scalars: list[Any] = [e for e in events if isinstance(e, yaml.ScalarEvent)]
    if any(e.anchor is not None or e.tag is not None for e in scalars):
        return sorted(
            (t.start_mark.index, t.end_mark.index)
            for t in yaml.scan(text, Loader=_Loader)
            if isinstance(t, yaml.ScalarToken)
        )
    return sorted(
        (e.start_mark.index, e.end_mark.index)
        for e in scalars
        if e.start_mark.index < e.end_mark.index
    )


def _comments(text: str, spans: list[tuple[int, int]]) -> list[int]:
    """Positions of the comments of `text` (a `#` outside every scalar)."""
    starts = [s for s, _ in spans]
    found: list[int] = []
    for match in _COMMENT.finditer(text):
        pos = match.start()
        i = bisect.bisect_right(starts, pos) - 1
        if i >= 0 and spans[i][0] <= pos < spans[i][1]:
            continue
        found.append(pos)
    return found


class _Builder:
    """Nodes from PyYAML's events, with the comments go-yaml would attach where they are."""

    def __init__(self, text: str, base_line: int, comments: list[int]) -> None:
        self.text = text
        self.base_line = base_line
        self.comments = comments

    def line(self, pos: int) -> int:
        return self.base_line + self.text.count("\n", 0, pos) + 1

    def documents(self, events: list[Any]) -> list[Document]:
        docs: list[Document] = []
        i = 1  # past StreamStart
        claimed: set[int] = set()
        while isinstance(events[i], yaml.DocumentStartEvent):
            start = events[i]
            content = int(events[i + 1].start_mark.index)
            node, i = self.node(events, i + 1)
            i += 1  # past DocumentEnd
            head = self.head(start, content, claimed)
            if head and node is None:
                raise NotReproduced("comments above an empty document", self.line(content))
            docs.append(Document(node, head=head, index=len(docs)))
        for pos in self.comments:
            if pos not in claimed:
                raise NotReproduced(
                    f"a comment inside a document ({self.comment_text(pos)!r}): where yq "
                    "(go-yaml v3) would place it is not reproduced; remove it from the template "
                    "or make it the document's first lines",
                    self.line(pos),
                )
        return docs

    def comment_text(self, pos: int) -> str:
        end = self.text.find("\n", pos)
        return self.text[pos : end if end >= 0 else len(self.text)].rstrip()

    def head(self, start: Any, content: int, claimed: set[int]) -> list[str]:
        """Comment lines between an explicit `---` and the content: go-yaml keeps them as
        the first node's head comment when they are one block of lines right above it."""
        inside = [p for p in self.comments if start.end_mark.index <= p < content]
        if not inside:
            return []
        first_line = self.line(inside[0])
        if not start.explicit or first_line == self.line(start.end_mark.index):
            raise NotReproduced("a comment on a document separator line", first_line)
        lines = [self.comment_text(p) for p in inside]
        if self.line(content) - first_line != len(lines):
            raise NotReproduced(
                "blank lines among the comments above a document: go-yaml would split them "
                "between the document and its first key; not reproduced",
                first_line,
            )
        claimed.update(inside)
        return lines

    def node(self, events: list[Any], i: int) -> tuple[Node | None, int]:
        event = events[i]
        if isinstance(event, yaml.DocumentEndEvent):
            return None, i
        at = self.line(event.start_mark.index)
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise NotReproduced("anchors and aliases are not reproduced", at)
        if getattr(event, "tag", None) is not None:
            raise NotReproduced(f"the explicit tag {event.tag} is not reproduced", at)
        if isinstance(event, yaml.ScalarEvent):
            return Scalar(event.value, event.style or ""), i + 1
        if isinstance(event, yaml.MappingStartEvent):
            mapping = Mapping(flow=bool(event.flow_style))
            i += 1
            while not isinstance(events[i], yaml.MappingEndEvent):
                key, i = self.node(events, i)
                if not isinstance(key, Scalar):
                    raise NotReproduced("a mapping key that is not a scalar", at)
                value, i = self.node(events, i)
                mapping.pairs.append((key, value if value is not None else Scalar("")))
            return mapping, i + 1
        sequence = Sequence(flow=bool(event.flow_style))
        i += 1
        while not isinstance(events[i], yaml.SequenceEndEvent):
            item, i = self.node(events, i)
            sequence.items.append(item if item is not None else Scalar(""))
        return sequence, i + 1


# --- what yq's operators see ------------------------------------------------------------------


def length(node: Node | None) -> int:
    """yq's `length`: keys, items, characters of a scalar's text (null: 0)."""
    if node is None:
        return 0
    if isinstance(node, Mapping):
        return len(node.pairs)
    if isinstance(node, Sequence):
        return len(node.items)
    return 0 if node.resolved() is None else len(node.value)


def delete(node: Node | None, path: tuple[str, ...]) -> None:
    """yq's `del(.a.b.c)`: the key goes, with its comments; nothing is created."""
    for key in path[:-1]:
        if not isinstance(node, Mapping):
            return
        node = node.get(key)
    if isinstance(node, Mapping):
        node.pairs = [(k, v) for k, v in node.pairs if k.value != path[-1]]


def data(node: Node | None) -> Any:
    """The node as plain values (maps, lists, null, booleans, text)."""
    if node is None:
        return None
    if isinstance(node, Mapping):
        return {k.value: data(v) for k, v in node.pairs}
    if isinstance(node, Sequence):
        return [data(v) for v in node.items]
    return node.resolved()


def head_comment(doc: Document) -> str:
    """yq's `head_comment` of a document: its leading content printed without separators
    (or go-yaml's head comment), the final newline and each line's `# ` taken off."""
    if doc.leading:
        text = "".join(
            "" if SEPARATOR in line else line for line in doc.leading.splitlines(keepends=True)
        )
        if not text.endswith("\n"):
            text += "\n"
        text = text[:-1]
    else:
        text = "\n".join(doc.head)
    text = re.sub(r"^# ", "", text)
    return text.replace("\n# ", "\n")


# --- writing ---------------------------------------------------------------------------------


def print_documents(docs: list[Document], *, separators: bool = True) -> str:
    """What yq's printer writes for these documents (yq `eval`, one printer for all files)."""
    out: list[str] = []
    if not docs:
        return ""
    previous_doc, first_file = docs[0].index, docs[0].file
    for doc in docs:
        starts_with_separator = doc.leading.startswith(SEPARATOR)
        if (previous_doc != doc.index or first_file != doc.file) and not starts_with_separator:
            out.append("---\n" if separators else "")
        out.append(_leading(doc.leading, separators))
        out.append(encode(doc))
        previous_doc = doc.index
    return "".join(out)


def _leading(content: str, separators: bool) -> str:
    out: list[str] = []
    for line in content.splitlines(keepends=True):
        if SEPARATOR in line:
            out.append("---\n" if separators else "")
        else:
            out.append(line if line.endswith("\n") else line + "\n")
    return "".join(out)


def encode(doc: Document) -> str:
    """go-yaml v3's encoding of one document with yq's settings (indent 2)."""
    lines: list[str] = list(doc.head)
    node = doc.node
    if node is None:
        lines.append("null")
    elif isinstance(node, Scalar):
        raise NotReproduced("a document that is a single scalar is not reproduced")
    elif node.flow or _empty(node):
        lines.append(_flow(node))
    elif isinstance(node, Mapping):
        _block_mapping(node, 0, lines)
    else:
        _block_sequence(node, 0, lines)
    if _ends_open(node):
        raise NotReproduced(
            "a document ending in a block scalar that keeps its trailing blank lines (`|+`): "
            "go-yaml would end the document with `...`; not reproduced"
        )
    return "\n".join(lines) + "\n"


def _empty(node: Node) -> bool:
    return (isinstance(node, Mapping) and not node.pairs) or (
        isinstance(node, Sequence) and not node.items
    )


def _ends_open(node: Node | None) -> bool:
    while isinstance(node, Mapping | Sequence) and not node.flow and not _empty(node):
        node = node.pairs[-1][1] if isinstance(node, Mapping) else node.items[-1]
    return (
        isinstance(node, Scalar)
        and _style(node, flow=False, key=False) in ("|", ">")
        and _chomp(node.value) == "+"
    )


def _block_mapping(node: Mapping, indent: int, lines: list[str]) -> None:
    for key, value in node.pairs:
        prefix = " " * indent + _key(key) + ":"
        _value(prefix, value, lines, inner=indent + 2)


def _block_sequence(node: Sequence, indent: int, lines: list[str]) -> None:
    for item in node.items:
        dash = " " * indent + "-"
        if isinstance(item, Mapping | Sequence) and not item.flow and not _empty(item):
            start = len(lines)
            if isinstance(item, Mapping):
                _block_mapping(item, indent + 2, lines)
            else:
                _block_sequence(item, indent + 2, lines)
            lines[start] = dash + " " + lines[start][indent + 2 :]
        else:
            _value(dash, item, lines, inner=indent + 2)


def _value(prefix: str, value: Node, lines: list[str], inner: int) -> None:
    """`prefix` (`key:` or `-`) followed by a value; nested blocks at `inner`."""
    if isinstance(value, Scalar):
        style = _style(value, flow=False, key=False)
        if style in ("|", ">"):
            lines.append(prefix + " " + _block_scalar(value.value, style, inner))
            return
        text = _scalar(value.value, style)
        lines.append(prefix + (" " + text if text else ""))
    elif value.flow or _empty(value):
        lines.append(prefix + " " + _flow(value))
    else:
        lines.append(prefix)
        if isinstance(value, Mapping):
            _block_mapping(value, inner, lines)
        else:
            _block_sequence(value, inner, lines)


def _key(key: Scalar) -> str:
    if len(key.value) > _SIMPLE_KEY_MAX:
        raise NotReproduced(f"a key longer than {_SIMPLE_KEY_MAX} characters is not reproduced")
    return _scalar(key.value, _style(key, flow=False, key=True))


def _flow(node: Node) -> str:
    if isinstance(node, Scalar):
        return _scalar(node.value, _style(node, flow=True, key=False))
    if isinstance(node, Mapping):
        inner = ", ".join(
            _scalar(k.value, _style(k, flow=True, key=True)) + ": " + _flow(v)
            for k, v in node.pairs
        )
        return "{" + inner + "}"
    return "[" + ", ".join(_flow(v) for v in node.items) + "]"


# --- scalars, as go-yaml's emitter writes them -----------------------------------------------


@dataclass(frozen=True)
class _Analysis:
    multiline: bool
    flow_plain: bool
    block_plain: bool
    single_quoted: bool
    block: bool


def _printable(char: str) -> bool:
    code = ord(char)
    return (
        char == "\n"
        or 0x20 <= code <= 0x7E
        or 0xA0 <= code <= 0xD7FF
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
    )


@lru_cache(maxsize=8192)
def _analyze(value: str) -> _Analysis:
    """go-yaml's analysis of a scalar (which styles may write it); names, kinds and keys
    repeat in every document, so each text is analysed once."""
    if not value:
        return _Analysis(False, False, True, True, False)
    block_ind = flow_ind = value.startswith(("---", "..."))
    line_breaks = special = tabs = False
    leading_space = leading_break = trailing_space = trailing_break = False
    break_space = space_break = previous_space = previous_break = False
    preceded_ws = True
    for i, char in enumerate(value):
        followed_ws = i + 1 >= len(value) or value[i + 1] in " \t"
        if i == 0:
            if char in "#,[]{}&*!|>'\"%@`":
                flow_ind = block_ind = True
            elif char in "?:":
                flow_ind = True
                block_ind = block_ind or followed_ws
            elif char == "-" and followed_ws:
                flow_ind = block_ind = True
        elif char in ",?[]{}":
            flow_ind = True
        elif char == ":":
            flow_ind = True
            block_ind = block_ind or followed_ws
        elif char == "#" and preceded_ws:
            flow_ind = block_ind = True
        if char == "\t":
            tabs = True
        elif not _printable(char):
            special = True
        if char == " ":
            leading_space = leading_space or i == 0
            trailing_space = trailing_space or i == len(value) - 1
            break_space = break_space or previous_break
            previous_space, previous_break = True, False
        elif char in _BREAKS:
            line_breaks = True
            leading_break = leading_break or i == 0
            trailing_break = trailing_break or i == len(value) - 1
            space_break = space_break or previous_space
            previous_space, previous_break = False, True
        else:
            previous_space = previous_break = False
        preceded_ws = char in " \t" or char in _BREAKS
    flow_plain = block_plain = single = block = True
    if leading_space or leading_break or trailing_space or trailing_break:
        flow_plain = block_plain = False
    if trailing_space:
        block = False
    if break_space:
        flow_plain = block_plain = single = False
    if space_break or tabs or special:
        flow_plain = block_plain = single = False
    if space_break or special:
        block = False
    if line_breaks:
        flow_plain = block_plain = False
    if flow_ind:
        flow_plain = False
    if block_ind:
        block_plain = False
    return _Analysis(line_breaks, flow_plain, block_plain, single, block)


def _style(node: Scalar, *, flow: bool, key: bool) -> str:
    """The style go-yaml writes a decoded scalar in (encode.go, then select_scalar_style)."""
    style = node.style
    value = node.value
    if style == "" and "\n" in value:
        style = "|"
    analysis = _analyze(value)
    if key and analysis.multiline:
        style = '"'
    if style == "":
        if (flow and not analysis.flow_plain) or (not flow and not analysis.block_plain):
            style = "'"
        if not value and (flow or key):
            style = "'"
    if style == "'" and not analysis.single_quoted:
        style = '"'
    if style in ("|", ">") and (not analysis.block or flow or key):
        style = '"'
    return style


def _scalar(value: str, style: str) -> str:
    if style == "":
        return value
    if style == "'":
        if any(b in value for b in _BREAKS):
            raise NotReproduced("a single-quoted scalar spanning lines is not reproduced")
        return "'" + value.replace("'", "''") + "'"
    return _double_quoted(value)


_ESCAPES = {
    0x00: "0",
    0x07: "a",
    0x08: "b",
    0x09: "t",
    0x0A: "n",
    0x0B: "v",
    0x0C: "f",
    0x0D: "r",
    0x1B: "e",
    0x22: '"',
    0x5C: "\\",
    0x85: "N",
    0xA0: "_",
    0x2028: "L",
    0x2029: "P",
}


def _double_quoted(value: str) -> str:
    out = ['"']
    for char in value:
        code = ord(char)
        if not _printable(char) or code == 0xFEFF or char in _BREAKS or char in '"\\':
            if code in _ESCAPES:
                out.append("\\" + _ESCAPES[code])
            elif code <= 0xFF:
                out.append(f"\\x{code:02X}")
            elif code <= 0xFFFF:
                out.append(f"\\u{code:04X}")
            else:
                out.append(f"\\U{code:08X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _chomp(value: str) -> str:
    if not value or value[-1] not in _BREAKS:
        return "-"
    if len(value) == 1 or value[-2] in _BREAKS:
        return "+"
    return ""


def _block_scalar(value: str, style: str, indent: int) -> str:
    """A literal or folded scalar: its header and its lines, content at `indent`."""
    if any(b in value for b in "\r\x85\u2028\u2029"):
        raise NotReproduced("a block scalar with carriage returns or Unicode line breaks")
    hint = "2" if value[:1] in (" ", "\n") else ""
    out = [style + hint + _chomp(value)]
    breaks = True
    leading_spaces = True
    pad = " " * indent
    for i, char in enumerate(value):
        if char == "\n":
            if style == ">" and not breaks and not leading_spaces:
                k = 0
                while k < len(value) and value[k] == "\n":
                    k += 1
                if not (k >= len(value) or value[k] in " \t\n"):
                    out.append("\n")
            out.append("\n")
            breaks = True
        else:
            if breaks:
                if i == 0:
                    out.append("\n")
                out.append(pad)
                leading_spaces = char in " \t"
            out.append(char)
            breaks = False
    text = "".join(out)
    # The value's last line break ends the line; the next line follows it directly.
    return text[:-1] if text.endswith("\n") else text
