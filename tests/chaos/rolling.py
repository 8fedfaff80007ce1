"""Case 7: a rolling restart of every worker while deployments render."""

from __future__ import annotations

import time

from shared.contracts.activityrefs import (
    ACT_RENDER_ROOT,
)
from shared.contracts.deploy import (
    TASK_QUEUE,
)
from shared.devstack import fleetrepo
from shared.devstack.emulator.model import CheckRunRecord
from tests.chaos.report import CaseResult
from tests.support.cluster import Cluster, Fleet

NUMBER = 7
KEY = "rolling"
TITLE = "A rolling restart of every worker while deployments render"
ROOTS = 4
RELEASES = 400
POLLING_LIMIT = 60.0  # s for a new worker to poll the shared queue
SETTLE_LIMIT = 300.0  # s for every root to reach review after the last restart
SETUP = f"""
A fleet of {ROOTS} roots × {RELEASES} releases (a render of a few seconds each, so the two
workers hold deployments when the restart begins). One commit changes the global values file,
which every root reads; its signed push goes to the gateway. As soon as a `render_root`
activity runs, the workers are restarted as an upgrade restarts them, one at a time: SIGTERM to
the first (it has Temporal's 30 s graceful shutdown to finish or hand back its activities), a
new worker started in its place and seen polling the shared queue, then the same for the
second. Checked: every root's deployment reaches review with its diff and is published after
Approve, exactly one deployment (one check run) per root, none failed; how many were rendered
again for a worker taken for lost is reported, not limited (a stopped worker's pinned queue is
found empty after 30 s, docs/operations.md).
"""


def run(chaos: Cluster, result: CaseResult) -> None:
    fleet = chaos.fleet("rolling", groups=1, clusters_per_group=ROOTS, releases=RELEASES)
    base = fleetrepo.head(fleet.repo)
    head = fleetrepo.set_value(
        fleet.repo, "deployments/global.values.yaml", "env.ROLLING", "1", "global: roll"
    )
    started = time.monotonic()
    fleet.push(base, head)

    def rendering() -> str | None:
        for root in fleet.roots:
            state = fleet.deploy_state(root)
            deployment = state.current.deployment_id if state and state.current else None
            if deployment and chaos.temporal.running_activity(deployment, ACT_RENDER_ROOT.name):
                return root
        return None

    first = fleet.wait("a render to start", rendering, poll=0.1)
    result.note(
        "the restart began while rendering",
        f"{first}, {time.monotonic() - started:.0f} s after the push",
    )
    for old in sorted(chaos.workers):
        stopped_at = time.monotonic()
        code = chaos.stop_worker(old)
        took = time.monotonic() - stopped_at
        new = chaos.fresh_worker_id()
        child = chaos.start_worker(new)
        polling = _wait_polling(fleet, child.pid)
        result.check(
            f"SIGTERM to {old} → exited; {new} started in its place and polling",
            f"exit {code} after {took:.0f} s; {new} polling after {polling:.0f} s",
            f"exit 0 within the graceful shutdown; polling ≤ {POLLING_LIMIT:.0f} s",
            code == 0 and polling <= POLLING_LIMIT,
        )
    restarted = time.monotonic()

    reviews: dict[str, CheckRunRecord] = {}
    for root in fleet.roots:
        reviews[root] = fleet.review(root, head, timeout=SETTLE_LIMIT)
    result.check(
        f"every root's deployment asks for review with its diff ({ROOTS} roots)",
        f"{len(reviews)} of {ROOTS}, the last {time.monotonic() - restarted:.0f} s after the "
        "last restart",
        f"{ROOTS}, ≤ {SETTLE_LIMIT:.0f} s",
        len(reviews) == ROOTS,
    )
    deployments = {root: str(run.state["external_id"]) for root, run in reviews.items()}
    for review in reviews.values():
        fleet.click(review, "approve", "alice")
    outcomes = {
        root: fleet.finished(deployment, {"success"}, timeout=SETTLE_LIMIT).conclusion
        for root, deployment in deployments.items()
    }
    result.check(
        "after Approve: published",
        ", ".join(f"{root}: {c}" for root, c in sorted(outcomes.items())),
        "success for each",
        all(c == "success" for c in outcomes.values()),
    )
    per_root = {root: _deployments(fleet, root, head) for root in fleet.roots}
    result.check(
        "deployments (distinct check-run external ids) per root at the pushed revision",
        sorted({len(ids) for ids in per_root.values()}),
        "[1]",
        all(len(ids) == 1 for ids in per_root.values()),
    )
    again = [
        root
        for root, deployment in deployments.items()
        if len(chaos.temporal.activity_runs(deployment, ACT_RENDER_ROOT.name)) > 1
    ]
    result.note(
        "rendered again on another worker (the first worker stopped before or during it)",
        f"{len(again)} of {ROOTS}" + (f": {', '.join(sorted(again))}" if again else ""),
    )


def _wait_polling(fleet: Fleet, pid: int) -> float:
    since = time.monotonic()

    def polling() -> bool | None:
        identities = fleet.cluster.temporal.pollers(TASK_QUEUE)
        return True if any(i.partition("@")[0] == str(pid) for i in identities) else None

    fleet.wait("the new worker to poll", polling, poll=0.5, timeout=POLLING_LIMIT + 30)
    return time.monotonic() - since


def _deployments(fleet: Fleet, root: str, head: str) -> set[str]:
    return {
        str(run.state.get("external_id"))
        for run in fleet.check_runs(root)
        if run.state.get("head_sha") == head
    }
