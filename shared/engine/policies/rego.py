"""Rego policies as conftest reads them, evaluated in-process by regopy (Microsoft's
rego-cpp; no OPA server): every `deny…` / `violation…` rule of the set's packages is a deny,
every `warn…` rule a warning, each producing messages (strings, or objects with `msg`).
Each rendered object is one `input`, as `conftest test` without `--combine` gives it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import regopy

from shared.engine.errors import FleetError
from shared.engine.policies.objects import Finding, Level, Manifest

# rego-cpp's error tree: `(error 14:policies/x.rego|47|2 (errormsg 24:Invalid boolean …)`.
# The numbers before `:` are lengths, the ones after `|` a byte offset and a length.
_LENGTH = re.compile(r"(\d+):")


class RegoPolicies:
    """The `.rego` files of one policy set, parsed once, asked about one object at a time."""

    def __init__(self, policy_set: str, modules: Iterable[tuple[str, str]], packages: list[str]):
        self.policy_set = policy_set
        self.packages = packages
        self.sources = dict(modules)
        self.interpreter = regopy.Interpreter()
        # rego-cpp prints its errors itself; they reach the fleet as FleetErrors instead.
        self.interpreter.log_level = regopy.LogLevel.NONE
        for path, text in self.sources.items():
            try:
                self.interpreter.add_module(path, text)
            except regopy.RegoError as err:
                raise self._error(str(err), f"policy set {policy_set!r}") from None
        # Some mistakes (an unsafe variable, an unknown function) show only when compiled:
        # a query over nothing compiles every module.
        for package in packages:
            self._query(package, None)

    def evaluate(self, manifest: Manifest) -> list[Finding]:
        found = []
        for package in self.packages:
            rules = self._query(package, manifest)
            for rule in sorted(rules):
                level = _level(rule)
                if level is None:
                    continue
                policy = f"data.{package}.{rule}"
                found += [
                    Finding.on(manifest, self.policy_set, level, message, policy)
                    for message in _messages(rules[rule], rule)
                ]
        return found

    def _query(self, package: str, manifest: Manifest | None) -> dict[str, Any]:
        self.interpreter.set_input(manifest.body if manifest is not None else {})
        try:
            output = self.interpreter.query(f"data.{package}")
        except regopy.RegoError as err:
            raise self._error(str(err), self._context(manifest)) from None
        except json.JSONDecodeError as err:  # regopy reads some errors as a result
            raise self._error(err.doc, self._context(manifest)) from None
        text = str(output)
        if not output.ok():
            raise self._output_error(output, self._context(manifest))
        if text == "undefined" or len(output) == 0:
            return {}
        expressions = output[0].expressions
        value = expressions[0] if expressions else {}
        return value if isinstance(value, dict) else {}

    def _context(self, manifest: Manifest | None) -> str:
        if manifest is None:
            return f"policy set {self.policy_set!r}"
        return (
            f"policy set {self.policy_set!r} on {manifest.kind} {manifest.name!r} ({manifest.file})"
        )

    def _error(self, text: str, context: str) -> FleetError:
        """A FleetError at the first error's file and line, in rego-cpp's words."""
        message = _error_message(text)
        for match in _LENGTH.finditer(text):
            start = match.end()
            path = text[start : start + int(match.group(1))]
            offset, bar, _ = text[start + len(path) + 1 :].partition("|")
            source = self.sources.get(path)
            if source is None or not bar or not offset.isdigit():
                continue
            line = source.encode()[: int(offset)].count(b"\n") + 1
            return FleetError(f"{context}: Rego: {message}", path=path, line=line)
        # Without a place (`Function not found: f`): the first line naming what it quotes.
        quoted = message.rpartition(": ")[2]
        for path, source in sorted(self.sources.items()):
            for number, line_text in enumerate(source.splitlines(), 1):
                if quoted and re.search(rf"\b{re.escape(quoted)}\b", line_text):
                    return FleetError(f"{context}: Rego: {message}", path=path, line=number)
        return FleetError(f"{context}: Rego: {message}")

    def _output_error(self, output: regopy.Output, context: str) -> FleetError:
        """An unsuccessful query's error: its text is only in the output's node tree."""
        node = output.node()
        text = " ".join(node.at(k).json() for k in range(len(node))) if node else str(output)
        return self._error(text, context)


def _error_message(text: str) -> str:
    marker = "(errormsg "
    at = text.find(marker)
    if at < 0:
        return " ".join(text.split())[:300] or "invalid policy"
    length, _, rest = text[at + len(marker) :].partition(":")
    return rest[: int(length)] if length.isdigit() else rest.split(")", 1)[0]


def _level(rule: str) -> Level | None:
    if rule.startswith(("deny", "violation")):
        return "deny"
    if rule.startswith("warn"):
        return "warn"
    return None


def _messages(value: Any, rule: str) -> list[str]:
    """conftest's result shapes: a set of strings or of objects with `msg`; rego-cpp reads
    v0's `deny[msg] { … }` as an object whose keys are the messages."""
    if value is True:
        return [rule]
    if value is False or value is None:
        return []
    if isinstance(value, dict):
        if "msg" in value:
            return [_text(value["msg"])]
        return [str(k) for k, v in value.items() if v is not False]
    if isinstance(value, list):
        return [_text(item.get("msg", item) if isinstance(item, dict) else item) for item in value]
    return [_text(value)]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
