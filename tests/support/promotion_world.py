"""PromotionWorkflow on the time-skipping server with a fake fleet behind its activities.

`Fleet` models one patch in a rollout sequence: which nodes it is active on at each revision,
the roots under each node, the gates, soak times, windows, dependencies and conflicts. The
activity doubles answer from it under the real activity names; the commit double writes a new
revision (the patch one node further) and, like the real deploy side, every root under the new
node then reports its deployment through the `deployment_finished` signal (published unless the
test says otherwise). Check runs, commits and pull requests leave traces the tests assert on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from shared.contracts.activityrefs import (
    ACT_CHECK_RUN,
    ACT_JUDGE_ACTION,
    ACT_PROMOTION_COMMIT,
    ACT_PROMOTION_DEPLOYMENTS,
    ACT_PROMOTION_EVALUATE,
    ACT_PROMOTION_GRADUATE,
    ACT_PROMOTION_ROLLBACK,
    ACT_RECORD_AUDIT,
)
from shared.contracts.deploy import (
    TASK_QUEUE,
    AuditRecord,
    CheckRunRef,
    CheckRunRequest,
    DeploymentState,
)
from shared.contracts.governance import ActionRequest, Verdict
from shared.contracts.promotion import (
    PROMOTION_WORKFLOW,
    QUERY_ROLLOUT,
    SIGNAL_DEPLOYMENT_FINISHED,
    CommitRequest,
    CommitResult,
    DeploymentFinished,
    DeploymentsRequest,
    DeploymentsResult,
    EvaluateRequest,
    Evaluation,
    GraduateRequest,
    GraduateResult,
    NodeInfo,
    PromotionInput,
    RollbackRequest,
    RollbackResult,
    RolloutView,
    RootDeployment,
    WindowInfo,
    promotion_workflow_id,
)
from tests.support import queries, timeskip
from tests.support.deploy_world import REPO
from tests.support.judging import judge_click
from workflows.promotion import PromotionWorkflow

PATCH = "hypershift-v4.18"
WORKFLOW_ID = promotion_workflow_id(REPO.full_name, PATCH)
Window = Callable[[str, datetime], WindowInfo]


def rev(n: int) -> str:
    return f"{n:x}".rjust(2, "0") * 20


@dataclass
class Fleet:
    plan: list[NodeInfo]
    roots: dict[str, list[str]]
    # revision -> how many nodes of the plan have the patch active (-1: the patch is gone)
    active: dict[str, int] = field(default_factory=dict)
    tip: str = ""
    conflicts: dict[str, list[str]] = field(default_factory=dict)
    unmet: dict[str, list[str]] = field(default_factory=dict)
    window: Window | None = None
    # root -> the state its next deployment ends in (default published); None: never reports
    outcomes: dict[str, DeploymentState | None] = field(default_factory=dict)
    rollback: Literal["manual", "auto"] = "manual"  # rollout.rollback of rollwright.yaml
    rollbacks: list[RollbackRequest] = field(default_factory=list)
    latest: dict[str, RootDeployment] = field(default_factory=dict)  # latest.json per root
    commits: list[CommitRequest] = field(default_factory=list)
    commit_times: list[datetime] = field(default_factory=list)
    evaluations: list[EvaluateRequest] = field(default_factory=list)
    graduations: list[GraduateRequest] = field(default_factory=list)
    check_runs: dict[int, list[CheckRunRequest]] = field(default_factory=dict)
    deployed: list[DeploymentFinished] = field(default_factory=list)
    client: Client | None = None
    # Governance: rollwright.yaml's `review:` section, GitHub's permission of each login
    # (anyone else: write) and team members (`@org/slug`); the clicks judged and audited.
    review: dict[str, Any] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)
    teams: dict[str, set[str]] = field(default_factory=dict)
    judged: list[ActionRequest] = field(default_factory=list)
    audits: list[AuditRecord] = field(default_factory=list)

    def start_at(self, active: int) -> str:
        self.tip = rev(len(self.active) + 1)
        self.active[self.tip] = active
        return self.tip

    def new_revision(self, active: int | None = None) -> str:
        """Someone else pushes to the default branch (the patch where it was)."""
        k = self.active[self.tip] if active is None else active
        return self.start_at(k)

    def node_of(self, root: str) -> int:
        return next(i for i, n in enumerate(self.plan) if root in self.roots.get(n.path, []))

    # --- assertions helpers ---------------------------------------------------------------

    def runs(self) -> list[list[CheckRunRequest]]:
        return list(self.check_runs.values())

    def last_run(self) -> CheckRunRequest:
        newest = max(self.check_runs)
        return self.check_runs[newest][-1]

    def shown(self) -> list[CheckRunRequest]:
        return [req for reqs in self.check_runs.values() for req in reqs]

    # --- activities -----------------------------------------------------------------------

    @activity.defn(name=ACT_PROMOTION_EVALUATE.name)
    async def evaluate(self, req: EvaluateRequest) -> Evaluation:
        self.evaluations.append(req)
        k = self.active[req.revision]
        if k < 0:
            return Evaluation(revision=req.revision, found=False)
        current = self.plan[k - 1].path if k > 0 else None
        nxt = self.plan[k].path if k < len(self.plan) else None
        window = WindowInfo()
        if nxt is not None and self.window is not None:
            window = self.window(nxt, req.now)
        return Evaluation(
            revision=req.revision,
            plan=self.plan,
            active_nodes=[n.path for n in self.plan[:k]],
            current_node=current,
            next_node=nxt,
            roots=self.roots.get(current, []) if current else [],
            node_roots={n.path: self.roots.get(n.path, []) for n in self.plan},
            unmet_dependencies=self.unmet.get(req.revision, []),
            graduation_ready=k == len(self.plan),
            conflicts=self.conflicts.get(req.revision, []),
            window=window,
            rollback=self.rollback,
        )

    @activity.defn(name=ACT_PROMOTION_DEPLOYMENTS.name)
    async def deployments(self, req: DeploymentsRequest) -> DeploymentsResult:
        reported = {r.root: r for r in req.reported}
        out = []
        for root in req.roots:
            found = reported.get(root)
            if found is None:
                known = self.latest.get(root)
                out.append(known or RootDeployment(root=root))
                continue
            out.append(
                RootDeployment(
                    root=root,
                    revision=found.revision,
                    deployment_id=found.deployment_id,
                    state=found.state,
                    message=found.message,
                    contains_patch=self.contains_patch(root, found.revision),
                )
            )
        return DeploymentsResult(deployments=out)

    def contains_patch(self, root: str, revision: str) -> bool:
        """Whether `revision` has the patch active at `root`."""
        return self.active.get(revision, 0) > self.node_of(root)

    @activity.defn(name=ACT_PROMOTION_COMMIT.name)
    async def commit(self, req: CommitRequest) -> CommitResult:
        k = self.active[self.tip]
        if k < len(self.plan) and self.plan[k].path == req.to_node:
            self.commits.append(req)
            self.commit_times.append(activity.info().current_attempt_scheduled_time)
            self.new_revision(k + 1)
            await self.deploy(req.to_node, self.tip)
            return CommitResult(revision=self.tip)
        return CommitResult(revision=self.tip, committed=False, message="already promoted")

    async def deploy(self, node: str, revision: str) -> None:
        """The deploy side: every root under `node` deploys `revision` and reports it."""
        for root in self.roots.get(node, []):
            state = self.outcomes.get(root, "published")
            if state is None:
                continue
            await self.report(root, revision, state)

    async def report(self, root: str, revision: str, state: DeploymentState) -> None:
        assert self.client is not None
        finished = DeploymentFinished(
            root=root,
            revision=revision,
            deployment_id=f"dep-{root}-{len(self.deployed)}",
            state=state,
            message="" if state == "published" else f"{state} at {root}",
        )
        self.deployed.append(finished)
        await self.client.get_workflow_handle(WORKFLOW_ID).signal(
            SIGNAL_DEPLOYMENT_FINISHED, finished
        )

    @activity.defn(name=ACT_PROMOTION_ROLLBACK.name)
    async def rollback_promotion(self, req: RollbackRequest) -> RollbackResult:
        """The revert commit: the patch one node back; the roots under the node deploy the
        new tip (without the patch) and, with their previous render, verify."""
        self.rollbacks.append(req)
        k = self.active[self.tip]
        if k == 0 or self.plan[k - 1].path != req.node:
            return RollbackResult(revision=self.tip, committed=False, message="not promoted")
        promoted = self.tip
        self.new_revision(k - 1)
        for root in self.roots.get(req.node, []):
            await self.report(root, self.tip, "verified")
        return RollbackResult(revision=self.tip, reverted=promoted)

    @activity.defn(name=ACT_PROMOTION_GRADUATE.name)
    async def graduate(self, req: GraduateRequest) -> GraduateResult:
        self.graduations.append(req)
        return GraduateResult(
            number=42, url="https://gh/acme/fleet/pull/42", branch=f"rollwright/graduate-{PATCH}"
        )

    @activity.defn(name=ACT_CHECK_RUN.name)
    async def check_run(self, req: CheckRunRequest) -> CheckRunRef:
        assert len(req.actions) <= 3
        if req.check_run_id is None:
            run_id = len(self.check_runs) + 1
            self.check_runs[run_id] = []
        else:
            run_id = req.check_run_id
            assert run_id in self.check_runs
        self.check_runs[run_id].append(req)
        return CheckRunRef(check_run_id=run_id)

    @activity.defn(name=ACT_JUDGE_ACTION.name)
    async def judge_action(self, req: ActionRequest) -> Verdict:
        self.judged.append(req)
        roots = self.roots.get(req.node, []) if req.node else []
        return judge_click(req, roots, self.review, (self.permissions, self.teams))

    @activity.defn(name=ACT_RECORD_AUDIT.name)
    async def record_audit(self, rec: AuditRecord) -> None:
        self.audits.append(rec)

    def activities(self) -> list[Callable[..., Any]]:
        return [
            self.evaluate,
            self.deployments,
            self.commit,
            self.graduate,
            self.check_run,
            self.rollback_promotion,
            self.judge_action,
            self.record_audit,
        ]


@dataclass
class Rollout:
    env: WorkflowEnvironment
    fleet: Fleet
    handle: WorkflowHandle[Any, Any] | None = None

    @property
    def client(self) -> Client:
        return self.env.client

    async def start(self, *, max_history_events: int | None = None) -> WorkflowHandle[Any, Any]:
        self.handle = await self.client.start_workflow(
            PROMOTION_WORKFLOW,
            PromotionInput(
                repo=REPO,
                patch_id=PATCH,
                revision=self.fleet.tip,
                max_history_events=max_history_events,
            ),
            id=WORKFLOW_ID,
            task_queue=TASK_QUEUE,
            result_type=RolloutView,
        )
        return self.handle

    async def view(self) -> RolloutView:
        handle = self.client.get_workflow_handle(WORKFLOW_ID)
        return await queries.query(handle, QUERY_ROLLOUT, RolloutView)

    async def signal(self, name: str, arg: Any) -> None:
        await self.client.get_workflow_handle(WORKFLOW_ID).signal(name, arg)


@asynccontextmanager
async def rollout(fleet: Fleet) -> AsyncIterator[Rollout]:
    async with timeskip.environment() as env:
        fleet.client = env.client
        async with Worker(
            env.client,
            task_queue=TASK_QUEUE,
            workflows=[PromotionWorkflow],
            activities=fleet.activities(),
        ):
            yield Rollout(env=env, fleet=fleet)
