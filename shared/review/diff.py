"""The reviewable diff between two renders of a root (both redacted: no plaintext goes in).

Renders are one file per resource, so a resource is a file: the diff is one section per added,
removed or changed file, a unified diff in a fenced `diff` block, sorted by path so that the
resources of one release stay together.

Redaction can hide a change: a rotated secret inside a ConfigMap shows as the same
`REDACTED…` text on both sides. When both renders carry the digests of their plaintext
(`RenderFiles.digests`, per file, and `RenderFiles.hidden`, per redacted leaf), such a file
counts as changed and its section names the JSON pointers of the values that changed, never
the values. `RenderDiff.markdown()` is the full diff (stored in the
blob store, shown on the job page); `RenderDiff.check_run_text()` fits GitHub's 65,535-byte
check-run text, cut between whole resources with a visible marker and a link to the full diff.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from shared.github.limits import OUTPUT_LIMIT, Section, fit_sections

Change = Literal["added", "removed", "changed"]
CONTEXT_LINES = 3
_SYMBOL: dict[Change, str] = {"added": "+", "removed": "-", "changed": "~"}
_BACKTICKS = re.compile(r"^ *(`{3,})", re.MULTILINE)


@dataclass(frozen=True)
class RenderFiles:
    """One side of a diff: redacted files, plus what the plaintext looked like (optional)."""

    files: Mapping[str, bytes]
    digests: Mapping[str, str] = field(default_factory=dict)  # path → plaintext file digest
    # path → JSON pointer → digest of the plaintext of each leaf whose shown value is redacted
    hidden: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class FileDiff:
    path: str
    change: Change
    unified: str  # the unified diff text, lines ending in "\n" ("" when only hidden values)
    hidden: tuple[str, ...] = ()  # pointers of redacted values that changed


@dataclass
class RenderDiff:
    files: list[FileDiff] = field(default_factory=list)
    # The fleet's warnings about the new render (`path:line: warning: …`), shown first.
    warnings: list[str] = field(default_factory=list)
    # Markdown above everything: what the diff compares (shared.review.compared).
    preamble: str = ""

    @property
    def added(self) -> int:
        return sum(1 for f in self.files if f.change == "added")

    @property
    def removed(self) -> int:
        return sum(1 for f in self.files if f.change == "removed")

    @property
    def changed(self) -> int:
        return sum(1 for f in self.files if f.change == "changed")

    @property
    def empty(self) -> bool:
        return not self.files

    def counts(self) -> str:
        return f"{self.added} added, {self.removed} removed, {self.changed} changed"

    def header(self, full_url: str | None = None) -> str:
        return self.preamble + self._counts_line(full_url) + self.warnings_markdown()

    def _counts_line(self, full_url: str | None) -> str:
        if self.empty:
            line = "**No changes**: the render is identical to the latest published render."
        else:
            line = f"**{len(self.files)} resource(s)**: {self.counts()}."
        if full_url and not self.empty:
            line += f" [Full diff]({full_url})"
        return line + "\n\n"

    def warnings_markdown(self) -> str:
        if not self.warnings:
            return ""
        lines = [f"**{len(self.warnings)} warning(s)** in the fleet for this root:", ""]
        lines += [f"- ⚠️ `{w}`" for w in self.warnings]
        return "\n".join(lines) + "\n\n"

    def sections(self) -> list[str]:
        return [_section(f) for f in self.files]

    def markdown(self, full_url: str | None = None) -> str:
        """Everything, uncut."""
        return self.header(full_url) + "".join(self.sections())

    def check_run_text(self, full_url: str, limit: int = OUTPUT_LIMIT) -> str:
        """The diff within `limit` UTF-8 bytes, cut after the last resource that fits whole.

        When even the first resource does not fit, as much of it as fits is shown (cut on a
        line, its code block closed), so a reviewer of one huge resource still sees its start.
        Either way the marker says how much is missing and links to the full diff.
        """
        sections = self.sections()
        parts = [Section(self.header(full_url), counted=False, cuttable=False)]
        parts += [Section(text, cuttable=i == 0) for i, text in enumerate(sections)]
        return fit_sections(
            parts,
            limit,
            lambda kept, partial: _marker(kept, len(sections), full_url, first_cut=partial),
        )


def _marker(kept: int, total: int, full_url: str, *, first_cut: bool = False) -> str:
    shown = "the start of 1" if first_cut else str(kept)
    return (
        f"\n**Diff exceeds the limit:** showing {shown} of {total} resources. "
        f"[Full diff]({full_url})\n"
    )


Fingerprint = dict[str, tuple[str | None, str | None]]


def fingerprint(old: Mapping[str, str], new: Mapping[str, str]) -> Fingerprint:
    """What a diff is, exactly: each changed file with its plaintext digest before and after
    (None: absent on that side). Two diffs with the same fingerprint change the same files
    from the same contents to the same contents (approvals carry over on that)."""
    return {
        path: (old.get(path), new.get(path))
        for path in sorted(old.keys() | new.keys())
        if old.get(path) != new.get(path)
    }


def diff_renders(
    old: RenderFiles | Mapping[str, bytes] | None, new: RenderFiles | Mapping[str, bytes]
) -> RenderDiff:
    """Per-file diff from `old` (None: nothing deployed yet, everything is added) to `new`."""
    before = _side(old)
    after = _side(new)
    out = RenderDiff()
    for path in sorted(set(before.files) | set(after.files)):
        a, b = before.files.get(path), after.files.get(path)
        if a is None or b is None:
            change: Change = "added" if a is None else "removed"
            out.files.append(FileDiff(path, change, _unified(path, a, b)))
            continue
        old_digest, new_digest = before.digests.get(path), after.digests.get(path)
        if old_digest is not None and old_digest == new_digest:
            # The same plaintext: shown text can only differ by how it was redacted (markers
            # keyed with a rotated key, or from before keyed markers), which is not a change.
            continue
        hidden = _hidden_changes(before, after, path)
        if a == b and not hidden:
            continue
        out.files.append(FileDiff(path, "changed", _unified(path, a, b) if a != b else "", hidden))
    return out


def _side(side: RenderFiles | Mapping[str, bytes] | None) -> RenderFiles:
    if side is None:
        return RenderFiles({})
    if isinstance(side, RenderFiles):
        return side
    return RenderFiles(side)


def _hidden_changes(before: RenderFiles, after: RenderFiles, path: str) -> tuple[str, ...]:
    """Pointers of redacted values that differ between the sides, as far as digests tell."""
    old_digest, new_digest = before.digests.get(path), after.digests.get(path)
    if old_digest is None or new_digest is None or old_digest == new_digest:
        return ()
    old_leaves, new_leaves = before.hidden.get(path, {}), after.hidden.get(path, {})
    changed = tuple(
        pointer
        for pointer in sorted(set(old_leaves) | set(new_leaves))
        if old_leaves.get(pointer) != new_leaves.get(pointer)
    )
    if changed or before.files.get(path) != after.files.get(path):
        return changed
    # The plaintext differs but no leaf digest says where: still a change to review.
    return ("",)


def _lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def _unified(path: str, old: bytes | None, new: bytes | None) -> str:
    diff = difflib.unified_diff(
        _lines(old),
        _lines(new),
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}",
        n=CONTEXT_LINES,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in diff)


def _section(item: FileDiff) -> str:
    out = f"#### {_SYMBOL[item.change]} `{item.path}` ({item.change})\n\n"
    if item.hidden:
        where = ", ".join(f"`{p}`" if p else "the file" for p in item.hidden)
        out += f"Redacted values changed (not shown): {where}\n\n"
    if item.unified:
        # A fence longer than any backtick run inside: a manifest holding Markdown stays in.
        longest = max((len(m.group(1)) for m in _BACKTICKS.finditer(item.unified)), default=0)
        fence = "`" * max(3, longest + 1)
        out += f"{fence}diff\n{item.unified}{fence}\n\n"
    return out
