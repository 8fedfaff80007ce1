"""The worker's interceptor ends a deployment's hold (activities.admission) when its pinned
work ends here: the review policy read or the checkout's clean-up, or any pinned activity of
it failing; other activities and other deployments' holds are left alone."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

import pytest
from temporalio.testing import ActivityEnvironment
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from activities.admission import Admission
from worker.admission import AdmissionRelease


class _Activity(ActivityInboundInterceptor):
    """The activity itself, at the end of the interceptor chain: answers, or raises."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if self.error is not None:
            raise self.error
        return "done"


def _run(admission: Admission, activity_type: str, error: Exception | None = None) -> Any:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, activity_type=activity_type, workflow_id="d1", task_queue="rollwright/w1"
    )
    chain = AdmissionRelease(admission).intercept_activity(_Activity(error))
    # the input only passes through to the activity, which reads none of it
    return asyncio.run(env.run(chain.execute_activity, cast(ExecuteActivityInput, None)))


def _held(*holders: str) -> Admission:
    admission = Admission(len(holders))

    async def admit() -> None:
        for holder in holders:
            await admission.admit(holder)

    asyncio.run(admit())
    return admission


@pytest.mark.parametrize("activity_type", ["review_policy", "cleanup_checkout"])
def test_the_last_pinned_step_ends_the_hold(activity_type: str) -> None:
    admission = _held("d1", "d2")
    assert _run(admission, activity_type) == "done"
    assert admission.held == 1  # d2's stays


@pytest.mark.parametrize("activity_type", ["checkout", "render_root", "diff_render"])
def test_earlier_steps_keep_it(activity_type: str) -> None:
    admission = _held("d1")
    assert _run(admission, activity_type) == "done"
    assert admission.held == 1


def test_a_failing_pinned_activity_ends_it() -> None:
    admission = _held("d1", "d2")
    with pytest.raises(RuntimeError, match="git fetch failed"):
        _run(admission, "checkout", RuntimeError("git fetch failed"))
    assert admission.held == 1
