"""Workflow tests on Temporal's time-skipping test server with in-memory activity doubles.

`World` is a stateful fake of everything the deploy workflows touch (latest.json store, check
runs with every create/update, revision ancestry, renders, diffs, publishing, SQL records),
registered under the real activity names from shared/contracts/deploy.py. The pinned activities run
on a second worker polling the per-test "worker" queue that `worker_task_queue` returns, like
a real worker's own queue. The real activities are tested elsewhere and end to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar, cast

from temporalio import activity
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.verify import plan_for
from shared.contracts.activityrefs import (
    ACT_AFFECTED_ROOTS,
    ACT_AWAIT_DISPATCH,
    ACT_CARRY_OVER,
    ACT_CHECK_RUN,
    ACT_CHECKOUT,
    ACT_CLEANUP_CHECKOUT,
    ACT_DEPLOYMENT_STATUS,
    ACT_DIFF_RENDER,
    ACT_JUDGE_ACTION,
    ACT_JUDGE_REVIEW,
    ACT_LOAD_LATEST,
    ACT_NOTIFY_PROMOTIONS,
    ACT_PERSIST_LATEST,
    ACT_PROMOTION_SIGNAL,
    ACT_PROMOTION_TOUCHED,
    ACT_PUBLISH,
    ACT_QUEUE_CHECK_RUNS,
    ACT_RECORD_AUDIT,
    ACT_RECORD_DEPLOYMENT,
    ACT_RECORD_DEPLOYMENTS,
    ACT_RENDER_ROOT,
    ACT_REPORT_REVIEW,
    ACT_REVIEW_POLICY,
    ACT_REVISION_RELATION,
    ACT_SIGNAL_DEPLOYS,
    ACT_VERIFY_PLAN,
    ACT_WORKER_ALIVE,
    ACT_WORKER_TASK_QUEUE,
)
from shared.contracts.deploy import (
    DEPLOY_WORKFLOW,
    ERR_CHECKOUT_GONE,
    ERR_FLEET,
    QUERY_STATE,
    SEARCH_ATTRIBUTES,
    SIGNAL_NEW_REVISION,
    SIGNAL_REVIEW,
    SIGNAL_UNLOCK,
    TASK_QUEUE,
    TERMINAL_STATES,
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
    DeploymentResult,
    DeploymentStatus,
    DiffRequest,
    DiffSummary,
    LatestDeployment,
    LatestLookup,
    LoadLatestRequest,
    NewRevision,
    PersistLatestRequest,
    PublishRequest,
    PublishResult,
    Relation,
    RelationRequest,
    RenderRequest,
    RenderSummary,
    RepoRef,
    ReviewSignal,
    RootQueueInput,
    RootQueueState,
    SignalDeploysRequest,
    Trigger,
    admission_task_queue,
    deploy_workflow_id,
    waits_task_queue,
)
from shared.contracts.governance import (
    REVISION_REVIEW_WORKFLOW,
    SIGNAL_ROOT_REVIEW,
    ActionRequest,
    CarryOver,
    CarryOverRequest,
    JudgeRequest,
    OwnersRequirement,
    PolicyChecks,
    PolicySetRequirement,
    ReportReview,
    ReviewPolicy,
    ReviewPolicyRequest,
    RevisionReviewInput,
    Verdict,
    revision_review_workflow_id,
)
from shared.contracts.promotion import (
    NotifyPromotionsRequest,
    SignalPromotionsRequest,
    TouchedRequest,
    TouchedResult,
)
from shared.contracts.queueing import await_closed
from shared.contracts.verify import (
    VerifyPlanRequest,
    VerifyPlanResult,
)
from shared.devstack.temporal import temporal_binary
from shared.engine.config.fleet import FleetConfig
from shared.review.governance import decide, policy_for
from tests.support import histories, queries, timeskip
from tests.support.judging import judge_click
from workflows.deployment import DeploymentWorkflow
from workflows.dispatch import DispatchWorkflow
from workflows.revision import RevisionReviewWorkflow
from workflows.rootqueue.workflow import RootQueueWorkflow

T = TypeVar("T")

WORKFLOWS = [DispatchWorkflow, RootQueueWorkflow, DeploymentWorkflow, RevisionReviewWorkflow]
REPO = RepoRef(owner="acme", name="fleet", installation_id=7, clone_url="/nowhere/fleet.git")
PublishMode = Literal["ok", "fail", "fatal"]


def published_commit(revision: str) -> str:
    """The publish double's branch commit for a fleet revision (another 40-hex string)."""
    return revision[::-1]


def sha(label: str) -> str:
    """A readable fake 40-hex revision: sha("a") == "aaaa…", sha("b2") == "b2b2…"."""
    text = label.encode().hex() if not all(c in "0123456789abcdef" for c in label) else label
    return (text * 40)[:40]


@dataclass
class World:
    """What the activities see and do; every call leaves a trace the tests assert on."""

    pinned_queue: str = "worker-1"
    # Worker loss: `worker_task_queue` answers these first, then `pinned_queue`; the queues in
    # `spare_workers` get a worker too (the others are dead: nobody takes their tasks).
    queue_answers: list[str] = field(default_factory=list)
    spare_workers: list[str] = field(default_factory=list)
    # Queues whose worker is alive but busy (nobody takes their tasks yet): `worker_alive`
    # says yes for them, as for the pinned queue and the spares; `Harness.hire` starts one.
    busy: set[str] = field(default_factory=set)
    alive_asked: list[str] = field(default_factory=list)
    checkout_holds: dict[str, asyncio.Event] = field(default_factory=dict)  # queue -> event
    swept: set[str] = field(default_factory=set)  # queues whose worker lost its checkouts once
    latest: dict[str, LatestDeployment] = field(default_factory=dict)  # root -> latest.json
    persisted: list[LatestDeployment] = field(default_factory=list)
    check_runs: dict[int, list[CheckRunRequest]] = field(default_factory=dict)
    relations: dict[tuple[str | None, str], Relation] = field(default_factory=dict)
    render_errors: dict[str, str] = field(default_factory=dict)  # revision -> fleet error
    check_run_errors: set[str] = field(default_factory=set)  # revisions GitHub refuses
    relation_errors: set[str] = field(default_factory=set)  # revisions the mirror lacks
    empty_diffs: set[str] = field(default_factory=set)
    publish_modes: dict[str, PublishMode] = field(default_factory=dict)
    publish_attempts: list[str] = field(default_factory=list)
    records: list[DeploymentRecord] = field(default_factory=list)
    audits: list[AuditRecord] = field(default_factory=list)
    check_run_batches: list[int] = field(default_factory=list)  # sizes of batched writes
    # check-run ids by head commit: waits over thousands of queued revisions stay cheap
    runs_by_revision: dict[str, list[int]] = field(default_factory=dict)
    affected: dict[tuple[str, str], AffectedResult] = field(default_factory=dict)
    affected_calls: list[AffectedRequest] = field(default_factory=list)
    fleet_errors: dict[str, str] = field(default_factory=dict)  # revision -> fleet error
    # revision -> event: its affected roots are known once the test sets it
    affected_holds: dict[str, asyncio.Event] = field(default_factory=dict)
    awaiting: list[str] = field(default_factory=list)  # dispatches waited on, as asked
    awaited: list[tuple[str, str]] = field(default_factory=list)  # (dispatch, how it ended)
    signalled: list[SignalDeploysRequest] = field(default_factory=list)
    pinned_calls: list[tuple[str, str]] = field(default_factory=list)  # (activity, task queue)
    cleaned: list[str] = field(default_factory=list)
    client: Client | None = None  # set by the harness: signal_deploys really signals
    # Promotions: what dispatch and deploy told the PromotionWorkflows.
    touched: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    promotion_signals: list[SignalPromotionsRequest] = field(default_factory=list)
    notified: list[NotifyPromotionsRequest] = field(default_factory=list)
    # (revision, state) -> event: recording that row waits until the test sets it, so a
    # signal can arrive while the workflow waits on the activity; `held` lists them.
    record_holds: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    held: list[DeploymentRecord] = field(default_factory=list)
    # Delivery verification: the fleet's rollwright.yaml as the deployed revision
    # has it (its `verify` rules are planned by the real `plan_for`), and the plans asked for.
    config: FleetConfig = field(default_factory=FleetConfig)
    plans: list[VerifyPlanRequest] = field(default_factory=list)
    # Called with (root, published commit) after each publish: tests move a fake Argo CD.
    on_publish: Callable[[str, str], None] | None = None
    # Governance: the `review:` section of rollwright.yaml every revision has, the
    # GitHub permission of each login (anyone else: write) and the members of each team
    # (`@org/slug`, lowercase). `judge`: a real judge_review activity instead of the double.
    review: dict[str, Any] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)
    teams: dict[str, set[str]] = field(default_factory=dict)
    judge: Callable[..., Any] | None = None
    judged: list[ActionRequest] = field(default_factory=list)  # Unlock clicks judged
    owners: list[OwnersRequirement] = field(default_factory=list)  # what OWNERS files ask
    # What the policy sets found (tests compute them with the real engines).
    policy_sets: list[PolicySetRequirement] = field(default_factory=list)
    checks: PolicyChecks | None = None
    policies: list[ReviewPolicyRequest] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    reports: list[ReportReview] = field(default_factory=list)  # to the revision summaries
    # revision -> what its merged pull request's reviews carry over (none: a direct push)
    carried: dict[str, CarryOver] = field(default_factory=dict)

    # --- assertions helpers -------------------------------------------------------------

    @property
    def outcomes(self) -> list[DeploymentRecord]:
        """Records of finished deployments (DeploymentWorkflow records each state on the way)."""
        return [r for r in self.records if r.state in TERMINAL_STATES]

    def runs_for(self, revision: str, root: str | None = None) -> list[int]:
        """Check-run ids created for a revision (of one root), oldest first; the revision's
        `rollwright` check run (Approve all; an unreadable fleet) is not a root's: see
        `revision_runs`."""
        return [
            i
            for i in self.runs_by_revision.get(revision, [])
            if self.check_runs[i][0].name != "rollwright"
            and root in (None, self.check_runs[i][0].name.removeprefix("rollwright/"))
        ]

    def revision_runs(self, revision: str) -> list[int]:
        """The revision's `rollwright` check runs (its Approve all summary, or the failure of
        an unreadable fleet), oldest first."""
        return [
            i
            for i in self.runs_by_revision.get(revision, [])
            if self.check_runs[i][0].name == "rollwright"
        ]

    def check_run_of(self, deployment_id: str) -> int:
        """The check run whose external id is the deployment."""
        return next(
            i for i, reqs in self.check_runs.items() if reqs[0].external_id == deployment_id
        )

    def last(self, check_run_id: int) -> CheckRunRequest:
        return self.check_runs[check_run_id][-1]

    def conclusions(self, check_run_id: int) -> list[str | None]:
        return [r.conclusion or r.status for r in self.check_runs[check_run_id]]

    # --- shared-queue activities --------------------------------------------------------

    @activity.defn(name=ACT_LOAD_LATEST.name)
    async def load_latest(self, req: LoadLatestRequest) -> LatestLookup:
        return LatestLookup(latest=self.latest.get(req.root))

    @activity.defn(name=ACT_PERSIST_LATEST.name)
    async def persist_latest(self, req: PersistLatestRequest) -> None:
        self.latest[req.root] = req.latest
        self.persisted.append(req.latest)

    @activity.defn(name=ACT_CHECK_RUN.name)
    async def check_run(self, req: CheckRunRequest) -> CheckRunRef:
        return self._write_check_run(req)

    @activity.defn(name=ACT_QUEUE_CHECK_RUNS.name)
    async def queue_check_runs(self, batch: CheckRunBatch) -> CheckRunRefs:
        self.check_run_batches.append(len(batch.requests))
        return CheckRunRefs(refs=[self._write_check_run(r) for r in batch.requests])

    @activity.defn(name=ACT_DEPLOYMENT_STATUS.name)
    async def deployment_status(self, workflow_id: str) -> DeploymentStatus:
        # As activities/dispatch.py asks (not imported: workflow modules under test import
        # this one inside the workflow sandbox).
        assert self.client is not None
        handle = self.client.get_workflow_handle(workflow_id, result_type=DeploymentResult)
        description = await handle.describe()
        status = description.status.name.lower() if description.status else "running"
        if status != "completed":
            return DeploymentStatus(status=status)
        return DeploymentStatus(status=status, result=await handle.result())

    def _write_check_run(self, req: CheckRunRequest) -> CheckRunRef:
        assert len(req.actions) <= 3
        if req.head_sha in self.check_run_errors:
            raise ApplicationError("422 Unprocessable Entity", non_retryable=True)
        if req.check_run_id is None:
            check_run_id = len(self.check_runs) + 1
            self.check_runs[check_run_id] = []
            self.runs_by_revision.setdefault(req.head_sha, []).append(check_run_id)
        else:
            check_run_id = req.check_run_id
            assert check_run_id in self.check_runs, f"update of unknown check run {req}"
            assert self.check_runs[check_run_id][0].external_id == req.external_id
        self.check_runs[check_run_id].append(req)
        return CheckRunRef(check_run_id=check_run_id, html_url=f"https://gh/runs/{check_run_id}")

    @activity.defn(name=ACT_RECORD_DEPLOYMENTS.name)
    async def record_deployments(self, batch: DeploymentRecords) -> None:
        for rec in batch.records:
            await self.record_deployment(rec)

    @activity.defn(name=ACT_RECORD_DEPLOYMENT.name)
    async def record_deployment(self, rec: DeploymentRecord) -> None:
        hold = self.record_holds.get((rec.revision, rec.state))
        if hold is not None:
            self.held.append(rec)
            await hold.wait()
        self.records.append(rec)

    @activity.defn(name=ACT_RECORD_AUDIT.name)
    async def record_audit(self, rec: AuditRecord) -> None:
        self.audits.append(rec)

    @activity.defn(name=ACT_REVISION_RELATION.name)
    async def revision_relation(self, req: RelationRequest) -> str:
        if req.head in self.relation_errors:
            raise ApplicationError(f"unknown revision {req.head}", non_retryable=True)
        if req.base is None:
            return "first"
        if req.base == req.head:
            return "same"
        return self.relations.get((req.base, req.head), "ahead")

    @activity.defn(name=ACT_WORKER_TASK_QUEUE.name)
    async def worker_task_queue(self) -> str:
        return self.queue_answers.pop(0) if self.queue_answers else self.pinned_queue

    @activity.defn(name=ACT_WORKER_ALIVE.name)
    async def worker_alive(self, task_queue: str) -> bool:
        self.alive_asked.append(task_queue)
        return task_queue in {self.pinned_queue, *self.spare_workers, *self.busy}

    @activity.defn(name=ACT_AFFECTED_ROOTS.name)
    async def affected_roots(self, req: AffectedRequest) -> AffectedResult:
        self.affected_calls.append(req)
        hold = self.affected_holds.get(req.after)
        if hold is not None:
            await hold.wait()
        if req.after in self.fleet_errors:
            raise ApplicationError(self.fleet_errors[req.after], type=ERR_FLEET, non_retryable=True)
        if (req.before, req.after) not in self.affected:
            raise ApplicationError(f"unexpected diff {req.before}..{req.after}", non_retryable=True)
        return self.affected[(req.before, req.after)]

    @activity.defn(name=ACT_AWAIT_DISPATCH.name)
    async def await_dispatch(self, req: AwaitDispatchRequest) -> str:
        assert self.client is not None
        self.awaiting.append(req.workflow_id)
        outcome = await await_closed(
            self.client, req.workflow_id, req.timeout_seconds, beat=activity.heartbeat, every=1
        )
        self.awaited.append((req.workflow_id, outcome))
        return outcome

    @activity.defn(name=ACT_SIGNAL_DEPLOYS.name)
    async def signal_deploys(self, req: SignalDeploysRequest) -> None:
        self.signalled.append(req)
        assert self.client is not None
        for root in req.roots:  # what the real activity does: signal-with-start per root
            await start_deploy(self.client, root, req.revision, repo=req.repo)

    @activity.defn(name=ACT_CARRY_OVER.name)
    async def carry_over(self, req: CarryOverRequest) -> CarryOver:
        found = self.carried.get(req.revision)
        return found or CarryOver(reason="this commit did not come from a merged pull request")

    @activity.defn(name=ACT_REPORT_REVIEW.name)
    async def report_review(self, report: ReportReview) -> None:
        self.reports.append(report)
        assert self.client is not None
        # What the real activity does: signal-with-start of the revision's summary workflow.
        await self.client.start_workflow(
            REVISION_REVIEW_WORKFLOW,
            RevisionReviewInput(repo=report.repo, revision=report.revision),
            id=revision_review_workflow_id(report.repo.full_name, report.revision),
            task_queue=TASK_QUEUE,
            start_signal=SIGNAL_ROOT_REVIEW,
            start_signal_args=[report.review],
        )

    @activity.defn(name=ACT_PROMOTION_TOUCHED.name)
    async def promotion_touched(self, req: TouchedRequest) -> TouchedResult:
        return TouchedResult(patch_ids=self.touched.get((req.before, req.after), []))

    @activity.defn(name=ACT_PROMOTION_SIGNAL.name)
    async def promotion_signal(self, req: SignalPromotionsRequest) -> None:
        self.promotion_signals.append(req)

    @activity.defn(name=ACT_NOTIFY_PROMOTIONS.name)
    async def notify_promotions(self, req: NotifyPromotionsRequest) -> int:
        self.notified.append(req)
        return 0

    # --- pinned activities (the worker's own queue) -------------------------------------

    def _pinned(self) -> None:
        info = activity.info()
        self.pinned_calls.append((info.activity_type, info.task_queue))

    @activity.defn(name=ACT_CHECKOUT.name)
    async def checkout(self, req: CheckoutRequest) -> CheckoutResult:
        self._pinned()
        hold = self.checkout_holds.get(activity.info().task_queue)
        if hold is not None and not hold.is_set():
            await hold.wait()
        return CheckoutResult(path=f"/checkouts/{req.revision}", revision=req.revision)

    @activity.defn(name=ACT_RENDER_ROOT.name)
    async def render_root(self, req: RenderRequest) -> RenderSummary:
        self._pinned()
        if req.revision in self.render_errors:
            raise ApplicationError(
                self.render_errors[req.revision], type=ERR_FLEET, non_retryable=True
            )
        if activity.info().task_queue in self.swept:
            self.swept.discard(activity.info().task_queue)
            raise ApplicationError("checkout gone", type=ERR_CHECKOUT_GONE, non_retryable=True)
        return RenderSummary(
            digest=f"digest-{req.revision[:8]}",
            file_count=3,
            blob_prefix=f"renders/{REPO.full_name}/{req.root}/{req.revision}/",
        )

    @activity.defn(name=ACT_DIFF_RENDER.name)
    async def diff_render(self, req: DiffRequest) -> DiffSummary:
        self._pinned()
        revision = req.new_prefix.rstrip("/").rsplit("/", 1)[-1]
        if revision in self.empty_diffs:
            return DiffSummary(added=0, removed=0, changed=0, empty=True, text="", full_key="k")
        return DiffSummary(
            added=1,
            removed=0,
            changed=2,
            empty=False,
            text=f"diff of {revision[:8]} against {req.old_prefix}",
            full_key=f"diffs/{req.deployment_id}",
        )

    @activity.defn(name=ACT_REVIEW_POLICY.name)
    async def review_policy(self, req: ReviewPolicyRequest) -> ReviewPolicy:
        self._pinned()
        self.policies.append(req)
        config = FleetConfig.model_validate({"review": self.review})
        policy = policy_for(config, req.root, "atlas", author=req.author, owners=self.owners)
        return policy.model_copy(update={"policy_sets": self.policy_sets, "checks": self.checks})

    @activity.defn(name=ACT_JUDGE_REVIEW.name)
    async def judge_review(self, req: JudgeRequest) -> Verdict:
        actor = req.actor or ""
        teams = {team for team, members in self.teams.items() if actor.lower() in members}
        verdict = decide(
            req.policy,
            req.decision,
            req.actor,
            repo=req.repo.full_name,
            permission=self.permissions.get(actor, "write"),
            teams=teams,
            satisfied=req.satisfied,
        )
        self.verdicts.append(verdict)
        return verdict

    @activity.defn(name=ACT_JUDGE_ACTION.name)
    async def judge_action(self, req: ActionRequest) -> Verdict:
        self.judged.append(req)
        return judge_click(req, [req.root] if req.root else [], self.review, self.access)

    @property
    def access(self) -> tuple[dict[str, str], dict[str, set[str]]]:
        return self.permissions, self.teams

    @activity.defn(name=ACT_PUBLISH.name)
    async def publish(self, req: PublishRequest) -> PublishResult:
        # Runs on the shared queue: publishers work from the stored render.
        self.publish_attempts.append(req.revision)
        mode = self.publish_modes.get(req.revision, "ok")
        if mode == "fail":
            raise ApplicationError("delivery target unreachable")
        if mode == "fatal":
            raise ApplicationError("target refused the render", non_retryable=True)
        if self.on_publish is not None:
            self.on_publish(req.root, published_commit(req.revision))
        return PublishResult(
            target=f"blob://published/{req.root}/{req.deployment_id}",
            commit=published_commit(req.revision),
        )

    @activity.defn(name=ACT_VERIFY_PLAN.name)
    async def verify_plan(self, req: VerifyPlanRequest) -> VerifyPlanResult:
        self.plans.append(req)
        return VerifyPlanResult(plan=plan_for(self.config, req))

    @activity.defn(name=ACT_CLEANUP_CHECKOUT.name)
    async def cleanup_checkout(self, res: CheckoutResult) -> None:
        self._pinned()
        self.cleaned.append(res.path)

    def shared_activities(self) -> list[Callable[..., Any]]:
        return [
            self.load_latest,
            self.persist_latest,
            self.check_run,
            self.record_deployment,
            self.record_deployments,
            self.record_audit,
            self.queue_check_runs,
            self.deployment_status,
            self.revision_relation,
            self.worker_task_queue,
            self.worker_alive,
            self.affected_roots,
            self.signal_deploys,
            self.await_dispatch,
            self.publish,
            self.verify_plan,
            self.promotion_touched,
            self.promotion_signal,
            self.notify_promotions,
            self.judge or self.judge_review,
            self.judge_action,
            self.report_review,
            self.carry_over,
        ]

    def pinned_activities(self) -> list[Callable[..., Any]]:
        return [
            self.checkout,
            self.render_root,
            self.diff_render,
            self.review_policy,
            self.cleanup_checkout,
        ]


async def start_deploy(
    client: Client,
    root: str,
    revision: NewRevision,
    *,
    repo: RepoRef = REPO,
    **limits: int | None,
) -> WorkflowHandle[Any, Any]:
    """Signal-with-start of a root's queue (RootQueueWorkflow), as the gateway and
    signal_deploys do. `limits`: RootQueueInput's limits, smaller for a test."""
    return await client.start_workflow(
        DEPLOY_WORKFLOW,
        RootQueueInput(repo=repo, root=root, **limits),
        id=deploy_workflow_id(repo.full_name, root),
        task_queue=TASK_QUEUE,
        start_signal=SIGNAL_NEW_REVISION,
        start_signal_args=[revision],
    )


@dataclass
class Harness:
    env: WorkflowEnvironment
    world: World
    spares: dict[str, Worker] = field(default_factory=dict)
    shared: Worker | None = None  # the shared queue's worker (workflows and activities)
    hired: list[tuple[Worker, asyncio.Task[None]]] = field(default_factory=list)

    @property
    def client(self) -> Client:
        return self.env.client

    @asynccontextmanager
    async def skipping_time(self) -> AsyncIterator[None]:
        """Let the test server skip to its next timer whenever every workflow waits (only
        while the test waits on a condition that needs time to pass)."""
        async with cast(Any, self.env).time_skipping_unlocked():
            yield

    async def hire(self, queue: str) -> None:
        """A worker starts polling `queue` (a busy worker that frees up)."""
        worker = Worker(
            self.client,
            task_queue=queue,
            activities=self.world.pinned_activities(),
            graceful_shutdown_timeout=timedelta(0),
        )
        self.spares[queue] = worker
        self.hired.append((worker, asyncio.create_task(worker.run())))

    async def lose(self, queue: str) -> None:
        """The worker polling `queue` dies: its running activities are cut off and nobody
        takes that queue's tasks any more."""
        await self.spares.pop(queue).shutdown()

    async def push(
        self,
        root: str,
        revision: str,
        trigger: Trigger = "merge",
        *,
        reason: str | None = None,
        by: str | None = None,
        deployment_id: str | None = None,
        **limits: int | None,
    ) -> WorkflowHandle[Any, Any]:
        signal = NewRevision(
            revision=revision,
            trigger=trigger,
            requested_by=by,
            reason=reason or ("push" if trigger == "merge" else "api"),
            deployment_id=deployment_id,
        )
        return await start_deploy(self.client, root, signal, **limits)

    async def run_chain(self, workflow_id: str, first_run_id: str) -> list[WorkflowHistory]:
        """Every run of a workflow id from `first_run_id` on, following continue-as-new."""
        return await histories.run_chain(self.client, workflow_id, first_run_id)

    def deploy(self, root: str) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(deploy_workflow_id(REPO.full_name, root))

    async def state(self, root: str) -> RootQueueState:
        # Waits on moving parts use the doubles' records instead of queries.
        return await queries.query(self.deploy(root), QUERY_STATE, RootQueueState)

    async def until_state(
        self, root: str, what: str, predicate: Callable[[RootQueueState], bool]
    ) -> RootQueueState:
        async def probe() -> RootQueueState | None:
            state = await self.state(root)
            return state if predicate(state) else None

        state: RootQueueState = await until(probe, what)
        return state

    async def awaiting_review(self, root: str, revision: str, timeout: float = 15.0) -> str:
        """Wait for a deployment of `revision` to sit at the review gate (its check run asks
        for Approve / Reject); its deployment id. Read from the check-run double, not by
        query, so continue-as-new cannot get in the way."""

        def asking() -> str | None:
            for run_id in self.world.runs_for(revision, root):
                last = self.world.last(run_id)
                if last.conclusion == "action_required" and any(
                    a.identifier == "approve" for a in last.actions
                ):
                    return last.external_id
            return None

        deployment_id: str = await until(
            asking, f"{root} at {revision[:8]} awaiting review", timeout
        )
        return deployment_id

    async def review(
        self, deployment_id: str, decision: str, by: str = "alice", **origin: Any
    ) -> DeploymentResult:
        """Click Approve / Reject on the deployment's check run (`origin` overrides where the
        click says it was made) and wait for the deployment to finish."""
        await self.click(deployment_id, decision, by, **origin)
        return await self.outcome(deployment_id)

    async def click(
        self, deployment_id: str, decision: str, by: str = "alice", **origin: Any
    ) -> None:
        """Send the review signal a click on the deployment's check run makes."""
        handle = self.client.get_workflow_handle(deployment_id)
        request = self.world.check_runs[self.world.check_run_of(deployment_id)][0]
        signal = ReviewSignal.model_validate(
            {
                "decision": decision,
                "by": by,
                "repo": REPO.full_name,
                "check_run_name": request.name,
                "head_sha": request.head_sha,
                **origin,
            }
        )
        await handle.signal(SIGNAL_REVIEW, signal)

    async def outcome(self, deployment_id: str) -> DeploymentResult:
        # Waiting on a result lets the test server skip time (review timeout, retry backoff).
        handle = self.client.get_workflow_handle(deployment_id, result_type=DeploymentResult)
        # Handles from start_workflow unlock time skipping while awaiting a result; this one
        # comes from get_workflow_handle, so unlock it the same way (time-skipping env only).
        if not self.env.supports_time_skipping:
            return await handle.result()
        async with cast(Any, self.env).time_skipping_unlocked():
            try:
                result: DeploymentResult = await handle.result()
            except RuntimeError as err:  # the server's long poll ended with nothing
                raise AssertionError(
                    f"deployment {deployment_id} did not end while the test server could skip "
                    "time: its clock is held (did a deployment end after its queue continued "
                    "as new? tests/support/timeskip.py)"
                ) from err
        return result

    async def unlock(self, root: str, by: str = "bob") -> None:
        await self.deploy(root).signal(SIGNAL_UNLOCK, {"by": by})


async def until(probe: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    """Poll `probe` (plain or async) until it returns something truthy; real time passes, the
    test server does not skip any meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(0.02)


async def event_times(handle: WorkflowHandle[Any, Any]) -> list[tuple[str, datetime]]:
    """(event kind, event time) of a run's history, e.g. ("timer_fired", ...): the reliable
    clock of a time-skipping test (the server may skip further once nothing is left)."""
    return [
        (
            str(e.WhichOneof("attributes")).removesuffix("_event_attributes"),
            e.event_time.ToDatetime(),
        )
        async for e in handle.fetch_history_events()
    ]


def time_between(events: list[tuple[str, datetime]], first: str, last: str) -> timedelta:
    """From the first `first` event to the last `last` event."""
    start = next(t for kind, t in events if kind == first)
    end = [t for kind, t in events if kind == last][-1]
    return end - start


@asynccontextmanager
async def _environment(dev_server: bool) -> AsyncIterator[WorkflowEnvironment]:
    if not dev_server:
        async with timeskip.environment() as env:
            yield env
        return
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        data_converter=pydantic_data_converter,
        search_attributes=[SearchAttributeKey.for_keyword(n) for n in SEARCH_ATTRIBUTES],
        dev_server_log_level="error",
    )
    try:
        yield env
    finally:
        await env.shutdown()


@asynccontextmanager
async def harness(
    world: World | None = None,
    workflows: Sequence[type] = WORKFLOWS,
    *,
    dev_server: bool = False,
    shared_slots: int | None = None,
    activities: Sequence[Callable[..., Any]] = (),
) -> AsyncIterator[Harness]:
    """A fresh time-skipping server (tests.support.timeskip), search attributes registered,
    a worker on the shared queue and one on the pinned worker queue. `workflows`: another
    version of the workflow code (replay tests of older histories). `dev_server`: the real
    dev server instead, in real time (the test server has no schedule-to-start timeouts).
    `shared_slots`: activities the shared-queue worker runs at once (the SDK's default: 100).
    `activities`: real activities to run beside the doubles on the shared queue."""
    world = world or World()
    # Governed merge deployments report to their revision's summary workflow; a test that
    # varies the other workflows still has it run (it is not one of theirs to vary).
    if RevisionReviewWorkflow not in workflows:
        workflows = [*workflows, RevisionReviewWorkflow]
    async with _environment(dev_server) as env:
        world.client = env.client
        shared = Worker(
            env.client,
            task_queue=TASK_QUEUE,
            workflows=workflows,
            activities=[*world.shared_activities(), *activities],
            max_concurrent_activities=shared_slots,
        )
        pinned = Worker(
            env.client, task_queue=world.pinned_queue, activities=world.pinned_activities()
        )
        spares = {
            queue: Worker(
                env.client,
                task_queue=queue,
                activities=world.pinned_activities(),
                graceful_shutdown_timeout=timedelta(0),
            )
            for queue in world.spare_workers
        }
        waits = Worker(
            env.client, task_queue=waits_task_queue(TASK_QUEUE), activities=[world.await_dispatch]
        )
        # deployments ask for their worker there (activities.admission)
        admitting = Worker(
            env.client,
            task_queue=admission_task_queue(TASK_QUEUE),
            activities=[world.worker_task_queue],
        )
        async with contextlib.AsyncExitStack() as stack:
            for worker in (shared, pinned, waits, admitting, *spares.values()):
                await stack.enter_async_context(worker)
            h = Harness(env=env, world=world, spares=spares, shared=shared)
            try:
                yield h
            finally:
                for worker, running in h.hired:
                    if not running.done():
                        await worker.shutdown()


def latest(
    revision: str,
    *,
    trigger: Trigger = "merge",
    state: str = "published",
    at: datetime | None = None,
    **extra: Any,
) -> LatestDeployment:
    """A latest.json as a previous deployment left it."""
    return LatestDeployment.model_validate(
        {
            "deployment_id": f"dep-{revision[:6]}",
            "revision": revision,
            "trigger": trigger,
            "state": state,
            "render_digest": f"digest-{revision[:8]}",
            "finished_at": at or datetime(2024, 1, 1),
            "published_prefix": f"renders/{REPO.full_name}/x/{revision}/",
            "published_revision": revision,
            **extra,
        }
    )


def revisions(items: Sequence[Any]) -> list[str]:
    return [i.revision for i in items]
