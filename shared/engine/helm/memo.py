"""Go templates rendered once per distinct input, when the template shows what it reads.

Every app instance renders its template's helmfile.yaml.gotmpl with its own context (the
environment values plus `atlas`), one Helm engine call each: on a large fleet that is a sixth
of the render time, and most templates read a few keys that many instances share (the
instance name, a domain, a flag). `render` looks at the template once: when every action
uses only field chains (`.atlas.instance.name`, `.Values.port`), literals, control words
and functions known to be pure, the output is a function of the values at those chains, and
renders are cached under the JSON of exactly those values. Anything else (`$`, variables,
`include`/`tpl`/`template`, unknown or impure functions like `now` or `randAlphaNum`, a bare
`.`) disables the cache for that template, which is then rendered every time as before.

Why the chains cover everything read: inside `with .a` or `range .a` the dot is (part of)
the value at `.a`, which is in the key as a whole; Helm sees values through JSON, so equal
JSON means equal input to the engine. Errors are not cached.
"""

from __future__ import annotations

import json
from typing import Any

from shared.engine.helm import gotmpl

# Pure functions (Go text/template builtins and Sprig) a cached template may call. Left out
# on purpose: anything reading the clock, randomness, the environment, files, the cluster
# or other templates, and functions whose output follows Go's random map order (keys).
# fmt: off
PURE_FUNCTIONS = frozenset([
    "and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len", "print", "printf", "println",
    "index", "slice", "html", "js", "urlquery", "default", "empty", "coalesce", "ternary",
    "required", "fail", "quote", "squote", "upper", "lower", "title", "untitle", "trim",
    "trimAll", "trimPrefix", "trimSuffix", "trunc", "abbrev", "replace", "repeat", "substr",
    "nospace", "contains", "hasPrefix", "hasSuffix", "cat", "indent", "nindent", "toString",
    "toStrings", "toYaml", "toJson", "toPrettyJson", "toRawJson", "fromYaml", "fromJson",
    "b64enc", "b64dec", "int", "int64", "float64", "atoi", "add", "add1", "sub", "mul", "div",
    "mod", "max", "min", "floor", "ceil", "round", "join", "split", "splitList", "list", "dict",
    "get", "hasKey", "first", "last", "rest", "initial", "uniq", "has", "without", "compact",
    "concat", "append", "prepend", "reverse", "kebabcase", "snakecase", "camelcase", "sha256sum",
    "sha1sum", "adler32sum", "regexMatch", "regexReplaceAll", "regexReplaceAllLiteral",
    "regexFind", "regexFindAll", "regexSplit", "semver", "semverCompare", "typeOf", "kindOf",
    "kindIs", "typeIs", "deepEqual", "plural", "wrap", "wrapWith", "getOrNil",
])
# fmt: on
KEYWORDS = frozenset({"if", "else", "end", "with", "range", "break", "continue"})
LITERALS = frozenset({"true", "false", "nil"})

Paths = tuple[tuple[str, ...], ...]

_analysed: dict[str, Paths | None] = {}
_rendered: dict[tuple[str, str], str] = {}
_LIMIT = 4096


def read_paths(text: str) -> Paths | None:
    """The field chains `text` reads (with `.Values.x` as `.x`), or None when the template
    may read more than its field chains or is not pure."""
    found = _analysed.get(text, ())
    if found == ():
        found = _analyse(text)
        if len(_analysed) >= _LIMIT:
            _analysed.clear()
        _analysed[text] = found
    return found


def _analyse(text: str) -> Paths | None:
    paths: set[tuple[str, ...]] = set()
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            return tuple(sorted(paths))
        pos = start + 2
        if text.startswith("-", pos) and pos + 1 < len(text) and text[pos + 1].isspace():
            pos += 1
        while True:
            match = gotmpl.TOKEN.match(text, pos)
            if match is None or match.lastgroup in ("var", "decl", "comma"):
                return None  # `$`, `:=`, `,`, or anything this reader does not know
            pos = match.end()
            kind = match.lastgroup
            value = match.group()
            if kind == "close":
                if value.startswith("-") and not text[match.start() - 1].isspace():
                    return None  # `x-}}` is not a trim marker
                break
            if kind == "fields":
                chain = tuple(value[1:].split("."))
                while chain and chain[0] == "Values":  # `.Values.x` is `.x` (see helm.py)
                    chain = chain[1:]
                if not chain:
                    return None  # `.Values`: the whole context
                paths.add(chain)
            elif kind == "dot":
                return None  # the whole context
            elif kind == "ident" and value not in PURE_FUNCTIONS | KEYWORDS | LITERALS:
                return None


# JSON cannot spell "absent"; a one-key object with a name no value file uses does.
_MISSING_MARK = {"\u0000rollwright:missing": True}


def _key(paths: Paths, context: dict[str, Any]) -> str:
    parts: list[Any] = []
    for path in paths:
        node: Any = context
        depth = 0
        for name in path:
            if not isinstance(node, dict):
                break  # a field of a non-map: what Go does depends on that value
            if name not in node:
                node = _MISSING_MARK  # no value there, whatever else the map holds
                break
            node = node[name]
            depth += 1
        parts.append([depth, node])
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))


def render(text: str, context: dict[str, Any], *, source: str, host: gotmpl.Host | None) -> str:
    """`gotmpl.render(text, context, ...)`, cached when `text` allows."""
    paths = read_paths(text)
    if paths is None:
        return gotmpl.render(text, context, source=source, host=host)
    try:
        key = (text, _key(paths, context))
    except (TypeError, ValueError):  # not JSON: let the engine decide
        return gotmpl.render(text, context, source=source, host=host)
    out = _rendered.get(key)
    if out is None:
        out = gotmpl.render(text, context, source=source, host=host)
        if len(_rendered) >= _LIMIT:
            _rendered.clear()
        _rendered[key] = out
    return out


def clear_cache() -> None:
    _analysed.clear()
    _rendered.clear()
