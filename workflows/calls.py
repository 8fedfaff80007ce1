"""Activity call options in one place: short store/GitHub calls and long pinned-worker calls."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy

T = TypeVar("T")

# GitHub and the stores: short, retried with backoff until they answer.
SHORT_TIMEOUT = timedelta(minutes=2)
SHORT_RETRY = RetryPolicy(maximum_interval=timedelta(minutes=1))
# Long work on the worker that holds the checkout: heartbeats every 5 s, declared dead after
# 1 min; schedule_to_start notices a worker that vanished, so the deployment fails visibly.
PINNED_RETRY = RetryPolicy(maximum_interval=timedelta(minutes=1), maximum_attempts=5)


async def short(name: str, arg: Any, result_type: type[T]) -> T:
    result: T = await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=SHORT_TIMEOUT,
        retry_policy=SHORT_RETRY,
    )
    return result


async def pinned(
    name: str,
    arg: Any,
    result_type: type[T],
    *,
    task_queue: str,
    timeout: timedelta,
    retry_policy: RetryPolicy = PINNED_RETRY,
) -> T:
    result: T = await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        task_queue=task_queue,
        start_to_close_timeout=timeout,
        schedule_to_start_timeout=timedelta(minutes=2),
        heartbeat_timeout=timedelta(minutes=1),
        retry_policy=retry_policy,
    )
    return result
