"""The rules of one root's deployment queue, with no Temporal in them.

Manual deployments (hotfixes among them) run before merged revisions, first in first out within
each; a revision is queued once (a manual request for a queued merge promotes it); a manual
deployment that reached publish locks merged revisions out until someone clicks Unlock (a
hotfix's lock also opens when its pull request is merged); a re-run repeats only the
latest attempt; a root holds at most `max_queued` merges. The queue also knows which items'
check runs and SQL rows are still to be written, so a long queue is written in batches and
only where something changed. `RootQueueWorkflow` keeps the Temporal loop around it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from shared.contracts.deploy import (
    LatestDeployment,
    LockState,
    NewRevision,
    QueueItem,
    locks_queue,
    pack_queue,
    unpack_queue,
)

# The most merges one root's queue holds. The continue-as-new input carries the queue packed
# and the ids still to write; at 10,000 it measured 0.72 MB (docs/benchmarks.md, "Long
# queue"), well under Temporal's 2 MB payload limit, which a run could not continue past.
# A merge beyond it is refused on its check run; manual deployments are always queued.
MAX_QUEUED = 10_000

Outcome = Literal["queued", "promoted", "duplicate", "rerun_refused", "full"]


@dataclass(frozen=True)
class Enqueued:
    """What `RootQueue.enqueue` did with a revision: `item` is the queued (or promoted) one."""

    outcome: Outcome
    item: QueueItem | None = None


class RootQueue:
    """One root's queued deployments, its lock, and what is still to be written about them."""

    def __init__(
        self,
        items: Iterable[QueueItem] = (),
        lock: LockState | None = None,
        *,
        max_queued: int = MAX_QUEUED,
        changed: Iterable[str] = (),
        unrecorded: Iterable[str] = (),
    ) -> None:
        self.items = list(items)
        self.by_revision = {item.revision: item for item in self.items}
        self.lock = lock or LockState()
        self.max_queued = max_queued
        # Items whose check run must be written, in the order they changed (an ordered set).
        self.changed: dict[str, None] = dict.fromkeys(changed)
        # Items whose SQL row ("queued") is missing or stale.
        self.unrecorded = list(unrecorded)
        for item in self.items:
            if item.check_run_id is None:
                self.item_changed(item)

    @classmethod
    def unpack(
        cls,
        packed: str | None,
        lock: LockState | None,
        *,
        max_queued: int = MAX_QUEUED,
        changed: Iterable[str] = (),
        unrecorded: Iterable[str] = (),
    ) -> RootQueue:
        """The queue a previous run carried across continue-as-new (`pack`)."""
        items = unpack_queue(packed) if packed else []
        return cls(items, lock, max_queued=max_queued, changed=changed, unrecorded=unrecorded)

    def pack(self) -> str:
        return pack_queue(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def holding(self, revision: str) -> QueueItem | None:
        return self.by_revision.get(revision)

    # --- joining the queue ------------------------------------------------------------------

    def enqueue(
        self,
        signal: NewRevision,
        *,
        running: Iterable[str],
        latest: LatestDeployment | None,
        new_id: Callable[[], str],
        now: datetime,
    ) -> Enqueued:
        """Queue `signal`'s revision, or say why not. `running`: the revisions of deployments
        running now; `new_id` is called only when a new item is queued."""
        locks = signal.trigger == "manual" and (
            # A re-run repeats the latest attempt, lock included; any other manual deployment
            # (the API, a rollback) locks the queue.
            signal.reason != "rerequested" or (latest is not None and locks_queue(latest))
        )
        queued = self.by_revision.get(signal.revision)
        if queued is not None:
            if signal.trigger == "manual" and queued.trigger == "merge":
                self._promote(queued, signal, locks)
                return Enqueued("promoted", queued)
            return Enqueued("duplicate", queued)
        if signal.revision in set(running):
            return Enqueued("duplicate")
        if (
            signal.reason == "rerequested"
            and latest is not None
            and signal.revision != latest.revision
        ):
            return Enqueued("rerun_refused")
        if signal.trigger == "merge" and len(self.items) >= self.max_queued:
            return Enqueued("full")
        item = QueueItem(
            deployment_id=signal.deployment_id or new_id(),
            revision=signal.revision,
            trigger=signal.trigger,
            requested_by=signal.requested_by,
            reason=signal.reason,
            enqueued_at=now,
            locks_queue=locks,
            hotfix=signal.hotfix,
        )
        self._insert(item)
        self.item_changed(item)
        self.unrecorded.append(item.deployment_id)
        return Enqueued("queued", item)

    def _promote(self, item: QueueItem, signal: NewRevision, locks: bool) -> None:
        """A manual request for a queued merge revision moves it ahead of the merges."""
        item.trigger = "manual"
        item.requested_by = signal.requested_by
        item.reason = signal.reason
        item.locks_queue = locks
        item.hotfix = signal.hotfix
        # Stable: manual before merge, FIFO within each priority.
        self.items.sort(key=lambda i: 0 if i.trigger == "manual" else 1)
        self.item_changed(item)
        self.unrecorded.append(item.deployment_id)

    def _insert(self, item: QueueItem) -> None:
        """Where a stable sort would put a new item, without sorting a long queue again."""
        self.by_revision[item.revision] = item
        if item.trigger != "manual":
            self.items.append(item)
            return
        at = next((n for n, other in enumerate(self.items) if other.trigger != "manual"), None)
        self.items.insert(len(self.items) if at is None else at, item)

    # --- leaving it ---------------------------------------------------------------------------

    def front_may_start(self) -> bool:
        """The front of the queue may start once nothing runs (manual items come first)."""
        return bool(self.items) and (self.items[0].trigger == "manual" or not self.lock.locked)

    def take_next(self) -> QueueItem | None:
        """The next item that may run, out of the queue; None while only locked merges wait."""
        for item in self.items:
            if item.trigger == "manual" or not self.lock.locked:
                self.items.remove(item)
                del self.by_revision[item.revision]
                return item
        return None

    # --- the lock -----------------------------------------------------------------------------

    def follow_lock(self, lock: LockState) -> None:
        """The lock moved (latest.json changed, or Unlock): merged items' check runs say
        whether they wait, and name the locking deployment, so they are written again."""
        before, self.lock = self.lock, lock
        if (lock.locked, lock.by_deployment) != (before.locked, before.by_deployment):
            for item in self.items:
                if item.trigger == "merge":
                    self.item_changed(item)

    def waits_for_unlock(self, item: QueueItem) -> bool:
        return item.trigger == "merge" and self.lock.locked

    # --- what is still to be written ------------------------------------------------------------

    def item_changed(self, item: QueueItem) -> None:
        self.changed[item.deployment_id] = None

    def take_changed(self, count: int) -> list[QueueItem]:
        """Up to `count` items whose check run must be written, oldest change first."""
        wanted = set(itertools.islice(self.changed, count))
        for deployment_id in wanted:
            del self.changed[deployment_id]
        return [item for item in self.items if item.deployment_id in wanted]

    def take_unrecorded(self, count: int) -> list[QueueItem]:
        """Up to `count` items whose SQL row must be written, in the order they were queued."""
        wanted = set(self.unrecorded[:count])
        self.unrecorded = self.unrecorded[count:]
        return [item for item in self.items if item.deployment_id in wanted]

    def claim_check_run(self, item: QueueItem) -> bool:
        """Take `item` out of the check runs to write when it is new there (no check run yet):
        the item about to start is written alone, before the batches."""
        if item.check_run_id is None and item.deployment_id in self.changed:
            del self.changed[item.deployment_id]
            return True
        return False

    def claim_row(self, item: QueueItem) -> bool:
        """Take `item` out of the rows to write when it is there (see `claim_check_run`)."""
        if item.deployment_id in self.unrecorded:
            self.unrecorded.remove(item.deployment_id)
            return True
        return False
