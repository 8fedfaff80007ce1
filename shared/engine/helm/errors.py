"""Go template errors in words a fleet author reads: what Helm's engine says, without its
internal template names and repeated positions, with a hint where one helps.

    parse error at (x.gotmpl:2): unexpected "}" in operand
      → Go template syntax error: unexpected "}" in operand (a "}}" with one brace missing?)
    x.gotmpl:2 at <.Values.nope.x>: map has no entry for key "nope"
      → Go template error in {{ .Values.nope.x }}: key "nope" is not set (did you mean 'node'?)

The file and line stay in the problem's own `path:line:` (the caller sets them from the
position Helm reports), so the text drops the copies of it. Messages not recognised pass
through unchanged: a reworded message must never hide what Go said.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.engine import suggest

# Functions a template can call: Go's builtins, sprig's, Helm's and helmfile's. Only a
# vocabulary for "did you mean" on `function "x" not defined`; the engine decides what exists.
_FUNCTION_NAMES = """
    and call html index slice js len not or print printf println urlquery eq ne lt le gt ge
    abbrev abbrevboth adler32sum add add1 add1f addf ago all any append atoi b32dec b32enc
    b64dec b64enc base bcrypt biggest buildCustomCert camelcase cat ceil chunk clean coalesce
    compact concat contains date dateInZone dateModify date_in_zone date_modify decryptAES
    deepCopy deepEqual default derivePassword dict dig dir div divf duration durationRound
    empty encryptAES env expandenv ext fail first float64 floor fromJson fromJsonArray fromYaml
    fromYamlArray genCA genCAWithKey genPrivateKey genSelfSignedCert genSelfSignedCertWithKey
    genSignedCert genSignedCertWithKey get getHostByName hasKey hasPrefix hasSuffix htmlDate
    htmlDateInZone htpasswd include indent initial initials int int64 isAbs join kebabcase keys
    kindIs kindOf last list lookup lower max maxf merge mergeOverwrite min minf mod mul mulf
    mustAppend mustChunk mustCompact mustDateModify mustDeepCopy mustFirst mustFromJson mustHas
    mustInitial mustLast mustMerge mustMergeOverwrite mustPrepend mustPush mustRegexFind
    mustRegexFindAll mustRegexMatch mustRegexReplaceAll mustRegexReplaceAllLiteral
    mustRegexSplit mustRest mustReverse mustSlice mustToDate mustToJson mustToPrettyJson
    mustToRawJson mustUniq mustWithout nindent nospace now omit osBase osClean osDir osExt
    osIsAbs pick pluck plural prepend push quote randAlpha randAlphaNum randAscii randBytes
    randInt randNumeric regexFind regexFindAll regexMatch regexQuoteMeta regexReplaceAll
    regexReplaceAllLiteral regexSplit repeat replace required rest reverse round semver
    semverCompare seq set sha1sum sha256sum shuffle slice snakecase sortAlpha split splitList
    splitn squote sub subf substr swapcase ternary title toDate toDecimal toJson toPrettyJson
    toRawJson toString toStrings toToml toYaml tpl trim trimAll trimPrefix trimSuffix trimall
    trunc tuple typeIs typeIsLike typeOf uniq unixEpoch unset until untilStep untitle upper
    urlJoin urlParse uuidv4 values without wrap wrapWith getOrNil setValueAtPath readFile
    readDir readDirEntries isFile isDir requiredEnv exec envExec fetchSecretValue
    expandSecretRefs toYaml fromYaml
"""
FUNCTIONS = frozenset(_FUNCTION_NAMES.split())

_PARSE = re.compile(r"parse error at \([^)]*\): (?P<msg>.*)", re.S)
_EXECUTION = re.compile(r"execution error at \([^)]*\): (?P<msg>.*)", re.S)
# `template: x.yaml:9:22: executing "x.yaml" at <.Values.a.b>: message`, in the forms Helm
# and its wrapper print (with or without `template:`, the column and `executing "..."`).
_AT = re.compile(
    r"(?:template:? )?(?:[^\s<>]+:\d+(?::\d+)?:? )?(?:executing \"[^\"]*\" )?"
    r"at <(?P<expr>[^>]*)>: (?P<msg>.*)",
    re.S,
)


def reword(message: str, values: Mapping[str, Any] | None = None) -> str:
    """`message` (Helm's, one line) in plainer words; `values` (what the template saw)
    makes "did you mean" possible for a key that is not set."""
    match = _PARSE.search(message)
    if match:
        head = message[: match.start()]
        return f"{head}Go template syntax error: {_syntax(match['msg'])}"
    match = _EXECUTION.search(message)
    if match:  # `fail` / `required`: the template's own words
        return f"{message[: match.start()]}the template stopped: {match['msg']}"
    match = _AT.search(message)
    if match:
        head = message[: match.start()]
        expr = match["expr"]
        return (
            f"{head}Go template error in {{{{ {expr} }}}}: {_runtime(match['msg'], expr, values)}"
        )
    return message


def _syntax(msg: str) -> str:
    found = re.fullmatch(r'function "(?P<name>[^"]+)" not defined', msg)
    if found:
        name = found["name"]
        return f"unknown function {name!r}{suggest.hint(name, FUNCTIONS)}"
    if msg.startswith('unexpected "}" in'):
        return f'{msg} (a "}}}}" with one brace missing?)'
    if msg == "unexpected EOF":
        return (
            "the file ends inside an action or block: an {{ if }}, {{ range }}, {{ with }} "
            "or {{ define }} without its {{ end }}, or a '{{' without '}}'"
        )
    if msg.startswith("unclosed action"):
        return "an action opened with '{{' is not closed with '}}'"
    return msg


def _runtime(msg: str, expr: str, values: Mapping[str, Any] | None) -> str:
    found = re.fullmatch(r'map has no entry for key "(?P<key>[^"]*)"', msg)
    if found:
        key = found["key"]
        return f"key {key!r} is not set{_key_hint(expr, key, values)}"
    found = re.fullmatch(r"can't evaluate field (?P<key>\S+) in type .*", msg)
    if found:
        return f"cannot read {found['key']!r}: the value it is read from is not a map"
    found = re.fullmatch(r"nil pointer evaluating .*\.(?P<key>[^.\s]+)", msg)
    if found:
        key = found["key"]
        before, dot, _ = expr.rpartition(f".{key}")
        if dot and before:  # `.Values.nope.x`: it is `.Values.nope` that is not set
            missing = before.rpartition(".")[2]
            hint = _key_hint(before, missing, values) if missing else ""
            return f"cannot read {key!r}: {before} is not set{hint}"
        return f"cannot read {key!r}: the value it is read from is not set"
    found = re.fullmatch(r"(?P<name>\S+) is not a method but has arguments", msg)
    if found:
        return f"{found['name']!r} is a value, not a function: it takes no arguments"
    found = re.fullmatch(
        r"wrong number of args for (?P<f>\S+): want (?P<w>\d+) got (?P<g>\d+)", msg
    )
    if found:
        return f"{found['f']} takes {found['w']} argument(s), given {found['g']}"
    found = re.fullmatch(
        r'error calling include: template: no template "(?P<t>[^"]*)" associated with .*', msg
    )
    if found:
        return f'no template named {found["t"]!r} is defined ({{{{ define "{found["t"]}" }}}})'
    return msg


def _key_hint(expr: str, key: str, values: Mapping[str, Any] | None) -> str:
    """ " (did you mean 'x'?)" from the keys of the map the expression read `key` from."""
    if values is None:
        return ""
    parts = [p for p in expr.split(".") if p]
    if not parts or parts[0].startswith(("$", "(")) or " " in expr or key not in parts:
        return ""
    node: Any = values
    for part in parts[: parts.index(key)]:
        if not isinstance(node, Mapping) or part not in node:
            return ""
        node = node[part]
    return suggest.hint(key, [str(k) for k in node]) if isinstance(node, Mapping) else ""
