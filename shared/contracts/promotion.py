"""Contracts of the PromotionWorkflow: names, input, signals, the `rollout` query, activities.

`promote:<owner>/<repo>:<patch-id>` walks one version patch through the fleet's rollout
sequence (docs/promotion.md). The rules of shared/contracts/deploy.py hold here too: these
models are persisted in Temporal histories and in the gateway's outbox, so add optional fields with
defaults, never rename or retype one; unknown fields are ignored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from shared.contracts.deploy import DeploymentState, Payload, RepoRef

PROMOTION_WORKFLOW = "PromotionWorkflow"

SIGNAL_DEPLOYMENT_FINISHED = "deployment_finished"
SIGNAL_PROMOTE = "promote"
SIGNAL_HALT = "halt"
SIGNAL_RESUME = "resume"
SIGNAL_ROLLBACK = "rollback"  # RollbackSignal: the Roll back button (rollout.rollback: manual)
SIGNAL_PROMOTION_REVISION = "revision"
QUERY_ROLLOUT = "rollout"


# The check run of a rollout: one per patch, on the default branch's tip.
CHECK_RUN_PREFIX = "rollwright/promote: "

Gate = Literal["automated", "manual"]
# What a row of the rollout table says about one node of the sequence.
NodeState = Literal[
    "pending",  # the patch has not reached it
    "passed",  # the patch is active here and moved on
    "deploying",  # active here: waiting for every root's deployment
    "soaking",  # deployed everywhere: soak time running
    "healthy",  # deployed and soaked: the next node's gate decides
    "halted",  # a deployment failed here, or someone clicked Halt
    "blocked",  # the fleet repo has a problem the patch cannot pass (conflict, bad file)
    "window_closed",  # the next node: its promotion window is closed
    "dependencies_unmet",  # the next node: the patch's dependencies do not hold there
    "awaiting_promote",  # the next node: manual gate, waiting for a Promote click
    "promoting",  # the next node: the promotion commit is being written
    "graduating",  # every node: the graduation pull request is being opened
    "graduated",  # the graduation pull request is open; the workflow is done
]
Phase = Literal[
    "starting",
    "deploying",
    "soaking",
    "gate",
    "promoting",
    "halted",
    "blocked",
    "graduated",
    "gone",
]


def promotion_workflow_id(repo: str, patch_id: str) -> str:
    return f"promote:{repo}:{patch_id}"


def rollout_audit_root(patch_id: str) -> str:
    """The audit trail's `root` of a click on a rollout's check run (a rollout has no root)."""
    return f"rollout:{patch_id}"


def promotion_check_run_name(patch_id: str) -> str:
    return f"{CHECK_RUN_PREFIX}{patch_id}"


def patch_from_check_run_name(name: str) -> str | None:
    """The patch id of a `rollwright/promote: <patch-id>` check run, else None."""
    if not name.startswith(CHECK_RUN_PREFIX):
        return None
    patch_id = name[len(CHECK_RUN_PREFIX) :].strip()
    return patch_id or None


# --- signals ---------------------------------------------------------------------------------


class DeploymentFinished(Payload):
    """Signal from the deploy side: a root's deployment reached a terminal state."""

    root: str
    revision: str
    deployment_id: str
    state: DeploymentState
    message: str = ""


class PromoteSignal(Payload):
    by: str | None = None
    # The commit of the check run clicked: a click on a run that offered another node (an old
    # tip's) is stale and ignored. None (an API caller): the node waiting now.
    head_sha: str | None = None


class HaltSignal(Payload):
    by: str | None = None
    reason: str = ""
    # The commit of the check run clicked, for the record: halting is always honoured.
    head_sha: str | None = None


class ResumeSignal(Payload):
    by: str | None = None
    # The commit of the check run clicked: a Resume button shown for an earlier halt is stale
    # and ignored (it must not resume a newer one). None (an API caller): the current halt.
    head_sha: str | None = None


class RollbackSignal(Payload):
    by: str | None = None
    # The commit of the check run clicked: a button of an earlier halt is stale and ignored.
    head_sha: str | None = None


class PromotionRevision(Payload):
    """Signal: the default branch moved to `revision` (every push, from DispatchWorkflow)."""

    revision: str


# --- workflow input and query ----------------------------------------------------------------


class RolloutRow(Payload):
    node: str
    state: NodeState
    since: datetime
    detail: str = ""


class RootDeployment(Payload):
    """The latest terminal deployment of one root under the current node, as the workflow
    judged it: `contains_patch` says whether that revision had the patch active at the root."""

    root: str
    revision: str = ""
    deployment_id: str = ""
    state: DeploymentState | None = None
    message: str = ""
    contains_patch: bool = False

    @property
    def healthy(self) -> bool:
        # "published": a root without a verify rule; "verified": one with.
        return self.contains_patch and self.state in ("published", "verified")

    @property
    def failed(self) -> bool:
        ended = ("failed", "rejected", "timed_out", "unhealthy")
        return self.contains_patch and self.state in ended


class HaltState(Payload):
    node: str
    reason: str
    by: str | None = None  # None: a failed deployment halted it
    roots: list[str] = Field(default_factory=list)
    deployment_ids: list[str] = Field(default_factory=list)
    since: datetime
    rolled_back: bool = False  # the node's promotion was reverted (or tried) for this halt


class PromotionInput(Payload):
    repo: RepoRef
    patch_id: str
    revision: str = ""  # the default branch tip that started it ("" → the first signal's)
    # Carried across continue-as-new; empty on a fresh start.
    rows: list[RolloutRow] = Field(default_factory=list)
    node: str | None = None  # the node whose deployments are being watched
    deployments: list[RootDeployment] = Field(default_factory=list)
    acknowledged: list[str] = Field(default_factory=list)  # failed deployment ids resumed past
    halt: HaltState | None = None
    approved: dict[str, str] = Field(default_factory=dict)  # node → who clicked Promote
    offers: dict[str, str] = Field(default_factory=dict)  # check run commit → node it offered
    # Check run commit → `since` of the halt whose Resume button it showed.
    resume_offers: dict[str, datetime] = Field(default_factory=dict)
    # The manual gate on offer, so a Promote click that reaches the next run before its first
    # pass does counts.
    awaiting_node: str | None = None
    healthy_since: datetime | None = None
    check_run_id: int | None = None
    check_run_sha: str | None = None
    reported: list[DeploymentFinished] = Field(default_factory=list)  # not yet read
    # Continue-as-new once the history has this many events (None: the workflow's default).
    max_history_events: int | None = None
    # Clicks that did not count, as the check run lists them (the newest).
    refusals: list[str] = Field(default_factory=list)
    # node → the deployments that were healthy, with the patch, when the node passed.
    evidence: dict[str, list[RootDeployment]] = Field(default_factory=dict)


class NodeInfo(Payload):
    path: str
    gate: Gate = "automated"
    soak_seconds: int = 0


class WindowInfo(Payload):
    open: bool = True
    reason: str = ""
    next_open: datetime | None = None
    closes_at: datetime | None = None


class RolloutView(Payload):
    """Query result (`rollout`): the table the Temporal UI shows, and why it waits."""

    repo: str
    patch_id: str
    revision: str
    phase: Phase
    current_node: str | None
    next_node: str | None
    gate: Gate | None
    waiting_for: str
    rows: list[RolloutRow]
    deployments: list[RootDeployment]
    halt: HaltState | None
    pull_request_url: str | None = None
    # What the rollout page shows beyond the table (query only, never in a decision): each
    # node's gate and soak, its roots, when the current node's soak started, and the next
    # node's promotion window.
    nodes: list[NodeInfo] = Field(default_factory=list)
    node_roots: dict[str, list[str]] = Field(default_factory=dict)
    soak_started: datetime | None = None
    window: WindowInfo | None = None
    # node → the deployments that made it pass, as the workflow judged them (empty for nodes
    # passed in runs from before it was recorded)
    evidence: dict[str, list[RootDeployment]] = Field(default_factory=dict)


# --- activities ------------------------------------------------------------------------------


class EvaluateRequest(Payload):
    repo: RepoRef
    patch_id: str
    revision: str
    now: datetime  # workflow time, for promotion windows


class Evaluation(Payload):
    """The patch at one revision of the default branch (pure reading of the fleet repo)."""

    revision: str
    found: bool = True  # False: no file of the patch left (graduated or deleted)
    plan: list[NodeInfo] = Field(default_factory=list)
    active_nodes: list[str] = Field(default_factory=list)
    current_node: str | None = None  # the furthest active node
    next_node: str | None = None
    roots: list[str] = Field(default_factory=list)  # roots under the current node
    unmet_dependencies: list[str] = Field(default_factory=list)  # at the next node
    graduation_ready: bool = False
    conflicts: list[str] = Field(default_factory=list)
    window: WindowInfo = Field(default_factory=WindowInfo)  # of the next node, at `now`
    error: str = ""  # the fleet repo cannot be read at this revision (already redacted)
    rollback: Literal["manual", "auto"] = "manual"  # rollout.rollback of rollwright.yaml
    # every node's roots of the patch's cluster type (the rollout page's evidence); empty in
    # evaluations recorded before it was added
    node_roots: dict[str, list[str]] = Field(default_factory=dict)

    def node(self, path: str | None) -> NodeInfo | None:
        return next((n for n in self.plan if n.path == path), None)


class DeploymentsRequest(Payload):
    repo: RepoRef
    patch_id: str
    roots: list[str]
    # Outcomes the deploy side reported; roots without one are read from latest.json.
    reported: list[DeploymentFinished] = Field(default_factory=list)


class DeploymentsResult(Payload):
    deployments: list[RootDeployment]


class CommitRequest(Payload):
    repo: RepoRef
    patch_id: str
    to_node: str
    actor: str | None = None
    expected_revision: str = ""  # the tip the workflow evaluated (the plan is redone on a newer)


class CommitResult(Payload):
    revision: str  # the default branch tip after the commit (or as found)
    committed: bool = True
    message: str = ""  # why nothing was committed


class RollbackRequest(Payload):
    repo: RepoRef
    patch_id: str
    node: str  # the node whose promotion is reverted
    reason: str  # why (the halt's reason), for the commit message
    by: str | None = None  # who clicked Roll back (None: `rollout.rollback: auto`)


class RollbackResult(Payload):
    revision: str  # the default branch tip after the revert (or as found)
    committed: bool = True
    reverted: str = ""  # the promotion commit reverted
    message: str = ""  # why nothing was committed


class GraduateRequest(Payload):
    repo: RepoRef
    patch_id: str


class GraduateResult(Payload):
    number: int
    url: str
    branch: str
    already_open: bool = False


class TouchedRequest(Payload):
    repo: RepoRef
    before: str
    after: str


class TouchedResult(Payload):
    patch_ids: list[str]


class SignalPromotionsRequest(Payload):
    repo: RepoRef
    revision: str
    start: list[str] = Field(default_factory=list)  # patch ids to signal-with-start


class NotifyPromotionsRequest(Payload):
    repo: RepoRef
    finished: DeploymentFinished
