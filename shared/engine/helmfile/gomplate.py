"""gomplate templates as kube-renderer's bootstrap renders them (gomplate 3.11), on Helm's
template engine.

    render(template, context, source="helmfile.yaml")   # the text gomplate writes

gomplate and Helm both run Go's `text/template`; what differs is the function set and the
context. A template is read action by action and rendered only when every part of it is one
whose output Helm's engine reproduces; anything else is refused with its line and column:

- Go's language: pipelines, variables, `if`/`else`/`range`/`with`/`break`/`continue`, comments,
  trim markers; `$` is the context (Helm's `$` is its own root: rewritten to `$.Values`);
- Go's functions `and or not len index eq ne lt le gt ge print println`, and `printf` with a
  literal format of `%s`, `%v`, `%d` and `%%` only; gomplate's `default` (conv.Default: the
  default on an empty value, as sprig's);
- gomplate's `has`/`coll.Has` (a map's key or a list's item), `coll.Append` and
  `data.JSON`/`json`, rewritten into named templates of Helm's engine.

What would print differently is refused too: a printed value that is nil (Go prints
`<no value>`, which Helm's engine deletes from its output), a number printed with a verb Go
flags (`%!s(float64=3)`: gomplate reads YAML integers as int, Helm's engine every number as
float64), float literals, an integer of a million or more (`gotmpl.check_numbers`), and the
names Helm's root adds (`.Values`, `.Files`, `.Release`, ...), which gomplate's context lacks.
gomplate's `missingkey=error` is Helm's strict mode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from shared.engine.errors import FleetError
from shared.engine.helm import gotmpl
from shared.engine.helm.engine import render_template

KEYWORDS = frozenset({"if", "else", "end", "range", "with", "break", "continue"})
FUNCTIONS = frozenset(
    {"and", "or", "not", "len", "index", "eq", "ne", "lt", "le", "gt", "ge", "print", "println"}
    | {"printf", "default", "nil", "true", "false"}
)
# gomplate's namespaced functions (`coll.Append`) and aliases this module rewrites.
NAMESPACES = {"coll": frozenset({"Append", "Has"}), "data": frozenset({"JSON"})}
ALIASES = frozenset({"has", "json"})
HELM_ROOT = frozenset({"Values", "Files", "Release", "Chart", "Capabilities", "Template"})
_VERB = re.compile(r"%(.)")
_PRINTF_VERBS = frozenset("svd%")
_FLOAT = re.compile(r"[+-]?(?:\d[\d_]*\.|\.\d|\d[\d_]*[eE])")
_NO_VALUE = "rollwright-gomplate-no-value"

HELPERS = r"""
{{- define "rollwright.shown" -}}
{{- if kindIs "invalid" . -}}{{- fail "rollwright-gomplate-no-value" -}}{{- end -}}
{{- . -}}
{{- end -}}

{{- define "rollwright.has" -}}
{{- $in := index . 0 -}}{{- $key := index . 1 -}}
{{- if kindIs "map" $in -}}{{- toJson (dict "v" (hasKey $in $key)) -}}
{{- else if kindIs "slice" $in -}}{{- toJson (dict "v" (has $key $in)) -}}
{{- else -}}{{- toJson (dict "v" false) -}}
{{- end -}}
{{- end -}}

{{- define "rollwright.append" -}}
{{- toJson (dict "v" (append (index . 1) (index . 0))) -}}
{{- end -}}

{{- define "rollwright.json" -}}
{{- $parsed := mustFromJson (index . 0) -}}
{{- if kindIs "invalid" $parsed -}}{{- $parsed = dict -}}{{- end -}}
{{- if not (kindIs "map" $parsed) -}}{{- fail "data.JSON: not a JSON object" -}}{{- end -}}
{{- toJson (dict "v" $parsed) -}}
{{- end -}}
"""

_NAMESPACED = {"Append": "append", "Has": "has", "JSON": "json"}


def _call(name: str, args: list[str]) -> str:
    """A rewritten call: `coll.Append v list` arrives as ("coll", [".Append", v, list])."""
    if name in NAMESPACES:
        helper = _NAMESPACED[args[0].lstrip(".")]
        args = args[1:]
    else:
        helper = name
    arity = 1 if helper == "json" else 2
    if len(args) != arity:
        raise ValueError(f"{helper} takes {arity} argument(s), got {len(args)}")
    return f'(include "rollwright.{helper}" (list {" ".join(args)}) | fromJson).v'


GOMPLATE = gotmpl.Dialect(frozenset(NAMESPACES) | ALIASES, _call)


class Unsupported(Exception):
    """A part of a template whose gomplate output Helm's engine would not reproduce."""

    def __init__(self, message: str, line: int, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column

    def where(self) -> str:
        if not self.line:
            return ""
        return f" line {self.line}" + (f", column {self.column}" if self.column else "")


class NotInContext(Unsupported):
    """A name of Helm's root the context lacks: gomplate fails on it (missing key)."""


@dataclass
class _Token:
    kind: str
    text: str
    offset: int  # in the template


def _tokens(text: str, start: int, end: int) -> list[_Token]:
    out: list[_Token] = []
    pos = start
    while pos < end:
        match = gotmpl.TOKEN.match(text, pos, end)
        if match is None or match.lastgroup is None:
            raise _unsupported(text, pos, f"cannot read {text[pos : pos + 20]!r}")
        if match.lastgroup not in ("space", "comment"):
            out.append(_Token(match.lastgroup, match.group(), pos))
        pos = match.end()
    return out


def _unsupported(text: str, offset: int, message: str) -> Unsupported:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Unsupported(message, line, column)


def _check(text: str, tokens: list[_Token], names: frozenset[str]) -> None:
    """Refuse what gomplate and Helm's engine would not print alike; `names` are the keys of
    the context (a Helm root name such as `Values` is refused unless the context has it)."""
    for i, tok in enumerate(tokens):
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok.kind == "ident":
            name = tok.text
            if name in NAMESPACES:
                joined = after is not None and after.offset == tok.offset + len(name)
                member = after.text.lstrip(".") if after and after.kind == "fields" else ""
                if not joined or member not in NAMESPACES[name]:
                    raise _unsupported(
                        text, tok.offset, f"{name}.{member or '…'} is not reproduced"
                    )
            elif name == "printf":
                _check_format(text, tok, after)
            elif name not in KEYWORDS | FUNCTIONS | ALIASES:
                raise _unsupported(
                    text,
                    tok.offset,
                    f"'{name}' is not one of the gomplate functions rollwright reproduces "
                    "(docs/formats/helmfile.md, gomplate templates)",
                )
        elif tok.kind == "fields" and not (i and tokens[i - 1].text in NAMESPACES):
            first = tok.text.split(".")[1]
            if first in HELM_ROOT and first not in names:
                found = _unsupported(text, tok.offset, f".{first} is not in gomplate's context")
                raise NotInContext(found.message, found.line, found.column)
        elif tok.kind == "number" and _FLOAT.match(tok.text) and "x" not in tok.text.lower():
            raise _unsupported(
                text,
                tok.offset,
                f"the float {tok.text}: gomplate compares it with integers differently",
            )


def _check_format(text: str, tok: _Token, after: _Token | None) -> None:
    if after is None or after.kind not in ("string", "raw"):
        raise _unsupported(text, tok.offset, "printf needs a literal format")
    verbs = set(_VERB.findall(after.text))
    if not verbs <= _PRINTF_VERBS:
        bad = sorted(verbs - _PRINTF_VERBS)[0]
        raise _unsupported(text, after.offset, f"printf verb %{bad} is not reproduced")


def _is_print(tokens: list[_Token]) -> bool:
    """An action whose pipeline's value is printed (not a keyword, not a declaration)."""
    if not tokens or (tokens[0].kind == "ident" and tokens[0].text in KEYWORDS):
        return False
    i = 0
    while i < len(tokens) and tokens[i].kind in ("var", "comma"):
        i += 1
    return not (i < len(tokens) and tokens[i].kind == "decl")


def translate(text: str, names: frozenset[str] = frozenset()) -> str:
    """The template as Helm's engine runs it, or `Unsupported` at the first part that is not
    reproduced. Lines are kept, so runtime errors name the template's own lines. `names` are
    the context's keys."""
    out: list[str] = []
    pos = 0
    for action in gotmpl.actions(text):
        out.append(text[pos : action.body_start])
        body = text[action.body_start : action.body_end]
        pos = action.body_end
        if body.lstrip().startswith("/*"):
            out.append(body)
            continue
        tokens = _tokens(text, action.body_start, action.body_end)
        _check(text, tokens, names)
        rebuilt = _root_references(text, action.body_start, action.body_end, tokens)
        if _is_print(tokens):
            lead = rebuilt[: len(rebuilt) - len(rebuilt.lstrip())]
            trail = rebuilt[len(rebuilt.rstrip()) :]
            rebuilt = f'{lead}include "rollwright.shown" ({rebuilt.strip()}){trail}'
        out.append(rebuilt)
    out.append(text[pos:])
    return "".join(out)


def _root_references(text: str, start: int, end: int, tokens: list[_Token]) -> str:
    """The action's body with `$` (gomplate's context) as `$.Values`."""
    out: list[str] = []
    pos = start
    for tok in tokens:
        if tok.kind == "var" and (tok.text == "$" or tok.text.startswith("$.")):
            out.append(text[pos : tok.offset] + "$.Values" + tok.text[1:])
            pos = tok.offset + len(tok.text)
    out.append(text[pos:end])
    return "".join(out)


def render(template: str, context: dict[str, Any], *, source: str) -> str:
    """What `gomplate -c .=<context> -f <template>` writes, or `Unsupported`/`FleetError`
    (a template error of gomplate's own, with its line)."""
    translated = gotmpl.rewrite(
        translate(template, frozenset(context)), source=source, dialect=GOMPLATE
    )
    try:
        # `.` is the context alone, as gomplate's `-c .=<file>` makes it.
        out = render_template(
            translated, context, source=source, helpers=HELPERS, strict=True, values_alias=False
        )
    except FleetError as err:
        if _NO_VALUE in err.problem.message:
            raise Unsupported(
                "prints a value that is not set: gomplate prints <no value> there, which is "
                "not reproduced; use default or if",
                err.line or 0,
            ) from None
        raise
    if "%!" in out and "%!" not in template:
        at = out.index("%!")
        found = out[at:].split(")", 1)[0] + ")"
        raise Unsupported(
            f"printf prints {found} (line {out.count(chr(10), 0, at) + 1} of the output): "
            "gomplate reads YAML integers as integers, Helm's engine as floats; not reproduced",
            0,
        )
    gotmpl.check_numbers(out, context, source)
    return out
