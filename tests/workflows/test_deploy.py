"""DeployWorkflow + DeploymentWorkflow on the time-skipping server: the Neptune scenarios.

Every test starts its own test server (about 0.1 s) with fresh activity doubles (see
tests/support/deploy_world.py); days of review timeout and idle hours pass instantly.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from shared.contracts.activityrefs import (
    ACT_CHECKOUT,
    ACT_PUBLISH,
    ACT_QUEUE_CHECK_RUNS,
    ACT_RENDER_ROOT,
)
from shared.contracts.deploy import (
    DEPLOY_WORKFLOW,
    SA_REPO,
    SA_REVISION,
    SA_ROOT,
    SA_STATE,
    SA_TRIGGER,
    SIGNAL_UNLOCK,
    TASK_QUEUE,
    DeploymentRecord,
    RootQueueInput,
    UnlockSignal,
)
from tests.support.deploy_world import (
    REPO,
    Harness,
    World,
    event_times,
    harness,
    latest,
    revisions,
    sha,
    time_between,
    until,
)
from tests.support.fast_loss import DeploymentNoticingLossFast
from workflows.calls import PUBLISH_RETRY
from workflows.dispatch import DispatchWorkflow
from workflows.rootqueue.workflow import RootQueueWorkflow
from workflows.searchattrs import keyword

ROOT = "staging/cluster-a"
A, B, C, D, L = sha("a"), sha("b"), sha("c"), sha("d"), sha("1")


def scenario(fn: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    @functools.wraps(fn)
    def test() -> None:
        # A hang (say, a timer the server never skips to) fails the test instead of stalling.
        asyncio.run(asyncio.wait_for(fn(), 60))

    return test


async def published(h: Harness, revision: str, by: str = "alice") -> str:
    deployment_id = await h.awaiting_review(ROOT, revision)
    result = await h.review(deployment_id, "approve", by)
    assert result.state == "published", result
    return deployment_id


@scenario
async def test_merge_deployment_end_to_end() -> None:
    world = World()
    async with harness(world) as h:
        await h.push(ROOT, A, by="carol")
        deployment_id = await h.awaiting_review(ROOT, A)
        run_ids = world.runs_for(A)
        assert len(run_ids) == 1, "one check run per deployment, reused from queued to done"
        review = world.last(run_ids[0])
        assert (review.status, review.conclusion) == ("completed", "action_required")
        assert [a.identifier for a in review.actions] == ["approve", "reject"]
        assert review.external_id == deployment_id
        assert review.name == f"rollwright/{ROOT}"
        assert "diff of" in review.text and "by @carol" in review.summary
        # The checkout is gone before the (possibly days long) review: publish needs none.
        assert world.cleaned == [f"/checkouts/{A}"]

        result = await h.review(deployment_id, "approve", "alice")
        assert result.published and result.approved_by == "@alice"
        done = world.last(run_ids[0])
        assert (done.status, done.conclusion) == ("completed", "success")
        assert "Approved by: @alice" in done.summary
        assert world.conclusions(run_ids[0]) == [
            "queued",
            "in_progress",
            "action_required",
            "in_progress",
            "success",
        ]
        stored = world.latest[ROOT]
        assert (stored.revision, stored.state, stored.deployment_id) == (
            A,
            "published",
            result.deployment_id,
        )
        assert stored.published_prefix and A in stored.published_prefix
        assert not stored.locks_queue
        # Checkout, render, diff and cleanup ran on the worker that holds the checkout.
        assert {q for _, q in world.pinned_calls} == {world.pinned_queue}
        assert [n for n, _ in world.pinned_calls][:2] == [ACT_CHECKOUT.name, ACT_RENDER_ROOT.name]
        assert world.cleaned == [f"/checkouts/{A}"]
        assert [r.state for r in world.records] == [
            "queued",
            "rendering",
            "awaiting_review",
            "publishing",
            "published",
        ]

        state = await h.until_state(ROOT, "idle", lambda s: s.current is None)
        assert state.latest is not None and state.latest.revision == A
        assert not state.lock.locked and state.queue == []

        child = await h.client.get_workflow_handle(deployment_id).describe()
        attrs = child.typed_search_attributes
        assert attrs.get(keyword(SA_ROOT)) == ROOT and attrs.get(keyword(SA_REVISION)) == A
        assert attrs.get(keyword(SA_TRIGGER)) == "merge"
        assert attrs.get(keyword(SA_STATE)) == "published"
        parent = (await h.deploy(ROOT).describe()).typed_search_attributes
        assert parent.get(keyword(SA_REPO)) == "acme/fleet" and parent.get(keyword(SA_ROOT)) == ROOT
        await until(lambda: _search_state(h, "idle"), "RollwrightState idle")


@scenario
async def test_priority_manual_before_merge_fifo_within() -> None:
    world = World()
    async with harness(world) as h:
        await h.push(ROOT, A)
        first = await h.awaiting_review(ROOT, A)
        await h.push(ROOT, B)
        await h.push(ROOT, C)
        await h.push(ROOT, D, "manual", by="ops")
        state = await h.until_state(ROOT, "three queued", lambda s: len(s.queue) == 3)
        assert revisions(state.queue) == [D, B, C]
        assert [i.trigger for i in state.queue] == ["manual", "merge", "merge"]
        assert len(state.queue_ages_seconds) == 3
        assert all(age >= 0 for age in state.queue_ages_seconds)
        assert state.current is not None and state.current.revision == A
        # Queued items got their own queued check runs, saying where they stand when they
        # joined, with a link to the root's page for the live queue.
        for revision in (B, C, D):
            (run_id,) = await until(functools.partial(world.runs_for, revision), "check runs")
            assert world.last(run_id).status == "queued"
            assert world.last(run_id).root_page
        assert "position 1: it deploys next" in world.last(world.runs_for(D)[0]).summary
        # where C stood when its check run was written (D may have come in before)
        assert f"`{B[:12]}` (merge)" in world.last(world.runs_for(C)[0]).summary

        await h.review(first, "approve")
        manual = await published(h, D)  # the manual item jumps the merge queue
        # D (manual) locked the queue: unlock and the merges run in arrival order. The lock
        # comes from D's result, which reaches the root's workflow after D's own: an Unlock
        # sent before that would find nothing to unlock.
        await h.until_state(ROOT, "locked by D", lambda s: s.lock.by_deployment == manual)
        await h.unlock(ROOT)
        await published(h, B)
        await published(h, C)
        assert [r.revision for r in world.outcomes] == [A, D, B, C]


@scenario
async def test_lock_and_unlock() -> None:
    world = World()
    async with harness(world) as h:
        await h.push(ROOT, A, "manual", by="ops")
        manual = await h.awaiting_review(ROOT, A)
        await h.push(ROOT, B)
        await until(lambda: world.runs_for(B), "B's queued check run")
        (b_run,) = world.runs_for(B)
        assert world.last(b_run).status == "queued", "not locked before the manual publishes"

        await h.review(manual, "approve", "ops")
        state = await h.until_state(ROOT, "locked", lambda s: s.lock.locked)
        assert state.lock.by_deployment == manual and state.lock.revision == A
        assert state.current is None and revisions(state.queue) == [B]
        assert world.latest[ROOT].locks_queue is True

        blocked = await until(
            lambda: world.last(b_run).conclusion == "action_required" and world.last(b_run),
            "B shows action_required",
        )
        assert [a.identifier for a in blocked.actions] == ["unlock"]
        assert "Unlock" in blocked.summary and "locked" in blocked.summary
        assert "Queue locked" in blocked.summary
        await until(lambda: _search_state(h, "locked"), "RollwrightState locked")

        # Another merge while locked waits too, its check run says why at once.
        await h.push(ROOT, C)
        await until(lambda: world.runs_for(C), "C's check run")
        c_run = world.runs_for(C)[0]
        await until(lambda: world.last(c_run).conclusion == "action_required", "C blocked")

        await h.unlock(ROOT, by="bob")
        b_deployment = await h.awaiting_review(ROOT, B)
        assert world.runs_for(B) == [b_run], "the queued check run carries on"
        assert world.latest[ROOT].unlocked_by == "bob", "the Unlock is persisted"
        state = await h.state(ROOT)
        assert not state.lock.locked and revisions(state.queue) == [C]
        assert (await h.review(b_deployment, "approve")).published
        await published(h, C)
        assert not (await h.state(ROOT)).lock.locked


@scenario
async def test_unlock_during_housekeeping_is_persisted_before_the_next_deployment() -> None:
    """An Unlock that lands while the queue records a queued row (its last activity before
    picking the next item) is written to latest.json before that item runs."""
    world = World(latest={ROOT: latest(L, trigger="manual")})  # locked: A waits
    release = asyncio.Event()
    world.record_holds[(A, "queued")] = release
    async with harness(world) as h:
        await h.push(ROOT, A)
        await until(lambda: world.held, "A's queued row being recorded")
        await h.unlock(ROOT, by="bob")
        await h.until_state(ROOT, "the Unlock handled", lambda s: not s.lock.locked)
        release.set()
        await h.awaiting_review(ROOT, A)
        assert world.latest[ROOT].unlocked_by == "bob", "persisted before A ran"
        assert [r.deployment_id for r in world.persisted] == [latest(L).deployment_id]


@scenario
async def test_manual_bypasses_lock() -> None:
    world = World(latest={ROOT: latest(L, trigger="manual")})
    async with harness(world) as h:
        await h.push(ROOT, A)
        await h.until_state(ROOT, "A waits", lambda s: revisions(s.queue) == [A])
        await h.push(ROOT, B, "manual", by="ops")
        deployment_id = await h.awaiting_review(ROOT, B)
        state = await h.state(ROOT)
        assert state.lock.locked and revisions(state.queue) == [A]
        await h.review(deployment_id, "approve")
        state = await h.until_state(ROOT, "B done", lambda s: s.current is None)
        assert state.lock.by_deployment == deployment_id, "the new manual deployment holds it"
        assert revisions(state.queue) == [A]


@scenario
async def test_deployment_id_chosen_by_the_gateway_is_kept() -> None:
    world = World()
    async with harness(world) as h:
        await h.push(ROOT, A, "manual", by="ops", deployment_id="gateway-chosen-id")
        assert await h.awaiting_review(ROOT, A) == "gateway-chosen-id"
        # The same revision again, with another id: the running deployment keeps its own.
        await h.push(ROOT, A, "manual", by="ops", deployment_id="second-id")
        await h.push(ROOT, B)
        state = await h.until_state(ROOT, "B queued", lambda s: revisions(s.queue) == [B])
        assert state.current is not None and state.current.deployment_id == "gateway-chosen-id"
        assert state.queue[0].deployment_id not in ("gateway-chosen-id", "second-id")


def _queued(world: World, revision: str) -> list[DeploymentRecord]:
    return [r for r in world.records if r.revision == revision and r.state == "queued"]


@scenario
async def test_queued_items_are_recorded_with_their_trigger_and_requester() -> None:
    """A deployment waiting in the queue has its SQL row (job page, /roots) saying how it
    was asked for: a manual rollback with the gateway's id is no merge."""
    world = World()
    async with harness(world) as h:
        await h.push(ROOT, A, by="carol")
        running = await h.awaiting_review(ROOT, A)
        await h.push(ROOT, B, "manual", reason="rollback", by="ops", deployment_id="rollback-1")
        await h.push(ROOT, C, by="dave")
        await until(lambda: _queued(world, B) and _queued(world, C), "B and C recorded queued")
        (manual,) = _queued(world, B)
        assert (manual.deployment_id, manual.trigger, manual.requested_by) == (
            "rollback-1",
            "manual",
            "ops",
        )
        assert (manual.repo, manual.root) == (REPO.full_name, ROOT)
        assert manual.check_run_id == world.runs_for(B)[0], "links its queued check run"
        (merge,) = _queued(world, C)
        assert (merge.trigger, merge.requested_by) == ("merge", "dave")

        # a manual request for the queued merge promotes it, and its row says so
        await h.push(ROOT, C, "manual", by="erin")
        await until(lambda: len(_queued(world, C)) == 2, "C recorded again")
        promoted = _queued(world, C)[-1]
        assert promoted.deployment_id == merge.deployment_id
        assert (promoted.trigger, promoted.requested_by) == ("manual", "erin")

        # the queued row comes first, then the states on the way
        await h.review(running, "approve")
        rollback = await h.awaiting_review(ROOT, B)
        assert rollback == "rollback-1"

        def states() -> list[str]:
            return [r.state for r in world.records if r.deployment_id == rollback]

        await until(lambda: "awaiting_review" in states(), "B's review recorded")
        assert states() == ["queued", "rendering", "awaiting_review"]


@scenario
async def test_duplicate_revision_dropped_queued_or_running() -> None:
    world = World()
    async with harness(world) as h:
        await h.push(ROOT, A)
        deployment_id = await h.awaiting_review(ROOT, A)
        await h.push(ROOT, A)  # running
        await h.push(ROOT, B)
        await h.push(ROOT, B)  # queued
        await h.push(ROOT, C)
        # Signals are handled in order: once C is queued, the duplicates before it were too,
        # and the check runs a wrongly queued duplicate would get come before C's.
        state = await h.until_state(ROOT, "C queued", lambda s: C in revisions(s.queue))
        assert revisions(state.queue) == [B, C]
        await until(lambda: world.runs_for(C), "C's queued check run")
        assert len(world.runs_for(A)) == 1 and len(world.runs_for(B)) == 1

        # A manual request for a queued merge revision promotes it instead of duplicating it.
        await h.push(ROOT, C, "manual", by="ops")
        state = await h.until_state(ROOT, "C promoted", lambda s: s.queue[0].revision == C)
        assert [(i.revision, i.trigger) for i in state.queue] == [(C, "manual"), (B, "merge")]
        assert len(world.runs_for(C)) == 1
        await h.review(deployment_id, "approve")
        await published(h, C)


@scenario
async def test_behind_skipped_and_not_persisted() -> None:
    world = World(latest={ROOT: latest(L)})
    world.relations[(L, B)] = "behind"
    async with harness(world) as h:
        await h.push(ROOT, B)
        (run_id,) = await until(lambda: _completed(world, B), "B's check run completed")
        skipped = world.last(run_id)
        assert skipped.conclusion == "failure"
        assert "behind the latest deployed revision" in skipped.summary
        assert L[:12] in skipped.summary
        await until(lambda: world.outcomes, "the skip recorded")
        assert [(r.revision, r.state) for r in world.outcomes] == [(B, "skipped")]
        assert world.persisted == [] and world.latest[ROOT].revision == L
        assert not any(name == ACT_CHECKOUT.name for name, _ in world.pinned_calls)

        # A manual deployment of an older revision is a rollback: it runs, and asks.
        await h.push(ROOT, B, "manual", reason="rollback", by="ops")
        rollback = await h.awaiting_review(ROOT, B)
        assert (await h.review(rollback, "approve")).published
        assert world.latest[ROOT].revision == B


@scenario
async def test_rejected_not_persisted() -> None:
    world = World(latest={ROOT: latest(L)})
    async with harness(world) as h:
        await h.push(ROOT, A)
        deployment_id = await h.awaiting_review(ROOT, A)
        result = await h.review(deployment_id, "reject", "dave")
        assert result.state == "rejected" and not result.published and result.latest is None
        (run_id,) = world.runs_for(A)
        assert world.last(run_id).conclusion == "cancelled"
        assert "Rejected by @dave" in world.last(run_id).summary
        assert world.persisted == [] and world.latest[ROOT].revision == L
        assert world.publish_attempts == []
        state = await h.until_state(ROOT, "idle", lambda s: s.current is None)
        assert state.latest is not None and state.latest.revision == L


@scenario
async def test_a_click_counts_only_on_the_deployments_own_check_run() -> None:
    """A signed click names a deployment by its check run's external id; made on another
    root's, another repository's or another commit's check run it changes nothing, and every
    click is recorded with who and why."""
    world = World(latest={ROOT: latest(L)})
    async with harness(world) as h:
        await h.push(ROOT, A)
        deployment_id = await h.awaiting_review(ROOT, A)
        foreign = [
            {"check_run_name": "rollwright/prod/eu"},
            {"repo": "evil/fleet"},
            {"head_sha": B},
            {"repo": None, "check_run_name": None, "head_sha": None},
        ]
        for origin in foreign:
            await h.click(deployment_id, "approve", "mallory", **origin)
        await until(lambda: len(world.audits) == len(foreign), "the refused clicks recorded")
        assert [(a.action, a.actor, a.counted) for a in world.audits] == [
            ("approve", "mallory", False)
        ] * len(foreign)
        reasons = [a.reason for a in world.audits]
        assert "check run 'rollwright/prod/eu'" in reasons[0]
        assert "made in evil/fleet" in reasons[1]
        assert f"made on commit {B[:7]}" in reasons[2]
        assert "does not say which check run" in reasons[3]
        assert all(a.deployment_id == deployment_id and a.root == ROOT for a in world.audits)
        state = await h.until_state(ROOT, "still waiting", lambda s: s.current is not None)
        assert state.current is not None and state.current.state == "awaiting_review"
        assert world.publish_attempts == []
        # The same click on its own check run counts.
        result = await h.review(deployment_id, "approve", "alice")
        assert result.state == "published"
        assert [(a.actor, a.counted, a.reason) for a in world.audits[-1:]] == [("alice", True, "")]


def test_publish_retries_outlast_a_short_outage() -> None:
    """A git host or S3 endpoint away for a couple of minutes must not fail a reviewed
    deployment: the publish attempts span minutes, not seconds."""
    policy = PUBLISH_RETRY
    assert policy.maximum_interval is not None
    waits, wait = [], policy.initial_interval
    for _ in range(policy.maximum_attempts - 1):
        waits.append(min(wait, policy.maximum_interval))
        wait = wait * policy.backoff_coefficient
    assert sum(waits, timedelta()) >= timedelta(minutes=3)


@scenario
async def test_failed_apply_still_becomes_latest() -> None:
    world = World(latest={ROOT: latest(L)})
    world.publish_modes[A] = "fail"  # retryable: tried a few times, then failed
    world.publish_modes[B] = "fatal"  # non-retryable: tried once
    async with harness(world) as h:
        await h.push(ROOT, A)
        result = await h.review(await h.awaiting_review(ROOT, A), "approve")
        assert result.state == "failed" and not result.published
        assert world.publish_attempts == [A] * PUBLISH_RETRY.maximum_attempts
        stored = world.latest[ROOT]
        assert (stored.revision, stored.state) == (A, "failed")
        # The cluster still runs L's render: it stays the diff base.
        assert (
            stored.published_revision == L and stored.published_prefix == latest(L).published_prefix
        )
        (run_id,) = world.runs_for(A)
        assert world.last(run_id).conclusion == "failure"
        assert "delivery target unreachable" in world.last(run_id).summary
        state = await h.until_state(
            ROOT, "latest is A", lambda s: s.latest is not None and s.latest.revision == A
        )
        assert state.latest is not None and state.latest.state == "failed"

        await h.push(ROOT, B)
        result = await h.review(await h.awaiting_review(ROOT, B), "approve")
        assert result.state == "failed"
        assert world.publish_attempts.count(B) == 1
        assert world.latest[ROOT].revision == B
        assert len(world.publish_attempts) == PUBLISH_RETRY.maximum_attempts + 1
        assert ACT_PUBLISH.name not in [n for n, _ in world.pinned_calls], "publish is not pinned"


@scenario
async def test_render_error_fails_without_persisting() -> None:
    world = World(render_errors={A: "deployments/x/apps/web/deployment.yaml:4: unknown key 'nmae'"})
    async with harness(world) as h:
        await h.push(ROOT, A)
        (run_id,) = await until(lambda: _completed(world, A), "A failed")
        done = world.last(run_id)
        assert done.conclusion == "failure" and done.title == "Render failed"
        assert "unknown key 'nmae'" in done.summary
        assert world.persisted == []
        # The checkout is removed after a failure too.
        assert await until(lambda: world.cleaned, "cleanup") == [f"/checkouts/{A}"]


@scenario
async def test_idle_shutdown_only_when_empty() -> None:
    world = World(latest={ROOT: latest(L, trigger="manual")})  # locked
    async with harness(world) as h:
        handle = await h.push(ROOT, A)
        await h.until_state(ROOT, "A waits behind the lock", lambda s: revisions(s.queue) == [A])
        await h.env.sleep(timedelta(hours=5))
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        assert revisions((await h.state(ROOT)).queue) == [A]

        await h.unlock(ROOT)
        await published(h, A)
        await handle.result()  # lets the server skip the idle hour
        assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
        events = await event_times(handle)
        idle = time_between(
            events, "child_workflow_execution_completed", "workflow_execution_completed"
        )
        assert timedelta(minutes=60) <= idle < timedelta(minutes=61)

        # The next revision starts a fresh run that reloads latest.json (and the unlock).
        second = await h.push(ROOT, B)
        assert second.result_run_id != handle.result_run_id
        state = await h.until_state(ROOT, "B running", lambda s: s.current is not None)
        assert state.latest is not None and state.latest.revision == A
        assert not state.lock.locked


@scenario
async def test_idle_timer_restarts_after_each_deployment() -> None:
    world = World(empty_diffs={A})
    world.relations[(L, A)] = "ahead"
    world.latest[ROOT] = latest(L)
    async with harness(world) as h:
        handle = await h.push(ROOT, A)
        await h.until_state(
            ROOT, "A published", lambda s: s.latest is not None and s.latest.revision == A
        )
        await h.env.sleep(timedelta(minutes=45))
        await h.push(ROOT, B)  # 45 minutes in: a new revision resets the idle clock
        await published(h, B)
        await handle.result()
        events = await event_times(handle)
        last_done = [t for kind, t in events if kind == "child_workflow_execution_completed"][-1]
        total = time_between(
            events, "child_workflow_execution_completed", "workflow_execution_completed"
        )
        assert total >= timedelta(minutes=45 + 60)
        assert events[-1][1] - last_done < timedelta(minutes=61)


@scenario
async def test_lock_rebuilt_after_restart() -> None:
    world = World(latest={ROOT: latest(L, trigger="manual", state="failed")})
    async with harness(world) as h:
        await h.push(ROOT, A)
        state = await h.until_state(ROOT, "A queued", lambda s: revisions(s.queue) == [A])
        assert state.lock.locked and state.lock.by_deployment == world.latest[ROOT].deployment_id
        assert state.current is None
        (run_id,) = await until(lambda: world.runs_for(A), "A's check run")
        await until(lambda: world.last(run_id).conclusion == "action_required", "A blocked")


@scenario
async def test_unlock_survives_restart() -> None:
    world = World(
        latest={
            ROOT: latest(L, trigger="manual", unlocked_by="bob", unlocked_at=latest(L).finished_at)
        }
    )
    async with harness(world) as h:
        await h.push(ROOT, A)
        await h.awaiting_review(ROOT, A)
        assert not (await h.state(ROOT)).lock.locked


@scenario
async def test_unlock_that_starts_the_workflow_applies_to_the_rebuilt_lock() -> None:
    world = World(latest={ROOT: latest(L, trigger="manual")})
    async with harness(world) as h:
        # The root's workflow had finished idle; the Unlock click signal-with-starts it.
        await h.client.start_workflow(
            DEPLOY_WORKFLOW,
            RootQueueInput(repo=REPO, root=ROOT),
            id=h.deploy(ROOT).id,
            task_queue=TASK_QUEUE,
            start_signal=SIGNAL_UNLOCK,
            start_signal_args=[UnlockSignal(by="bob")],
        )
        await until(lambda: world.persisted, "the Unlock persisted")
        assert world.latest[ROOT].unlocked_by == "bob"
        await h.push(ROOT, A)
        await h.awaiting_review(ROOT, A)
        assert not (await h.state(ROOT)).lock.locked


@scenario
async def test_review_timeout_after_seven_days() -> None:
    world = World(latest={ROOT: latest(L)})
    async with harness(world) as h:
        await h.push(ROOT, A)
        deployment_id = await h.awaiting_review(ROOT, A)
        result = await h.outcome(deployment_id)
        events = await event_times(h.client.get_workflow_handle(deployment_id))
        waited = time_between(events, "timer_started", "timer_fired")
        assert timedelta(days=7) <= waited < timedelta(days=7, minutes=1)
        assert result.state == "timed_out"
        (run_id,) = world.runs_for(A)
        assert world.last(run_id).conclusion == "timed_out"
        assert world.persisted == [] and world.publish_attempts == []
        # The gate closed with nothing published: the queue goes idle and latest stays L (a late
        # click finds the render workflow finished; the gateway answers it as a stale button).
        state = await h.until_state(ROOT, "idle", lambda s: s.current is None)
        assert state.latest is not None and state.latest.revision == L


@scenario
async def test_empty_diff_auto_approved_only_for_merges_ahead() -> None:
    world = World(latest={ROOT: latest(L)}, empty_diffs={A, B, C})
    world.relations[(L, A)] = "ahead"
    async with harness(world) as h:
        await h.push(ROOT, A)
        state = await h.until_state(
            ROOT, "A published", lambda s: s.latest is not None and s.latest.revision == A
        )
        assert state.latest is not None and state.latest.approved_by == "rollwright (empty diff)"
        (run_id,) = world.runs_for(A)
        assert "action_required" not in world.conclusions(run_id)
        assert world.last(run_id).conclusion == "success"

        # A manual deployment asks even when nothing changes.
        await h.push(ROOT, B, "manual", by="ops")
        deployment_id = await h.awaiting_review(ROOT, B)
        asking = world.last(world.runs_for(B)[0])
        assert asking.conclusion == "action_required" and asking.title == "Review: no changes"
        assert "manual deployment" in asking.summary
        await h.review(deployment_id, "approve")


@scenario
async def test_diverged_asks_for_confirmation() -> None:
    world = World(latest={ROOT: latest(L)}, empty_diffs={A})
    world.relations[(L, A)] = "diverged"
    async with harness(world) as h:
        await h.push(ROOT, A)
        deployment_id = await h.awaiting_review(ROOT, A)
        asking = world.last(world.runs_for(A)[0])
        assert asking.conclusion == "action_required"
        assert "diverged" in asking.summary and L[:12] in asking.summary
        assert (await h.review(deployment_id, "approve")).published


@scenario
async def test_continue_as_new_keeps_queue() -> None:
    world = World(latest={ROOT: latest(L, trigger="manual")})  # locked: merges pile up
    async with harness(world) as h:
        first = await h.push(ROOT, A, max_history_events=20)
        for revision in (B, C, D):
            await h.push(ROOT, revision)
        await until(lambda: _continued(h, first), "continue-as-new")
        state = await h.until_state(ROOT, "queue of four", lambda s: len(s.queue) == 4)
        assert revisions(state.queue) == [A, B, C, D]
        assert state.lock.locked and state.latest is not None and state.latest.revision == L
        # Items the new run enqueued get their check runs from the refresh that follows.
        await until(
            lambda: all(world.runs_for(r) for r in (A, B, C, D)), "the four queued check runs"
        )
        check_runs_before = {r: world.runs_for(r) for r in (A, B, C, D)}
        assert all(len(ids) == 1 for ids in check_runs_before.values())

        await h.unlock(ROOT)
        await published(h, A)
        await published(h, B)
        # The carried queue items kept their deployment ids and check runs.
        assert {r: world.runs_for(r) for r in (A, B, C, D)} == check_runs_before
        assert [r.revision for r in world.outcomes] == [A, B]


@scenario
async def test_a_merge_past_a_full_queue_is_refused_on_its_check_run() -> None:
    # Past the most a queue keeps, its continue-as-new input would outgrow Temporal's payload
    # limit and the root's queue could not go on: the merge is refused, visibly.
    world = World(latest={ROOT: latest(L, trigger="manual")})
    async with harness(world) as h:
        for revision in (A, B, C, D):
            await h.push(ROOT, revision, max_queued=3)
        (run_id,) = await until(lambda: _completed(world, D), "the refusal check run")
        refused = world.last(run_id)
        assert refused.conclusion == "failure" and refused.title == "Queue full"
        assert "3 deployments waiting" in refused.summary and "unlock" in refused.summary
        state = await h.state(ROOT)
        assert revisions(state.queue) == [A, B, C] and state.queue_length == 3

        # A manual deployment is taken all the same, ahead of the merges.
        await h.push(ROOT, D, "manual", by="erin")
        await h.awaiting_review(ROOT, D)
        state = await h.state(ROOT)
        assert state.current is not None and state.current.revision == D
        assert revisions(state.queue) == [A, B, C]


@scenario
async def test_an_unlock_of_a_long_queue_starts_the_next_deployment_before_its_writes() -> None:
    # An Unlock rewrites every waiting merge's check run; the first of them starts before
    # those writes, which are done while it runs.
    queued = [sha(f"u{n}") for n in range(120)]  # three batches
    world = World(latest={ROOT: latest(L, trigger="manual")})
    async with harness(world) as h:
        for revision in queued:
            await h.push(ROOT, revision)
        await until(lambda: all(world.runs_for(r) for r in queued), "every check run")
        await h.unlock(ROOT)
        await h.awaiting_review(ROOT, queued[0])
        await until(
            lambda: all(len(world.check_runs[world.runs_for(r)[0]]) > 1 for r in queued[1:]),
            "every waiting check run rewritten",
        )
        # What the queue did from the Unlock to the deployment's start, from its history.
        steps: list[str] = []
        async for event in h.deploy(ROOT).fetch_history_events():
            if event.HasField("workflow_execution_signaled_event_attributes"):
                name = event.workflow_execution_signaled_event_attributes.signal_name
                steps = [] if name == SIGNAL_UNLOCK else steps
            elif event.HasField("activity_task_scheduled_event_attributes"):
                steps.append(event.activity_task_scheduled_event_attributes.activity_type.name)
            elif event.HasField("start_child_workflow_execution_initiated_event_attributes"):
                break
        assert ACT_QUEUE_CHECK_RUNS.name not in steps, steps


@scenario
async def test_rerun_refused_unless_latest_attempt() -> None:
    world = World(latest={ROOT: latest(L)})
    async with harness(world) as h:
        await h.push(ROOT, A, "manual", reason="rerequested", by="erin")
        (run_id,) = await until(lambda: _completed(world, A), "refusal check run")
        refused = world.last(run_id)
        assert refused.conclusion == "skipped" and refused.title == "Re-run refused"
        assert "latest deployment attempt" in refused.summary
        state = await h.state(ROOT)
        assert state.queue == [] and state.current is None

        # The latest attempt itself may be re-run; as a repeat of a merge it does not lock.
        await h.push(ROOT, L, "manual", reason="rerequested", by="erin")
        deployment_id = await h.awaiting_review(ROOT, L)
        assert (await h.review(deployment_id, "approve")).published
        state = await h.until_state(ROOT, "done", lambda s: s.current is None)
        assert not state.lock.locked


def _completed(world: World, revision: str) -> list[int]:
    return [i for i in world.runs_for(revision) if world.last(i).status == "completed"]


async def _search_state(h: Harness, expected: str) -> bool:
    attrs = (await h.deploy(ROOT).describe()).typed_search_attributes
    return attrs.get(keyword(SA_STATE)) == expected


async def _continued(h: Harness, handle: Any) -> bool:
    described = await h.client.get_workflow_handle(handle.id).describe()
    return bool(described.run_id != handle.result_run_id)


@scenario
async def test_github_and_git_errors_fail_one_item_not_the_queue() -> None:
    world = World(check_run_errors={A}, relation_errors={B})
    async with harness(world) as h:
        handle = await h.push(ROOT, A)
        await until(lambda: [r for r in world.outcomes if r.revision == A], "A recorded")
        (record,) = world.outcomes
        assert record.state == "failed" and "422" in record.message
        assert world.publish_attempts == [], "no review without a check run, so no publish"

        await h.push(ROOT, B)  # its ancestry cannot be computed
        (run_id,) = await until(lambda: _completed(world, B), "B failed")
        assert world.last(run_id).conclusion == "failure"
        assert "Could not compare" in world.last(run_id).summary

        await h.push(ROOT, C)  # the queue still works
        await published(h, C)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        assert [(r.revision, r.state) for r in world.outcomes] == [
            (A, "failed"),
            (B, "failed"),
            (C, "published"),
        ]


# Real time on the dev server (the test server has no schedule-to-start timeouts), with a
# deployment that calls a worker lost after 2 s instead of 30 s.
FAST_LOSS = [DispatchWorkflow, RootQueueWorkflow, DeploymentNoticingLossFast]


async def _deployment_of(h: Harness, revision: str) -> str:
    """The id of the deployment of `revision` once it runs (its check run is in progress)."""

    def running() -> str | None:
        for run_id in h.world.runs_for(revision):
            if any(r.status == "in_progress" for r in h.world.check_runs[run_id]):
                return h.world.check_runs[run_id][0].external_id
        return None

    found: str = await until(running, f"{revision[:8]} running")
    return found


@pytest.mark.slow
@scenario
async def test_a_lost_worker_is_replaced_and_the_deployment_goes_on() -> None:
    """The worker that took the deployment is gone before its checkout: once nobody has
    taken the task for 30 s, the deployment asks for a live worker, checks out and renders
    there, and its check run says so. (A worker killed mid-activity is first noticed by its
    missing heartbeats; `make chaos` kills real workers.)"""
    world = World(latest={ROOT: latest(L)}, pinned_queue="worker-2", queue_answers=["gone-1"])
    async with harness(world, FAST_LOSS, dev_server=True) as h:
        await h.push(ROOT, A)
        deployment_id = await _deployment_of(h, A)
        await h.awaiting_review(ROOT, A)
        # checkout, render, diff and the review policy, all on the live worker
        assert [q for name, q in world.pinned_calls if name != "cleanup_checkout"] == [
            "worker-2"
        ] * 4
        (run_id,) = world.runs_for(A)
        lost = [r for r in world.check_runs[run_id] if "was lost" in r.summary]
        assert [r.title for r in lost] == ["Rendering (a worker was lost)"]
        assert "(`gone-1`) was lost; rendering again on `worker-2` (attempt 2 of 4)" in (
            lost[0].summary
        )
        result = await h.review(deployment_id, "approve")
        assert result.state == "published"


@pytest.mark.slow
@scenario
async def test_a_busy_worker_is_waited_for_not_replaced() -> None:
    """Nobody took the deployment's task for the start limit, but its worker still polls its
    queue (a fleet-wide change queues hundreds of renders on each worker): the task is asked
    again there, no loss is counted or shown, and the deployment goes on once the worker
    takes it."""
    world = World(latest={ROOT: latest(L)}, queue_answers=["busy-1"], busy={"busy-1"})
    async with harness(world, FAST_LOSS, dev_server=True) as h:
        await h.push(ROOT, A)
        deployment_id = await _deployment_of(h, A)
        await until(lambda: world.alive_asked.count("busy-1") >= 2, "asked twice", 30)
        await h.hire("busy-1")
        await h.awaiting_review(ROOT, A)
        assert {q for _, q in world.pinned_calls} == {"busy-1"}
        (run_id,) = world.runs_for(A)
        assert not [r for r in world.check_runs[run_id] if "was lost" in r.summary]
        assert (await h.review(deployment_id, "approve")).state == "published"


@scenario
async def test_a_checkout_swept_by_a_restarted_worker_is_made_again() -> None:
    world = World(latest={ROOT: latest(L)}, swept={"worker-1"})
    async with harness(world) as h:
        await h.push(ROOT, A)
        deployment_id = await h.awaiting_review(ROOT, A)
        assert [name for name, _ in world.pinned_calls if name != "cleanup_checkout"] == [
            "checkout",
            "render_root",
            "checkout",
            "render_root",
            "diff_render",
            "review_policy",
        ]
        assert (await h.review(deployment_id, "approve")).state == "published"


@pytest.mark.slow
@scenario
async def test_after_three_lost_workers_the_deployment_fails_visibly() -> None:
    world = World(
        latest={ROOT: latest(L)},
        queue_answers=["dead-1", "dead-2", "dead-3", "dead-4"],  # nobody serves these
    )
    async with harness(world, FAST_LOSS, dev_server=True) as h:
        await h.push(ROOT, A)
        result = await h.outcome(await _deployment_of(h, A))
        assert result.state == "failed"
        (run_id,) = world.runs_for(A)
        done = world.last(run_id)
        assert done.conclusion == "failure" and done.title == "Deployment failed"
        assert "schedule_to_start timeout" in done.summary
        lost = [r for r in world.check_runs[run_id] if "was lost" in r.summary]
        assert len(lost) == 3 and "(attempt 4 of 4)" in lost[-1].summary
        assert world.persisted == [] and world.publish_attempts == []
        await h.until_state(ROOT, "idle", lambda s: s.current is None)
