"""A root's queue thousands of revisions long, on the dev server in real time (the
time-skipping server stops skipping once an abandoned child of a closed run is about, and the
queue continues as new while its deployment runs): every run's history stays short, every
queued revision keeps its place and its check run, and the chain of runs replays."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from shared.contracts.checkrun import QUEUE_ROWS
from shared.contracts.deploy import QUERY_HOLDING, STATE_QUEUE_ITEMS
from tests.support.deploy_world import (
    WORKFLOWS,
    Harness,
    World,
    harness,
    latest,
    revisions,
    sha,
    until,
)
from workflows.deployment import DeploymentWorkflow
from workflows.dispatch import DispatchWorkflow
from workflows.rootqueue.workflow import QUEUED_BATCH, RootQueueWorkflow

pytestmark = pytest.mark.slow  # on Temporal's dev server in real time

ROOT = "prod/eu-west"
L, M = sha("1"), sha("m")
HISTORY_EVENTS = 300  # a run continues as new past this many events
QUEUED = STATE_QUEUE_ITEMS + 200  # more than a state query shows


def scenario(fn: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    @functools.wraps(fn)
    def test() -> None:
        asyncio.run(asyncio.wait_for(fn(), 300))

    return test


def _merges(count: int, label: str) -> list[str]:
    return [sha(f"{label}{n}") for n in range(count)]


def _written(world: World, revision: str) -> list[str]:
    """Titles of every write of the revision's check run (one check run per revision)."""
    (run_id,) = world.runs_for(revision, ROOT)
    return [r.title for r in world.check_runs[run_id]]


async def _replays(histories: list[WorkflowHistory]) -> None:
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure


def _assert_short(histories: list[WorkflowHistory]) -> None:
    # A run ends at the first workflow task past the limit; signals that came in meanwhile
    # are the only slack.
    for history in histories:
        assert len(history.events) < 2 * HISTORY_EVENTS, len(history.events)
        # the server suggests continuing as new at 4 MiB: a run ends at most one batch later
        assert sum(e.ByteSize() for e in history.events) < 4 * 1024 * 1024


async def _deployment_awaiting_review(h: Harness, revision: str) -> str:
    # Real time on the dev server, next to thousands of check runs being written again (after
    # the Unlock): on a loaded machine the first deployment took over 15 s to ask once.
    deployment_id: str = await h.awaiting_review(ROOT, revision, timeout=60)
    return deployment_id


@scenario
async def test_thousands_queued_stay_in_order_with_short_histories() -> None:
    """A locked root collects 2,000 merged revisions: each gets one check run saying it waits
    for an Unlock (written in batches), the queue keeps push order over many runs, a manual
    deployment runs while the queue continues as new under it, and after it the waiting
    check runs name the new lock and the queue moves on one item after another."""
    world = World(latest={ROOT: latest(L, trigger="manual")})
    merged = _merges(QUEUED, "q")
    async with harness(world, dev_server=True) as h:
        first = await h.push(ROOT, merged[0], max_history_events=HISTORY_EVENTS)
        for revision in merged[1:]:
            await h.push(ROOT, revision)
        await until(
            lambda: all(world.runs_for(r, ROOT) for r in merged), "every queued check run", 120
        )
        state = await h.state(ROOT)
        # the state query shows the front of the queue; the holding query finds any item
        assert revisions(state.queue) == merged[:STATE_QUEUE_ITEMS]
        assert state.queue_length == QUEUED and state.lock.locked
        for revision in (merged[0], merged[-1]):
            held = await h.deploy(ROOT).query(QUERY_HOLDING, revision, result_type=str)
            assert held == world.last(world.runs_for(revision, ROOT)[0]).external_id
        assert max(world.check_run_batches) <= QUEUED_BATCH
        assert sum(world.check_run_batches) >= QUEUED
        for revision in merged:
            assert _written(world, revision) == ["Waiting: the queue is locked"]
        last = world.last(world.runs_for(merged[-1], ROOT)[0])
        assert f"at position {QUEUED}" in last.summary and last.root_page
        assert len(last.summary) < 2_000, "a short summary, not the whole queue"
        assert (await h.deploy(ROOT).describe()).run_id != first.result_run_id

        # A manual deployment goes first; the queue continues as new while it runs.
        await h.push(ROOT, M, "manual", by="alice")
        manual = await _deployment_awaiting_review(h, M)
        under = (await h.deploy(ROOT).describe()).run_id
        more = _merges(HISTORY_EVENTS, "r")
        for revision in more:
            await h.push(ROOT, revision)
        await until(lambda: all(world.runs_for(r, ROOT) for r in more), "the later check runs")
        assert (await h.deploy(ROOT).describe()).run_id != under, "continued under it"
        result = await h.review(manual, "approve")
        assert result.state == "published"
        # A later run heard its end, and every waiting check run now names the lock the
        # manual deployment holds.
        await until(
            lambda: all(
                f"`{manual}`" in world.last(world.runs_for(r, ROOT)[0]).summary
                for r in merged + more
            ),
            "waiting check runs naming the new lock",
            120,
        )
        state = await h.state(ROOT)
        assert state.lock.by_deployment == manual and state.current is None
        assert revisions(state.queue) == (merged + more)[:STATE_QUEUE_ITEMS]
        assert state.queue_length == QUEUED + len(more)

        await h.unlock(ROOT)
        for revision in merged[:3]:
            deployment_id = await _deployment_awaiting_review(h, revision)
            assert (await h.review(deployment_id, "approve")).state == "published"
        state = await h.state(ROOT)
        assert revisions(state.queue)[:QUEUE_ROWS] == merged[3 : 3 + QUEUE_ROWS]

        histories = await h.run_chain(first.id, first.result_run_id or "")
    assert len(histories) >= (QUEUED + HISTORY_EVENTS) // HISTORY_EVENTS
    _assert_short(histories)
    await _replays(histories)


@scenario
async def test_a_deployment_that_ends_without_telling_its_queue_fails_visibly() -> None:
    """The queue continued as new under a running deployment, which is then terminated (it
    cannot signal its end): the queue asks after it, fails it on its check run and moves on."""
    world = World(latest={ROOT: latest(L)})
    merged = _merges(40, "t")
    workflows = [RootQueueWorkflow, DeploymentWorkflow, DispatchWorkflow]
    async with harness(world, workflows, dev_server=True) as h:
        # asks after a deployment an earlier run started every 2 s, not every 30 minutes
        first = await h.push(ROOT, merged[0], max_history_events=30, detached_check_seconds=2)
        stuck = await _deployment_awaiting_review(h, merged[0])
        for revision in merged[1:]:
            await h.push(ROOT, revision)
        await until(lambda: all(world.runs_for(r, ROOT) for r in merged), "queued check runs")
        assert (await h.deploy(ROOT).describe()).run_id != first.result_run_id
        await h.client.get_workflow_handle(stuck).terminate("operator")
        await until(lambda: "Deployment failed" in _written(world, merged[0]), "failed", 30)
        assert "ended (terminated)" in world.last(world.runs_for(merged[0], ROOT)[0]).summary
        deployment_id = await _deployment_awaiting_review(h, merged[1])
        assert (await h.review(deployment_id, "approve")).state == "published"
        histories = await h.run_chain(first.id, first.result_run_id or "")
    replayer = Replayer(workflows=workflows, data_converter=pydantic_data_converter)
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure
