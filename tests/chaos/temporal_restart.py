"""Case 2: SIGKILL and restart of the Temporal dev server while a root has a queue and a
lock, and another root's deployment waits for review."""

from __future__ import annotations

import time

from shared.devstack import fleetrepo
from shared.devstack.emulator.model import CheckRunRecord
from tests.chaos.report import CaseResult
from tests.support.cluster import Cluster

NUMBER = 2
KEY = "temporal_restart"
TITLE = "SIGKILL and restart of the Temporal dev server with a queue and a lock"
DOWN = 3.0  # seconds the server stays dead
SETUP = f"""
Two roots. Root A gets a manual deployment (`POST /api/deploy`), approved and published, which
locks its queue; two merged revisions then wait in A's queue behind the lock. Root B has a
merge deployment waiting for review. The dev server (`temporal server start-dev
--db-filename …`) is killed with SIGKILL; while it is dead a third push for A is sent (the
gateway accepts it into its outbox); after {DOWN:.0f} s the server is started again on the same
port and database file. Then: A's queue and lock as before plus the third revision, B still
waiting; B is approved and published; Unlock is clicked on A's check run and its three
revisions are deployed in order.
"""


def run(chaos: Cluster, result: CaseResult) -> None:
    fleet = chaos.fleet("restart", groups=1, clusters_per_group=2)
    locked, waiting = fleet.roots
    rev0 = fleetrepo.head(fleet.repo)
    manual = fleet.api_deploy(locked, rev0, "ops")
    fleet.approve(fleet.review(locked, rev0), "ops")
    rev1 = fleet.commit_change(locked)
    fleet.push(rev0, rev1)
    rev2 = fleet.commit_change(locked)
    fleet.push(rev1, rev2)
    rev3 = fleet.commit_change(waiting)
    fleet.push(rev2, rev3)
    review = fleet.review(waiting, rev3)

    def queued(revisions: list[str]) -> list[tuple[str, str]] | None:
        state = fleet.deploy_state(locked)
        if state is None or [q.revision for q in state.queue] != revisions:
            return None
        return [(q.revision, q.deployment_id) for q in state.queue]

    before = fleet.wait("two revisions queued behind the lock", lambda: queued([rev1, rev2]))
    state = fleet.deploy_state(locked)
    assert state is not None
    lock_before = (state.lock.locked, state.lock.by_deployment)
    result.require(
        "before: root A's lock; queue",
        f"locked={state.lock.locked} by the manual deployment; {len(before)} revisions",
        "locked; 2",
        lock_before == (True, manual) and len(before) == 2,
    )

    chaos.kill_temporal()
    rev4 = fleet.commit_change(locked)
    delivery = fleet.push(rev3, rev4)
    time.sleep(DOWN)
    started = time.monotonic()
    chaos.restart_temporal()
    restarted = time.monotonic() - started
    result.check(
        "a push while the server is dead: the gateway's answer",
        delivery.status,
        "202 (kept in the outbox)",
        delivery.status == 202,
    )
    result.note("the server serving again after its restart", f"{restarted:.1f} s")

    after = fleet.wait(
        "the queue after the restart", lambda: queued([rev1, rev2, rev4]), timeout=120
    )
    state = fleet.deploy_state(locked)
    assert state is not None
    result.check(
        "after: root A's lock; queue (same deployment ids, then the push sent while down)",
        f"locked={state.lock.locked}, same holder: {state.lock.by_deployment == manual}; "
        f"same first two: {after[:2] == before}, third: {after[2][0] == rev4}",
        "locked, same holder; same first two, third is that push",
        (state.lock.locked, state.lock.by_deployment) == lock_before
        and after[:2] == before
        and after[2][0] == rev4,
    )
    review_state = chaos.temporal.query(review.state["external_id"], "deployment_state", str)
    result.check(
        "after: root B's deployment",
        review_state,
        "awaiting_review",
        review_state == "awaiting_review",
    )
    started = time.monotonic()
    published = fleet.approve(review, "alice")
    result.check(
        "  Approve on B → published",
        f"{published.conclusion} in {time.monotonic() - started:.1f} s",
        "success",
        published.conclusion == "success",
    )

    def unlock_button() -> CheckRunRecord | None:
        for run in reversed(fleet.check_runs(locked)):
            if any(a["identifier"] == "unlock" for a in run.actions):
                return run
        return None

    holder = fleet.wait("a check run with Unlock", unlock_button)
    fleet.click(holder, "unlock", "ops")
    order = []
    for revision in (rev1, rev2, rev4):
        fleet.approve(fleet.review(locked, revision), "alice")
        order.append(revision)

    def latest() -> str | None:  # the deployment's end reaches the queue a moment later
        state = fleet.deploy_state(locked)
        return state.latest.revision if state and state.latest else None

    final = fleet.wait("A's latest deployment", lambda: latest() if latest() == rev4 else None)
    result.check(
        "Unlock on A → its queued revisions reviewed and published in order; A's latest",
        f"{len(order)} published; latest is the last: {final == rev4}",
        "3; yes",
        final == rev4,
    )
