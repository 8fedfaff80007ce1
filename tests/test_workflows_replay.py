"""Determinism: histories of a busy scenario replay against the current workflow code.

The scenario touches every branch that records commands: lock rebuilt from latest.json, a
manual deployment jumping the queue, signals handled while a review is open, duplicates,
Unlock (persisted), continue-as-new carrying the queue, a rejection, a review timeout, the
idle shutdown, and a dispatch. `Replayer` then re-executes every run's history and fails on
any nondeterminism; a deliberately changed workflow makes it fail (last test).
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
from temporalio.client import WorkflowFailureError, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

# The workflow below is defined here, so the sandbox imports this module: what it imports
# passes through (the verify activity and its HTTP client are not workflow code).
with workflow.unsafe.imports_passed_through():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from activities.verify import DeliveryVerifier
    from shared.contracts.deploy import (
        DISPATCH_WORKFLOW,
        TASK_QUEUE,
        AffectedResult,
        DeploymentInput,
        DeploymentResult,
        DispatchInput,
        dispatch_workflow_id,
    )
    from shared.engine.config.fleet import FleetConfig
    from tests.support.deploy_versions import (
        DeployBeforeBounded,
        DeployBeforeRecordQueued,
        DeployBeforeSignalsFirst,
        DeployBoundedUnpatched,
        DeploymentBeforeBusyWorkers,
        DeploymentBeforeGovernance,
        DeploymentBeforeReviewOrigin,
        DeploymentBeforeVerify,
        DeploymentBeforeWorkerLoss,
        DeploymentBusyWorkersUnpatched,
        DeploymentGovernanceUnpatched,
        DeploymentReviewOriginUnpatched,
        DeploymentVerifyUnpatched,
        DeploymentWorkerLossUnpatched,
        DeployNotDetaching,
        DeployRecordingUnpatched,
        DeploySignalsFirstUnpatched,
        DeployWritingEveryBatch,
        DeployYieldingUnpatched,
        DispatchBeforeDeliveryOrder,
        DispatchBeforeFleetReports,
        DispatchDeliveryOrderUnpatched,
        DispatchFleetReportsUnpatched,
        DispatchWaitingOnSharedQueue,
    )
    from tests.support.deploy_world import (
        REPO,
        World,
        harness,
        latest,
        sha,
        until,
    )
    from workflows.deploy import DeployWorkflow
    from workflows.deployment import DeploymentWorkflow
    from workflows.dispatch import DispatchWorkflow

ROOT = "prod/eu-west"
A, B, C, D, L = sha("a"), sha("b"), sha("c"), sha("d"), sha("1")


# The busy scenario needs the time-skipping server, so its queue does not continue as new
# while a deployment runs (see DeployNotDetaching); test_workflows_deploy.py has that case on
# the dev server, and replays it.
BUSY_WORKFLOWS = [DeployNotDetaching, DeploymentWorkflow, DispatchWorkflow]


async def _busy_scenario() -> list[WorkflowHistory]:
    world = World(latest={ROOT: latest(L, trigger="manual")}, empty_diffs={D})
    world.relations[(B, D)] = "diverged"
    world.affected[(L, D)] = AffectedResult(roots=[ROOT])
    async with harness(world, BUSY_WORKFLOWS) as h:
        # Waits read the doubles' records, not queries (see Harness.state).
        deploy = await h.push(ROOT, A, max_history_events=40)  # locked: A waits
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
        assert (await h.outcome(c_id)).state == "timed_out"
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
    return asyncio.run(asyncio.wait_for(_busy_scenario(), 60))


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


def test_a_history_from_before_queued_items_were_recorded_replays() -> None:
    """A root's queue that ran on the code before "record-queued" replays on today's code;
    the same history fails without the patch check."""

    async def scenario() -> WorkflowHistory:
        world = World()
        old = [DeployBeforeRecordQueued, DeploymentWorkflow, DispatchWorkflow]
        async with harness(world, workflows=old) as h:
            deploy = await h.push(ROOT, A)
            first = await h.awaiting_review(ROOT, A)
            await h.push(ROOT, B, "manual", by="ops")
            await until(lambda: world.runs_for(B), "B queued")
            await h.review(first, "approve")
            await h.awaiting_review(ROOT, B)
            assert not [r for r in world.records if r.state == "queued"]
            return await deploy.fetch_history()

    history = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert _replay_failure(history, DeployWorkflow) is None
    assert _replay_failure(history, DeployRecordingUnpatched) is not None


def test_a_history_that_picked_the_next_item_before_a_signal_replays() -> None:
    """An Unlock that landed while the queue recorded a queued row: the code before
    "deploy-signals-before-next-item" started the item first, and that history replays on
    today's code; the same history fails without the patch check."""

    async def scenario() -> WorkflowHistory:
        world = World(latest={ROOT: latest(L, trigger="manual")})  # locked: A waits
        release = asyncio.Event()
        world.record_holds[(A, "queued")] = release
        old = [DeployBeforeSignalsFirst, DeploymentWorkflow, DispatchWorkflow]
        async with harness(world, workflows=old) as h:
            deploy = await h.push(ROOT, A)
            await until(lambda: world.held, "A's queued row being recorded")
            await h.unlock(ROOT)
            await h.until_state(ROOT, "the Unlock handled", lambda s: not s.lock.locked)
            release.set()
            await h.awaiting_review(ROOT, A)
            assert world.persisted == [], "the old code ran A before persisting the Unlock"
            return await deploy.fetch_history()

    history = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert _replay_failure(history, DeployWorkflow) is None
    assert _replay_failure(history, DeploySignalsFirstUnpatched) is not None


def test_a_deployment_that_took_any_click_replays() -> None:
    """A deployment reviewed on the code before "review-checks-origin" (clicks were not
    checked or recorded) replays on today's code; the same history fails without the patch
    check."""

    async def scenario() -> WorkflowHistory:
        world = World()
        async with harness(
            world, workflows=[DeployWorkflow, DeploymentBeforeReviewOrigin, DispatchWorkflow]
        ) as h:
            await h.push(ROOT, A)
            deployment_id = await h.awaiting_review(ROOT, A)
            result = await h.review(deployment_id, "approve", repo=None, head_sha=None)
            assert result.state == "published" and world.audits == []
            return await h.client.get_workflow_handle(deployment_id).fetch_history()

    history = asyncio.run(asyncio.wait_for(scenario(), 60))

    async def replay(deployment: type) -> Exception | None:
        replayer = Replayer(workflows=[deployment], data_converter=pydantic_data_converter)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        return result.replay_failure

    assert asyncio.run(replay(DeploymentWorkflow)) is None
    assert asyncio.run(replay(DeploymentReviewOriginUnpatched)) is not None


def test_a_deployment_from_before_delivery_verification_replays() -> None:
    """A deployment that ended at "published" on the code before "verify-delivery" replays
    on today's code, and fails without the patch check; a deployment that verified its
    delivery (an HTTP check, run by the real activity) replays on today's code."""

    async def scenario(deployment: type, world: World, activities: list[Any]) -> WorkflowHistory:
        async with harness(
            world, workflows=[DeployWorkflow, deployment, DispatchWorkflow], activities=activities
        ) as h:
            await h.push(ROOT, A)
            deployment_id = await h.awaiting_review(ROOT, A)
            result = await h.review(deployment_id, "approve")
            assert result.state == (
                "published" if deployment is not DeploymentWorkflow else "verified"
            )
            return await h.client.get_workflow_handle(deployment_id).fetch_history()

    # Both versions run where a rule would verify the root: the old one never asks.
    with _answering(200) as url:
        rule = {"roots": ["*"], "http": {"url": url + "/{root}", "retries": 0}}
        config = FleetConfig.model_validate({"verify": [rule]})
        verifier = DeliveryVerifier().verify_delivery
        old_world, new_world = World(config=config), World(config=config)
        old = asyncio.run(
            asyncio.wait_for(scenario(DeploymentBeforeVerify, old_world, [verifier]), 60)
        )
        new = asyncio.run(asyncio.wait_for(scenario(DeploymentWorkflow, new_world, [verifier]), 60))
    assert old_world.plans == [] and len(new_world.plans) == 1

    async def replay(deployment: type, history: WorkflowHistory) -> Exception | None:
        replayer = Replayer(workflows=[deployment], data_converter=pydantic_data_converter)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        return result.replay_failure

    assert asyncio.run(replay(DeploymentWorkflow, old)) is None
    assert asyncio.run(replay(DeploymentVerifyUnpatched, old)) is not None
    assert asyncio.run(replay(DeploymentWorkflow, new)) is None


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


def test_a_deployment_from_before_review_policies_replays() -> None:
    """A deployment approved on the code before "governance-review-policy" (no policy read,
    no click judged) replays on today's code; the same history fails without the patch
    check."""

    async def scenario() -> WorkflowHistory:
        world = World()
        async with harness(
            world, workflows=[DeployWorkflow, DeploymentBeforeGovernance, DispatchWorkflow]
        ) as h:
            await h.push(ROOT, A)
            deployment_id = await h.awaiting_review(ROOT, A)
            result = await h.review(deployment_id, "approve", "alice")
            assert result.state == "published" and world.policies == [] == world.verdicts
            return await h.client.get_workflow_handle(deployment_id).fetch_history()

    history = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert _deployment_replay_failure(history, DeploymentWorkflow) is None
    assert _deployment_replay_failure(history, DeploymentGovernanceUnpatched) is not None


def test_a_governed_deployment_replays() -> None:
    """A deployment under a review policy (a refused click, then an approver's) replays on
    today's code, and not on the code before review policies."""

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
    assert _deployment_replay_failure(history, DeploymentWorkflow) is None
    assert _deployment_replay_failure(history, DeploymentBeforeGovernance) is not None


def _deployment_replay_failure(history: WorkflowHistory, deployment: type) -> Exception | None:
    async def replay() -> Exception | None:
        replayer = Replayer(workflows=[deployment], data_converter=pydantic_data_converter)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        return result.replay_failure

    return asyncio.run(replay())


def test_a_dispatch_that_failed_on_an_unreadable_fleet_replays() -> None:
    """A dispatch that failed on a fleet error on the code before
    "dispatch-reports-unreadable-fleet" replays on today's code; the same history fails
    without the patch check."""
    after = sha("f")

    async def scenario() -> WorkflowHistory:
        world = World(fleet_errors={after: "rollwright.yaml:1: broken"})
        async with harness(world, workflows=[DispatchBeforeFleetReports]) as h:
            handle = await h.client.start_workflow(
                DISPATCH_WORKFLOW,
                DispatchInput(repo=REPO, before=sha("e"), after=after),
                id=dispatch_workflow_id(REPO.full_name, after),
                task_queue=TASK_QUEUE,
            )
            with contextlib.suppress(WorkflowFailureError):
                await handle.result()
            assert world.check_runs == {}
            return await handle.fetch_history()

    history = asyncio.run(asyncio.wait_for(scenario(), 60))

    async def replay(dispatch: type) -> Exception | None:
        replayer = Replayer(workflows=[dispatch], data_converter=pydantic_data_converter)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        return result.replay_failure

    assert asyncio.run(replay(DispatchWorkflow)) is None
    assert asyncio.run(replay(DispatchFleetReportsUnpatched)) is not None


def test_a_dispatch_that_did_not_wait_for_the_previous_one_replays() -> None:
    """A dispatch given `after_dispatch` by a newer gateway but run by a worker from before
    "dispatch-in-delivery-order" replays on today's code; it fails without the patch check."""
    after = sha("f")

    async def scenario() -> WorkflowHistory:
        world = World()
        world.affected[(sha("e"), after)] = AffectedResult(roots=["prod/eu"])
        async with harness(world, workflows=[DispatchBeforeDeliveryOrder]) as h:
            handle = await h.client.start_workflow(
                DISPATCH_WORKFLOW,
                DispatchInput(repo=REPO, before=sha("e"), after=after, after_dispatch="d:0"),
                id=dispatch_workflow_id(REPO.full_name, after),
                task_queue=TASK_QUEUE,
            )
            await handle.result()
            assert world.awaited == [] and len(world.signalled) == 1
            return await handle.fetch_history()

    history = asyncio.run(asyncio.wait_for(scenario(), 60))

    async def replay(dispatch: type) -> Exception | None:
        replayer = Replayer(workflows=[dispatch], data_converter=pydantic_data_converter)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        return result.replay_failure

    assert asyncio.run(replay(DispatchWorkflow)) is None
    assert asyncio.run(replay(DispatchDeliveryOrderUnpatched)) is not None


def test_a_dispatch_that_waited_on_the_shared_queue_replays() -> None:
    """A dispatch that awaited the previous one on the shared queue (before the waits queue)
    replays on today's code, which schedules that wait on the waits queue."""
    before, after = sha("e"), sha("f")

    async def scenario() -> WorkflowHistory:
        world = World()
        world.affected[(before, after)] = AffectedResult(roots=["prod/eu"])
        async with harness(world, workflows=[DispatchWaitingOnSharedQueue]) as h:
            handle = await h.client.start_workflow(
                DISPATCH_WORKFLOW,
                DispatchInput(repo=REPO, before=before, after=after, after_dispatch="d:0"),
                id=dispatch_workflow_id(REPO.full_name, after),
                task_queue=TASK_QUEUE,
            )
            await handle.result()
            assert world.awaited == [("d:0", "not_found")]
            return await handle.fetch_history()

    history = asyncio.run(asyncio.wait_for(scenario(), 60))
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert TASK_QUEUE in [
        a.task_queue.name for a in scheduled if a.activity_type.name == "await_dispatch"
    ]

    async def replay() -> Exception | None:
        replayer = Replayer(workflows=[DispatchWorkflow], data_converter=pydantic_data_converter)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        return result.replay_failure

    assert asyncio.run(replay()) is None


def test_a_deployment_that_took_a_busy_worker_for_lost_replays() -> None:
    """A deployment whose task nobody took within the start limit, re-pinned at once on the
    code before "deployment-waits-for-busy-workers", replays on today's code; the same
    history fails without the patch check."""

    async def scenario() -> WorkflowHistory:
        world = World(queue_answers=["gone-1"])
        old = [DeployWorkflow, DeploymentBeforeBusyWorkers, DispatchWorkflow]
        async with harness(world, old, dev_server=True) as h:
            await h.push(ROOT, A)
            deployment_id = await h.awaiting_review(ROOT, A)
            assert (await h.review(deployment_id, "approve")).state == "published"
            assert world.alive_asked == []
            return await h.client.get_workflow_handle(deployment_id).fetch_history()

    history = asyncio.run(asyncio.wait_for(scenario(), 90))
    assert _deployment_replay_failure(history, DeploymentWorkflow) is None
    assert _deployment_replay_failure(history, DeploymentBusyWorkersUnpatched) is not None


def test_deployments_from_before_worker_loss_handling_replay() -> None:
    """A deployment that failed on a lost worker, and one that awaited its checkout removal,
    on the code before "deployment-repins-lost-workers" and "cleanup-never-blocks", replay on
    today's code; the first fails without the patch check."""

    async def scenario() -> list[WorkflowHistory]:
        world = World(queue_answers=["dead-1"])  # the first deployment's worker is gone
        old = [DeployWorkflow, DeploymentBeforeWorkerLoss, DispatchWorkflow]
        async with harness(world, old, dev_server=True) as h:
            await h.push(ROOT, A)
            lost = await until(lambda: [r for r in world.outcomes if r.revision == A], "A")
            assert lost[0].state == "failed"
            await h.push(ROOT, B)
            deployment_id = await h.awaiting_review(ROOT, B)
            assert (await h.review(deployment_id, "approve")).state == "published"
            return [
                await h.client.get_workflow_handle(r.deployment_id).fetch_history()
                for r in world.outcomes
            ]

    histories = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert len(histories) == 2

    async def replay(deployment: type, history: WorkflowHistory) -> Exception | None:
        replayer = Replayer(workflows=[deployment], data_converter=pydantic_data_converter)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        return result.replay_failure

    for history in histories:
        assert asyncio.run(replay(DeploymentWorkflow, history)) is None
    # The lost worker: the old code failed where today's asks for another worker.
    assert asyncio.run(replay(DeploymentWorkerLossUnpatched, histories[0])) is not None


def test_a_queue_from_before_bounded_histories_replays() -> None:
    """A root's queue on the code before "deploy-bounded-queue" (every queued check run
    rewritten with the whole queue, continue-as-new only between deployments) replays on
    today's code, every run of it; the same histories fail without the patch check."""

    async def scenario() -> list[WorkflowHistory]:
        world = World()
        old = [DeployBeforeBounded, DeploymentWorkflow, DispatchWorkflow]
        async with harness(world, workflows=old) as h:
            deploy = await h.push(ROOT, A, max_history_events=30)
            first = await h.awaiting_review(ROOT, A)
            for revision in (B, C):
                await h.push(ROOT, revision)
            await until(lambda: world.runs_for(B) and world.runs_for(C), "B and C queued")
            await h.review(first, "approve")
            second = await h.awaiting_review(ROOT, B)
            await h.review(second, "approve")
            await h.awaiting_review(ROOT, C)
            assert not world.check_run_batches, "the old code wrote queued check runs singly"
            return await h.run_chain(deploy.id, deploy.result_run_id or "")

    histories = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert len(histories) > 1
    assert [_replay_failure(h, DeployWorkflow) for h in histories] == [None] * len(histories)
    assert _replay_failure(histories[0], DeployBoundedUnpatched) is not None


def test_a_queue_that_wrote_every_batch_before_the_next_deployment_replays() -> None:
    """An Unlock of a long queue on the code before "deploy-writes-yield" (every queued check
    run rewritten before the next deployment starts) replays on today's code; the same
    history fails without the patch check."""
    queued = [sha(f"w{n}") for n in range(120)]  # three batches of check runs

    async def scenario() -> list[WorkflowHistory]:
        world = World(latest={ROOT: latest(sha("1"), trigger="manual")})
        old = [DeployWritingEveryBatch, DeploymentWorkflow, DispatchWorkflow]
        async with harness(world, workflows=old) as h:
            deploy = await h.push(ROOT, queued[0])
            for revision in queued[1:]:
                await h.push(ROOT, revision)
            await until(lambda: all(world.runs_for(r) for r in queued), "every check run")
            await h.unlock(ROOT)
            await h.awaiting_review(ROOT, queued[0])
            return await h.run_chain(deploy.id, deploy.result_run_id or "")

    histories = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert [_replay_failure(h, DeployWorkflow) for h in histories] == [None] * len(histories)
    assert _replay_failure(histories[-1], DeployYieldingUnpatched) is not None


def _replay_failure(history: WorkflowHistory, deploy: type) -> Exception | None:
    """Why a deploy queue's history does not replay on a DeployWorkflow version (None: it
    does)."""

    async def replay() -> Any:
        replayer = Replayer(
            workflows=[deploy, DeploymentWorkflow, DispatchWorkflow],
            data_converter=pydantic_data_converter,
        )
        return await replayer.replay_workflow(history, raise_on_replay_failure=False)

    failure: Exception | None = asyncio.run(replay()).replay_failure
    return failure


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
