"""What a change does to every affected root: the engine of PR previews and `rollwright diff`.

    report = build_preview(Path("fleet"), "main", "feature")   # two git revisions
    report.failed, report.changed, report.counts                # exit status, summary
    report_markdown(report, limit=65_535, full_url=url)          # check run text / PR comment
    report_unified(report), report_json(report)                  # terminals, CI, tools

Both revisions are read from the git repository (plain or bare) without touching its
working tree, index or HEAD: each is exported through a temporary index into a temporary
directory (charts and kustomizations need real files), which is removed afterwards. The
two exports run at once: for a preview of a few roots they are most of the time.

The roots rendered are those the change can affect (`Fleet.affected` on both sides, so a
root that appears or disappears is included; a change to a global input affects every
root), or exactly `roots` when given. Each root is rendered on both sides; the diff is made
from the **redacted** renders (`Render.files`) with the plaintext digests alongside, so a
rotated secret shows as a changed `REDACTED:sha256:` hash or as "redacted values changed"
and never as its value. Noise (`shared.review.noise`, rules from the head side's `rollwright.yaml`)
is hidden and listed. A render error on the base side is a warning (`base_error`; the diff
then shows the whole head render as added), on the head side a failure (`head_error`); an
error in one root never stops the others.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from shared.engine import parallel
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.render import Render
from shared.engine.tree import GitError, WorkTree, changed_files, git
from shared.github.app import OUTPUT_LIMIT
from shared.review.diff import RenderDiff, RenderFiles, diff_renders
from shared.review.noise import HiddenChange, NoiseFilter

RootStatus = Literal["added", "removed", "changed", "unchanged", "error"]
REPORT_FORMAT = "rollwright.preview/v1"


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
        return self.error is not None or any(r.head_error is not None for r in self.roots)

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


# --------------------------------------------------------------------------- building


def build_preview(
    repo: Path,
    base: str,
    head: str,
    *,
    roots: list[str] | None = None,
    warnings: Sequence[str] = (),
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> PreviewReport:
    """Render the roots `head` can change (or exactly `roots`) at both revisions and diff them.

    Raises `GitError` when a revision cannot be resolved or read (not a fleet mistake) and
    `FleetError` when `roots` names a root neither side has; every fleet mistake inside a
    side is reported in the result instead. `progress` is called with a short label after
    each render (e.g. to heartbeat); `jobs` > 1 renders on several processes.
    """
    base_sha = _resolve(repo, base)
    head_sha = _resolve(repo, head)
    notes = list(warnings)
    changed = None if roots is not None else changed_files(repo, base_sha, head_sha)
    if changed is not None and not changed:
        return PreviewReport(base_sha, head_sha, [], warnings=notes)
    with (
        tempfile.TemporaryDirectory(prefix="rollwright-preview-") as tmp,
        ThreadPoolExecutor(max_workers=1) as pool,  # joined before the directory goes
    ):
        # Exporting is most of a small preview's time and mostly git's: both sides at once.
        base_export = pool.submit(_Side.export, repo, base_sha, Path(tmp) / "base")
        head_side = _Side.export(repo, head_sha, Path(tmp) / "head")
        if head_side.fleet is None:
            return PreviewReport(base_sha, head_sha, [], warnings=notes, error=head_side.error)
        base_side = base_export.result()
        if base_side.error is not None:
            notes.append(f"the base revision {base_sha[:12]} cannot be read: {base_side.error}")
        if roots is not None:
            for root in roots:
                if root not in head_side.roots and root not in base_side.roots:
                    raise FleetError(f"unknown root {root!r}: neither revision has it")
            selected = sorted(set(roots))
            every = False
        else:
            assert changed is not None
            try:
                affected = head_side.affected(changed)
            except FleetError as err:
                error = head_side.clean(str(err))
                return PreviewReport(base_sha, head_sha, [], warnings=notes, error=error)
            try:
                affected |= base_side.affected(changed)
            except FleetError:
                affected |= head_side.roots  # over-rendering is safe, missing a root is not
            selected = sorted(affected)
            union = head_side.roots | base_side.roots
            every = len(union) > 1 and set(selected) >= union
        previews = _compare(selected, base_side, head_side, jobs, progress)
    return PreviewReport(base_sha, head_sha, previews, all_roots=every, warnings=notes)


def _resolve(repo: Path, revision: str) -> str:
    if revision.startswith("-"):
        raise GitError(f"{revision!r} is not a revision")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").strip()
    except GitError:
        git(repo, "rev-parse", "--git-dir")  # "not a git repository" says it better
        raise GitError(f"revision {revision!r} is not a commit of {repo}") from None


@dataclass
class _Side:
    """One revision exported to a directory, its fleet and the roots it has."""

    sha: str
    directory: Path
    fleet: Fleet | None
    roots: set[str]
    error: str | None  # the fleet could not be opened at this revision

    @classmethod
    def export(cls, repo: Path, sha: str, directory: Path) -> _Side:
        export_revision(repo, sha, directory)
        try:
            fleet = Fleet.open(WorkTree(directory))
            roots = set(fleet.roots())
        except FleetError as err:
            return cls(sha, directory, None, set(), _clean(str(err), directory))
        return cls(sha, directory, fleet, roots, None)

    def affected(self, changed: set[str]) -> set[str]:
        if self.fleet is None:
            raise FleetError(self.error or "the fleet cannot be read")
        return self.fleet.affected(changed)

    def clean(self, message: str) -> str:
        return _clean(message, self.directory)

    def renders(
        self, roots: list[str], jobs: int
    ) -> Iterator[tuple[str, RenderFiles | None, str | None]]:
        """(root, redacted files with plaintext digests, error) per root present here, in
        order; a fleet error in one root does not stop the ones after it."""
        if self.fleet is None:
            return
        pending = [r for r in roots if r in self.roots]
        while pending:
            done = 0
            try:
                for render in parallel.render_all(self.fleet, pending, jobs):
                    done += 1
                    yield render.root, _side_files(render), None
                return
            except FleetError as err:
                # parallel.render_all raises root k's error after yielding roots 0..k-1.
                yield pending[done], None, self.clean(str(err))
                pending = pending[done + 1 :]


def _side_files(render: Render) -> RenderFiles:
    return RenderFiles(render.files, render.file_digests, render.leaf_digests())


def _clean(message: str, directory: Path) -> str:
    """Error messages name repo-relative paths, not the temporary export directory."""
    return message.replace(f"{directory}{os.sep}", "").replace(str(directory), ".")


def export_revision(repo: Path, sha: str, directory: Path) -> None:
    """Write the tree of commit `sha` into `directory` through a temporary index: the
    repository's own index, working tree and HEAD are untouched (bare repos work too)."""
    git_dir = git(repo, "rev-parse", "--absolute-git-dir").strip()
    directory.mkdir(parents=True)
    index = directory.parent / f"{directory.name}.index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    base = ["git", f"--git-dir={git_dir}", f"--work-tree={directory}"]
    for args in (["read-tree", sha], ["checkout-index", "--all", "--force"]):
        proc = subprocess.run([*base, *args], env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise GitError(
                f"exporting {sha[:12]} from {repo}: git {args[0]}: {proc.stderr.strip()}"
            )
    index.unlink(missing_ok=True)


def _compare(
    roots: list[str],
    base: _Side,
    head: _Side,
    jobs: int,
    progress: Callable[[str], None] | None,
) -> list[RootPreview]:
    assert head.fleet is not None
    noise = NoiseFilter.from_settings(head.fleet.config.preview)
    old: dict[str, RenderFiles] = {}
    base_errors: dict[str, str] = {}
    for root, files, error in base.renders(roots, jobs):
        if files is not None:
            old[root] = files
        else:
            base_errors[root] = error or "render failed"
        if progress:
            progress(f"base {root}")
    if base.fleet is None:
        base_errors = {root: f"the base revision cannot be read: {base.error}" for root in roots}
    out: dict[str, RootPreview] = {}
    for root, files, error in head.renders(roots, jobs):
        if progress:
            progress(f"head {root}")
        if files is None:
            out[root] = RootPreview(
                root, "error", None, base_error=base_errors.get(root), head_error=error
            )
            continue
        out[root] = _root_preview(
            root, base, head, old.get(root), base_errors.get(root), files, noise
        )
    for root in roots:
        if root not in out:  # gone at head: every resource is removed
            empty = RenderFiles({})
            out[root] = _root_preview(
                root, base, head, old.get(root), base_errors.get(root), empty, noise
            )
    return [out[root] for root in roots]


def _root_preview(
    root: str,
    base: _Side,
    head: _Side,
    old: RenderFiles | None,
    base_error: str | None,
    new: RenderFiles,
    noise: NoiseFilter,
) -> RootPreview:
    diff = diff_renders(old, new)
    shown, hidden = noise.split(diff, dict(old.files) if old else {}, dict(new.files))
    status: RootStatus
    if base.fleet is not None and root not in base.roots:
        status = "added"
    elif root not in head.roots:
        status = "removed"
    else:
        status = "unchanged" if shown.empty else "changed"
    return RootPreview(root, status, shown, base_error=base_error, hidden=hidden)


# --------------------------------------------------------------------------- formats


def repro_command(base: str, head: str, root: str | None = None) -> str:
    """The local command that prints the same report: `rollwright diff BASE HEAD [--root R]`."""
    words = ["rollwright", "diff", base, head]
    if root is not None:
        words += ["--root", root]
    return shlex.join(words)


def report_markdown(
    report: PreviewReport,
    *,
    limit: int | None = OUTPUT_LIMIT,
    full_url: str | None = None,
    repro: str | None = None,
    title: str = "rollwright preview",
) -> str:
    """The report as GitHub Markdown within `limit` UTF-8 bytes (None: uncut).

    Summary (warnings, PR-side failures with their error and `repro` — default: a
    `rollwright diff` per failed root —, a table of roots), then a `<details>` per root
    and per resource with its ```diff block, and the hidden noise listed per root. When it
    does not fit, whole resources are kept in order, then the start of one more, then a
    "Diff exceeds the limit" marker linking `full_url`; fences and `<details>` are always
    closed. `title` "" leaves the heading out (a check run has its own title).
    """
    from shared.review.markdown import render_markdown

    return render_markdown(report, limit=limit, full_url=full_url, repro=repro, title=title)


def report_unified(report: PreviewReport) -> str:
    """Plain unified diff with `#` comment lines (warnings, errors, hidden noise); paths are
    `a/<root>/<file>` / `b/<root>/<file>`, as in a rendered tree."""
    lines = [f"# rollwright diff {report.base[:12]}..{report.head[:12]}\n"]
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
        "head": report.head,
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
    }
