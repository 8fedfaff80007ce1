"""Git activities on the worker's cached mirror: affected roots, ancestry, checkouts."""

from __future__ import annotations

import re
import time
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import fleet_mistakes
from activities.heartbeat import blocking
from activities.joblog import JobLog
from shared.contracts.activityrefs import (
    ACT_AFFECTED_ROOTS,
    ACT_CHECKOUT,
    ACT_CLEANUP_CHECKOUT,
    ACT_REVISION_RELATION,
)
from shared.contracts.deploy import (
    AffectedRequest,
    AffectedResult,
    CheckoutRequest,
    CheckoutResult,
    FleetRoots,
    Relation,
    RelationRequest,
)
from shared.engine.affected import affected_between
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import GitTree
from shared.stores.blob import BlobStore, fleet_roots_key
from shared.stores.gitmirror import GitMirror, RevisionNotFound, is_zero


class GitActivities:
    def __init__(
        self, mirror: GitMirror, jobs: JobLog | None = None, blobs: BlobStore | None = None
    ) -> None:
        self.mirror = mirror
        self.jobs = jobs or JobLog(None)
        self.blobs = blobs  # where the fleet's roots are noted for the fleet page

    # --- dispatch --------------------------------------------------------------------------

    @activity.defn(name=ACT_AFFECTED_ROOTS.name)
    async def affected_roots(self, request: AffectedRequest) -> AffectedResult:
        with fleet_mistakes():
            result = await blocking(self._affected, request)
        activity.logger.info(
            "affected roots computed",
            extra={
                "repo": request.repo.full_name,
                "before": request.before,
                "after": request.after,
                "roots": len(result.roots),
                "all_roots": result.all_roots,
                "reason": result.reason,
            },
        )
        return result

    def _affected(self, request: AffectedRequest) -> AffectedResult:
        repo, before, after = request.repo, request.before, request.after
        if is_zero(after):
            return AffectedResult(roots=[], reason="the branch was deleted")
        mirror = self.mirror.ensure(repo, after)
        reason = ""
        if request.forced:
            reason = "forced push: the previous revision may not be an ancestor"
        elif is_zero(before):
            reason = "new branch: no previous revision to compare with"
        elif not self.mirror.has_commit(repo, before):
            try:
                self.mirror.ensure(repo, before)
            except RevisionNotFound:
                reason = f"previous revision {before[:12]} is unknown to the repository"
        if reason:
            # Over-rendering is safe, missing a root is not: every root at `after`.
            roots = Fleet.open(GitTree(mirror, after)).roots()
            self._note_roots(request, mirror, roots)
            return AffectedResult(roots=sorted(roots), all_roots=True, reason=reason)
        affected = affected_between(mirror, before, after)
        self._note_roots(request, mirror)
        return AffectedResult(roots=affected)

    def _note_roots(
        self, request: AffectedRequest, mirror: Path, roots: list[str] | None = None
    ) -> None:
        """Every root at the pushed revision, for the fleet page (best effort: without it
        the page lists the deployed roots only)."""
        if self.blobs is None:
            return
        try:
            roots = (
                roots if roots is not None else Fleet.open(GitTree(mirror, request.after)).roots()
            )
        except FleetError:
            return  # the fleet cannot be read there: its `rollwright` check run says why
        noted = FleetRoots(revision=request.after, roots=sorted(roots))
        try:
            self.blobs.put(
                fleet_roots_key(request.repo.full_name), noted.model_dump_json().encode()
            )
        except Exception as err:  # the dispatch goes on; the page misses the undeployed ones
            activity.logger.warning("fleet roots not noted", extra={"error": str(err)})

    # --- deploy ----------------------------------------------------------------------------

    @activity.defn(name=ACT_REVISION_RELATION.name)
    async def revision_relation(self, request: RelationRequest) -> Relation:
        with fleet_mistakes():
            relation: Relation = await blocking(
                self.mirror.relation, request.repo, request.base, request.head
            )
        activity.logger.info(
            "revision relation",
            extra={
                "repo": request.repo.full_name,
                "base": request.base,
                "head": request.head,
                "relation": relation,
            },
        )
        return relation

    # --- pinned to one worker --------------------------------------------------------------

    @activity.defn(name=ACT_CHECKOUT.name)
    async def checkout(self, request: CheckoutRequest) -> CheckoutResult:
        name = _checkout_name()
        self.jobs.write(name, "checking out", revision=request.revision)
        started = time.monotonic()
        try:
            with fleet_mistakes():
                path, sha = await blocking(
                    self.mirror.checkout, request.repo, request.revision, name
                )
        except ApplicationError as err:
            self.jobs.write(name, "checkout failed", revision=request.revision, error=err.message)
            raise
        activity.logger.info(
            "checked out",
            extra={"repo": request.repo.full_name, "revision": sha, "path": str(path)},
        )
        self.jobs.write(
            name,
            "checked out",
            revision=sha,
            worker=activity.info().task_queue,
            seconds=round(time.monotonic() - started, 3),
        )
        return CheckoutResult(path=str(path), revision=sha)

    @activity.defn(name=ACT_CLEANUP_CHECKOUT.name)
    async def cleanup_checkout(self, checkout: CheckoutResult) -> None:
        try:
            removed = await blocking(self.mirror.remove_checkout, Path(checkout.path))
        except ValueError as err:
            raise ApplicationError(str(err), type="InvalidCheckout", non_retryable=True) from None
        activity.logger.info("checkout removed", extra={"path": checkout.path, "found": removed})
        self.jobs.write(_checkout_name(), "checkout removed")


def _checkout_name() -> str:
    """The checkout directory: the workflow id, i.e. the deployment id for DeploymentWorkflow."""
    workflow_id = activity.info().workflow_id or activity.info().activity_id
    return re.sub(r"[^A-Za-z0-9._-]", "-", workflow_id).strip("._-") or "checkout"
