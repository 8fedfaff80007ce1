"""Group commit for accepted webhooks: many deliveries, one SQL transaction.

SQLite has one writer at a time, and under load the gateway's per-webhook commits queued
behind each other (and behind the outbox drainer's) for longer than the answer may take.
`DeliveryIntake.claim` therefore does not write by itself: it adds the delivery to the next
batch and waits for it. A batch starts as soon as the previous one is committed, with whatever
has arrived meanwhile — a lone webhook is written at once, with no added delay; at 200/s a
handful share one transaction. Every caller learns whether its delivery was new (True) or
seen before (False), or gets the database's exception.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from shared.stores.sql.deliveries import DeliveryClaim, DeliveryStore

MAX_BATCH = 200


@dataclass
class _Waiting:
    claim: DeliveryClaim
    answer: asyncio.Future[bool] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class DeliveryIntake:
    def __init__(self, store: DeliveryStore, *, max_batch: int = MAX_BATCH) -> None:
        self.store = store
        self.max_batch = max_batch
        self._waiting: list[_Waiting] = []
        self._writer: asyncio.Task[None] | None = None

    async def claim(self, claim: DeliveryClaim) -> bool:
        """Record the delivery (and its outbox row) in the next batch; False for a repeat.

        A caller that goes away (the client hung up) does not take its delivery out of the
        batch: once written it is performed, and GitHub's redelivery is a duplicate."""
        waiting = _Waiting(claim)
        # Read the outcome even if nobody awaits it any more, so asyncio does not complain.
        waiting.answer.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._waiting.append(waiting)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())
        return await asyncio.shield(waiting.answer)

    async def _write(self) -> None:
        while self._waiting:
            batch = self._waiting[: self.max_batch]
            del self._waiting[: self.max_batch]
            try:
                recorded = await asyncio.to_thread(self.store.claim, [w.claim for w in batch])
            except Exception as err:
                for w in batch:
                    w.answer.set_exception(err)
                continue
            for w, new in zip(batch, recorded, strict=True):
                w.answer.set_result(new)
