"""Pydantic models for every workflow input, signal, query result and activity payload.

These are the contract between the gateway, the workflows and the activities, and they are
persisted in Temporal histories, so change them with care: add optional fields with defaults,
never rename or retype a field in place (add a new one and keep reading the old), and bump
`SCHEMA` of a model whose meaning changes. All models ignore unknown fields so an older worker
can still decode a newer payload during a rolling deploy.

Names used across processes (workflow types, signals, queries, task queues) live here too, so
the gateway can start and signal workflows without importing workflow code.
"""

from __future__ import annotations

import base64
import json
import zlib
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# --- names shared by gateway, worker and workflows -------------------------------------------

TASK_QUEUE = "rollwright"  # the shared queue; each worker also polls its own (see activities)


def waits_task_queue(task_queue: str) -> str:
    """Where activities that only wait on another workflow run (await_dispatch), beside the
    shared queue: each worker serves it with many slots, so waiters never take the shared
    queue's slots from the work they wait for."""
    return f"{task_queue}#waits"


def admission_task_queue(task_queue: str) -> str:
    """Where a deployment asks for its worker (worker_task_queue), beside the shared queue:
    each worker takes a task from it only when it can soon admit the deployment, so the ones
    waiting stay in this queue, for whichever worker has room first."""
    return f"{task_queue}#admission"


DISPATCH_WORKFLOW = "DispatchWorkflow"
DEPLOY_WORKFLOW = "DeployWorkflow"
# One deployment of one root to one revision. Registered as "RenderWorkflow", its name before
# the restructuring: histories in flight (and the Temporal UI's filters) keep naming it so.
DEPLOYMENT_WORKFLOW = "RenderWorkflow"

SIGNAL_NEW_REVISION = "new_revision"
SIGNAL_UNLOCK = "unlock"
SIGNAL_DEPLOYMENT_UPDATE = "deployment_update"
SIGNAL_REVIEW = "review"
# A pull request whose head was hotfixed to the root was merged: the hotfix lock opens.
SIGNAL_HOTFIX_MERGED = "hotfix_merged"
QUERY_STATE = "state"
# revision (str) -> the deployment id running or queued for it, or None; answers however long
# the queue is (the state query shows only its front)
QUERY_HOLDING = "holding"
# Queue items a state query returns: its answer must stay under Temporal's 2 MB payload limit
# (about 250 bytes an item); `queue_length` counts them all.
STATE_QUEUE_ITEMS = 1000


# ApplicationError types that activities raise for mistakes in the fleet repo (never retried).
ERR_FLEET = "FleetError"
# The pinned worker no longer has the deployment's checkout (it restarted and swept it): the
# deployment redoes its work on a live worker, as when the worker is lost.
ERR_CHECKOUT_GONE = "CheckoutGone"
ERR_PUBLISH_TIMEOUT = "PublishTimeout"

# Search attributes (Keyword), registered by the dev stack and documented for production.
SA_REPO = "RollwrightRepo"
SA_ROOT = "RollwrightRoot"
SA_REVISION = "RollwrightRevision"
SA_TRIGGER = "RollwrightTrigger"
SA_STATE = "RollwrightState"
SEARCH_ATTRIBUTES = (SA_REPO, SA_ROOT, SA_REVISION, SA_TRIGGER, SA_STATE)

REVIEW_TIMEOUT_SECONDS = 7 * 24 * 3600
IDLE_TIMEOUT_SECONDS = 60 * 60


def deploy_workflow_id(repo: str, root: str) -> str:
    return f"deploy:{repo}:{root}"


def dispatch_workflow_id(repo: str, after: str) -> str:
    return f"dispatch:{repo}:{after}"


class Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=False)


Trigger = Literal["merge", "manual"]
Decision = Literal["approve", "reject"]
Relation = Literal["first", "same", "ahead", "behind", "diverged"]
DeploymentState = Literal[
    "queued",
    "rendering",
    "awaiting_review",
    "approved",
    "publishing",
    "published",
    "verifying",  # published; waiting for Argo CD / the HTTP check (docs/verification.md)
    "verified",
    "unhealthy",
    "rejected",
    "timed_out",
    "skipped",
    "failed",
    "cancelled",
]
TERMINAL_STATES: frozenset[str] = frozenset(
    {
        "published",
        "verified",
        "unhealthy",
        "rejected",
        "timed_out",
        "skipped",
        "failed",
        "cancelled",
    }
)
# The states in which a root's cluster was given the deployment's render.
DELIVERED_STATES: frozenset[str] = frozenset({"published", "verifying", "verified", "unhealthy"})


class RepoRef(Payload):
    """A fleet repository as GitHub names it, plus how to reach it."""

    owner: str
    name: str
    installation_id: int | None = None
    # For display and links only: the worker clones from the configured GitHub, never from this
    # (a caller who could choose it would choose what is rendered and where the token goes).
    clone_url: str = ""
    default_branch: str = "main"
    html_url: str = ""

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


class HotfixRef(Payload):
    """A deployment of an unmerged pull request's head (`/rollwright hotfix`): which pull
    request, at which head. It locks its root until that pull request is merged or someone
    clicks Unlock (docs/governance.md, "Hotfixes")."""

    pr: int
    head: str
    url: str = ""  # the pull request's page, for links

    @property
    def label(self) -> str:
        return f"hotfix from #{self.pr}"


# --- DispatchWorkflow ------------------------------------------------------------------------


class DispatchInput(Payload):
    repo: RepoRef
    before: str  # all zeros for a new branch
    after: str
    forced: bool = False
    pusher: str | None = None
    delivery_id: str | None = None
    # Manual re-runs (check_suite rerequested): these roots, not the diff.
    roots: list[str] | None = None
    trigger: Trigger = "merge"
    # NewRevision.reason for every root; empty: "push" for merges, "rerequested" for manual.
    reason: str = ""
    # The dispatch of the repository's previous delivery (the gateway's outbox order): this one
    # queues its revisions only once that one has finished, so root queues see pushes in the
    # order GitHub delivered them.
    after_dispatch: str | None = None


class AwaitDispatchRequest(Payload):
    workflow_id: str
    timeout_seconds: float = 15 * 60


class AffectedRequest(Payload):
    repo: RepoRef
    before: str
    after: str
    forced: bool = False


class AffectedResult(Payload):
    roots: list[str]
    all_roots: bool = False  # True when the diff could not be computed (forced push, unknown base)
    reason: str = ""


class DispatchResult(Payload):
    roots: list[str]
    all_roots: bool = False
    # The fleet could not be read at the pushed revision (`path:line: message`); the commit's
    # `rollwright` check run says so and nothing was queued.
    error: str | None = None


# --- DeployWorkflow --------------------------------------------------------------------------


class NewRevision(Payload):
    """Signal: deploy `revision` of the root (a merge, or a manual deploy / re-run)."""

    revision: str
    trigger: Trigger = "merge"
    requested_by: str | None = None
    reason: str = ""  # "push", "rerequested", "api", "rollback"
    enqueued_at: datetime | None = None  # set by the workflow from workflow.now()
    # Chosen by the gateway for API deploys, so it can answer with the job page; the workflow
    # picks one (workflow.uuid4) when absent, or keeps the queued item's when the revision is
    # already queued or running.
    deployment_id: str | None = None
    # A hotfix (trigger manual, reason "hotfix"): the pull request whose head this is.
    hotfix: HotfixRef | None = None


class HotfixMerged(Payload):
    """Signal: the pull request of a hotfix was merged (the hotfix lock opens)."""

    pr: int
    merge_commit_sha: str | None = None
    by: str | None = None  # who merged it


class UnlockSignal(Payload):
    by: str | None = None
    # The check run clicked (a queued merge's): a click that does not count is shown there at
    # once, whatever the length of the queue (docs/governance.md).
    check_run_id: int | None = None


class QueueItem(Payload):
    deployment_id: str  # assigned at enqueue (a workflow side effect), the check run's external_id
    revision: str
    trigger: Trigger
    requested_by: str | None = None
    reason: str = ""
    enqueued_at: datetime
    check_run_id: int | None = None  # the queued item's check run, when one was created
    # Whether this deployment locks the queue once it reaches publish (see DeployWorkflow).
    locks_queue: bool = False
    hotfix: HotfixRef | None = None


class LockState(Payload):
    """Set by a manual deployment; merge items wait until someone clicks Unlock."""

    locked: bool = False
    by_deployment: str | None = None
    revision: str | None = None
    since: datetime | None = None
    # Locked by a hotfix: the merge of its pull request opens the lock.
    hotfix: HotfixRef | None = None


class FleetRoots(Payload):
    """Every root of a fleet repository at a pushed revision of its default branch (written
    by `affected_roots`): the fleet page lists them, deployed or not."""

    revision: str
    roots: list[str]


class LatestDeployment(Payload):
    """The root's latest deployment attempt, persisted in the blob store as latest.json."""

    SCHEMA: int = 1

    deployment_id: str
    revision: str
    trigger: Trigger
    state: DeploymentState
    render_digest: str | None = None
    approved_by: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    check_run_id: int | None = None
    message: str = ""
    # Blob prefix of the last *published* render (the diff base), carried forward when this
    # attempt failed: a failed apply becomes latest, but the cluster still runs the old render.
    published_prefix: str | None = None
    published_revision: str | None = None
    # Which deployment published that render, and when: what a review says it compares with.
    # Filled in when latest.json is written (None in files written before the fields).
    published_deployment_id: str | None = None
    published_at: datetime | None = None
    # The queue lock lives here so a restarted DeployWorkflow rebuilds it: this attempt locks
    # merged revisions out (None in files written before the field: trigger == "manual"),
    # until someone clicks Unlock, which is recorded here too.
    locks_queue: bool | None = None
    unlocked_by: str | None = None
    unlocked_at: datetime | None = None
    hotfix: HotfixRef | None = None


def locks_queue(latest: LatestDeployment) -> bool:
    """Whether this attempt locks merged revisions out: a locking (manual) deployment that
    reached publish, successfully or not."""
    # Delivered (published, and verifying/verified/unhealthy after it) or failed.
    if latest.state not in DELIVERED_STATES and latest.state != "failed":
        return False
    return latest.locks_queue if latest.locks_queue is not None else latest.trigger == "manual"


def lock_from_latest(latest: LatestDeployment | None) -> LockState:
    """The queue lock as a function of latest.json: the DeployWorkflow rebuilds it from there
    after a restart, and the root page reads it the same way."""
    if latest is None or not locks_queue(latest) or latest.unlocked_at is not None:
        return LockState()
    return LockState(
        locked=True,
        by_deployment=latest.deployment_id,
        revision=latest.revision,
        since=latest.finished_at,
        hotfix=latest.hotfix,
    )


class CurrentDeployment(Payload):
    deployment_id: str
    revision: str
    trigger: Trigger
    state: DeploymentState
    started_at: datetime
    check_run_id: int | None = None


class RootQueueInput(Payload):
    repo: RepoRef
    root: str
    # Carried across continue-as-new; empty on a fresh start.
    lock: LockState | None = None
    latest: LatestDeployment | None = None
    loaded_latest: bool = False
    last_activity_at: datetime | None = None
    # Limits, None for the workflow's defaults: operational knobs, and how the tests make
    # them bite quickly. Continue-as-new once the history has this many events; at most this
    # many merges queued; how often to ask after a deployment an earlier run started.
    max_history_events: int | None = None
    max_queued: int | None = None
    detached_check_seconds: int | None = None
    # The queue packed (`pack_queue`; a long one is too big for a payload as JSON), and the
    # deployment that was running when the previous run continued as new (it runs on, and
    # reports its end by signal).
    queue_packed: str | None = None
    running: QueueItem | None = None
    current: CurrentDeployment | None = None
    # Queued items whose check run or SQL row was still to be written (deployment ids), and
    # an Unlock not yet written to latest.json (carried in `latest`).
    changed: list[str] = Field(default_factory=list)
    unrecorded: list[str] = Field(default_factory=list)
    unlock_unsaved: bool = False
    # Unlock clicks that did not count, as the waiting check runs list them (the newest).
    unlock_refusals: list[str] = Field(default_factory=list)
    # Pull requests merged after they were hotfixed here: a hotfix of one of them that ends
    # later does not lock the queue.
    merged_hotfixes: list[int] = Field(default_factory=list)
    # Their merge signals (who merged, the merge commit), for the audit row of a hotfix lock
    # that opens as its deployment ends (an older run's input has none: that row then names
    # the pull request alone).
    merged_hotfix_signals: list[HotfixMerged] = Field(default_factory=list)


class RootQueueState(Payload):
    """Query result: what the Temporal UI and the job pages show about a root."""

    repo: str
    root: str
    queue: list[QueueItem]  # the first STATE_QUEUE_ITEMS, in order
    queue_ages_seconds: list[float]
    lock: LockState
    current: CurrentDeployment | None
    latest: LatestDeployment | None
    queue_length: int


class DeploymentUpdate(Payload):
    """Signal from a DeploymentWorkflow to its parent at every state change."""

    deployment_id: str
    state: DeploymentState
    check_run_id: int | None = None
    message: str = ""
    render_digest: str | None = None
    approved_by: str | None = None
    # On the last update (a terminal state): the latest.json the deployment wrote, if any.
    latest: LatestDeployment | None = None


def pack_queue(queue: list[QueueItem]) -> str:
    """A queue as compact text for continue-as-new: zlib-compressed JSON, base64."""
    raw = json.dumps([item.model_dump(mode="json") for item in queue], separators=(",", ":"))
    return base64.b64encode(zlib.compress(raw.encode(), 6)).decode()


def unpack_queue(packed: str) -> list[QueueItem]:
    raw = zlib.decompress(base64.b64decode(packed)).decode()
    return [QueueItem.model_validate(item) for item in json.loads(raw)]


# --- DeploymentWorkflow --------------------------------------------------------------------------


class DeploymentInput(Payload):
    deployment_id: str
    repo: RepoRef
    root: str
    revision: str
    trigger: Trigger
    requested_by: str | None = None
    relation: Relation = "first"
    latest: LatestDeployment | None = None
    queued_check_run_id: int | None = None
    queue_summary: str = ""
    # Set by the parent: manual and diverged deployments always ask, even with an empty diff.
    require_confirmation: bool = False
    # Copied into latest.json: this deployment locks the queue once it reaches publish.
    locks_queue: bool = False
    hotfix: HotfixRef | None = None


# Where a person acted: a check run button, a job page button, the API, a PR review.
AuditSource = Literal["check_run", "page", "api", "pr_review", "pr_comment", "pr_merge"]


class ReviewSignal(Payload):
    decision: Decision
    by: str | None = None
    # Where the click was made: the check run's repository, name and head commit. It counts
    # only on the deployment's own check run (senders before this left them out).
    repo: str | None = None
    check_run_name: str | None = None
    head_sha: str | None = None
    source: AuditSource = "check_run"


class DeploymentResult(Payload):
    deployment_id: str
    state: DeploymentState
    message: str = ""
    render_digest: str | None = None
    approved_by: str | None = None
    check_run_id: int | None = None
    published: bool = False
    # What the child persisted as latest.json (published or failed apply); None otherwise.
    latest: LatestDeployment | None = None


class DeploymentStatus(Payload):
    """How a deployment workflow stands, for a root's queue that did not hear its end."""

    status: str  # running, completed, failed, canceled, terminated, timed_out, not_found
    result: DeploymentResult | None = None  # when completed


# --- activity payloads -----------------------------------------------------------------------


class CheckoutRequest(Payload):
    repo: RepoRef
    revision: str


class CheckoutResult(Payload):
    path: str  # on the worker that ran it; later activities run on the same task queue
    revision: str


class RelationRequest(Payload):
    repo: RepoRef
    base: str | None
    head: str


class RenderRequest(Payload):
    repo: RepoRef
    root: str
    revision: str
    checkout_path: str
    deployment_id: str


class RenderSummary(Payload):
    """A render stored (redacted) in the blob store; plaintext never leaves the worker."""

    digest: str
    file_count: int
    blob_prefix: str  # renders/<owner>/<repo>/<root>/<sha>/


class RenderFailure(Payload):
    message: str  # fleet-repo error, already redacted


class DiffRequest(Payload):
    repo: RepoRef
    root: str
    new_prefix: str
    old_prefix: str | None  # None: nothing deployed yet
    deployment_id: str


class DiffSummary(Payload):
    added: int
    removed: int
    changed: int
    empty: bool
    text: str  # redacted Markdown, already cut to fit a check run
    full_key: str  # blob key of the full redacted diff


class CheckRunAction(Payload):
    label: str
    description: str
    identifier: Literal[
        "approve", "reject", "unlock", "promote", "halt", "resume", "rollback", "approve_all"
    ]


class CheckRunRequest(Payload):
    """Create (check_run_id None) or fully update one check run."""

    repo: RepoRef
    check_run_id: int | None = None
    name: str
    head_sha: str
    external_id: str
    status: Literal["queued", "in_progress", "completed"]
    conclusion: (
        Literal[
            "success",
            "failure",
            "neutral",
            "cancelled",
            "skipped",
            "timed_out",
            "action_required",
        ]
        | None
    ) = None
    title: str
    summary: str
    text: str = ""
    actions: list[CheckRunAction] = Field(default_factory=list)
    details_url: str | None = None
    # Add a link to the root's page (its live queue) to the summary.
    root_page: bool = False


class CheckRunBatch(Payload):
    requests: list[CheckRunRequest]


class CheckRunRefs(Payload):
    refs: list[CheckRunRef]


class DeploymentRecords(Payload):
    records: list[DeploymentRecord]


class CheckRunRef(Payload):
    check_run_id: int
    html_url: str = ""


class PublishRequest(Payload):
    repo: RepoRef
    root: str
    revision: str
    deployment_id: str
    trigger: Trigger
    approved_by: str | None = None
    # Empty since publish stopped being pinned: publishers work from the stored render (and
    # those that need plaintext re-render on their own worker and check the digest).
    checkout_path: str = ""
    blob_prefix: str
    render_digest: str | None = None


class PublishResult(Payload):
    target: str  # where the render went (blob key, branch@sha, s3 prefix)
    already_published: bool = False
    # The branch commit holding the render (git targets): what Argo CD must be Synced at.
    commit: str | None = None


class PersistLatestRequest(Payload):
    repo: RepoRef
    root: str
    latest: LatestDeployment


class LoadLatestRequest(Payload):
    repo: RepoRef
    root: str


class LatestLookup(Payload):
    latest: LatestDeployment | None = None


class SignalDeploysRequest(Payload):
    repo: RepoRef
    roots: list[str]
    revision: NewRevision


class AuditRecord(Payload):
    """One person's action on a deployment or a root (approve, reject, unlock, …), whether it
    counted, and why not when it did not: the audit trail of job pages and `/api/`."""

    repo: str
    root: str | None = None
    deployment_id: str | None = None
    action: str
    actor: str | None = None
    source: AuditSource = "check_run"
    # None: received, not judged yet (the gateway's row of a click a workflow judges).
    counted: bool | None
    reason: str = ""
    at: datetime


class DeploymentRecord(Payload):
    """One row of deployment history (SQL): the query side of job pages and the API."""

    deployment_id: str
    repo: str
    root: str
    revision: str
    trigger: Trigger
    state: DeploymentState
    requested_by: str | None = None
    approved_by: str | None = None
    check_run_id: int | None = None
    render_digest: str | None = None
    added: int | None = None
    removed: int | None = None
    changed: int | None = None
    message: str = ""
    at: datetime
    hotfix: HotfixRef | None = None
