"""One typed reference per activity: its registered name, what it takes and what it returns.

Workflows call activities through these (`workflows.calls.run(ACT_CHECK_RUN, request, ...)`),
so workflow code imports no activity code and mypy checks that a call passes the request the
activity takes and reads the result it returns. The activities register under `ref.name`, and
a test checks every reference against the registered function's annotations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from shared.contracts.deploy import (
    AffectedRequest,
    AffectedResult,
    AuditRecord,
    AwaitDispatchRequest,
    CheckoutRequest,
    CheckoutResult,
    CheckRunBatch,
    CheckRunRef,
    CheckRunRefs,
    CheckRunRequest,
    DeploymentRecord,
    DeploymentRecords,
    DeploymentStatus,
    DiffRequest,
    DiffSummary,
    LatestLookup,
    LoadLatestRequest,
    PersistLatestRequest,
    PublishRequest,
    PublishResult,
    Relation,
    RelationRequest,
    RenderRequest,
    RenderSummary,
    SignalDeploysRequest,
)
from shared.contracts.governance import (
    ActionRequest,
    CarryOver,
    CarryOverRequest,
    JudgeRequest,
    ReportReview,
    ReviewPolicy,
    ReviewPolicyRequest,
    Verdict,
)
from shared.contracts.hotfix import (
    HotfixCommentRequest,
    HotfixJudgeRequest,
    HotfixMergedRequest,
    HotfixVerdict,
)
from shared.contracts.preview import (
    PreviewBuildRequest,
    PreviewCommentRef,
    PreviewCommentRequest,
    PreviewOutcome,
    PreviewRevisions,
    PreviewRevisionsRequest,
)
from shared.contracts.promotion import (
    CommitRequest,
    CommitResult,
    DeploymentsRequest,
    DeploymentsResult,
    EvaluateRequest,
    Evaluation,
    GraduateRequest,
    GraduateResult,
    NotifyPromotionsRequest,
    RollbackRequest,
    RollbackResult,
    SignalPromotionsRequest,
    TouchedRequest,
    TouchedResult,
)
from shared.contracts.verify import VerifyPlanRequest, VerifyPlanResult, VerifyRequest, VerifyResult

RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class ActivityRef(Generic[RequestT, ResultT]):
    """An activity as workflows see it. `request` is `None` for an activity that takes no
    argument; `result` is what the data converter decodes the answer into."""

    name: str
    # Any: a Literal alias (`Relation`) or None is a type form, not a `type`
    request: Any
    result: Any


# --- deployments: the root's queue and one deployment ---------------------------------------
ACT_REVISION_RELATION: ActivityRef[RelationRequest, Relation] = ActivityRef(
    "revision_relation", RelationRequest, Relation
)
ACT_LOAD_LATEST: ActivityRef[LoadLatestRequest, LatestLookup] = ActivityRef(
    "load_latest", LoadLatestRequest, LatestLookup
)
ACT_PERSIST_LATEST: ActivityRef[PersistLatestRequest, None] = ActivityRef(
    "persist_latest", PersistLatestRequest, None
)
ACT_CHECK_RUN: ActivityRef[CheckRunRequest, CheckRunRef] = ActivityRef(
    "check_run", CheckRunRequest, CheckRunRef
)
# Queued items' check runs and rows, a batch per call.
ACT_QUEUE_CHECK_RUNS: ActivityRef[CheckRunBatch, CheckRunRefs] = ActivityRef(
    "queue_check_runs", CheckRunBatch, CheckRunRefs
)
ACT_RECORD_DEPLOYMENT: ActivityRef[DeploymentRecord, None] = ActivityRef(
    "record_deployment", DeploymentRecord, None
)
ACT_RECORD_DEPLOYMENTS: ActivityRef[DeploymentRecords, None] = ActivityRef(
    "record_deployments", DeploymentRecords, None
)
ACT_RECORD_AUDIT: ActivityRef[AuditRecord, None] = ActivityRef("record_audit", AuditRecord, None)
# A deployment workflow's status by its workflow id (a queue asks about one it did not start).
ACT_DEPLOYMENT_STATUS: ActivityRef[str, DeploymentStatus] = ActivityRef(
    "deployment_status", str, DeploymentStatus
)
# Runs on the shared queue and names the worker's own queue: what follows is pinned to it.
ACT_WORKER_TASK_QUEUE: ActivityRef[None, str] = ActivityRef("worker_task_queue", None, str)
# Whether a worker (by its task queue) still polls: a busy worker is waited for, not replaced.
ACT_WORKER_ALIVE: ActivityRef[str, bool] = ActivityRef("worker_alive", str, bool)
ACT_CHECKOUT: ActivityRef[CheckoutRequest, CheckoutResult] = ActivityRef(
    "checkout", CheckoutRequest, CheckoutResult
)
ACT_RENDER_ROOT: ActivityRef[RenderRequest, RenderSummary] = ActivityRef(
    "render_root", RenderRequest, RenderSummary
)
ACT_DIFF_RENDER: ActivityRef[DiffRequest, DiffSummary] = ActivityRef(
    "diff_render", DiffRequest, DiffSummary
)
ACT_PUBLISH: ActivityRef[PublishRequest, PublishResult] = ActivityRef(
    "publish", PublishRequest, PublishResult
)
ACT_CLEANUP_CHECKOUT: ActivityRef[CheckoutResult, None] = ActivityRef(
    "cleanup_checkout", CheckoutResult, None
)

# --- review governance ------------------------------------------------------------------------
ACT_REVIEW_POLICY: ActivityRef[ReviewPolicyRequest, ReviewPolicy] = ActivityRef(
    "review_policy", ReviewPolicyRequest, ReviewPolicy
)
ACT_JUDGE_REVIEW: ActivityRef[JudgeRequest, Verdict] = ActivityRef(
    "judge_review", JudgeRequest, Verdict
)
# Signal-with-start of the revision's summary (RevisionReviewWorkflow).
ACT_REPORT_REVIEW: ActivityRef[ReportReview, None] = ActivityRef(
    "report_review", ReportReview, None
)
ACT_CARRY_OVER: ActivityRef[CarryOverRequest, CarryOver] = ActivityRef(
    "carry_over", CarryOverRequest, CarryOver
)
# Unlock and the rollout buttons: does the click count under the review policy in force.
ACT_JUDGE_ACTION: ActivityRef[ActionRequest, Verdict] = ActivityRef(
    "judge_action", ActionRequest, Verdict
)

# --- delivery verification --------------------------------------------------------------------
ACT_VERIFY_PLAN: ActivityRef[VerifyPlanRequest, VerifyPlanResult] = ActivityRef(
    "verify_plan", VerifyPlanRequest, VerifyPlanResult
)
ACT_VERIFY_DELIVERY: ActivityRef[VerifyRequest, VerifyResult] = ActivityRef(
    "verify_delivery", VerifyRequest, VerifyResult
)

# --- dispatch ---------------------------------------------------------------------------------
ACT_AFFECTED_ROOTS: ActivityRef[AffectedRequest, AffectedResult] = ActivityRef(
    "affected_roots", AffectedRequest, AffectedResult
)
# Signal-with-start of every affected root's queue.
ACT_SIGNAL_DEPLOYS: ActivityRef[SignalDeploysRequest, None] = ActivityRef(
    "signal_deploys", SignalDeploysRequest, None
)
# Waits for the repository's previous dispatch; answers how it ended.
ACT_AWAIT_DISPATCH: ActivityRef[AwaitDispatchRequest, str] = ActivityRef(
    "await_dispatch", AwaitDispatchRequest, str
)

# --- promotion --------------------------------------------------------------------------------
ACT_PROMOTION_EVALUATE: ActivityRef[EvaluateRequest, Evaluation] = ActivityRef(
    "promotion_evaluate", EvaluateRequest, Evaluation
)
ACT_PROMOTION_DEPLOYMENTS: ActivityRef[DeploymentsRequest, DeploymentsResult] = ActivityRef(
    "promotion_deployments", DeploymentsRequest, DeploymentsResult
)
ACT_PROMOTION_COMMIT: ActivityRef[CommitRequest, CommitResult] = ActivityRef(
    "promotion_commit", CommitRequest, CommitResult
)
ACT_PROMOTION_ROLLBACK: ActivityRef[RollbackRequest, RollbackResult] = ActivityRef(
    "promotion_rollback", RollbackRequest, RollbackResult
)
ACT_PROMOTION_GRADUATE: ActivityRef[GraduateRequest, GraduateResult] = ActivityRef(
    "promotion_graduate", GraduateRequest, GraduateResult
)
ACT_PROMOTION_TOUCHED: ActivityRef[TouchedRequest, TouchedResult] = ActivityRef(
    "promotion_touched", TouchedRequest, TouchedResult
)
ACT_PROMOTION_SIGNAL: ActivityRef[SignalPromotionsRequest, None] = ActivityRef(
    "promotion_signal", SignalPromotionsRequest, None
)
# Tells the rollouts waiting on a root that one of its deployments ended; answers how many.
ACT_NOTIFY_PROMOTIONS: ActivityRef[NotifyPromotionsRequest, int] = ActivityRef(
    "notify_promotions", NotifyPromotionsRequest, int
)

# --- pull request previews --------------------------------------------------------------------
ACT_PREVIEW_REVISIONS: ActivityRef[PreviewRevisionsRequest, PreviewRevisions] = ActivityRef(
    "preview_revisions", PreviewRevisionsRequest, PreviewRevisions
)
ACT_PREVIEW_BUILD: ActivityRef[PreviewBuildRequest, PreviewOutcome] = ActivityRef(
    "preview_build", PreviewBuildRequest, PreviewOutcome
)
ACT_PREVIEW_COMMENT: ActivityRef[PreviewCommentRequest, PreviewCommentRef] = ActivityRef(
    "preview_comment", PreviewCommentRequest, PreviewCommentRef
)

# --- hotfixes ---------------------------------------------------------------------------------
# Whether a `/rollwright hotfix` command may deploy (the pull request, its reviews and checks,
# the commenter, rollwright.yaml's `hotfix` on the default branch).
ACT_HOTFIX_JUDGE: ActivityRef[HotfixJudgeRequest, HotfixVerdict] = ActivityRef(
    "hotfix_judge", HotfixJudgeRequest, HotfixVerdict
)
# The sticky `rollwright:hotfix` comment on the pull request; answers its id.
ACT_HOTFIX_COMMENT: ActivityRef[HotfixCommentRequest, int] = ActivityRef(
    "hotfix_comment", HotfixCommentRequest, int
)
# Signal-with-start `hotfix_merged` to each hotfixed root's queue.
ACT_HOTFIX_MERGED: ActivityRef[HotfixMergedRequest, None] = ActivityRef(
    "hotfix_merged", HotfixMergedRequest, None
)

# Every activity a worker must register (the test of the registration walks this).
ALL: tuple[ActivityRef[Any, Any], ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, ActivityRef)
)
