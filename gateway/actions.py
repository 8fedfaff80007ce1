"""What the gateway does to Temporal for a webhook: one start or signal, as a stored action.

`route_event` (gateway/webhooks.py) turns a webhook into one of these; `POST /events` stores it
as JSON in the outbox, and the drainer (gateway/outbox.py) reads it back and `deliver`s it
through the Dispatcher. The models are therefore a stored format: add optional fields with
defaults, never rename or retype one (rows written by an older gateway are read by a newer).
`repo` (owner/name) is the ordering key: one repository's actions are performed in order.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from gateway.dispatcher import Dispatched, Dispatcher
from shared.contracts.deploy import (
    DISPATCH_WORKFLOW,
    SIGNAL_NEW_REVISION,
    SIGNAL_REVIEW,
    SIGNAL_UNLOCK,
    AuditRecord,
    DispatchInput,
    NewRevision,
    RepoRef,
    ReviewSignal,
    UnlockSignal,
    deploy_workflow_id,
)
from shared.contracts.hotfix import (
    HOTFIX_WORKFLOW,
    SIGNAL_HOTFIX,
    HotfixCommand,
    hotfix_workflow_id,
)
from shared.contracts.preview import (
    PREVIEW_WORKFLOW,
    SIGNAL_PR_CLOSED,
    SIGNAL_PR_HEAD,
    PullRequestClosed,
    PullRequestHead,
    preview_workflow_id,
)
from shared.contracts.promotion import promotion_workflow_id, rollout_audit_root

# The gateway's audit row of a click a workflow judges: received, not judged yet.
RECEIVED = "received; the {judge} judges it by the review policy"


class _Action(BaseModel):
    """A workflow start or signal to perform. Stored as JSON in the outbox between accepting
    the webhook and performing it, so the models are the stored format: add optional fields,
    never rename one."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    def audit(self, at: datetime) -> AuditRecord | None:
        """The audit event of a person's click this action carries, recorded with the
        delivery (None: not a click, or one the workflow audits alone, like Approve /
        Reject). It says the click was received; whether it counted is the workflow's row."""
        return None

    def unheard(self, outcome: str, at: datetime) -> AuditRecord | None:
        """The audit event of a click whose workflow was not there to judge it (`outcome`
        of the signal: `not_running`), None for anything else."""
        return None


class _Click(_Action):
    """An action carrying a person's click that its workflow judges by the review policy
    (Unlock, a rollout's buttons; docs/governance.md): recorded as received with the
    delivery, and as not counted when its workflow is not running."""

    judge: ClassVar[str]  # who judges it: "root's queue", "rollout"

    def clicked(self, at: datetime) -> AuditRecord:
        """The click's audit row, not judged (`counted` None)."""
        raise NotImplementedError

    def absent(self) -> str:
        """What is not running when nobody judges it ("the rollout of `x`")."""
        raise NotImplementedError

    def audit(self, at: datetime) -> AuditRecord | None:
        return self.clicked(at).model_copy(update={"reason": RECEIVED.format(judge=self.judge)})

    def unheard(self, outcome: str, at: datetime) -> AuditRecord | None:
        if outcome != "not_running":
            return None
        reason = f"{self.absent()} is not running"
        return self.clicked(at).model_copy(update={"counted": False, "reason": reason})


class StartDispatch(_Action):
    kind: Literal["start_dispatch"] = "start_dispatch"
    workflow_id: str
    inp: DispatchInput

    @property
    def repo(self) -> str:
        return self.inp.repo.full_name

    @property
    def target(self) -> str:
        return self.workflow_id

    def describe(self) -> str:
        return f"start {DISPATCH_WORKFLOW}"


class Review(_Action):
    kind: Literal["review"] = "review"
    repo: str
    deployment_id: str
    signal: ReviewSignal

    @property
    def target(self) -> str:
        return self.deployment_id

    def describe(self) -> str:
        return f"signal {SIGNAL_REVIEW} ({self.signal.decision})"


class Unlock(_Click):
    kind: Literal["unlock"] = "unlock"
    repo: str
    root: str
    signal: UnlockSignal
    # The repository as the webhook names it: the Unlock signal-with-starts a finished
    # root's queue (rows stored without it only signal a running one).
    repo_ref: RepoRef | None = None

    @property
    def target(self) -> str:
        return deploy_workflow_id(self.repo, self.root)

    def describe(self) -> str:
        start = "signal-with-start" if self.repo_ref is not None else "signal"
        return f"{start} {SIGNAL_UNLOCK}"

    judge: ClassVar[str] = "root's queue"

    def clicked(self, at: datetime) -> AuditRecord:
        return AuditRecord(
            repo=self.repo,
            root=self.root,
            action="unlock",
            actor=self.signal.by,
            counted=None,
            at=at,
        )

    def absent(self) -> str:
        return f"the queue of `{self.root}`"


class QueueRevision(_Action):
    kind: Literal["queue_revision"] = "queue_revision"
    repo_ref: RepoRef
    root: str
    revision: NewRevision

    @property
    def repo(self) -> str:
        return self.repo_ref.full_name

    @property
    def target(self) -> str:
        return deploy_workflow_id(self.repo, self.root)

    def describe(self) -> str:
        return f"signal-with-start {SIGNAL_NEW_REVISION}"


class PreviewHead(_Action):
    kind: Literal["preview_head"] = "preview_head"
    repo_ref: RepoRef
    pr: int
    signal: PullRequestHead

    @property
    def repo(self) -> str:
        return self.repo_ref.full_name

    @property
    def target(self) -> str:
        return preview_workflow_id(self.repo, self.pr)

    def describe(self) -> str:
        return f"signal-with-start {PREVIEW_WORKFLOW} {SIGNAL_PR_HEAD} ({self.signal.action})"


class PreviewClosed(_Action):
    kind: Literal["preview_closed"] = "preview_closed"
    repo: str
    pr: int
    signal: PullRequestClosed

    @property
    def target(self) -> str:
        return preview_workflow_id(self.repo, self.pr)

    def describe(self) -> str:
        return f"signal {SIGNAL_PR_CLOSED}"


class HotfixRequested(_Action):
    """`/rollwright hotfix <root>…` commented on a pull request: its HotfixWorkflow judges it
    and audits it, root by root."""

    kind: Literal["hotfix"] = "hotfix"
    repo_ref: RepoRef
    pr: int
    command: HotfixCommand

    @property
    def repo(self) -> str:
        return self.repo_ref.full_name

    @property
    def target(self) -> str:
        return hotfix_workflow_id(self.repo, self.pr)

    def describe(self) -> str:
        return f"signal-with-start {HOTFIX_WORKFLOW} {SIGNAL_HOTFIX}"


class PromotionClick(_Click):
    """Promote / Halt / Resume / Roll back on a rollout's check run
    (`rollwright/promote: <patch>`)."""

    kind: Literal["promotion_click"] = "promotion_click"
    repo: str
    patch_id: str
    action: Literal["promote", "halt", "resume", "rollback"]
    by: str | None = None
    # The clicked check run's commit: a stale Promote or Resume is ignored.
    head_sha: str | None = None

    @property
    def target(self) -> str:
        return promotion_workflow_id(self.repo, self.patch_id)

    def describe(self) -> str:
        return f"signal {self.action}"

    judge: ClassVar[str] = "rollout"

    def clicked(self, at: datetime) -> AuditRecord:
        # A rollout has no root: the audit trail names it `rollout:<patch-id>` there.
        root = rollout_audit_root(self.patch_id)
        return AuditRecord(
            repo=self.repo, root=root, action=self.action, actor=self.by, counted=None, at=at
        )

    def absent(self) -> str:
        return f"the rollout of `{self.patch_id}`"


Action = (
    StartDispatch
    | Review
    | Unlock
    | QueueRevision
    | PreviewHead
    | PreviewClosed
    | PromotionClick
    | HotfixRequested
)
ACTION: TypeAdapter[Action] = TypeAdapter(Annotated[Action, Field(discriminator="kind")])


async def deliver(action: Action, d: Dispatcher) -> Dispatched:
    """Perform an action through the dispatcher (the outbox drainer calls this)."""
    match action:
        case StartDispatch():
            return await d.start_dispatch(action.workflow_id, action.inp)
        case Review():
            return await d.review(action.deployment_id, action.signal)
        case Unlock():
            return await d.unlock(action.repo, action.root, action.signal, action.repo_ref)
        case QueueRevision():
            return await d.queue_revision(action.repo_ref, action.root, action.revision)
        case PreviewHead():
            return await d.preview_head(action.repo_ref, action.pr, action.signal)
        case PreviewClosed():
            # The pull request's hotfixes hear of it first (a merge opens their locks); a
            # retry of the action signals both again, which neither minds.
            await d.hotfix_closed(action.repo, action.pr, action.signal)
            return await d.preview_closed(action.repo, action.pr, action.signal)
        case HotfixRequested():
            return await d.hotfix(action.repo_ref, action.pr, action.command)
        case PromotionClick():
            return await d.promotion_click(
                action.repo, action.patch_id, action.action, action.by, action.head_sha
            )
