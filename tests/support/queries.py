"""Querying workflows on Temporal's time-skipping test server, which drops a query that reaches
a run in the very task that continues it as new ("Task not found when completing"): the caller
would wait out its whole deadline. Ask with a short deadline, and again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

T = TypeVar("T")

ATTEMPTS = 10


async def query(handle: WorkflowHandle[Any, Any], name: str, result_type: type[T]) -> T:
    for _ in range(ATTEMPTS):
        try:
            result: T = await handle.query(
                name, result_type=result_type, rpc_timeout=timedelta(seconds=2)
            )
            return result
        except RPCError as err:
            if err.status not in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
                raise
    raise AssertionError(f"the {name!r} query of {handle.id} keeps timing out")
