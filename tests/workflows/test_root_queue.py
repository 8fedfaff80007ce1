"""The rules of one root's queue (`RootQueue`), without Temporal: order, duplicates, promotion,
re-runs, the lock, the limit, and what is still to be written."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from shared.contracts.deploy import (
    LatestDeployment,
    LockState,
    NewRevision,
    Trigger,
    lock_from_latest,
)
from workflows.rootqueue.queue import Enqueued, RootQueue

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ids = (f"id-{n}" for n in itertools.count())


def new_id() -> str:
    return next(ids)


def merge(revision: str, deployment_id: str | None = None) -> NewRevision:
    return NewRevision(revision=revision, reason="push", deployment_id=deployment_id)


def manual(revision: str, reason: str = "api", by: str = "ops") -> NewRevision:
    return NewRevision(revision=revision, trigger="manual", reason=reason, requested_by=by)


def latest(revision: str = "l0", trigger: Trigger = "manual") -> LatestDeployment:
    return LatestDeployment(
        deployment_id="d-latest", revision=revision, trigger=trigger, state="published"
    )


def add(
    queue: RootQueue,
    signal: NewRevision,
    *,
    running: tuple[str, ...] = (),
    last: LatestDeployment | None = None,
) -> Enqueued:
    return queue.enqueue(signal, running=running, latest=last, new_id=new_id, now=NOW)


def revisions(queue: RootQueue) -> list[str]:
    return [item.revision for item in queue.items]


def test_manual_items_go_before_merges_first_in_first_out_within_each() -> None:
    queue = RootQueue()
    for signal in (merge("m1"), manual("a1"), merge("m2"), manual("a2")):
        assert add(queue, signal).outcome == "queued"
    assert revisions(queue) == ["a1", "a2", "m1", "m2"]
    assert [queue.take_next().revision for _ in range(4)] == ["a1", "a2", "m1", "m2"]
    assert queue.take_next() is None


def test_a_revision_is_queued_once_and_not_while_it_runs() -> None:
    queue = RootQueue()
    first = add(queue, merge("a"))
    again = add(queue, merge("a"))
    assert again.outcome == "duplicate" and again.item is first.item
    assert add(queue, merge("b"), running=("b",)).outcome == "duplicate"
    assert revisions(queue) == ["a"]


def test_a_manual_request_for_a_queued_merge_promotes_it() -> None:
    queue = RootQueue()
    for revision in ("m1", "m2"):
        add(queue, merge(revision))
    queue.changed.clear()
    queue.unrecorded.clear()
    done = add(queue, manual("m2", by="erin"))
    assert done.outcome == "promoted" and done.item is not None
    assert revisions(queue) == ["m2", "m1"]
    assert (done.item.trigger, done.item.requested_by, done.item.locks_queue) == (
        "manual",
        "erin",
        True,
    )
    # its check run and row say so again
    assert list(queue.changed) == [done.item.deployment_id] == queue.unrecorded


def test_the_gateways_deployment_id_is_kept_and_none_is_drawn() -> None:
    queue = RootQueue()
    drawn: list[str] = []
    done = queue.enqueue(
        merge("a", deployment_id="chosen"),
        running=(),
        latest=None,
        new_id=lambda: drawn.append("x") or "x",
        now=NOW,
    )
    assert done.item is not None and done.item.deployment_id == "chosen" and drawn == []


def test_only_the_latest_attempt_can_be_re_run() -> None:
    queue = RootQueue()
    last = latest("l0")
    assert add(queue, manual("old", reason="rerequested"), last=last).outcome == "rerun_refused"
    rerun = add(queue, manual("l0", reason="rerequested"), last=last)
    assert rerun.outcome == "queued"
    # a re-run repeats the latest attempt's lock: a published manual deployment locked
    assert rerun.item is not None and rerun.item.locks_queue
    unlocking = latest("l1", trigger="merge")
    again = add(RootQueue(), manual("l1", reason="rerequested"), last=unlocking)
    assert again.item is not None and not again.item.locks_queue


def test_merges_past_the_limit_are_refused_and_manual_deployments_still_queue() -> None:
    queue = RootQueue(max_queued=2)
    assert [add(queue, merge(r)).outcome for r in ("a", "b", "c")] == ["queued", "queued", "full"]
    assert add(queue, manual("d")).outcome == "queued"
    assert revisions(queue) == ["d", "a", "b"]


def test_a_lock_holds_merges_back_but_not_manual_deployments() -> None:
    locked = lock_from_latest(latest("l0"))
    assert locked.locked
    queue = RootQueue(lock=locked)
    add(queue, merge("m"))
    assert not queue.front_may_start() and queue.take_next() is None
    assert queue.waits_for_unlock(queue.items[0])
    add(queue, manual("a"))
    assert queue.front_may_start()
    assert queue.take_next().revision == "a"


def test_the_lock_moving_rewrites_the_waiting_merges_check_runs() -> None:
    queue = RootQueue(lock=lock_from_latest(latest("l0")))
    for signal in (merge("m1"), manual("a"), merge("m2")):
        add(queue, signal)
    queue.changed.clear()
    queue.follow_lock(lock_from_latest(latest("l0")))  # the same lock: nothing to rewrite
    assert not queue.changed
    queue.follow_lock(LockState())  # unlocked
    assert [queue.by_revision[r].deployment_id for r in ("m1", "m2")] == list(queue.changed)
    assert queue.take_next().revision == "a"
    assert queue.take_next().revision == "m1"


def test_what_is_to_be_written_is_taken_in_batches_in_order() -> None:
    queue = RootQueue()
    for n in range(5):
        add(queue, merge(f"r{n}"))
    assert [i.revision for i in queue.take_changed(2)] == ["r0", "r1"]
    assert [i.revision for i in queue.take_unrecorded(3)] == ["r0", "r1", "r2"]
    front = queue.items[0]
    assert not queue.claim_check_run(front)  # already taken
    assert queue.claim_row(queue.items[3]) and not queue.claim_row(queue.items[3])
    assert [i.revision for i in queue.take_changed(10)] == ["r2", "r3", "r4"]
    assert [i.revision for i in queue.take_unrecorded(10)] == ["r4"]


def test_an_item_with_a_check_run_is_not_claimed_alone() -> None:
    queue = RootQueue()
    item = add(queue, merge("a")).item
    assert item is not None
    item.check_run_id = 7
    assert not queue.claim_check_run(item)
    item.check_run_id = None
    assert queue.claim_check_run(item) and not queue.changed


def test_packed_and_unpacked_the_queue_is_the_same() -> None:
    queue = RootQueue()
    for signal in (merge("m1"), manual("a")):
        add(queue, signal)
    queue.items[0].check_run_id = 3
    again = RootQueue.unpack(queue.pack(), queue.lock, changed=["x"], unrecorded=["y"])
    assert again.items == queue.items
    assert set(again.by_revision) == {"a", "m1"}
    # items without a check run are written again by the next run; the carried ids stay
    assert list(again.changed) == ["x", queue.items[1].deployment_id]
    assert again.unrecorded == ["y"]
    assert len(RootQueue.unpack(None, None)) == 0
