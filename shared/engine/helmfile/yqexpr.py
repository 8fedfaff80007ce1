"""The yq expressions of kube-renderer's file name patterns (`render_filename_pattern`).

kube-renderer evaluates the pattern with `yq eval -N` on each document and takes the printed
scalar as a path. This module evaluates the subset its built-in patterns and its tests use,
with yq v4's meaning: paths (`.a.b`, `."helm.sh/hook"`), `//` (falls back on null and false
only), string `+`, `==`/`!=`, parentheses, `|`, assignment `=` and update `|=` (they change
the document the rest of the pipe sees, never the document written), `sub(regex; repl)`
with Go's regular expressions and replace-all, `capture(regex)` with named groups,
`head_comment` and `length`. Anything else is refused with its column, not guessed.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from shared.engine.helmfile import yqdoc

_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<op>\|=|//|==|!=|[|+=(),;])
    | (?P<path>\.(?:"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_-]*)?)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.X,
)
# Binding strength, yq's: `|` 30, assignment and comparison 40, `+` and `//` 42.
_PRECEDENCE = {"|": 30, "=": 40, "|=": 40, "==": 40, "!=": 40, "+": 42, "//": 42}
_FUNCTIONS = {"sub": 2, "capture": 1, "head_comment": 0, "length": 0}


class ExpressionError(Exception):
    def __init__(self, message: str, column: int | None = None) -> None:
        where = f" (column {column})" if column is not None else ""
        super().__init__(f"{message}{where}")


@dataclass(frozen=True)
class _Node:
    kind: str  # path, string, op, call, identity
    text: str = ""
    args: tuple[_Node, ...] = ()
    column: int = 0


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.lastgroup is None:
            raise ExpressionError(f"cannot read {text[pos : pos + 12]!r}", pos + 1)
        if match.lastgroup != "space":
            out.append((match.lastgroup, match.group(), pos + 1))
        pos = match.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.pos = 0

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.pos] if self.pos < len(self.toks) else ("end", "", 0)

    def take(self) -> tuple[str, str, int]:
        tok = self.peek()
        self.pos += 1
        return tok

    def expression(self, min_precedence: int = 0) -> _Node:
        left = self.primary()
        while True:
            kind, text, column = self.peek()
            prec = _PRECEDENCE.get(text) if kind == "op" else None
            if prec is None or prec < min_precedence:
                return left
            self.take()
            right = self.expression(prec + 1)
            left = _Node("op", text, (left, right), column)

    def primary(self) -> _Node:
        kind, text, column = self.take()
        if kind == "string":
            return _Node("string", _unquote(text), column=column)
        if kind == "path":
            node = _Node("identity", column=column) if text == "." else None
            keys = [] if text == "." else [_key(text)]
            while self.peek()[0] == "path" and self.peek()[1] != ".":
                keys.append(_key(self.take()[1]))
            if node is not None and not keys:
                return node
            return _Node("path", "\0".join(keys), column=column)
        if kind == "op" and text == "(":
            inner = self.expression()
            if self.take()[1] != ")":
                raise ExpressionError("unbalanced parentheses", column)
            return inner
        if kind == "name":
            return self.call(text, column)
        raise ExpressionError(f"unexpected {text or 'end of expression'!r}", column or None)

    def call(self, name: str, column: int) -> _Node:
        if name not in _FUNCTIONS:
            raise ExpressionError(
                f"yq operator {name!r} is not supported (supported: {', '.join(_FUNCTIONS)})",
                column,
            )
        args: list[_Node] = []
        if _FUNCTIONS[name]:
            if self.take()[1] != "(":
                raise ExpressionError(f"{name} takes arguments in parentheses", column)
            while True:
                args.append(self.expression())
                sep = self.take()[1]
                if sep == ")":
                    break
                if sep not in (";", ","):
                    raise ExpressionError(f"unexpected {sep!r} in the arguments of {name}", column)
        if len(args) != _FUNCTIONS[name]:
            raise ExpressionError(f"{name} takes {_FUNCTIONS[name]} argument(s)", column)
        return _Node("call", name, tuple(args), column)


def _unquote(text: str) -> str:
    return re.sub(
        r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text[1:-1]
    )


def _key(text: str) -> str:
    key = text[1:]
    return _unquote(key) if key.startswith('"') else key


def parse(text: str) -> _Node:
    parser = _Parser(text)
    node = parser.expression()
    if parser.peek()[0] != "end":
        raise ExpressionError(f"unexpected {parser.peek()[1]!r}", parser.peek()[2])
    return node


@dataclass
class _Context:
    document: yqdoc.Document


def evaluate(expression: str, doc: yqdoc.Document) -> str:
    """The scalar `yq eval -N expression` prints for one document; "" when it prints
    nothing (the expression matched nothing)."""
    tree = parse(expression)
    results = _eval(tree, yqdoc.data(doc.node), _Context(doc))
    if not results:
        return ""
    if len(results) > 1:
        raise ExpressionError("the pattern yields more than one value")
    value = results[0]
    if isinstance(value, dict | list):
        raise ExpressionError("the pattern yields a map or a list, not a file name")
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _eval(node: _Node, value: Any, ctx: _Context) -> list[Any]:
    if node.kind == "identity":
        return [value]
    if node.kind == "string":
        return [node.text]
    if node.kind == "path":
        return [_get(value, node.text.split("\0"), node.column)]
    if node.kind == "call":
        return _call(node, value, ctx)
    op = node.text
    left, right = node.args
    if op == "|":
        return [out for v in _eval(left, value, ctx) for out in _eval(right, v, ctx)]
    if op in ("=", "|="):
        return [_assign(left, right, value, ctx, update=op == "|=")]
    lefts = _eval(left, value, ctx)
    rights = _eval(right, value, ctx)
    if op == "//":
        kept = [v for v in lefts if v is not None and v is not False]
        return kept or rights
    results: list[Any] = []
    for a in lefts:
        for b in rights:
            if op == "==":
                results.append(a == b)
            elif op == "!=":
                results.append(a != b)
            else:
                results.append(_add(a, b, node.column))
    return results


def _get(value: Any, keys: list[str], column: int) -> Any:
    for key in keys:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ExpressionError(f"cannot index a {type(value).__name__} with {key!r}", column)
        value = value.get(key)
    return value


def _add(a: Any, b: Any, column: int) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, str) and isinstance(b, str):
        return a + b
    raise ExpressionError("`+` of values that are not both text is not supported", column)


def _assign(target: _Node, source: _Node, value: Any, ctx: _Context, *, update: bool) -> Any:
    if target.kind != "path":
        raise ExpressionError("only a path can be assigned", target.column)
    keys = target.text.split("\0")
    result = copy.deepcopy(value) if isinstance(value, dict) else {}
    current = _get(result, keys, target.column)
    new = _eval(source, current if update else value, ctx)
    holder = result
    for key in keys[:-1]:
        nxt = holder.get(key)
        if not isinstance(nxt, dict):
            nxt = {}
            holder[key] = nxt
        holder = nxt
    holder[keys[-1]] = new[-1] if new else None
    return result


def _call(node: _Node, value: Any, ctx: _Context) -> list[Any]:
    name = node.text
    if name == "head_comment":
        return [yqdoc.head_comment(ctx.document)]
    if name == "length":
        if isinstance(value, dict | list | str):
            return [len(value)]
        return [0]
    pattern = _single(_eval(node.args[0], value, ctx), node)
    regex = go_regex(pattern, node.column)
    if not isinstance(value, str):
        raise ExpressionError(f"{name} of a value that is not text", node.column)
    if name == "sub":
        replacement = _single(_eval(node.args[1], value, ctx), node)
        return [regex.sub(lambda m: go_expand(replacement, m), value)]
    match = regex.search(value)
    if match is None:
        return []
    return [{k: v for k, v in match.groupdict().items()}]


def _single(values: list[Any], node: _Node) -> str:
    if len(values) != 1 or not isinstance(values[0], str):
        raise ExpressionError(f"{node.text} wants one text argument", node.column)
    return values[0]


_FLAGS = re.compile(r"^\(\?([imsU]+)\)")


def go_regex(pattern: str, column: int | None = None) -> re.Pattern[str]:
    """A Go (RE2) regular expression as Python's `re`: without the `m` flag Go's `$`
    matches only at the very end of the text."""
    flags = _FLAGS.match(pattern)
    multiline = bool(flags and "m" in flags.group(1))
    if flags and "U" in flags.group(1):
        raise ExpressionError("the regular expression flag U is not supported", column)
    translated = pattern if multiline else _end_anchor(pattern)
    try:
        return re.compile(translated)
    except re.error as err:
        raise ExpressionError(f"regular expression {pattern!r}: {err}", column) from None


def _end_anchor(pattern: str) -> str:
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        out.append("\\Z" if char == "$" and not in_class else char)
        i += 1
    return "".join(out)


_EXPAND = re.compile(r"\$(?:\$|\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")


def go_expand(template: str, match: re.Match[str]) -> str:
    """Go's `Regexp.Expand`: `$1`, `${1}`, `$name`; an unknown group is empty, `$$` is `$`."""

    def one(found: re.Match[str]) -> str:
        if found.group(0) == "$$":
            return "$"
        name = found.group(1) or found.group(2)
        try:
            group = match.group(int(name)) if name.isdigit() else match.group(name)
        except IndexError:  # no such group
            return ""
        return group or ""

    return _EXPAND.sub(one, template)
