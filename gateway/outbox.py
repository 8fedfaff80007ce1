"""The outbox drainer: performs the workflow starts and signals that `POST /events` accepted.

`POST /events` stores each routed action in the `gateway_outbox` table in the same transaction
as its delivery record and answers 202 at once; this task, started in the app's lifespan,
performs the actions through the Dispatcher:

- Rounds: lease up to `per_repo` consecutive pending rows of up to `repos` repositories
  (OutboxStore.claim), perform each repository's rows in `id` order — repositories in
  parallel, one row at a time within one — then write every outcome of the round in one
  transaction (OutboxStore.finish). A new row wakes the drainer; otherwise it looks every
  `poll` seconds (rows of other replicas, retries that have come due).
- Temporal unreachable (DispatchError): the row stays pending with a growing delay (`backoff`
  doubling up to `backoff_max`), and the repository's later rows wait behind it, so each
  repository's deliveries are performed in the order they were accepted.
- A row that can never be performed (an action that no longer parses, Temporal rejecting the
  request as invalid) is marked `failed` and the repository moves on.
- Leases (`lease`, renewed while a round runs) let several gateways share one database: a row
  is performed by the drainer holding its lease. A gateway that stops gives its leases back;
  one that dies leaves them to expire, and whoever comes next (another replica, or the same
  gateway restarted) performs the rows then. Pending rows are drained at startup.

Delivery is at least once: a gateway that dies after performing an action but before writing
its outcome performs it again once the lease expires. Every action tolerates that (see
docs/gateway.md, "Delivery guarantees").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import ValidationError

from gateway.actions import ACTION, StartDispatch, deliver
from gateway.dispatcher import Dispatcher, DispatchError
from gateway.metrics import GatewayMetrics
from shared.stores.sql.outbox import OutboxClaim, OutboxResult, OutboxStore

log = logging.getLogger("rollwright.gateway.outbox")


@dataclass(frozen=True)
class OutboxOptions:
    lease: timedelta = timedelta(seconds=30)
    repos: int = 32  # repositories per round
    per_repo: int = 50  # rows of one repository per round
    concurrency: int = 16  # repositories performed at once
    poll: float = 1.0  # seconds between looks when nothing woke the drainer
    backoff: float = 0.5  # first retry delay after an infrastructure error, seconds
    backoff_max: float = 30.0
    retention: timedelta = timedelta(days=7)  # finished rows are deleted after this
    prune_every: float = 600.0
    stop_timeout: float = 10.0  # how long stopping waits for a round in progress
    give_way: float = 0.05  # longest wait for webhook answers in progress before each step

    def retry_delay(self, attempts: int) -> float:
        """Delay before attempt `attempts + 1` (attempts made so far ≥ 1)."""
        return float(min(self.backoff_max, self.backoff * 2 ** max(0, attempts - 1)))


def _clip(text: str, limit: int = 2000) -> str:
    """Both ends of a long message: what was being done, and what Temporal said."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]}...{text[-half:]}"


def default_owner() -> str:
    """Unique per drainer: a lease names who holds it, for people reading the table too."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"[:128]


class OutboxDrainer:
    def __init__(
        self,
        store: OutboxStore,
        dispatcher: Dispatcher,
        metrics: GatewayMetrics,
        options: OutboxOptions | None = None,
        *,
        owner: str | None = None,
    ) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.options = options or OutboxOptions()
        self.owner = owner or default_owner()
        self._wake = asyncio.Event()
        self._answering = 0
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._last_prune = 0.0

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name=f"outbox drainer {self.owner}")

    def wake(self) -> None:
        """A row was added: look now rather than at the next poll."""
        self._wake.set()

    @contextmanager
    def giving_way(self) -> Iterator[None]:
        """Wrap answering a webhook: the drainer's steps wait for a moment without one."""
        self._answering += 1
        try:
            yield
        finally:
            self._answering -= 1

    async def _give_way(self) -> None:
        # Answering GitHub fast is the promise; performing can wait a few milliseconds. The
        # drainer shares the process (and, on small machines, the CPUs with Temporal), so each
        # of its steps waits until no webhook is being answered, for at most `give_way`: under
        # steady load it still moves at least one row per `give_way`.
        if not self._answering:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.give_way
        while self._answering and loop.time() < deadline:
            await asyncio.sleep(0.001)

    async def stop(self) -> None:
        """Finish the round in progress (up to `stop_timeout`), then give the leases back."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), self.options.stop_timeout)
            except TimeoutError:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        try:
            released = await asyncio.to_thread(self.store.release, self.owner)
        except Exception as err:  # they expire on their own
            log.warning("outbox: giving back leases failed: %s", err)
        else:
            if released:
                log.info("outbox: gave back %d leased rows", released)

    async def run(self) -> None:
        failures = 0
        while not self._stopping:
            self._wake.clear()
            try:
                performed = await self.drain_once()
            except Exception as err:  # the database, most likely: wait and look again
                failures += 1
                delay = self.options.retry_delay(failures)
                log.error("outbox: draining failed (again in %.1fs): %s", delay, err)
                await self._sleep(delay)
                continue
            failures = 0
            if performed:
                continue  # there may be more: claim the next round at once
            await self._prune_now_and_then()
            await self._sleep(self.options.poll)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    # --- one round -------------------------------------------------------------------------

    async def drain_once(self) -> int:
        """Claim, perform and record one round; how many rows it claimed."""
        options = self.options
        await self._give_way()
        claims = await asyncio.to_thread(
            self.store.claim,
            self.owner,
            lease=options.lease,
            repos=options.repos,
            per_repo=options.per_repo,
        )
        if not claims:
            return 0
        results: list[OutboxResult] = []
        heartbeat = asyncio.create_task(self._renew([c.id for c in claims]))
        try:
            by_repo: dict[str, list[OutboxClaim]] = defaultdict(list)
            for claim in claims:
                by_repo[claim.repo].append(claim)
            limit = asyncio.Semaphore(options.concurrency)

            async def repository(rows: list[OutboxClaim]) -> None:
                async with limit:
                    await self._perform_in_order(rows, results)

            await asyncio.gather(*(repository(rows) for rows in by_repo.values()))
        finally:
            heartbeat.cancel()
            # Written even when the round was cancelled part-way: what was performed must not
            # be performed again by whoever takes the rows next.
            attempted = {r.id for r in results}
            untouched = [c.id for c in claims if c.id not in attempted]
            await asyncio.shield(self._record(results, untouched))
        return len(claims)

    async def _perform_in_order(self, rows: list[OutboxClaim], results: list[OutboxResult]) -> None:
        for row in rows:
            result = await self._perform(row)
            results.append(result)
            if result.state == "retry":
                return  # later rows of this repository wait behind it

    async def _perform(self, row: OutboxClaim) -> OutboxResult:
        try:
            action = ACTION.validate_json(row.payload)
        except ValidationError as err:
            log.error("outbox row %d (%s): unreadable action: %s", row.id, row.delivery_id, err)
            self.metrics.outbox_performed.labels(outcome="failed").inc()
            return OutboxResult(row.id, "failed", error=_clip(f"unreadable action: {err}"))
        await self._give_way()
        if isinstance(action, StartDispatch) and action.inp.after_dispatch is None:
            # This repository's rows are performed one at a time in id order: the previous
            # dispatch has been started (or refused) already. It queues its revisions first.
            previous = await asyncio.to_thread(self.store.previous_dispatch, row.repo, row.id)
            if previous is not None and previous != action.workflow_id:
                inp = action.inp.model_copy(update={"after_dispatch": previous})
                action = action.model_copy(update={"inp": inp})
        try:
            dispatched = await deliver(action, self.dispatcher)
        except DispatchError as err:
            if not err.retryable:
                log.error("outbox row %d (%s): %s; giving up", row.id, row.delivery_id, err)
                self.metrics.outbox_performed.labels(outcome="failed").inc()
                return OutboxResult(row.id, "failed", error=_clip(str(err)))
            return self._retry(row, str(err))
        except Exception as err:  # a bug, or something we did not foresee: keep the row
            log.exception("outbox row %d (%s): %s", row.id, row.delivery_id, action.describe())
            return self._retry(row, f"{type(err).__name__}: {err}")
        self.metrics.outbox_performed.labels(outcome=dispatched.outcome).inc()
        self.metrics.outbox_delay.observe((datetime.now(UTC) - row.created_at).total_seconds())
        log.info(
            "outbox: %s %s → %s (delivery %s)",
            action.describe(),
            dispatched.workflow_id,
            dispatched.outcome,
            row.delivery_id,
        )
        # A click whose workflow is not running was judged by nobody: recorded as not counted.
        unheard = action.unheard(dispatched.outcome, datetime.now(UTC))
        return OutboxResult(
            row.id,
            "done",
            outcome=f"{dispatched.outcome}: {dispatched.workflow_id}",
            audit=unheard,
        )

    def _retry(self, row: OutboxClaim, error: str) -> OutboxResult:
        delay = self.options.retry_delay(row.attempts + 1)
        log.warning(
            "outbox row %d (%s, attempt %d): %s; again in %.1fs",
            row.id,
            row.delivery_id,
            row.attempts + 1,
            error,
            delay,
        )
        self.metrics.outbox_retries.inc()
        retry_at = datetime.now(UTC) + timedelta(seconds=delay)
        return OutboxResult(row.id, "retry", error=_clip(error), retry_at=retry_at)

    async def _record(self, results: Sequence[OutboxResult], untouched: Sequence[int]) -> None:
        """Write a round's outcomes; the database may blink, so try for a while: until the
        leases expire the rows are still ours."""
        deadline = asyncio.get_running_loop().time() + self.options.lease.total_seconds() / 2
        attempt = 0
        while True:
            try:
                await asyncio.to_thread(self.store.finish, self.owner, results, untouched)
                return
            except Exception as err:
                attempt += 1
                if asyncio.get_running_loop().time() > deadline:
                    log.error(
                        "outbox: recording %d outcomes failed, they will be performed again "
                        "when their leases expire: %s",
                        len(results),
                        err,
                    )
                    return
                await asyncio.sleep(self.options.retry_delay(attempt))

    async def _renew(self, ids: list[int]) -> None:
        every = self.options.lease.total_seconds() / 3
        while True:
            await asyncio.sleep(every)
            try:
                held = await asyncio.to_thread(
                    self.store.renew_leases, self.owner, ids, self.options.lease
                )
            except Exception as err:
                log.warning("outbox: renewing leases failed: %s", err)
                continue
            if held < len(ids):
                log.debug("outbox: %d of %d rows of this round still leased", held, len(ids))

    async def _prune_now_and_then(self) -> None:
        now = asyncio.get_running_loop().time()
        if self._last_prune and now - self._last_prune < self.options.prune_every:
            return
        self._last_prune = now
        try:
            pruned = await asyncio.to_thread(self.store.prune, self.options.retention)
        except Exception as err:
            log.warning("outbox: pruning finished rows failed: %s", err)
            return
        if pruned:
            log.info("outbox: deleted %d finished rows", pruned)
