"""A PR preview's report: per root, its status and shown diff (`PreviewReport`), and the
formats other than Markdown (`report_unified`, `report_json`; Markdown is
`shared.review.markdown`). `shared.review.preview` builds reports."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from shared.contracts.governance import OwnersRequirement, PolicyFinding
from shared.review.diff import RenderDiff
from shared.review.noise import HiddenChange

RootStatus = Literal["added", "removed", "changed", "unchanged", "error"]
REPORT_FORMAT = "rollwright.preview/v1"
# The head of a preview of the working tree (`rollwright diff REV`): not a commit.
WORKING_TREE = "working tree"


def short_revision(revision: str) -> str:
    """A commit id cut to 12 characters for people; the working tree by name."""
    return revision if revision == WORKING_TREE else revision[:12]


@dataclass(frozen=True)
class RootPreview:
    """One root's part of a preview.

    status: `added` / `removed` (the root exists on one side only), `changed`, `unchanged`,
    or `error` (the head side failed to render; `diff` is None).
    diff: the shown (redacted) diff, noise-only resources taken out; None on `error`.
    base_error / head_error: the render error of that side (secrets cut out), or None.
    hidden: changed resources hidden because every difference is noise (`shared.review.noise`).
    """

    root: str
    status: RootStatus
    diff: RenderDiff | None
    base_error: str | None = None
    head_error: str | None = None
    hidden: list[HiddenChange] = field(default_factory=list)
    # Every changed file with its digests before and after, noise included (shared.review.diff
    # `fingerprint`): what a deployment's diff is compared with for carried-over approvals.
    fingerprint: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    # The OWNERS files of the applications the change touches (docs/governance.md).
    owners: list[OwnersRequirement] = field(default_factory=list)
    # What the root's policy sets find on the PR side's render, and a policy file that does
    # not compile (a fleet mistake: the preview fails, as the deployment would).
    policies: list[PolicyFinding] = field(default_factory=list)
    policy_error: str | None = None


@dataclass(frozen=True)
class PreviewCounts:
    roots: int  # roots rendered (affected, or asked for)
    roots_added: int
    roots_removed: int
    roots_changed: int  # with shown changes, including added and removed roots
    roots_failed: int  # head side failed to render
    added: int  # resources
    removed: int
    changed: int
    hidden: int  # changed resources hidden as noise


@dataclass(frozen=True)
class PreviewReport:
    """A preview of `head` against `base` (both full commit ids).

    all_roots: every root of either side was affected (a global input changed).
    warnings: the caller's (e.g. "merge ref missing") then the engine's own.
    error: the head side's fleet could not be read at all (nothing rendered); a failure.
    """

    base: str
    head: str
    roots: list[RootPreview]
    all_roots: bool = False
    warnings: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def failed(self) -> bool:
        """The head side failed to render somewhere: the check run fails, the CLI exits 2."""
        return self.error is not None or any(
            r.head_error is not None or r.policy_error is not None for r in self.roots
        )

    @property
    def changed(self) -> bool:
        """Some root shows a change (noise-only changes do not count)."""
        return any(r.diff is not None and not r.diff.empty for r in self.roots)

    @property
    def counts(self) -> PreviewCounts:
        diffs = [r.diff for r in self.roots if r.diff is not None]
        return PreviewCounts(
            roots=len(self.roots),
            roots_added=sum(1 for r in self.roots if r.status == "added"),
            roots_removed=sum(1 for r in self.roots if r.status == "removed"),
            roots_changed=sum(1 for d in diffs if not d.empty),
            roots_failed=sum(1 for r in self.roots if r.head_error is not None),
            added=sum(d.added for d in diffs),
            removed=sum(d.removed for d in diffs),
            changed=sum(d.changed for d in diffs),
            hidden=sum(len(r.hidden) for r in self.roots),
        )

    @property
    def base_errors(self) -> list[RootPreview]:
        return [r for r in self.roots if r.base_error is not None]

    @property
    def head_errors(self) -> list[RootPreview]:
        return [r for r in self.roots if r.head_error is not None]


def repro_command(base: str, head: str, root: str | None = None) -> str:
    """The local command that prints the same report: `rollwright diff BASE HEAD [--root R]`."""
    words = ["rollwright", "diff", base] + ([] if head == WORKING_TREE else [head])
    if root is not None:
        words += ["--root", root]
    return shlex.join(words)


def report_unified(report: PreviewReport) -> str:
    """Plain unified diff with `#` comment lines (warnings, errors, hidden noise); paths are
    `a/<root>/<file>` / `b/<root>/<file>`, as in a rendered tree."""
    target = short_revision(report.head)
    lines = [f"# rollwright diff {report.base[:12]}..{target}\n"]
    lines += [f"# warning: {line}\n" for w in report.warnings for line in _lines_of(w)]
    if report.error:
        lines += ["# error: the head revision's fleet cannot be read:\n"]
        lines += [f"#   {line}\n" for line in _lines_of(report.error)]
    c = report.counts
    lines.append(
        f"# {c.roots} root(s): {c.roots_changed} changed, {c.roots_failed} failed; "
        f"resources: {c.added} added, {c.removed} removed, {c.changed} changed, "
        f"{c.hidden} hidden as noise\n"
    )
    for item in report.roots:
        lines.append(f"# root {item.root}: {root_status(item)}\n")
        if item.base_error:
            lines.append("#   base side failed to render (warning):\n")
            lines += [f"#     {line}\n" for line in _lines_of(item.base_error)]
        if item.head_error:
            lines.append("#   PR side failed to render:\n")
            lines += [f"#     {line}\n" for line in _lines_of(item.head_error)]
        for hidden in item.hidden:
            lines.append(f"#   hidden as noise: {hidden.path} ({', '.join(hidden.pointers)})\n")
        for f in item.diff.files if item.diff else []:
            if f.hidden:
                where = ", ".join(p or "(the file)" for p in f.hidden)
                lines.append(f"#   redacted values changed in {f.path}: {where}\n")
            lines.append(_prefix_paths(f.unified, item.root))
    return "".join(lines)


def _lines_of(text: str) -> list[str]:
    return text.splitlines() or [""]


def _prefix_paths(unified: str, root: str) -> str:
    out = []
    for i, line in enumerate(unified.splitlines(keepends=True)):
        if i < 2 and line.startswith(("--- a/", "+++ b/")):
            line = f"{line[:6]}{root}/{line[6:]}"
        out.append(line)
    return "".join(out)


def root_status(item: RootPreview) -> str:
    """One root's outcome in a line: `changed (1 added, 0 removed, 2 changed), 1 hidden as
    noise` (the unified report's root headers and the Markdown's per-root summaries)."""
    if item.head_error is not None:
        return "failed to render"
    text: str = item.status
    if item.diff is not None and not item.diff.empty:
        text += f" ({item.diff.counts()})"
    if item.hidden:
        text += f", {len(item.hidden)} hidden as noise"
    return text


def report_json(report: PreviewReport) -> dict[str, Any]:
    """A stable JSON document (`format` "rollwright.preview/v1"; keys only ever added)."""
    c = report.counts
    return {
        "format": REPORT_FORMAT,
        "base": report.base,
        "head": report.head,  # "working tree" when it is the working tree (no commit)
        "all_roots": report.all_roots,
        "failed": report.failed,
        "changed": report.changed,
        "warnings": list(report.warnings),
        "error": report.error,
        "counts": {
            "roots": c.roots,
            "roots_added": c.roots_added,
            "roots_removed": c.roots_removed,
            "roots_changed": c.roots_changed,
            "roots_failed": c.roots_failed,
            "added": c.added,
            "removed": c.removed,
            "changed": c.changed,
            "hidden": c.hidden,
        },
        "roots": [_root_json(item) for item in report.roots],
        "working_tree": report.head == WORKING_TREE,  # added last: keys are only ever added
    }


def _root_json(item: RootPreview) -> dict[str, Any]:
    diff = item.diff
    return {
        "root": item.root,
        "status": item.status,
        "base_error": item.base_error,
        "head_error": item.head_error,
        "added": diff.added if diff else 0,
        "removed": diff.removed if diff else 0,
        "changed": diff.changed if diff else 0,
        "resources": [
            {
                "path": f.path,
                "change": f.change,
                "diff": f.unified,
                "redacted_changes": list(f.hidden),
            }
            for f in (diff.files if diff else [])
        ],
        "hidden": [{"path": h.path, "pointers": list(h.pointers)} for h in item.hidden],
        # Added last: keys are only ever added.
        "policies": [f.model_dump() for f in item.policies],
        "policy_error": item.policy_error,
    }
