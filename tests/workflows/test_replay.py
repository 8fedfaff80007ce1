"""Determinism: workflow histories replay against the current workflow code.

Two sources. The busy scenario, run here, touches every branch of a root's queue that records
commands: lock rebuilt from latest.json, a manual deployment jumping the queue, signals handled
while a review is open, duplicates, Unlock (persisted), continue-as-new carrying the queue, a
rejection, a review timeout, the idle shutdown, and a dispatch. And the histories recorded
under tests/histories/ (tests/support/histories.py): every workflow as the current release
writes it, which a later change must still replay. A deliberately changed workflow fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

# The workflow below is defined here, so the sandbox imports this module: what it imports
# passes through (the verify activity and its HTTP client are not workflow code).
with workflow.unsafe.imports_passed_through():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from activities.verify import DeliveryVerifier
    from shared.contracts.deploy import (
        DEPLOY_WORKFLOW,
        DEPLOYMENT_WORKFLOW,
        DISPATCH_WORKFLOW,
        SIGNAL_DEPLOYMENT_UPDATE,
        TASK_QUEUE,
        AffectedResult,
        DeploymentInput,
        DeploymentResult,
        DeploymentUpdate,
        DispatchInput,
        dispatch_workflow_id,
    )
    from shared.contracts.governance import REVISION_REVIEW_WORKFLOW
    from shared.contracts.hotfix import HOTFIX_WORKFLOW
    from shared.contracts.preview import PREVIEW_WORKFLOW
    from shared.contracts.promotion import PROMOTION_WORKFLOW
    from shared.engine.config.fleet import FleetConfig
    from tests.support.deploy_world import (
        REPO,
        Harness,
        World,
        harness,
        latest,
        sha,
        until,
    )
    from tests.support.histories import keep, on_disk, workflow_type
    from workflows.deployment import DeploymentWorkflow
    from workflows.dispatch import DispatchWorkflow
    from workflows.registry import WORKFLOWS
    from workflows.rootqueue.workflow import RootQueueWorkflow

ROOT = "prod/eu-west"
A, B, C, D, L = sha("a"), sha("b"), sha("c"), sha("d"), sha("1")
# Above the queue's history length when C ends (219-228 events measured, loaded machine too),
# so the queue continues as new only where the scenario makes it: between C and D.
HISTORY_LIMIT = 260


# Every workflow type the worker registers (shared.contracts' names).
WORKFLOW_TYPES = {
    DISPATCH_WORKFLOW,
    DEPLOY_WORKFLOW,
    DEPLOYMENT_WORKFLOW,
    PREVIEW_WORKFLOW,
    PROMOTION_WORKFLOW,
    REVISION_REVIEW_WORKFLOW,
    HOTFIX_WORKFLOW,
}
BUSY_WORKFLOWS = [RootQueueWorkflow, DeploymentWorkflow, DispatchWorkflow]


async def _busy_scenario() -> list[WorkflowHistory]:
    world = World(latest={ROOT: latest(L, trigger="manual")}, empty_diffs={D})
    world.relations[(B, D)] = "diverged"
    world.affected[(L, D)] = AffectedResult(roots=[ROOT])
    async with harness(world, BUSY_WORKFLOWS) as h:
        # Waits read the doubles' records, not queries (see Harness.state).
        # Continue-as-new after C's review, before D, never while a deployment runs: when a
        # child ends after its parent's run continued as new, Temporal's time-skipping test
        # server keeps a lock on its clock for good (the parent was to release it), and every
        # later timeout waits in real time. The dev-server test of a long queue covers that
        # case, and replays it.
        deploy = await h.push(ROOT, A, max_history_events=HISTORY_LIMIT)  # locked: A waits
        await until(lambda: _asks(world, A, "unlock"), "A blocked by the lock")
        await h.push(ROOT, B, "manual", by="ops")
        manual = await h.awaiting_review(ROOT, B)
        await h.push(ROOT, C)
        await h.push(ROOT, C)  # duplicate
        await h.push(ROOT, B)  # duplicate of the running revision
        await h.unlock(ROOT)
        await until(lambda: world.runs_for(C), "C queued")
        await h.review(manual, "approve", "ops")  # new lock by B
        # B's lock reaches the root's workflow after B's result; an Unlock sent before that
        # would find nothing to unlock. The queued check runs name the deployment that holds it.
        await until(
            lambda: _locked_by(world, A, manual) and _locked_by(world, C, manual), "locked by B"
        )
        await h.unlock(ROOT)
        a_id = await h.awaiting_review(ROOT, A)
        await h.review(a_id, "reject")
        c_id = await h.awaiting_review(ROOT, C)
        # The test server skips the review's 7 days.
        assert (await h.outcome(c_id)).state == "timed_out"
        await _past_history_limit(h, deploy.result_run_id, late_from=c_id)
        # A push through DispatchWorkflow: D diverged from B (the latest), asks even if empty.
        dispatch = await h.client.start_workflow(
            DISPATCH_WORKFLOW,
            DispatchInput(repo=REPO, before=L, after=D),
            id=dispatch_workflow_id(REPO.full_name, D),
            task_queue=TASK_QUEUE,
        )
        await dispatch.result()
        d_id = await h.awaiting_review(ROOT, D)
        await h.review(d_id, "approve")
        await deploy.result()  # follows continue-as-new to the idle shutdown

        histories = await h.run_chain(deploy.id, deploy.result_run_id or "")
        assert len(histories) >= 2, "the scenario should have continued as new"
        for deployment_id in (manual, a_id, c_id, d_id):
            histories.append(await h.client.get_workflow_handle(deployment_id).fetch_history())
        histories.append(await dispatch.fetch_history())
        return histories


@pytest.fixture(scope="module")
def histories() -> list[WorkflowHistory]:
    recorded = asyncio.run(asyncio.wait_for(_busy_scenario(), 60))
    keep("busy-queue", recorded)
    return recorded


def test_histories_replay_deterministically(histories: list[WorkflowHistory]) -> None:
    async def replay() -> None:
        replayer = Replayer(workflows=BUSY_WORKFLOWS, data_converter=pydantic_data_converter)
        for history in histories:
            result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
            assert result.replay_failure is None, f"{history.workflow_id}: {result.replay_failure}"

    asyncio.run(replay())


@workflow.defn(name="RenderWorkflow")
class _ChangedDeploymentWorkflow:
    """DeploymentWorkflow with one extra activity up front: a change without workflow.patched."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        await workflow.execute_activity(
            "worker_task_queue", start_to_close_timeout=timedelta(seconds=5)
        )
        return await DeploymentWorkflow().run(inp)


def test_replay_catches_a_nondeterministic_change(histories: list[WorkflowHistory]) -> None:
    renders = [h for h in histories if h.workflow_id not in _deploy_and_dispatch_ids()]
    assert renders

    async def replay() -> Any:
        replayer = Replayer(
            workflows=[_ChangedDeploymentWorkflow], data_converter=pydantic_data_converter
        )
        return await replayer.replay_workflow(renders[0], raise_on_replay_failure=False)

    result = asyncio.run(replay())
    assert result.replay_failure is not None


def test_deployments_keep_their_registered_workflow_type(
    histories: list[WorkflowHistory],
) -> None:
    """The class is DeploymentWorkflow since the restructuring; histories in flight name the
    type "RenderWorkflow", and they replay on the renamed class."""
    renders = [h for h in histories if h.workflow_id not in _deploy_and_dispatch_ids()]
    types = {
        h.events[0].workflow_execution_started_event_attributes.workflow_type.name for h in renders
    }
    assert types == {"RenderWorkflow"}

    async def replay() -> Any:
        replayer = Replayer(workflows=[DeploymentWorkflow], data_converter=pydantic_data_converter)
        return [await replayer.replay_workflow(h, raise_on_replay_failure=False) for h in renders]

    assert [r.replay_failure for r in asyncio.run(replay())] == [None] * len(renders)


def test_a_verified_deployment_replays() -> None:
    """A deployment that verified its delivery (an HTTP check, run by the real activity)
    replays."""

    async def scenario(world: World) -> WorkflowHistory:
        verifier = DeliveryVerifier().verify_delivery
        async with harness(world, activities=[verifier]) as h:
            await h.push(ROOT, A)
            deployment_id = await h.awaiting_review(ROOT, A)
            assert (await h.review(deployment_id, "approve")).state == "verified"
            return await h.client.get_workflow_handle(deployment_id).fetch_history()

    with _answering(200) as url:
        rule = {"roots": ["*"], "http": {"url": url + "/{root}", "retries": 0}}
        world = World(config=FleetConfig.model_validate({"verify": [rule]}))
        history = asyncio.run(asyncio.wait_for(scenario(world), 60))
    assert len(world.plans) == 1
    keep("verified-deployment", [history])
    assert _deployment_replay_failure(history, DeploymentWorkflow) is None


@contextlib.contextmanager
def _answering(status: int) -> Iterator[str]:
    """A local HTTP endpoint answering every GET with `status`: the external check."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_governed_deployment_replays() -> None:
    """A deployment under a review policy (a refused click, then an approver's) replays."""

    async def scenario() -> WorkflowHistory:
        world = World(permissions={"rita": "read"})
        async with harness(world) as h:
            await h.push(ROOT, A, by="carol")
            deployment_id = await h.awaiting_review(ROOT, A)
            await h.click(deployment_id, "approve", "rita")
            await until(lambda: world.audits, "the refusal recorded")
            result = await h.review(deployment_id, "approve", "alice")
            assert result.state == "published" and len(world.verdicts) == 2
            return await h.client.get_workflow_handle(deployment_id).fetch_history()

    history = asyncio.run(asyncio.wait_for(scenario(), 60))
    keep("governed-deployment", [history])
    assert _deployment_replay_failure(history, DeploymentWorkflow) is None


def _deployment_replay_failure(history: WorkflowHistory, deployment: type) -> Exception | None:
    async def replay() -> Exception | None:
        replayer = Replayer(workflows=[deployment], data_converter=pydantic_data_converter)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        return result.replay_failure

    return asyncio.run(replay())


async def _past_history_limit(h: Harness, first_run: str | None, late_from: str) -> None:
    """Lengthen the queue's history past HISTORY_LIMIT with late progress reports of the ended
    deployment `late_from` (the queue ignores them; they wake nothing). The next revision's
    signal then finds the queue past its limit, between deployments."""
    queue = h.deploy(ROOT)
    while (seen := await queue.describe()).history_length <= HISTORY_LIMIT:
        assert seen.run_id == first_run, "the queue continued as new early: raise HISTORY_LIMIT"
        late = DeploymentUpdate(deployment_id=late_from, state="awaiting_review")
        await queue.signal(SIGNAL_DEPLOYMENT_UPDATE, late)

        async def longer(before: int = seen.history_length) -> bool:
            return bool((await queue.describe()).history_length > before)

        await until(longer, "the late report recorded")


def _asks(world: World, revision: str, action: str) -> bool:
    return any(
        a.identifier == action
        for run_id in world.runs_for(revision)
        for a in world.last(run_id).actions
    )


def _locked_by(world: World, revision: str, deployment_id: str) -> bool:
    """The revision's queued check run offers Unlock of the lock `deployment_id` holds."""
    return any(
        _asks(world, revision, "unlock") and f"`{deployment_id}`" in world.last(run_id).summary
        for run_id in world.runs_for(revision)
    )


def _deploy_and_dispatch_ids() -> set[str]:
    return {f"deploy:{REPO.full_name}:{ROOT}", dispatch_workflow_id(REPO.full_name, D)}


def test_every_recorded_history_replays_on_the_registered_workflows() -> None:
    """The histories committed under tests/histories/ (one release's behaviour of every
    workflow) replay on the classes the worker registers: a change that breaks one needs a
    `workflow.patched` branch and an entry in docs/workflow-versions.md."""
    recorded = on_disk()
    assert len(WORKFLOWS) == len(WORKFLOW_TYPES)
    assert {workflow_type(history) for _, history in recorded} == WORKFLOW_TYPES

    async def replay() -> None:
        replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
        for path, history in recorded:
            result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
            assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"

    asyncio.run(replay())
