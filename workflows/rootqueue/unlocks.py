"""Unlock clicks on a root's queue, as plain rules (docs/governance.md, "Unlock and the rollout
buttons"): whether a click finds a lock to open, what the judge is asked, the audit row of the
verdict, and which queued check runs show a click that did not count. No Temporal here: the
root's queue judges and records clicks through `workflows.clicks`.
"""

from __future__ import annotations

from datetime import datetime

from shared.contracts.deploy import (
    AuditRecord,
    HotfixMerged,
    LatestDeployment,
    LockState,
    QueueItem,
    RepoRef,
    UnlockSignal,
)
from shared.contracts.governance import ActionRequest, Verdict
from workflows.rootqueue.queue import RootQueue

# A refused click is shown at once on every waiting check run of a queue this short; a longer
# queue shows it on the check run clicked, and on the others when they are next written (a
# refused click must not cost thousands of GitHub writes).
SHOW_ON_ALL = 50


def nothing_to_unlock(root: str, lock: LockState, latest: LatestDeployment | None) -> str | None:
    """Why a click has nothing to open (None: the queue is locked)."""
    if not lock.locked or latest is None:
        return f"the queue of `{root}` is not locked: there is nothing to unlock"
    return None


def lock_moved(before: LockState, now: LockState) -> str | None:
    """Why a counted click no longer applies: the lock it was made on went away or was
    replaced while it was judged (None: it is the same lock)."""
    if (now.locked, now.by_deployment) != (before.locked, before.by_deployment):
        return (
            "the lock changed while the click was judged (a deployment took or released it); "
            "click Unlock again if the queue should still be opened"
        )
    return None


def judge_request(
    repo: RepoRef, root: str, signal: UnlockSignal, workflow_id: str
) -> ActionRequest:
    """What `judge_action` is asked: the root's policy at the tip of the default branch."""
    return ActionRequest(
        repo=repo, action="unlock", actor=signal.by, root=root, workflow_id=workflow_id
    )


def audit_record(
    repo: RepoRef,
    root: str,
    lock: LockState,
    signal: UnlockSignal,
    verdict: Verdict,
    *,
    at: datetime,
) -> AuditRecord:
    """The audit row of a judged Unlock, on the deployment that holds the lock (its job page
    lists it)."""
    return AuditRecord(
        repo=repo.full_name,
        root=root,
        deployment_id=lock.by_deployment,
        action="unlock",
        actor=signal.by,
        counted=verdict.counts,
        reason=verdict.reason,
        at=at,
    )


def unlocked(latest: LatestDeployment, by: str | None, at: datetime) -> LatestDeployment:
    """latest.json once an Unlock counted: the lock is a function of it, so the Unlock is
    recorded there and survives an idle restart."""
    return latest.model_copy(update={"unlocked_by": by, "unlocked_at": at})


def to_show(queue: RootQueue, signal: UnlockSignal) -> list[QueueItem]:
    """The waiting items whose check runs are written again to show a refused click."""
    waiting = [item for item in queue.items if queue.waits_for_unlock(item)]
    if len(waiting) <= SHOW_ON_ALL:
        return waiting
    return [item for item in waiting if item.check_run_id == signal.check_run_id]


# --- a hotfix's pull request merged ---------------------------------------------------------


def opened_by_merge(lock: LockState, merged: HotfixMerged) -> bool:
    """Whether the merge of `merged`'s pull request opens this lock: the lock is a hotfix's
    from that pull request. The merged revision deploys through the queue as every merge does;
    no one is asked (the lock was taken for exactly this wait)."""
    return lock.locked and lock.hotfix is not None and lock.hotfix.pr == merged.pr


def merge_by(merged: HotfixMerged) -> str:
    """Who opened the lock, as latest.json and the root page show it."""
    return f"merge of #{merged.pr}" + (f" by {merged.by}" if merged.by else "")


def merge_audit_record(
    repo: RepoRef,
    root: str,
    lock: LockState,
    merged: HotfixMerged,
    *,
    at: datetime,
    while_deploying: bool = False,
) -> AuditRecord:
    """The audit row of a hotfix lock opened by its pull request's merge (`while_deploying`:
    the merge came while the hotfix was queued or deploying; its lock opens as it ends)."""
    commit = f" as {merged.merge_commit_sha[:12]}" if merged.merge_commit_sha else ""
    opens = "opens as its deployment ends" if while_deploying else "opens"
    return AuditRecord(
        repo=repo.full_name,
        root=root,
        deployment_id=lock.by_deployment,
        action="unlock",
        actor=merged.by,
        source="pr_merge",
        counted=True,
        reason=f"pull request #{merged.pr} was merged{commit}: the hotfix lock {opens}",
        at=at,
    )
