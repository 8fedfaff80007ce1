"""A worker's admission of deployments: how many hold its own task queue at once.

A deployment pins its checkout, render, diff and policy read to the worker that answers
`worker_task_queue`. A fleet-wide change asks for a worker for every root at once; answered at
once, each worker's own queue would hold hundreds of checkouts, and every pinned task behind
them would wait past the pinned start limit (the 30 s that tell a lost worker) and be asked
again. Asked on the waits queue, the answer waits here instead, heartbeating, until this
worker holds fewer than `limit` deployments: its own queue stays a few tasks deep, and the
deployments waiting for room wait where no start limit applies, first come first served.

A deployment's hold ends when its pinned work ends on this worker (its review policy read,
its checkout's clean-up, or any of its pinned activities failing: the worker's interceptor
calls `release`), or after `lease` seconds whatever happened (a workflow ended from outside).
Holders are workflow ids: one deployment, one hold, asked again or not.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable

# A hold outlives any pinned stint (seconds to a few minutes for a large root); it only
# frees the room of a deployment whose workflow ended without its worker hearing of it.
LEASE_SECONDS = 600.0
# While waiting, `on_wait` runs this often (the activity heartbeats, so a lost worker's
# waiting deployments are asked elsewhere within the heartbeat timeout).
WAIT_BEAT_SECONDS = 10.0


class Admission:
    """Deployments holding this worker, at most `limit`; the others wait in arrival order."""

    def __init__(self, limit: int, *, lease: float = LEASE_SECONDS) -> None:
        if limit < 1:
            raise ValueError(f"admission limit must be at least 1, not {limit}")
        self.limit = limit
        self.lease = lease
        self._held: dict[str, float] = {}  # holder → monotonic deadline
        self._waiting: collections.deque[tuple[str, asyncio.Future[None]]] = collections.deque()

    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def waiting(self) -> int:
        return sum(1 for _, future in self._waiting if not future.done())

    async def admit(
        self,
        holder: str,
        *,
        on_wait: Callable[[], None] = lambda: None,
        beat: float = WAIT_BEAT_SECONDS,
    ) -> None:
        """Return once `holder` holds this worker (at once if it already does). Cancelled
        while waiting, it leaves the line; cancelled once admitted, it gives the room back."""
        self._expire()
        if holder in self._held:
            self._held[holder] = time.monotonic() + self.lease
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((holder, future))
        self._grant()
        try:
            while not future.done():
                try:
                    await asyncio.wait_for(asyncio.shield(future), beat)
                except TimeoutError:
                    on_wait()
                    self._grant()  # holds may have run out meanwhile
        except BaseException:
            if future.done() and not future.cancelled():
                self.release(holder)
            else:
                future.cancel()  # _grant skips it
            raise

    def release(self, holder: str) -> None:
        """`holder`'s pinned work ended here: its room goes to the first one waiting."""
        if self._held.pop(holder, None) is not None:
            self._grant()

    def _expire(self) -> None:
        now = time.monotonic()
        for holder in [h for h, deadline in self._held.items() if deadline <= now]:
            del self._held[holder]

    def _grant(self) -> None:
        self._expire()
        while self._waiting and len(self._held) < self.limit:
            holder, future = self._waiting.popleft()
            if future.done():  # left the line
                continue
            self._held[holder] = time.monotonic() + self.lease
            future.set_result(None)
