"""The events rollwright announces, each with a stable id: the same state change or reminder
recorded twice is one event (its id is the notifications table's key), so a sink gets each
once however often an activity is retried."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from shared.contracts.deploy import DeploymentRecord
from shared.stores.sql.deployments import StateChange
from shared.stores.sql.notifications import NewEvent

# deployment state entered → event kind (the states an operator follows; rendering,
# publishing and verifying are steps, not news)
DEPLOYMENT_KINDS = {
    "queued": "deployment.queued",
    "awaiting_review": "deployment.awaiting_review",
    "approved": "deployment.approved",
    "published": "deployment.published",
    "verified": "deployment.verified",
    "unhealthy": "deployment.unhealthy",
    "rejected": "deployment.rejected",
    "timed_out": "deployment.timed_out",
    "failed": "deployment.failed",
    "cancelled": "deployment.cancelled",
}
_WORDS = {
    "deployment.queued": "queued",
    "deployment.awaiting_review": "awaits review",
    "deployment.approved": "approved",
    "deployment.published": "published",
    "deployment.verified": "verified",
    "deployment.unhealthy": "unhealthy",
    "deployment.rejected": "rejected",
    "deployment.timed_out": "timed out waiting for review",
    "deployment.failed": "failed",
    "deployment.cancelled": "cancelled",
}
MAX_ID = 160


def event_id(kind: str, *parts: str) -> str:
    """`<kind>:<parts…>`, or `<kind>:sha256:<digest>` when that would not fit the key."""
    plain = ":".join((kind, *parts))
    if len(plain) <= MAX_ID:
        return plain
    return f"{kind}:sha256:{hashlib.sha256(plain.encode()).hexdigest()[:64]}"


def deployment_kind(change: StateChange) -> str | None:
    """The event a recorded state change is, if any. An approval shows as the state after the
    review (the deployment goes on to publish at once)."""
    if change.previous == "awaiting_review" and change.state in ("approved", "publishing"):
        return "deployment.approved"
    if change.state == "approved":
        return None  # counted above when it ends a review; else not news
    if change.state == "verifying" and change.previous != "published":
        return "deployment.published"  # a root with a verify rule records no "published"
    return DEPLOYMENT_KINDS.get(change.state)


def deployment_event(record: DeploymentRecord, change: StateChange, url: str) -> NewEvent | None:
    kind = deployment_kind(change)
    if kind is None:
        return None
    words = _WORDS[kind]
    if kind == "deployment.approved" and record.approved_by:
        words = f"approved by {_login(record.approved_by)}"
    what = f"hotfix from #{record.hotfix.pr}" if record.hotfix else "deployment"
    summary = f"{record.repo} `{record.root}`: {what} of `{record.revision[:12]}` {words}"
    body = {
        "id": event_id(kind, record.deployment_id),
        "type": kind,
        "repo": record.repo,
        "root": record.root,
        "deployment_id": record.deployment_id,
        "revision": record.revision,
        "trigger": record.trigger,
        "state": change.state,
        "previous": change.previous,
        "requested_by": record.requested_by,
        "approved_by": record.approved_by,
        # a hotfix: the unmerged pull request and the head deployed (null otherwise)
        "hotfix": record.hotfix.model_dump(mode="json") if record.hotfix else None,
        "at": record.at.isoformat(),
        "url": url,
        "summary": summary,
    }
    return _event(body, record.repo, record.root, record.deployment_id)


def rollback_event(
    repo: str, patch_id: str, node: str, commit: str, by: str | None, at: datetime
) -> NewEvent:
    """A rollout's promotion reverted (the Roll back button, or `rollback: auto`); `commit`
    is the promotion commit reverted, so the event is one per promotion undone."""
    kind = "rollout.rolled_back"
    who = f" by {_login(by)}" if by else ""
    body = {
        "id": event_id(kind, repo, patch_id, commit),
        "type": kind,
        "repo": repo,
        "patch_id": patch_id,
        "node": node,
        "commit": commit,
        "by": by,
        "at": at.isoformat(),
        "summary": f"{repo}: rollout of `{patch_id}` rolled back at `{node}`{who}",
    }
    return _event(body, repo, None, None)


def reminder_event(
    kind: str,
    key: tuple[str, ...],
    *,
    repo: str,
    root: str,
    deployment_id: str,
    since: datetime,
    summary: str,
    url: str,
) -> NewEvent:
    body = {
        "id": event_id(kind, *key),
        "type": kind,
        "repo": repo,
        "root": root,
        "deployment_id": deployment_id,
        "since": since.isoformat(),
        "url": url,
        "summary": summary,
    }
    return _event(body, repo, root, deployment_id)


def _event(body: dict[str, Any], repo: str, root: str | None, deployment: str | None) -> NewEvent:
    return NewEvent(
        event_id=str(body["id"]),
        kind=str(body["type"]),
        repo=repo,
        root=root,
        deployment_id=deployment,
        body=json.dumps(body, sort_keys=True),
    )


def _login(who: str) -> str:
    """`@login` (records carry it with or without the `@`)."""
    return who if who.startswith("@") else f"@{who}"
