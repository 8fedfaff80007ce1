"""Render a root from a checkout into the blob store, and diff two stored renders.

Both run on the worker that holds the checkout (the DeploymentWorkflow pins them to its queue).
Only redacted files leave this module: `Fleet.render` returns the redacted twin in `files`
(plaintext is available from the engine's `reveal()` to publishers that re-encrypt, never here).

A root that no longer exists at the revision renders as an empty set of files: deleting a
cluster directory therefore deploys an empty render, whose diff removes every resource and
goes through the same review as any other change.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import fleet_mistakes, withhold_unexpected
from activities.heartbeat import blocking
from activities.joblog import JobLog
from activities.store import StoredRender, load_render, publisher, save_render
from shared.contracts.activityrefs import (
    ACT_DIFF_RENDER,
    ACT_RENDER_ROOT,
)
from shared.contracts.deploy import (
    ERR_CHECKOUT_GONE,
    DiffRequest,
    DiffSummary,
    LatestDeployment,
    RenderRequest,
    RenderSummary,
)
from shared.engine.fleet import Fleet
from shared.engine.publish_secrets import secret_files, unpublishable
from shared.engine.render import Render
from shared.engine.secrets.redact import keyed_markers
from shared.engine.tree import WorkTree
from shared.review.compared import Base, Commit, ReviewContext, context_key
from shared.review.diff import diff_renders
from shared.review.diffdoc import diff_document, document_key
from shared.settings import Settings
from shared.stores.blob import BlobStore, latest_key, render_prefix
from shared.stores.gitmirror import GitMirrorError, commit_summary


def full_diff_key(deployment_id: str) -> str:
    """Where the uncut diff of a deployment lives (the job page shows it)."""
    return f"jobs/{deployment_id}/diff.md"


def render_checkout(checkout: Path, root: str) -> Render:
    """The root's render from a checkout; empty when the root is gone at this revision."""
    return render_with_warnings(checkout, root, warn=False)[0]


# The fleet's warnings per root of the revisions rendered last: they depend on the revision
# alone, and one push deploys many roots of one revision (the analysis reads every release
# of the fleet: about a second on a 1,000-root fleet, where a root's render takes a tenth of
# that).
_WARNINGS: OrderedDict[tuple[str, str], dict[str, list[str]]] = OrderedDict()
_WARNINGS_KEPT = 8
_warnings_lock = threading.Lock()
# The fleets of the checkouts rendered last: opening a fleet finds every root, and its first
# render checks the whole fleet's structure, about 0.2 s on a 1,000-root fleet that every
# deployment of a fleet-wide change paid again. The deployments of one revision on a worker
# share its worktree (`GitMirror.checkout`: the real path names the revision and the
# repository's mirror), so that path is the key. A fleet caches what it reads and is not made
# for threads: one user at a time holds its lock.
_FLEETS: OrderedDict[Path, tuple[Fleet, threading.Lock]] = OrderedDict()
_FLEETS_KEPT = 2
_fleets_lock = threading.Lock()


def shared_fleet(checkout: Path, *, share: bool = True) -> tuple[Fleet, threading.Lock]:
    """The fleet at `checkout` and the lock its users hold, shared with the other users of
    the same worker checkout (renders, review policies). `share=False` for a tree whose
    files may change under the same path (a working copy, a test's repository)."""
    if not share:
        return Fleet.open(WorkTree(checkout)), threading.Lock()
    real = checkout.resolve()
    with _fleets_lock:
        found = _FLEETS.get(real)
        if found is not None:
            _FLEETS.move_to_end(real)
            return found
    fleet = Fleet.open(WorkTree(checkout))
    with _fleets_lock:
        found = _FLEETS.setdefault(real, (fleet, threading.Lock()))
        while len(_FLEETS) > _FLEETS_KEPT:
            _FLEETS.popitem(last=False)
    return found


def render_with_warnings(
    checkout: Path,
    root: str,
    *,
    warn: bool = True,
    key: tuple[str, str] | None = None,
    share: bool = False,
    publishable: bool = False,
) -> tuple[Render, list[str]]:
    """The root's render and (with `warn`) the fleet's warnings about it: values keys the
    fleet sets that no template reads and releases of the root that render no object, with
    file and line, which the check run shows above the diff. `key` (repository, commit id)
    shares the unread keys between the deployments of a commit; `share` the opened fleet
    between the users of a worker checkout. `publishable`: a render the fleet's publishing
    target would refuse (secret values, and `publish.secrets: refuse`) is a fleet error now,
    before anyone is asked to approve it."""
    fleet, lock = shared_fleet(checkout, share=share)
    with lock:
        if root not in set(fleet.roots()):
            return Render.of(root, {}), []
        render = fleet.render(root)
        if publishable:
            refusal = unpublishable(fleet.tree, fleet.config, root, secret_files(render))
            if refusal is not None:
                raise refusal
        if not warn:
            return render, []
        empty = [str(p) for p in fleet.render_warnings(root)]
        if key is None:
            return render, [str(p) for p in fleet.unread_values(root)] + empty
        with _warnings_lock:
            table = _WARNINGS.get(key)
        if table is None:
            table = {r: [str(p) for p in fleet.unread_values(r)] for r in fleet.roots()}
            with _warnings_lock:
                _WARNINGS[key] = table
                while len(_WARNINGS) > _WARNINGS_KEPT:
                    _WARNINGS.popitem(last=False)
    return render, table.get(root, []) + empty


class RenderActivities:
    def __init__(self, settings: Settings, blobs: BlobStore) -> None:
        self.settings = settings
        self.blobs = blobs
        self.jobs = JobLog(blobs)

    @activity.defn(name=ACT_RENDER_ROOT.name)
    async def render_root(self, request: RenderRequest) -> RenderSummary:
        return await blocking(self._render, request)

    def _render(self, request: RenderRequest) -> RenderSummary:
        log = activity.logger
        repo = request.repo.full_name
        if not Path(request.checkout_path).is_dir():
            # This worker restarted since the checkout (its sweep removed it), or the task
            # reached another worker: the deployment checks out again on a live one.
            raise ApplicationError(
                f"the checkout {request.checkout_path} is not on this worker",
                type=ERR_CHECKOUT_GONE,
                non_retryable=True,
            )
        self.jobs.write(
            request.deployment_id, "render started", root=request.root, revision=request.revision
        )
        started = time.monotonic()
        commit = self._commit(request)
        # The fleet's warnings are shared by the deployments of one commit (None: git could not
        # name it, and they are worked out for this root alone).
        key = (repo, commit["sha"]) if commit.get("sha") else None
        try:
            with (
                withhold_unexpected(f"rendering root {request.root!r}"),
                fleet_mistakes(),
                keyed_markers(self.settings.marker_key(repo)),
            ):
                render, warnings = render_with_warnings(
                    Path(request.checkout_path), request.root, key=key, share=True, publishable=True
                )
        except ApplicationError as err:
            self.jobs.write(
                request.deployment_id,
                "render failed",
                error=err.message,
                seconds=round(time.monotonic() - started, 3),
            )
            raise
        if not render.files:
            log.info("root renders empty", extra={"repo": repo, "root": request.root})
        prefix = render_prefix(repo, request.root, request.revision)
        save_render(self.blobs, prefix, request.revision, render, warnings, commit)
        log.info(
            "render stored",
            extra={
                "repo": repo,
                "root": request.root,
                "revision": request.revision,
                "files": len(render.files),
                "digest": render.digest,
                "prefix": prefix,
            },
        )
        self.jobs.write(
            request.deployment_id,
            "rendered",
            root=request.root,
            files=len(render.files),
            warnings=len(warnings),
            # no digest: it hashes the plaintext, and people read this log (store.py)
            prefix=prefix,
            seconds=round(time.monotonic() - started, 3),
        )
        return RenderSummary(digest=render.digest, file_count=len(render.files), blob_prefix=prefix)

    def _commit(self, request: RenderRequest) -> dict[str, str]:
        """The checkout's commit: sha, subject, author and date (empty when git cannot say)."""
        try:
            return commit_summary(Path(request.checkout_path))
        except GitMirrorError as err:  # reviews still work without the subject and author
            activity.logger.warning(
                "commit summary unavailable",
                extra={"repo": request.repo.full_name, "error": str(err)},
            )
            return {}

    @activity.defn(name=ACT_DIFF_RENDER.name)
    async def diff_render(self, request: DiffRequest) -> DiffSummary:
        return await blocking(self._diff, request)

    def _diff(self, request: DiffRequest) -> DiffSummary:
        started = time.monotonic()
        new = load_render(self.blobs, request.new_prefix)
        old = load_render(self.blobs, request.old_prefix) if request.old_prefix else None
        diff = diff_renders(old.side if old else None, new.side)
        diff.warnings = new.warnings
        context = self._context(request, new, old)
        self.blobs.put(context_key(request.deployment_id), context.model_dump_json().encode())
        diff.preamble = context.markdown()
        url = self.settings.job_url(request.deployment_id)
        key = full_diff_key(request.deployment_id)
        self.blobs.put(key, diff.markdown().encode())
        document = diff_document(diff, old.files if old else None, new.files)
        self.blobs.put(document_key(request.deployment_id), document.to_json())
        activity.logger.info(
            "render diffed",
            extra={
                "repo": request.repo.full_name,
                "root": request.root,
                "old": request.old_prefix,
                "new": request.new_prefix,
                "added": diff.added,
                "removed": diff.removed,
                "changed": diff.changed,
            },
        )
        self.jobs.write(
            request.deployment_id,
            "diffed",
            base=request.old_prefix,
            compared=context.comparison(),
            added=diff.added,
            removed=diff.removed,
            changed=diff.changed,
            lines_added=document.additions,
            lines_removed=document.deletions,
            full_diff=key,
            seconds=round(time.monotonic() - started, 3),
        )
        return DiffSummary(
            added=diff.added,
            removed=diff.removed,
            changed=diff.changed,
            empty=diff.empty,
            text=diff.check_run_text(url),
            full_key=key,
        )

    def _context(
        self, request: DiffRequest, new: StoredRender, old: StoredRender | None
    ) -> ReviewContext:
        """What the review compares: the deployed commit, and the render published last on
        the root (latest.json names its deployment; nothing when there is none)."""
        web = request.repo.html_url.rstrip("/")
        info = new.meta.get("commit") or {}
        sha = str(info.get("sha") or new.meta.get("revision") or "")
        commit = Commit(
            sha=sha,
            subject=str(info.get("subject") or ""),
            author=str(info.get("author") or ""),
            url=f"{web}/commit/{sha}" if web and sha else "",
        )
        raw = self.blobs.get(latest_key(request.repo.full_name, request.root))
        latest = LatestDeployment.model_validate_json(raw) if raw is not None else None
        if old is None:
            return ReviewContext(
                root=request.root,
                commit=commit,
                last_attempt=latest.deployment_id if latest else None,
                last_attempt_state=latest.state if latest else None,
            )
        revision = str(old.meta.get("revision") or "")
        who, when = (None, None)
        if latest is not None and latest.published_prefix == old.prefix:
            who, when = publisher(latest)
        base = Base(
            revision=revision,
            deployment_id=who,
            published_at=when,
            commit_url=f"{web}/commit/{revision}" if web and revision else "",
        )
        return ReviewContext(root=request.root, commit=commit, base=base)
