"""Run blocking work (git, Helm, the blob store) from an async activity while heartbeating.

Activities are `async def` so that heartbeats come from the event loop, not from the code that
is busy: `await blocking(fn, *args)` runs `fn` in a thread and heartbeats every
`HEARTBEAT_SECONDS` until it returns. Temporal declares the activity dead when heartbeats stop
for the heartbeat timeout (1 min), so a stuck worker is noticed while a long render is not.

Cancellation (the workflow gave up, or the worker shuts down) arrives as `CancelledError` at
the await; the thread cannot be interrupted and finishes on its own, its result discarded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from temporalio import activity

T = TypeVar("T")

HEARTBEAT_SECONDS = 5.0


def beat(*details: Any) -> None:
    """Heartbeat when running inside an activity (the helpers are also used outside one)."""
    if activity.in_activity():
        activity.heartbeat(*details)


async def blocking(
    fn: Callable[..., T], *args: Any, interval: float | None = None, **kwargs: Any
) -> T:
    """`fn(*args, **kwargs)` in a worker thread, heartbeating every `interval` seconds."""
    every = HEARTBEAT_SECONDS if interval is None else interval
    # to_thread copies the context, so logging in the thread still names the activity.
    task: asyncio.Future[T] = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
    beat()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            beat()
    except asyncio.CancelledError:
        # The thread keeps running; observe its outcome so nothing is reported as lost.
        task.add_done_callback(_discard)
        raise


def _discard(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
