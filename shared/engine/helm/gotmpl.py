"""Go templates as helmfile renders them, on Helm's template engine.

ATLAS is "pure helmfile": its users' `.gotmpl` files (app templates, hierarchy values, values
lists) run with helmfile's function set and options. Rollwright renders them with Helm's own
engine (`shared.engine.helm.engine`), which has sprig and Helm's functions but not helmfile's, so
each action is rewritten before it runs:

- helmfile functions Helm's engine lacks, or has with another meaning, become calls of named
  templates shipped with the template (`get`, `getOrNil` and `setValueAtPath` with helmfile's
  signatures, `fromYaml` failing on bad YAML, `toYaml` keeping its final newline). Results
  travel through JSON, which keeps their type: the engine holds every number as float64
  whichever way it arrives;
- functions that read the world (`readFile`, `isFile`, `isDir`, `readDir`, `listDir`, `env`,
  `requiredEnv`, `fetchSecretValue`, `expandSecretRefs`) become *callouts*: the named template
  looks the answer up in a file of the template chart, and when it is not there yet fails with
  the question; Python answers it (files of the fleet's revision only, the environment
  rollwright.yaml declares, SOPS files through the caller's decryption) and renders again;
- `exec` and `envExec` are refused: they would run commands on the worker.

Options are helmfile's: `missingkey=error`. Whitespace is the template's, byte for byte.
Errors name the user's file and line: rewriting keeps every action on its lines.
"""

from __future__ import annotations

import base64
import json
import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from shared.engine import yamldoc
from shared.engine.errors import FleetError
from shared.engine.helm.engine import render_template
from shared.engine.tree import Tree

# The tokens of an action: everything Go's template lexer knows inside `{{ }}`.
TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>/\*.*?\*/)
    | (?P<string>"(?:[^"\\\n]|\\.)*")
    | (?P<raw>`[^`]*`)
    | (?P<char>'(?:[^'\\\n]|\\.)+')
    | (?P<number>[+-]?(?:0[xX][0-9a-fA-F_]+|\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+))
    | (?P<fields>(?:\.[A-Za-z_][A-Za-z0-9_]*)+)
    | (?P<dot>\.)
    | (?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    | (?P<decl>:?=)
    | (?P<comma>,)
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<punct>[|()])
    | (?P<close>-?\}\})
    """,
    re.X | re.S,
)

KEYWORDS = frozenset({"if", "else", "end", "with", "range", "break", "continue", "define"})
NAMED = frozenset({"template", "block"})  # followed by a template name, then a pipeline

CALLOUTS = frozenset(
    {
        "readFile",
        "isFile",
        "isDir",
        "readDir",
        "listDir",
        "env",
        "requiredEnv",
        "fetchSecretValue",
        "expandSecretRefs",
    }
)
REFUSED = {
    "exec": "exec is refused: it would run commands on the worker (renders run no commands)",
    "envExec": "envExec is refused: it would run commands on the worker (renders run no commands)",
}
_HELPERS_DEFINED = frozenset({"get", "getOrNil", "setValueAtPath", "fromYaml", "toYaml"})
REWRITTEN = _HELPERS_DEFINED | CALLOUTS | set(REFUSED)

_ANSWERS = "rollwright-callouts.json"
_CALLOUT = re.compile(r"rollwright-callout:([A-Za-z0-9+/=]+)")
MAX_CALLOUTS = 256

# Named templates the rewritten actions call. Each returns `{"v": value}` as JSON.
HELPERS = r"""
{{- define "rollwright.get" -}}
{{- $path := index . 0 -}}{{- $hasDefault := index . 1 -}}{{- $default := index . 2 -}}
{{- $value := index . 3 -}}{{- $orNil := index . 4 -}}{{- $done := false -}}
{{- if ne $path "" -}}
{{- range $key := splitList "." $path -}}
{{- if not $done -}}
{{- if not (kindIs "map" $value) -}}
{{- fail (printf "get %q: the value at %q is a %s, not a map" $path $key (kindOf $value)) -}}
{{- else if hasKey $value $key -}}
{{- $value = index $value $key -}}
{{- else if $hasDefault -}}
{{- $value = $default -}}{{- $done = true -}}
{{- else if $orNil -}}
{{- $value = index $ 2 -}}{{- $done = true -}}
{{- else -}}
{{- fail (printf "get %q: no value exists for key %q" $path $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "v" $value) -}}
{{- end -}}

{{- define "rollwright.setValueAtPath" -}}
{{- $keys := splitList "." (index . 0) -}}{{- $current := index . 2 -}}
{{- range $key := initial $keys -}}
{{- if not (hasKey $current $key) -}}
{{- fail (printf "setValueAtPath %q: value for key %q does not exist" (index $ 0) $key) -}}
{{- end -}}
{{- $current = index $current $key -}}
{{- if not (kindIs "map" $current) -}}
{{- fail (printf "setValueAtPath %q: value for key %q was not a map" (index $ 0) $key) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $current (last $keys) (index . 1) -}}
{{- toJson (dict "v" (index . 2)) -}}
{{- end -}}

{{- define "rollwright.fromYaml" -}}
{{- $parsed := fromYaml (index . 0) -}}
{{- if and (eq (len $parsed) 1) (hasKey $parsed "Error") -}}
{{- fail (printf "fromYaml: %s" (get $parsed "Error")) -}}
{{- end -}}
{{- toJson (dict "v" $parsed) -}}
{{- end -}}

{{- define "rollwright.callout" -}}
{{- $answers := (index . 2).Get "rollwright-callouts.json" | default "{}" | fromJson -}}
{{- $key := toJson (list (index . 0) (index . 1)) -}}
{{- if hasKey $answers $key -}}
{{- toJson (index $answers $key) -}}
{{- else -}}
{{- fail (printf "rollwright-callout:%s" (b64enc $key)) -}}
{{- end -}}
{{- end -}}
"""


def _json_call(name: str, args: list[str]) -> str:
    return f'(include "{name}" (list {" ".join(args)}) | fromJson).v'


def _rewrite_call(name: str, args: list[str]) -> str:
    """The Helm-engine expression for a helmfile function call with argument texts."""
    if name in ("get", "getOrNil"):
        if len(args) not in (2, 3):
            raise ValueError(
                f"{name} takes a path, an optional default and a value (helmfile's "
                f"get(path, [default, ]value)); got {len(args)} arguments"
            )
        default = args[1] if len(args) == 3 else "nil"
        has_default = "true" if len(args) == 3 else "false"
        or_nil = "true" if name == "getOrNil" else "false"
        return _json_call("rollwright.get", [args[0], has_default, default, args[-1], or_nil])
    if name == "setValueAtPath":
        _arity(name, args, 3)
        return _json_call("rollwright.setValueAtPath", args)
    if name == "fromYaml":
        _arity(name, args, 1)
        return _json_call("rollwright.fromYaml", args)
    if name == "toYaml":
        # helmfile's toYaml keeps the final newline that Helm's trims.
        _arity(name, args, 1)
        return f'printf "%s\\n" (toYaml {args[0]})'
    if name in REFUSED:
        raise ValueError(REFUSED[name])
    if name == "expandSecretRefs":
        _arity(name, args, 1)
        return _json_call(
            "rollwright.callout", ['"expandSecretRefs"', f"(toJson {args[0]})", "$.Files"]
        )
    _arity(name, args, 1)
    return _json_call("rollwright.callout", [f'"{name}"', args[0], "$.Files"])


def _arity(name: str, args: list[str], count: int) -> None:
    if len(args) != count:
        raise ValueError(f"{name} takes {count} argument(s), got {len(args)}")


@dataclass
class _Tokens:
    items: list[tuple[str, str]]
    pos: int = 0

    def peek(self) -> tuple[str, str]:
        return self.items[self.pos] if self.pos < len(self.items) else ("end", "")

    def take(self) -> tuple[str, str]:
        item = self.peek()
        self.pos += 1
        return item

    def skip_space(self) -> str:
        out = ""
        while self.peek()[0] in ("space", "comment"):
            out += self.take()[1]
        return out


def _tokens(body: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(body):
        match = TOKEN.match(body, pos)
        if match is None or match.lastgroup is None:
            raise ValueError(f"cannot read {body[pos : pos + 20]!r}")
        out.append((match.lastgroup, match.group()))
        pos = match.end()
    return out


def _pipeline(toks: _Tokens, dialect: Dialect) -> str:
    """A pipeline up to `)` or the end, the calls of `dialect`'s functions rewritten."""
    result: str | None = None
    while True:
        words: list[str] = []  # the command's operands, rewritten
        while True:
            toks.skip_space()
            kind, text = toks.peek()
            if kind == "end" or (kind == "punct" and text in "|)"):
                break
            toks.take()
            if kind == "punct" and text == "(":
                inner = _pipeline(toks, dialect)
                if toks.take() != ("punct", ")"):
                    raise ValueError("unbalanced parentheses")
                text = f"({inner})"
                # `(pipeline).Field` stays one operand.
                while toks.peek()[0] == "fields":
                    text += toks.take()[1]
            words.append(text)
        if not words:
            raise ValueError("empty command in a pipeline")
        head = words[0]
        if head in dialect.names:
            args = words[1:] + ([f"({result})"] if result is not None else [])
            result = dialect.call(head, args)
        else:
            command = " ".join(words)
            result = command if result is None else f"{result} | {command}"
        if toks.peek() == ("punct", "|"):
            toks.take()
            continue
        return result


def _rewrite_action(body: str, dialect: Dialect) -> str:
    """One action's text (between the delimiters and trim markers), rewritten."""
    toks = _Tokens(_tokens(body))
    prefix = toks.skip_space()
    kind, text = toks.peek()
    while kind == "ident" and (text in KEYWORDS or text in NAMED):
        prefix += toks.take()[1] + toks.skip_space()
        if text in NAMED:
            prefix += toks.take()[1] + toks.skip_space()  # the template's name
        kind, text = toks.peek()
    # Declarations: `$x :=`, `$i, $v :=`, `$x =`.
    start = toks.pos
    decl = ""
    while toks.peek()[0] in ("var", "comma", "space"):
        decl += toks.take()[1]
    if toks.peek()[0] == "decl":
        prefix += decl + toks.take()[1] + toks.skip_space()
    else:
        toks.pos = start
    if toks.peek()[0] == "end":
        return body
    rewritten = _pipeline(toks, dialect)
    if toks.peek()[0] != "end":
        raise ValueError(f"unexpected {toks.peek()[1]!r}")
    # Keep the action's line count, so every later line keeps its number, and the space a
    # closing trim marker needs (`x -}}`: `x-}}` is a syntax error).
    new = prefix + rewritten
    tail = "\n" * max(0, body.count("\n") - new.count("\n"))
    if not tail and body[-1:].isspace():
        tail = " "
    return new + tail


_TRIM_OPEN = re.compile(r"\{\{-\s")


@dataclass(frozen=True)
class Dialect:
    """The functions of a template language that Helm's engine lacks or has with another
    meaning: `call(name, argument texts)` is the expression that replaces a call of one of
    `names` (a command's first word; the piped value comes last). helmfile's is `HELMFILE`;
    kube-renderer's gomplate templates have their own (shared.engine.helmfile.gomplate)."""

    names: frozenset[str]
    call: Callable[[str, list[str]], str]

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(r"(?<![.$\w])(" + "|".join(sorted(self.names)) + r")\b")


HELMFILE = Dialect(frozenset(REWRITTEN), _rewrite_call)


@dataclass(frozen=True)
class Action:
    """One `{{ … }}` of a template: `text[start:end]` whole, `text[body_start:body_end]`
    between the delimiters and their trim markers; `line` is where it starts."""

    start: int
    body_start: int
    body_end: int
    end: int
    line: int


def actions(text: str) -> Iterator[Action]:
    """The actions of a template, in order."""
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            return
        open_len = 3 if _TRIM_OPEN.match(text, start) else 2
        end = action_end(text, start + open_len)
        close_len = 3 if text[end - 1] == "-" and text[end - 2].isspace() else 2
        if close_len == 3:
            end -= 1
        line = text.count("\n", 0, start) + 1
        yield Action(start, start + open_len, end, end + close_len, line)
        pos = end + close_len


def rewrite(text: str, *, source: str = "", dialect: Dialect = HELMFILE) -> str:
    """The template with `dialect`'s functions (helmfile's) turned into what Helm's engine
    runs."""
    ident = dialect.pattern
    if not ident.search(text):
        return text
    out: list[str] = []
    pos = 0
    for action in actions(text):
        out.append(text[pos : action.body_start])
        body = text[action.body_start : action.body_end]
        if body.lstrip().startswith("/*") or not ident.search(body):
            out.append(body)
        else:
            try:
                out.append(_rewrite_action(body, dialect))
            except ValueError as err:
                raise FleetError(f"template error: {err}", path=source, line=action.line) from None
        pos = action.body_end
    out.append(text[pos:])
    return "".join(out)


def action_end(text: str, pos: int) -> int:
    """Index of the `}}` closing the action starting at `pos` (strings may hold `}}`);
    shared with `helm.reads`, which walks the same actions."""
    while pos < len(text):
        char = text[pos]
        if text.startswith("}}", pos):
            return pos
        if char == '"':
            pos += 1
            while pos < len(text) and text[pos] != '"':
                pos += 2 if text[pos] == "\\" else 1
        elif char == "`":
            pos = text.find("`", pos + 1)
            if pos < 0:
                break
        elif text.startswith("/*", pos):
            pos = text.find("*/", pos + 2)
            if pos < 0:
                break
        pos += 1
    raise FleetError("template error: unclosed action (missing `}}`)")


Decrypt = Callable[[Tree, str], dict[str, Any]]


@dataclass
class Host:
    """What templates may read of the world: one revision's files, the environment
    rollwright.yaml declares (`atlas.env`) and its SOPS files (through `decrypt`)."""

    tree: Tree
    env: Mapping[str, str] = field(default_factory=dict)
    decrypt: Decrypt | None = None
    secret_reads: int = 0  # how many answers came from SOPS files (callers redact them)
    # The directory relative paths start from (helmfile's: the state file's own), and the
    # top-level directories templates may not read (ATLAS layers deployments/ by hierarchy).
    base: str = ""
    reserved: tuple[str, ...] = ("deployments",)

    def answer(self, name: str, arg: Any, source: str) -> Any:
        if name in ("env", "requiredEnv"):
            return self._env(name, arg, source)
        if name == "fetchSecretValue":
            return self._secret(str(arg), source)
        if name == "expandSecretRefs":
            return self._expand(json.loads(arg), source)
        path = self._path(name, arg, source)
        tree = self.tree
        if name == "isFile":
            return tree.is_file(path)
        if name == "isDir":
            return tree.is_dir(path)
        if name in ("readDir", "listDir"):
            if not tree.is_dir(path):
                raise FleetError(f"{name} {arg!r}: no directory {path}", path=source)
            names = sorted(tree.listdir(path))
            keep = [n for n in names if name == "listDir" or not tree.is_dir(f"{path}/{n}")]
            # Go's filepath.Join cleans the joined path, as helmfile returns it.
            return [posixpath.normpath(posixpath.join(str(arg), n)) for n in keep]
        try:
            return tree.read_text(path)
        except (FileNotFoundError, IsADirectoryError):
            raise FleetError(f"readFile {arg!r}: no file {path}", path=source) from None
        except UnicodeDecodeError:
            raise FleetError(f"readFile {arg!r}: {path} is not UTF-8 text", path=source) from None

    def _env(self, name: str, arg: Any, source: str) -> str:
        key = str(arg)
        if key not in self.env:
            raise FleetError(
                f"{name} {key!r}: not declared in rollwright.yaml atlas.env (templates see the "
                "environment declared there, never the worker's)",
                path=source,
            )
        value = self.env[key]
        if name == "requiredEnv" and not value:
            raise FleetError(f"required env var `{key}` is not set", path=source)
        return value

    def _path(self, name: str, arg: Any, source: str) -> str:
        """A file function's path as a repo path: relative to the repository root (ATLAS
        builds them from `.Values.atlas.cwd`, which is `.`), never leaving it."""
        text = str(arg)
        if text.startswith("/"):
            raise FleetError(
                f"{name} {text!r}: absolute paths are not allowed; build paths from "
                "`.Values.atlas.cwd` (the repository root)",
                path=source,
            )
        path = posixpath.normpath(posixpath.join(self.base, text) if self.base else text)
        if path == ".." or path.startswith("../"):
            raise FleetError(f"{name} {text!r} points outside the repository", path=source)
        if any(path == top or path.startswith(top + "/") for top in self.reserved):
            raise FleetError(
                f"{name} {text!r}: templates may not read files under deployments/ (values "
                "there are layered by the hierarchy)",
                path=source,
            )
        return "" if path == "." else path

    def _secret(self, ref: str, source: str) -> Any:
        """`ref+sops://<file>[#/<key path>]`: a SOPS file of the repository (whole, as
        YAML text, or one key). Other backends would read secrets from outside the repo."""
        if not ref.startswith("ref+sops://"):
            raise FleetError(
                f"fetchSecretValue: only ref+sops:// references are supported (got "
                f"{ref.split('://', 1)[0]}://...): renders read secrets from the repository only",
                path=source,
            )
        if self.decrypt is None:
            raise FleetError("fetchSecretValue: secrets are not available here", path=source)
        rest = ref.removeprefix("ref+sops://")
        target, _, fragment = rest.partition("#")
        target = target.split("?", 1)[0]
        path = self._path("fetchSecretValue", target, source)
        data: Any = self.decrypt(self.tree, path)
        self.secret_reads += 1
        if not fragment.strip("/"):
            return yamldoc.dumps(data) if isinstance(data, dict) else data
        for key in fragment.strip("/").split("/"):
            if not isinstance(data, dict) or key not in data:
                raise FleetError(f"fetchSecretValue: no key {fragment!r} in {path}", path=source)
            data = data[key]
        return data

    def _expand(self, value: Any, source: str) -> Any:
        if isinstance(value, dict):
            return {k: self._expand(v, source) for k, v in value.items()}
        if isinstance(value, list):
            return [self._expand(v, source) for v in value]
        if isinstance(value, str) and value.startswith("ref+"):
            return self._secret(value, source)
        return value


def render(
    text: str, context: dict[str, Any], *, source: str, host: Host | None, strict: bool = True
) -> str:
    """Render `text` as helmfile would, with `context` as `.` and `.Values`; `strict` is
    helmfile's `missingkey=error` (its first pass over a state file renders without it)."""
    rewritten = rewrite(text, source=source)
    if rewritten == text:
        out = render_template(text, context, source=source, strict=strict)
    else:
        answers: dict[str, Any] = {}
        for _ in range(MAX_CALLOUTS):
            files = ((_ANSWERS, json.dumps(answers, sort_keys=True).encode()),) if answers else ()
            try:
                out = render_template(
                    rewritten, context, source=source, helpers=HELPERS, files=files, strict=strict
                )
                break
            except FleetError as err:
                question = _CALLOUT.search(err.problem.message)
                if question is None:
                    raise
                key = base64.b64decode(question.group(1)).decode()
                name, arg = json.loads(key)
                if host is None:
                    raise FleetError(f"{name} is not available here", path=source) from None
                try:
                    answers[key] = {"v": host.answer(name, arg, source)}
                except FleetError as problem:
                    raise FleetError(problem.problem.message, path=source, line=err.line) from None
        else:
            raise FleetError(f"more than {MAX_CALLOUTS} file, env or secret lookups", path=source)
    check_numbers(out, context, source)
    return out


_EXPONENT = re.compile(r"\b\d(?:\.\d+)?e\+\d\d+\b")


def check_numbers(out: str, context: dict[str, Any], source: str) -> None:
    """Helm's engine holds numbers as float64 and prints an integer of a million or more as
    `1e+06`, where helmfile prints `1000000`. Such output is refused, not changed."""
    if "e+" not in out:
        return
    printed = set(_EXPONENT.findall(out))
    if not printed:
        return
    for value in _integers(context):
        text = _go_float(value)
        if text in printed:
            raise FleetError(
                f"template error: the integer {value} would print as {text} (Helm's template "
                "engine holds numbers as float64, helmfile prints them whole); write "
                "`{{ int .x }}` or quote the value",
                path=source,
            )


def _integers(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value] if abs(value) >= 1_000_000 else []
    if isinstance(value, dict):
        return [n for v in value.values() for n in _integers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _integers(v)]
    return []


def _go_float(value: int) -> str:
    """Go's `%v` of float64(value) for |value| >= 1e6: the shortest digits in exponent form
    (`1e+06`, `1.2345678901e+10`)."""
    mantissa, _, exponent = f"{Decimal(repr(float(value))).normalize():E}".partition("E")
    exp = int(exponent)
    return f"{mantissa.lower()}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
