"""DispatchWorkflow on the time-skipping server: a push becomes one DeployWorkflow per root.

The signal_deploys double records the request and really signal-with-starts each root's
DeployWorkflow, so the test also sees the revision arrive there.
"""

from __future__ import annotations

import asyncio

from temporalio.client import WorkflowFailureError

from shared.contracts.deploy import (
    DISPATCH_WORKFLOW,
    SA_REPO,
    SA_REVISION,
    SA_STATE,
    SA_TRIGGER,
    TASK_QUEUE,
    AffectedResult,
    DispatchInput,
    DispatchResult,
    dispatch_workflow_id,
)
from tests.support.deploy_world import REPO, Harness, World, harness, latest, sha, until
from workflows.searchattrs import keyword

BEFORE, AFTER = sha("0"), sha("f")


async def dispatch(h: Harness, inp: DispatchInput) -> DispatchResult:
    handle = await h.client.start_workflow(
        DISPATCH_WORKFLOW,
        inp,
        id=dispatch_workflow_id(REPO.full_name, inp.after),
        task_queue=TASK_QUEUE,
        result_type=DispatchResult,
    )
    result: DispatchResult = await handle.result()
    described = await handle.describe()
    attrs = described.typed_search_attributes
    assert attrs.get(keyword(SA_REPO)) == REPO.full_name
    assert attrs.get(keyword(SA_REVISION)) == inp.after
    assert attrs.get(keyword(SA_TRIGGER)) == inp.trigger
    assert attrs.get(keyword(SA_STATE)) == "dispatched"
    return result


def test_push_signals_one_deploy_workflow_per_affected_root() -> None:
    async def scenario() -> None:
        world = World()
        world.affected[(BEFORE, AFTER)] = AffectedResult(roots=["prod/eu", "staging/a"])
        async with harness(world) as h:
            result = await dispatch(
                h, DispatchInput(repo=REPO, before=BEFORE, after=AFTER, pusher="carol")
            )
            assert result.roots == ["prod/eu", "staging/a"] and not result.all_roots
            assert [(r.before, r.after) for r in world.affected_calls] == [(BEFORE, AFTER)]
            (request,) = world.signalled
            assert request.roots == ["prod/eu", "staging/a"]
            assert request.revision.revision == AFTER
            assert request.revision.trigger == "merge"
            assert request.revision.reason == "push"
            assert request.revision.requested_by == "carol"
            for root in ("prod/eu", "staging/a"):
                deployment_id = await h.awaiting_review(root, AFTER)
                state = await h.state(root)
                assert state.root == root and state.repo == REPO.full_name
                assert state.current is not None and state.current.trigger == "merge"
                assert (await h.review(deployment_id, "approve")).published
            assert set(world.latest) == {"prod/eu", "staging/a"}

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_push_without_affected_roots_signals_nothing() -> None:
    async def scenario() -> None:
        world = World()
        world.affected[(BEFORE, AFTER)] = AffectedResult(roots=[], reason="docs only")
        async with harness(world) as h:
            result = await dispatch(h, DispatchInput(repo=REPO, before=BEFORE, after=AFTER))
            assert result.roots == []
            assert world.signalled == []

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_forced_push_deploys_all_roots() -> None:
    async def scenario() -> None:
        world = World()
        world.affected[(BEFORE, AFTER)] = AffectedResult(
            roots=["a", "b", "c"], all_roots=True, reason="forced push"
        )
        async with harness(world) as h:
            result = await dispatch(
                h, DispatchInput(repo=REPO, before=BEFORE, after=AFTER, forced=True)
            )
            assert result.all_roots and result.roots == ["a", "b", "c"]
            assert world.affected_calls[0].forced
            assert world.signalled[0].roots == ["a", "b", "c"]

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_rerun_of_named_roots_skips_the_diff_and_is_manual() -> None:
    async def scenario() -> None:
        world = World(latest={"b": latest(AFTER)})
        async with harness(world) as h:
            result = await dispatch(
                h,
                DispatchInput(
                    repo=REPO,
                    before=BEFORE,
                    after=AFTER,
                    roots=["b", "a", "b"],
                    trigger="manual",
                    pusher="erin",
                ),
            )
            assert result.roots == ["a", "b"]
            assert world.affected_calls == [], "a re-run names its roots"
            (request,) = world.signalled
            assert (request.revision.trigger, request.revision.reason) == ("manual", "rerequested")
            # Both are allowed: `a` has no deployment yet, `b`'s latest attempt is AFTER.
            for root in ("a", "b"):
                await h.awaiting_review(root, AFTER)

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_check_suite_rerun_without_roots_is_a_rerun_of_the_affected_roots() -> None:
    async def scenario() -> None:
        world = World(latest={"a": latest(sha("9"))})
        world.affected[(BEFORE, AFTER)] = AffectedResult(roots=["a"])
        async with harness(world) as h:
            await dispatch(
                h, DispatchInput(repo=REPO, before=BEFORE, after=AFTER, trigger="manual")
            )
            assert world.signalled[0].revision.reason == "rerequested"
            # `a` was last deployed at another revision: the re-run is refused, visibly.
            (run_id,) = await until(lambda: world.runs_for(AFTER), "refusal")
            assert world.last(run_id).title == "Re-run refused"

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_an_unreadable_fleet_fails_the_commits_check_run_naming_file_and_line() -> None:
    problem = "rollwright.yaml:3: unknown key 'layuot' (did you mean 'layout'?)"

    async def scenario() -> None:
        world = World(fleet_errors={AFTER: problem})
        async with harness(world) as h:
            result = await h.client.execute_workflow(
                DISPATCH_WORKFLOW,
                DispatchInput(repo=REPO, before=BEFORE, after=AFTER),
                id=dispatch_workflow_id(REPO.full_name, AFTER),
                task_queue=TASK_QUEUE,
                result_type=DispatchResult,
            )
            assert result.roots == [] and result.error == problem
            assert world.signalled == []
            (run_id,) = world.revision_runs(AFTER)
            run = world.last(run_id)
            assert (run.name, run.conclusion, run.title) == (
                "rollwright",
                "failure",
                "The fleet cannot be read",
            )
            assert f"`{problem}`" in run.summary

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_affected_roots_failure_fails_the_dispatch() -> None:
    async def scenario() -> None:
        world = World()  # no diff known: the double raises a non-retryable error
        async with harness(world) as h:
            handle = await h.client.start_workflow(
                DISPATCH_WORKFLOW,
                DispatchInput(repo=REPO, before=BEFORE, after=AFTER),
                id=dispatch_workflow_id(REPO.full_name, AFTER),
                task_queue=TASK_QUEUE,
            )
            try:
                await handle.result()
            except WorkflowFailureError:
                pass
            else:
                raise AssertionError("dispatch should fail")
            assert world.signalled == []

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_revisions_are_queued_in_delivery_order_whichever_dispatch_is_faster() -> None:
    """Three pushes delivered A, B, C: C's affected roots are known first, A's last. Each
    dispatch waits for the previous delivery's before it queues, so the root's queue gets
    A, B, C; a missing previous dispatch (never started) holds nothing up."""
    a, b, c = sha("a"), sha("b"), sha("c")

    async def scenario() -> None:
        world = World(affected_holds={a: asyncio.Event(), b: asyncio.Event()})
        for before, after in ((BEFORE, a), (a, b), (b, c)):
            world.affected[(before, after)] = AffectedResult(roots=["prod/eu"])
        async with harness(world) as h:
            ids = [dispatch_workflow_id(REPO.full_name, rev) for rev in (a, b, c)]
            inputs = [
                DispatchInput(repo=REPO, before=BEFORE, after=a, after_dispatch="dispatch:gone"),
                DispatchInput(repo=REPO, before=a, after=b, after_dispatch=ids[0]),
                DispatchInput(repo=REPO, before=b, after=c, after_dispatch=ids[1]),
            ]
            handles = [
                await h.client.start_workflow(DISPATCH_WORKFLOW, inp, id=wid, task_queue=TASK_QUEUE)
                for wid, inp in zip(ids, inputs, strict=True)
            ]
            await until(lambda: len(world.affected_calls) == 3, "all three computing")
            assert world.signalled == []  # C knows its roots but waits for B, B for A
            world.affected_holds[b].set()
            await asyncio.sleep(0.5)
            assert world.signalled == []  # B knows too, and still waits for A
            world.affected_holds[a].set()
            for handle in handles:
                await handle.result()
            assert [r.revision.revision for r in world.signalled] == [a, b, c]
            assert ("dispatch:gone", "not_found") in world.awaited

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_burst_of_dispatches_waiting_in_order_leaves_the_workers_free() -> None:
    """Twenty pushes at once on a worker that runs four shared activities at a time, the
    first one slowest: the nineteen waiting for their previous delivery wait on the waits
    queue, not in the shared slots the first one needs to queue its revision."""
    revisions = [sha(f"burst{n}") for n in range(20)]
    ids = [dispatch_workflow_id(REPO.full_name, rev) for rev in revisions]

    async def scenario() -> None:
        world = World(affected_holds={revisions[0]: asyncio.Event()})
        befores = [BEFORE, *revisions[:-1]]
        for before, after in zip(befores, revisions, strict=True):
            world.affected[(before, after)] = AffectedResult(roots=["prod/eu"])
        async with harness(world, shared_slots=4) as h:
            handles = [
                await h.client.start_workflow(
                    DISPATCH_WORKFLOW,
                    DispatchInput(repo=REPO, before=before, after=after, after_dispatch=previous),
                    id=wid,
                    task_queue=TASK_QUEUE,
                )
                for before, after, wid, previous in zip(
                    befores, revisions, ids, ["dispatch:none", *ids[:-1]], strict=True
                )
            ]
            await until(lambda: len(world.affected_calls) == 20, "every dispatch computing")
            await until(lambda: len(world.awaiting) >= 19, "nineteen waiting")
            world.affected_holds[revisions[0]].set()
            for handle in handles:
                await handle.result()
            assert [r.revision.revision for r in world.signalled] == revisions

    asyncio.run(asyncio.wait_for(scenario(), 60))
