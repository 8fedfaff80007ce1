"""What a change does to every affected root: the engine of PR previews and `rollwright diff`.

    report = build_preview(Path("fleet"), "main", "feature")   # two git revisions
    report = build_preview(Path("fleet"), "main", None)        # main against the working tree
    report.failed, report.changed, report.counts                # exit status, summary
    report_markdown(report, limit=65_535, full_url=url)          # check run text / PR comment
    report_unified(report), report_json(report)                  # terminals, CI, tools

Both revisions are read from the git repository (plain or bare) without touching its
working tree, index or HEAD: each is exported through a temporary index into a temporary
directory (charts and kustomizations need real files), which is removed afterwards. The
two exports run at once: for a preview of a few roots they are most of the time. A `head` of
None is the working tree as it is on disk (uncommitted and untracked files included; what
`git status` ignores is left out of the changed paths but, as for `rollwright render`, read
where the fleet reads it): `rollwright diff REV`.

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
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from shared.contracts.governance import OwnersRequirement, PolicyFinding
from shared.engine import parallel
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.policies.sets import check_root, sets_for
from shared.engine.publish_secrets import unpublishable
from shared.engine.render import Render
from shared.engine.tree import GitError, WorkTree, changed_files, git
from shared.review.diff import RenderFiles, diff_renders, fingerprint
from shared.review.noise import NoiseFilter
from shared.review.owners import owners_for
from shared.review.policies import findings_of
from shared.review.report import WORKING_TREE, PreviewReport, RootPreview, RootStatus

# --------------------------------------------------------------------------- building


def build_preview(
    repo: Path,
    base: str,
    head: str | None,
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
    head_sha = _resolve(repo, head) if head is not None else WORKING_TREE
    notes = list(warnings)
    changed = None
    if roots is None:
        changed = (
            changed_files(repo, base_sha, head_sha)
            if head is not None
            else worktree_changes(repo, base_sha)
        )
    if changed is not None and not changed:
        return PreviewReport(base_sha, head_sha, [], warnings=notes)
    with (
        tempfile.TemporaryDirectory(prefix="rollwright-preview-") as tmp,
        ThreadPoolExecutor(max_workers=1) as pool,  # joined before the directory goes
    ):
        # Exporting is most of a small preview's time and mostly git's: both sides at once.
        base_export = pool.submit(_Side.export, repo, base_sha, Path(tmp) / "base")
        head_side = (
            _Side.export(repo, head_sha, Path(tmp) / "head")
            if head is not None
            else _Side.working_tree(repo)
        )
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

    @classmethod
    def working_tree(cls, repo: Path) -> _Side:
        """The checkout itself, read in place (it is already real files)."""
        top = Path(git(repo, "rev-parse", "--show-toplevel").strip())
        try:
            fleet = Fleet.open(WorkTree(top))
            roots = set(fleet.roots())
        except FleetError as err:
            return cls(WORKING_TREE, top, None, set(), _clean(str(err), top))
        return cls(WORKING_TREE, top, fleet, roots, None)

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


def worktree_changes(repo: Path, base: str) -> set[str]:
    """Paths the working tree has added, modified or deleted since commit `base`: tracked
    files (staged or not) and untracked ones that `.gitignore` does not exclude."""
    if git(repo, "rev-parse", "--is-bare-repository").strip() == "true":
        raise GitError(f"{repo} is a bare repository: it has no working tree to compare")
    tracked = git(repo, "diff", "--name-only", "--no-renames", "-z", base, "--")
    untracked = git(repo, "ls-files", "--others", "--exclude-standard", "-z")
    return {p for p in (tracked + untracked).split("\0") if p}


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
        if files is not None:  # a render publishing would refuse fails here already
            refusal = unpublishable(head.fleet.tree, head.fleet.config, root, files.hidden)
            if refusal is not None:
                files, error = None, head.clean(str(refusal))
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
    changes = fingerprint(old.digests if old else {}, new.digests)
    findings, policy_error = _policies(root, head, new)
    return RootPreview(
        root,
        status,
        shown,
        base_error=base_error,
        hidden=hidden,
        fingerprint=changes,
        owners=_owners(root, head, set(changes), old, new),
        policies=findings,
        policy_error=policy_error,
    )


def _policies(root: str, head: _Side, new: RenderFiles) -> tuple[list[PolicyFinding], str | None]:
    """What the root's policy sets find on the PR side's (redacted) render, or why they
    cannot run (a policy file that does not compile, at its file and line)."""
    if head.fleet is None or root not in head.roots:
        return [], None
    config = head.fleet.config
    if not sets_for(config, root):
        return [], None
    try:
        found = check_root(WorkTree(head.directory), config, root, new.files)
    except FleetError as err:
        return [], head.clean(str(err))
    return findings_of(found), None


def _owners(
    root: str, head: _Side, changed: set[str], old: RenderFiles | None, new: RenderFiles
) -> list[OwnersRequirement]:
    """The OWNERS files at the head whose applications the change touches. A root gone at
    the head has none; a broken OWNERS file is the validation's to report, not the preview's."""
    if head.fleet is None or not changed or root not in head.roots:
        return []

    def read(side: str, path: str) -> bytes | None:
        files = (old.files if old else {}) if side == "old" else new.files
        return files.get(path)

    fleet = head.fleet
    try:
        return owners_for(
            WorkTree(head.directory), fleet.config, fleet.layout_name, root, changed, read
        )
    except FleetError:
        return []
