"""What a deployment's check run says: title, summary, buttons. Pure functions (no I/O), so
workflows can call them deterministically; activities only send the result to GitHub."""

from __future__ import annotations

from datetime import datetime

from shared.contracts.deploy import (
    CheckRunAction,
    CheckRunRequest,
    DeploymentInput,
    HotfixRef,
    LockState,
    QueueItem,
    RepoRef,
    Trigger,
)

APPROVE = CheckRunAction(label="Approve", description="Publish this render", identifier="approve")
REJECT = CheckRunAction(
    label="Reject", description="Do not deploy this revision", identifier="reject"
)
APPROVE_ALL = CheckRunAction(
    label="Approve all",
    description="Approve every root you may approve",
    identifier="approve_all",
)
UNLOCK = CheckRunAction(
    label="Unlock", description="Let merged revisions deploy again", identifier="unlock"
)


QUEUE_ROWS = 10  # rows of a root's queue shown on a check run (the root's page has them all)


def check_run_name(root: str) -> str:
    return f"rollwright/{root}"


# The check run of a revision as a whole (not of one root): what a push did or could not do.
REVISION_CHECK_NAME = "rollwright"


def unreadable_fleet(repo: RepoRef, revision: str, message: str) -> CheckRunRequest:
    """The failed `rollwright` check run of a pushed revision whose fleet cannot be read: no
    root can be worked out or deployed until a fix is pushed."""
    return CheckRunRequest(
        repo=repo,
        name=REVISION_CHECK_NAME,
        head_sha=revision,
        external_id=f"revision:{revision}",
        status="completed",
        conclusion="failure",
        title="The fleet cannot be read",
        summary=(
            f"rollwright could not read the fleet at `{short(revision)}`, so it cannot tell "
            "which roots this push changes, and deployed nothing. Fix the file below and "
            "push again; `rollwright validate` shows the same problems locally.\n\n"
            + "\n".join(f"- `{line}`" for line in message.splitlines() if line.strip())
        ),
    )


# Check runs of this App that are not a root's: the pull request preview and the rollouts
# of version patches (`rollwright/promote: <patch>`). A root cannot take these names over.
NOT_ROOT_NAMES = frozenset({"rollwright/preview"})
NOT_ROOT_PREFIXES = ("rollwright/promote:",)


def root_from_check_run_name(name: str) -> str | None:
    prefix = "rollwright/"
    if name in NOT_ROOT_NAMES or name.startswith(NOT_ROOT_PREFIXES):
        return None
    return name[len(prefix) :] if name.startswith(prefix) and len(name) > len(prefix) else None


def short(sha: str) -> str:
    return sha[:12]


def queue_table(queue: list[QueueItem], now: datetime, lock: LockState | None) -> str:
    """Markdown: the root's queue, manual items first, with ages."""
    lines = []
    if lock and lock.locked:
        lines += [lock_line(lock), ""]
    if not queue:
        lines.append("Queue: empty.")
        return "\n".join(lines)
    lines += ["| # | revision | trigger | waiting |", "|---|---|---|---|"]
    for i, item in enumerate(queue[:QUEUE_ROWS], 1):
        age = max(0, int((now - item.enqueued_at).total_seconds()))
        lines.append(f"| {i} | `{short(item.revision)}` | {item.trigger} | {_age(age)} |")
    if len(queue) > QUEUE_ROWS:
        lines += ["", f"… and {len(queue) - QUEUE_ROWS} more (the root's page lists them all)."]
    return "\n".join(lines)


def lock_line(lock: LockState) -> str:
    return (
        f"**Queue locked** by manual deployment `{lock.by_deployment}` of "
        f"`{short(lock.revision or '')}`: merged revisions wait until someone clicks Unlock."
    )


def queued_summary(queue: list[QueueItem], item: QueueItem) -> str:
    """A queued item's short summary: where it stands and what goes before it. Written when
    the item joins the queue (or changes), not at every move of the queue: the root's page
    has the live queue."""
    position = next((i for i, other in enumerate(queue) if other is item), len(queue))
    ahead = queue[:position]
    text = f"**Queued** at position {position + 1}"
    if not ahead:
        return text + ": it deploys next."
    first = ", ".join(f"`{short(other.revision)}` ({other.trigger})" for other in ahead[:3])
    more = f" and {len(ahead) - 3} more" if len(ahead) > 3 else ""
    return f"{text}, behind {first}{more} (manual deployments go before merged revisions)."


def _age(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def summary(
    *,
    state: str,
    root: str,
    revision: str,
    trigger: Trigger,
    requested_by: str | None,
    approved_by: str | None,
    queue_markdown: str,
    message: str = "",
    details_url: str | None = None,
    hotfix: HotfixRef | None = None,
) -> str:
    parts = [
        f"**{state}** — root `{root}` at `{short(revision)}`",
        "",
        f"- Trigger: {trigger}" + (f" by @{requested_by}" if requested_by else ""),
    ]
    if hotfix is not None:
        parts.append(hotfix_line(hotfix))
    if approved_by:
        parts.append(f"- Approved by: {approved_by}")
    if details_url:
        parts.append(f"- Job page: {details_url}")
    if message:
        parts += ["", message]
    parts += ["", queue_markdown]
    return "\n".join(parts)


def request(
    *,
    repo: RepoRef,
    root: str,
    revision: str,
    deployment_id: str,
    check_run_id: int | None,
    status: str,
    conclusion: str | None,
    title: str,
    trigger: Trigger,
    requested_by: str | None,
    approved_by: str | None,
    queue_markdown: str,
    message: str = "",
    text: str = "",
    actions: list[CheckRunAction] | None = None,
    details_url: str | None = None,
    hotfix: HotfixRef | None = None,
) -> CheckRunRequest:
    """The complete check run of one deployment: every update sends all of it. A hotfix says
    so in its title and summary."""
    return CheckRunRequest.model_validate(
        {
            "repo": repo,
            "check_run_id": check_run_id,
            "name": check_run_name(root),
            "head_sha": revision,
            "external_id": deployment_id,
            "status": status,
            "conclusion": conclusion,
            "title": f"Hotfix: {title}" if hotfix is not None else title,
            "summary": summary(
                state=title,
                root=root,
                revision=revision,
                trigger=trigger,
                requested_by=requested_by,
                approved_by=approved_by,
                queue_markdown=queue_markdown,
                message=message,
                details_url=details_url,
                hotfix=hotfix,
            ),
            "text": text,
            "actions": actions or [],
            "details_url": details_url,
        }
    )


def deployment_request(
    inp: DeploymentInput,
    *,
    check_run_id: int | None,
    status: str,
    title: str,
    conclusion: str | None = None,
    approved_by: str | None = None,
    message: str = "",
    text: str = "",
    actions: list[CheckRunAction] | None = None,
) -> CheckRunRequest:
    """The check run of a running deployment: what its input names, and how it stands now."""
    return request(
        repo=inp.repo,
        root=inp.root,
        revision=inp.revision,
        deployment_id=inp.deployment_id,
        trigger=inp.trigger,
        requested_by=inp.requested_by,
        queue_markdown=inp.queue_summary,
        check_run_id=check_run_id,
        status=status,
        conclusion=conclusion,
        title=title,
        approved_by=approved_by,
        message=message,
        text=text,
        actions=actions,
        hotfix=inp.hotfix,
    )


def queue_item_request(
    repo: RepoRef,
    root: str,
    item: QueueItem,
    *,
    status: str,
    title: str,
    queue_markdown: str,
    conclusion: str | None = None,
    message: str = "",
    actions: list[CheckRunAction] | None = None,
) -> CheckRunRequest:
    """The check run of a queue item the root's queue writes itself: queued, waiting for an
    Unlock, refused or skipped (nobody has approved anything yet)."""
    return request(
        repo=repo,
        root=root,
        revision=item.revision,
        deployment_id=item.deployment_id,
        trigger=item.trigger,
        requested_by=item.requested_by,
        approved_by=None,
        check_run_id=item.check_run_id,
        status=status,
        conclusion=conclusion,
        title=title,
        queue_markdown=queue_markdown,
        message=message,
        actions=actions,
        hotfix=item.hotfix,
    )


def hotfix_line(hotfix: HotfixRef) -> str:
    """How a check run names a hotfix: its pull request and head, and the lock it takes."""
    pr = f"[#{hotfix.pr}]({hotfix.url})" if hotfix.url else f"#{hotfix.pr}"
    return (
        f"- **Hotfix** from pull request {pr} at `{short(hotfix.head)}`, not merged: once "
        "published it locks the root until the pull request is merged or someone clicks Unlock"
    )
