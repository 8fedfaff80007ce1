"""What the root's queue writes on the check runs of its items: queued where they stand,
waiting for an Unlock, refused, skipped. Plain functions over the queue (no Temporal)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shared.contracts import checkrun
from shared.contracts.deploy import CheckRunRequest, NewRevision, QueueItem, RepoRef
from workflows.refusals import refusals_block
from workflows.rootqueue.queue import RootQueue

WAITING_TITLE = "Waiting: the queue is locked"
WAITING_MESSAGE = (
    "A manual deployment locked this root's queue. Merged revisions wait until someone clicks "
    "**Unlock**."
)


def queued(
    repo: RepoRef, root: str, queue: RootQueue, item: QueueItem, refused: Sequence[str] = ()
) -> CheckRunRequest:
    """A queued item's check run: waiting for an Unlock (with the Unlock clicks that did not
    count), or queued with where it stands. Its summary is written when the item joins the
    queue or changes; the root's page has the live queue (`root_page`)."""
    waiting = queue.waits_for_unlock(item)
    shown = refusals_block(refused) if waiting else None
    summary = checkrun.queued_summary(queue.items, item)
    request = checkrun.queue_item_request(
        repo,
        root,
        item,
        status="completed" if waiting else "queued",
        conclusion="action_required" if waiting else None,
        title=WAITING_TITLE if waiting else "Queued",
        queue_markdown=(checkrun.lock_line(queue.lock) + "\n\n" if waiting else "") + summary,
        message="\n\n".join(m for m in (WAITING_MESSAGE, shown) if m) if waiting else "",
        actions=[checkrun.UNLOCK] if waiting else [],
    )
    return request.model_copy(update={"root_page": True})


def queue_table(queue: RootQueue, now: datetime) -> str:
    return checkrun.queue_table(queue.items, now, queue.lock)


def rerun_refused(signal: NewRevision, latest: str) -> str:
    return (
        f"Only the latest deployment attempt can be re-run, and that is "
        f"`{checkrun.short(latest)}`, not `{checkrun.short(signal.revision)}`. "
        "Use a manual deployment to go to another revision."
    )


def queue_full(signal: NewRevision, queue: RootQueue) -> str:
    locked = queue.lock.locked
    waiting = "a lock" if locked else "the deployments ahead"
    return (
        f"This root's queue already holds {len(queue):,} deployments waiting "
        f"(held by {waiting}), the most one root's queue keeps, so "
        f"`{checkrun.short(signal.revision)}` was not queued. A later merge carries "
        "its changes; to deploy it now, deploy it manually (manual deployments are "
        "always queued, ahead of merges)" + (" or unlock the root." if locked else ".")
    )


def behind(item: QueueItem, latest: str) -> str:
    return (
        f"Skipped: `{checkrun.short(item.revision)}` is behind the latest deployed revision "
        f"`{checkrun.short(latest)}`; deploying it would roll the root back. Use a manual "
        "deployment (rollback) if that is what you want."
    )


def not_compared(item: QueueItem, error: object) -> str:
    return (
        f"Could not compare `{checkrun.short(item.revision)}` with the latest deployed "
        f"revision: {error}"
    )
