"""A worker's admission of deployments (activities.admission): at most `limit` hold it, the
others wait in arrival order; holds end on release, on cancellation, or at the lease; and
`worker_task_queue` on the admission queue answers only once admitted, or hands the deployment
back when its worker begins to stop."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import cast

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.admission import Admission
from activities.dispatch import QueueActivities
from shared.contracts.deploy import admission_task_queue
from shared.settings import Settings


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_at_most_the_limit_hold_and_the_others_go_in_arrival_order() -> None:
    async def scenario() -> list[str]:
        admission = Admission(2)
        order: list[str] = []

        async def deployment(name: str) -> None:
            await admission.admit(name)
            order.append(name)

        tasks = [asyncio.create_task(deployment(f"d{i}")) for i in range(5)]
        await _settle()
        assert order == ["d0", "d1"] and admission.held == 2 and admission.waiting == 3
        admission.release("d1")
        await _settle()
        assert order == ["d0", "d1", "d2"]
        admission.release("nobody")  # not holding: changes nothing
        admission.release("d0")
        admission.release("d2")
        await asyncio.gather(*tasks)
        assert admission.held == 2 and admission.waiting == 0
        return order

    assert asyncio.run(scenario()) == ["d0", "d1", "d2", "d3", "d4"]


def test_a_deployment_asking_again_keeps_its_hold() -> None:
    async def scenario() -> None:
        admission = Admission(1)
        await admission.admit("d0")
        await asyncio.wait_for(admission.admit("d0"), 1)  # repinned here, or a retry
        assert admission.held == 1

    asyncio.run(scenario())


def test_a_deployment_cancelled_while_waiting_leaves_the_line() -> None:
    async def scenario() -> None:
        admission = Admission(1)
        await admission.admit("d0")
        waiting = asyncio.create_task(admission.admit("d1"))
        after = asyncio.create_task(admission.admit("d2"))
        await _settle()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        admission.release("d0")
        await asyncio.wait_for(after, 1)
        assert admission.held == 1 and admission.waiting == 0

    asyncio.run(scenario())


def test_a_hold_ends_at_its_lease_and_the_waiting_hear_of_it_while_beating() -> None:
    async def scenario() -> int:
        admission = Admission(1, lease=0.2)
        beats = 0

        def beat() -> None:
            nonlocal beats
            beats += 1

        await admission.admit("vanished")  # its workflow ended without its worker hearing
        await asyncio.wait_for(admission.admit("d1", on_wait=beat, beat=0.05), 2)
        assert admission.held == 1
        return beats

    assert asyncio.run(scenario()) >= 2


def _queues(admission: Admission) -> tuple[QueueActivities, ActivityEnvironment]:
    settings = Settings(public_url="http://rollwright.test", worker_id="w1")
    queues = QueueActivities(settings, cast(Client, None), admission)  # no Temporal call
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, task_queue=admission_task_queue(settings.task_queue), workflow_id="d1"
    )
    return queues, env


def test_worker_task_queue_on_the_admission_queue_answers_once_admitted() -> None:
    async def scenario() -> str:
        admission = Admission(1)
        await admission.admit("d0")
        queues, env = _queues(admission)
        answer = asyncio.create_task(env.run(queues.worker_task_queue))
        await asyncio.sleep(0.1)
        assert not answer.done() and admission.waiting == 1
        admission.release("d0")
        queue: str = await asyncio.wait_for(answer, 2)
        assert admission.held == 1  # d1 holds the worker now
        admission.release("d1")
        return queue

    assert asyncio.run(scenario()) == "rollwright/w1"


def test_worker_task_queue_hands_waiting_deployments_back_when_its_worker_stops() -> None:
    async def scenario() -> None:
        admission = Admission(1)
        await admission.admit("d0")
        queues, env = _queues(admission)
        answer = asyncio.create_task(env.run(queues.worker_task_queue))
        await asyncio.sleep(0.1)
        env.worker_shutdown()
        with pytest.raises(ApplicationError, match="w1 is stopping"):
            await asyncio.wait_for(answer, 2)
        assert admission.waiting == 0 and admission.held == 1

    asyncio.run(scenario())
