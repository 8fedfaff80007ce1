"""Which values a Go template reads, found by reading its actions (never by running it).

Used to find values keys that nothing reads (typos such as `imgae:` for `image:`), so it errs
on the side of reading: a key is only ever called unread when no way for the template to
reach it was seen.

- A field chain `.Values.a.b` (anywhere, also `$.Values.a.b` and `$root.Values.a.b`) reads
  `a.b` and everything below it: whatever `with`, `range`, `include` or a variable does with
  that value later stays below `a.b`.
- In a values template (helmfile's `.gotmpl` files) the dot *is* the values: `.a.b` at the top
  level (outside `with`, `range` and `define`) reads `a.b` too. Inside those blocks a chain is
  relative to a value whose own chain was already read.
- `index .Values "a" "b"`, `get .Values "a"`, `hasKey .Values "a"` and helmfile's
  `get "a.b" .` read `a.b` / `a`.
- The values as a whole (`toYaml .Values`, `.Values | …`, `range $k, $v := .Values`, a bare
  `.` or `$` at the top level that is not handed to `include`/`template`/`tpl`) may read any
  key: `whole`. So may a template that cannot be read (the caller treats it the same way).
- `tpl` makes value strings templates: the caller must read them too (`tpl`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from shared.engine.errors import FleetError
from shared.engine.helm import gotmpl

Path = tuple[str, ...]

# Commands whose dot or `$` argument is not read by the command itself: the named template
# (or the `tpl` string) does its own reading, which is analysed where it is written.
_PASS_ON = frozenset({"include", "template", "block", "tpl", "required"})
# Commands that read one key (or a key path) of the map they are given.
_KEYED = frozenset({"index", "get", "hasKey", "getOrNil"})
_BLOCKS = frozenset({"with", "range", "define", "block"})


@dataclass(frozen=True)
class Reads:
    """The value paths a set of templates reads (each with everything below it)."""

    paths: frozenset[Path] = frozenset()
    whole: bool = False  # some template may read any key
    tpl: bool = False  # some template renders value strings as templates

    def __or__(self, other: Reads) -> Reads:
        return Reads(self.paths | other.paths, self.whole or other.whole, self.tpl or other.tpl)

    def under(self, prefix: Path) -> Reads:
        """These reads as seen from a parent whose values hold ours under `prefix` (a
        subchart's key): `whole` becomes the whole of `prefix`."""
        paths = {prefix + p for p in self.paths}
        if self.whole:
            paths.add(prefix)
        return Reads(frozenset(paths), False, self.tpl)

    def below(self, prefix: Path) -> Reads:
        """The reads at or below `prefix`, with `prefix` cut off (a subchart's share of
        `global`)."""
        n = len(prefix)
        return Reads(frozenset(p[n:] for p in self.paths if p[:n] == prefix and len(p) > n))

    def covers(self, path: Path) -> bool:
        """Whether `path` is read (some read path is `path` or above it)."""
        return self.whole or any(path[: len(p)] == p for p in self.paths)

    def reaches(self, path: Path) -> bool:
        """Whether something below `path` is read (so `path` itself is needed)."""
        n = len(path)
        return any(len(p) > n and p[:n] == path for p in self.paths)

    def keys_at(self, path: Path) -> set[str]:
        """The keys read right below `path` (candidates for "did you mean")."""
        n = len(path)
        return {p[n] for p in self.paths if len(p) > n and p[:n] == path}


def merge(reads: Iterable[Reads]) -> Reads:
    out = Reads()
    for one in reads:
        out = out | one
    return out


@dataclass
class _Scan:
    values_dot: bool  # the top-level dot is the values (helmfile) rather than Helm's root
    paths: set[Path] = field(default_factory=set)
    whole: bool = False
    tpl: bool = False
    stack: list[str] = field(default_factory=list)  # open blocks: if, with, range, define
    roots: set[str] = field(default_factory=lambda: {"$"})  # variables holding the root
    values_vars: set[str] = field(default_factory=set)  # variables holding the values

    @property
    def top(self) -> bool:
        return not any(kind in _BLOCKS for kind in self.stack)

    def result(self) -> Reads:
        return Reads(frozenset(self.paths), self.whole, self.tpl)


def chart_template(text: str) -> Reads:
    """What a Helm chart template (or helper) reads of `.Values`."""
    return _read(text, values_dot=False)


def values_template(text: str) -> Reads:
    """What a helmfile values template or app template reads: its dot is the values."""
    return _read(text, values_dot=True)


def _read(text: str, *, values_dot: bool) -> Reads:
    scan = _Scan(values_dot)
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            return scan.result()
        open_len = 3 if text.startswith("{{-", start) else 2
        try:
            end = gotmpl.action_end(text, start + open_len)
        except FleetError:
            return Reads(whole=True)  # cannot be read: anything may be read
        pos = end + 2
        body = text[start + open_len : end]
        if body.endswith("-") and body[:-1].endswith((" ", "\t", "\n", "\r")):
            body = body[:-1]
        tokens = _tokens(body)
        if tokens is None:
            return Reads(whole=True)
        _action(scan, tokens)


def _tokens(body: str) -> list[tuple[str, str]] | None:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(body):
        match = gotmpl.TOKEN.match(body, pos)
        if match is None or match.lastgroup is None:
            return None
        if match.lastgroup not in ("space", "comment"):
            out.append((match.lastgroup, match.group()))
        pos = match.end()
    return out


def _action(scan: _Scan, tokens: list[tuple[str, str]]) -> None:
    if not tokens:
        return
    kind, word = tokens[0]
    if kind == "ident" and word == "end":
        if scan.stack:
            scan.stack.pop()
        return
    if kind == "ident" and word == "else":
        rest = tokens[1:]
        if rest and rest[0] == ("ident", "with"):
            tokens = rest[1:]  # `else with x`: still a with block, dot rebound
        else:
            if scan.stack and scan.stack[-1] in ("with", "range"):
                scan.stack[-1] = "if"  # the else branch sees the outer dot
            tokens = rest[1:] if rest and rest[0] == ("ident", "if") else rest
        _operands(scan, tokens)
        return
    if kind == "ident" and word in ("if", "with", "range", "define", "block"):
        # The block's own pipeline is read where the block opens (outside it).
        _operands(scan, tokens[1:], head=word if word in ("define", "block") else None)
        scan.stack.append(word)
        return
    if kind == "ident" and word == "template":
        _operands(scan, tokens[1:], head="template")
        return
    # `$x := <operand>`: a variable holding the root or the values.
    if len(tokens) == 3 and tokens[0][0] == "var" and tokens[1][0] == "decl":
        name, (value_kind, value) = tokens[0][1], tokens[2]
        if _is_root(scan, value_kind, value):
            scan.roots.add(name)
            return
        if _is_values(scan, value_kind, value):
            scan.values_vars.add(name)
            return
    _operands(scan, tokens)


def _is_root(scan: _Scan, kind: str, word: str) -> bool:
    return (kind == "dot" and scan.top) or (kind == "var" and word in scan.roots)


def _is_values(scan: _Scan, kind: str, word: str) -> bool:
    if kind == "fields" and word == ".Values":
        return True
    if kind == "var" and "." in word:
        var, rest = word.split(".", 1)
        return var in scan.roots and rest == "Values"
    return kind == "var" and word in scan.values_vars


def _operands(scan: _Scan, tokens: list[tuple[str, str]], head: str | None = None) -> None:
    """Record what the operands of a pipeline read. `head` is the command the operands
    belong to (the first identifier of each command; parentheses start a new one)."""
    heads: list[str | None] = [head]
    counts = [0]  # operands of each open command so far
    fresh = head is None  # the next operand starts a command
    i = 0
    while i < len(tokens):
        kind, word = tokens[i]
        if kind == "punct" and word == "(":
            heads.append(None)
            counts.append(0)
            fresh = True
            i += 1
            continue
        if kind == "punct" and word == ")":
            if len(heads) > 1:
                heads.pop()
                counts.pop()
            counts[-1] += 1
            fresh = False
            i += 1
            continue
        if kind == "punct" and word == "|":
            heads[-1] = None
            counts[-1] = 0
            fresh = True
            i += 1
            continue
        if kind in ("decl", "comma"):
            fresh = True
            i += 1
            continue
        current = heads[-1]
        if fresh:
            fresh = False
            if kind == "ident":
                heads[-1] = word
                if word == "tpl":
                    scan.tpl = True
                i += 1
                continue
            current = heads[-1] = ""  # a command that starts with an operand
            piped = _piped_get(tokens, i + 1) if scan.values_dot else None
            if piped is not None and _names_values(scan, kind, word):
                scan.paths.add(piped)  # helmfile's `.Values | get "a.b" default`
                i += 1
                continue
        if kind == "ident" and word == "tpl":
            scan.tpl = True
        literals = _literals(tokens, i + 1)
        first = counts[-1] == 0
        counts[-1] += 1
        if not (kind == "string" and current in ("get", "getOrNil") and not first):
            _operand(scan, kind, word, current, literals)  # (later strings: defaults)
        i += 1


def _piped_get(tokens: list[tuple[str, str]], start: int) -> Path | None:
    """The path of `| get "a.b" …` following an operand, if that is what follows."""
    rest = tokens[start : start + 3]
    if (
        len(rest) == 3
        and rest[0] == ("punct", "|")
        and rest[1][0] == "ident"
        and rest[1][1] in ("get", "getOrNil")
        and rest[2][0] in ("string", "raw")
    ):
        return tuple(rest[2][1][1:-1].split("."))
    return None


def _names_values(scan: _Scan, kind: str, word: str) -> bool:
    """Whether an operand is the values as a whole in a values template."""
    return (
        _is_values(scan, kind, word)
        or _is_root(scan, kind, word)
        or (
            kind == "var"
            and word.partition(".")[2] == "Values"
            and word.partition(".")[0] in scan.roots
        )
    )


def _literals(tokens: list[tuple[str, str]], start: int) -> list[str]:
    out = []
    for kind, word in tokens[start:]:
        if kind not in ("string", "raw"):
            break
        out.append(word[1:-1])
    return out


def _operand(scan: _Scan, kind: str, word: str, head: str | None, literals: list[str]) -> None:
    if kind == "fields":
        chain = tuple(word[1:].split("."))
        if chain[0] == "Values":
            _chain(scan, chain[1:], head, literals)
        elif scan.values_dot and scan.top:
            _chain(scan, chain, head, literals)
        return
    if kind == "var":
        var, _, rest = word.partition(".")
        chain = tuple(rest.split(".")) if rest else ()
        if var in scan.values_vars:
            _chain(scan, chain, head, literals)
        elif var in scan.roots:
            if chain[:1] == ("Values",):
                _chain(scan, chain[1:], head, literals)
            elif scan.values_dot:
                _chain(scan, chain, head, literals)
            elif not chain:
                _whole_root(scan, head, literals)
        return
    if kind == "dot" and scan.top:
        _whole_root(scan, head, literals)
    elif kind == "string" and head in ("get", "getOrNil") and scan.values_dot and scan.top:
        # helmfile's `get "a.b" [default] .`: the path comes first
        scan.paths.add(tuple(word[1:-1].split(".")))


def _chain(scan: _Scan, chain: Path, head: str | None, literals: list[str]) -> None:
    """A chain into the values (after `.Values`, or a values dot)."""
    while chain[:1] == ("Values",):
        chain = chain[1:]  # `.Values.Values.x` is `.x` in helmfile templates (helm.py)
    if chain:
        scan.paths.add(chain)
        return
    if head in _KEYED and literals:
        scan.paths.add(tuple(literals) if head == "index" else (literals[0],))
    elif head in _PASS_ON or (head in ("get", "getOrNil") and scan.values_dot):
        return
    else:
        scan.whole = True


def _whole_root(scan: _Scan, head: str | None, literals: list[str]) -> None:
    """The root object itself: harmless handed to a named template (which does its own
    reading), a keyed lookup in a values template, anything else may read every key."""
    if head in _PASS_ON:
        return
    if scan.values_dot:
        _chain(scan, (), head, literals)
    else:
        scan.whole = True
