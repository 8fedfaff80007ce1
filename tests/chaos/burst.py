"""Case 3: a burst of signed pushes at 200 per second: every delivery performed exactly once,
and each root's queue in delivery order."""

from __future__ import annotations

import asyncio
import time

from temporalio.api.enums.v1 import PendingActivityState

from shared.contracts.checkrun import check_run_name
from shared.contracts.deploy import dispatch_workflow_id
from shared.devstack import fleetrepo
from shared.stores.sql.outbox import OutboxStore
from shared.stores.sql.tables import OutboxRow
from tests.bench.service import send_open_loop, signed_requests
from tests.chaos import gitrepo
from tests.chaos.report import CaseFailed, CaseResult
from tests.support.cluster import Cluster, Fleet

NUMBER = 3
KEY = "burst"
TITLE = "A burst of 200 signed pushes per second"
RATE = 200.0
PUSHES = 400  # two seconds of it
GROUPS, CLUSTERS = 4, 10  # 40 roots, 10 pushes each
CONNECTIONS = 16
DRAIN_LIMIT = 300.0  # s for every dispatch to finish and every revision to be queued
STALL_LIMIT = 60.0  # s without a dispatch finishing: stuck, say why instead of waiting on
SETUP = f"""
A linear history of {PUSHES} commits, each changing one of {GROUPS * CLUSTERS} roots (round
robin), and GitHub's `push` webhook for each commit (`before` = its parent), signed; sent
open-loop at {RATE:.0f}/s over {CONNECTIONS} keep-alive connections (so a few are in flight at
once and the gateway's acceptance order — its outbox ids — is the delivery order). Each root's
first revision goes to review and the later ones wait in its queue, so every revision a root
was sent stays visible. Checked: each delivery has exactly one outbox row, performed once as a
fresh DispatchWorkflow start; exactly {PUSHES} DispatchWorkflows ran, each completed; each
root's running deployment plus its queue are exactly its revisions in delivery order; one
check run per root and revision.
"""


def run(chaos: Cluster, result: CaseResult) -> None:
    fleet = chaos.fleet("burst", groups=GROUPS, clusters_per_group=CLUSTERS)
    base = fleetrepo.head(fleet.repo)
    shas, root_of = _history(fleet)
    before = [base, *shas[:-1]]  # each push's `before`: its parent
    payloads = [
        fleet.emulator.push_payload(fleet.owner, fleet.name, b, a)
        for b, a in zip(before, shas, strict=True)
    ]
    url = f"{chaos.stack.urls.gateway}/events"
    requests = signed_requests(url, chaos.stack.webhook_secret, "push", payloads)
    started = time.monotonic()
    sent = asyncio.run(send_open_loop(url, requests, RATE, CONNECTIONS))
    statuses = {s: sent.statuses.count(s) for s in sorted(set(sent.statuses))}
    result.require(
        f"{PUSHES} signed pushes: answers",
        f"{statuses} at {PUSHES / sent.elapsed:.0f}/s achieved",
        f"{PUSHES} × 202",
        statuses == {202: PUSHES},
    )
    delivery_ids = [delivery for delivery, _ in requests]

    def drained() -> list[OutboxRow] | None:
        rows = [r for r in OutboxStore(chaos.database).rows() if r.repo == fleet.full_name]
        if len(rows) < PUSHES or any(r.state == "pending" for r in rows):
            return None
        return rows

    rows = fleet.wait("the outbox to drain", drained, poll=1.0, timeout=DRAIN_LIMIT)
    rows_of: dict[str, list[OutboxRow]] = {}
    for row in rows:
        rows_of.setdefault(row.delivery_id, []).append(row)
    performed = [
        delivery
        for delivery in delivery_ids
        if len(rows_of.get(delivery, [])) == 1
        and rows_of[delivery][0].state == "done"
        and rows_of[delivery][0].outcome.startswith("started: ")
    ]
    result.check(
        "deliveries with exactly one outbox row, performed as a fresh DispatchWorkflow start",
        f"{len(performed)} of {PUSHES} ({len(rows)} rows for the repository)",
        f"{PUSHES} of {PUSHES}, {PUSHES} rows",
        len(performed) == PUSHES and len(rows) == PUSHES,
    )
    # delivery order: the order the gateway accepted them (outbox ids), each naming its commit
    order = [row.target.rpartition(":")[2] for row in rows]
    sent_index = {sha: i for i, sha in enumerate(shas)}
    overtaken = 0
    latest = -1
    for sha in order:
        overtaken += sent_index[sha] < latest
        latest = max(latest, sent_index[sha])
    result.note(
        "pushes accepted after one sent later than them (requests in flight at once)", overtaken
    )

    query = f'WorkflowType="DispatchWorkflow" AND RollwrightRepo="{fleet.full_name}"'
    progress = [-1, time.monotonic()]  # dispatches finished, when that last grew

    def dispatched() -> dict[str, int] | None:
        runs = chaos.temporal.executions(query)
        finished = sum(1 for r in runs if r.status and r.status.name != "RUNNING")
        if finished > progress[0]:
            progress[:] = [finished, time.monotonic()]
        elif time.monotonic() - progress[1] > STALL_LIMIT:
            raise CaseFailed(
                f"the dispatches stalled: {finished} of {PUSHES} finished, none in the last "
                f"{STALL_LIMIT:.0f} s; activities of the running ones (type, state: count): "
                f"{_pending_activities(chaos, query)}"
            )
        if len(runs) < PUSHES or finished < len(runs):
            return None
        counts: dict[str, int] = {}
        for execution in runs:
            name = execution.status.name if execution.status else "?"
            counts[name] = counts.get(name, 0) + 1
        counts["distinct ids"] = len({r.id for r in runs})
        return counts

    counts = fleet.wait("every dispatch to finish", dispatched, poll=2.0, timeout=DRAIN_LIMIT)
    expected_ids = {dispatch_workflow_id(fleet.full_name, sha) for sha in shas}
    result.check(
        "DispatchWorkflow executions of the repository",
        counts,
        f"{PUSHES} COMPLETED, {PUSHES} distinct ids",
        counts == {"COMPLETED": PUSHES, "distinct ids": PUSHES} and len(expected_ids) == PUSHES,
    )

    expected: dict[str, list[str]] = {root: [] for root in fleet.roots}
    for sha in order:
        expected[root_of[sha]].append(sha)

    def queues() -> dict[str, list[str]] | None:
        found = {}
        for root in fleet.roots:
            state = fleet.deploy_state(root)
            if state is None:
                return None
            running = [state.current.revision] if state.current else []
            found[root] = running + [q.revision for q in state.queue]
            if len(found[root]) < len(expected[root]):
                return None
        return found

    seen = fleet.wait("every revision in its root's queue", queues, poll=1.0, timeout=DRAIN_LIMIT)
    result.note(
        "from the first push to the last revision queued", f"{time.monotonic() - started:.0f} s"
    )
    in_order = [root for root in fleet.roots if seen[root] == expected[root]]
    wrong = {
        root: _positions(seen[root], expected[root]) for root in fleet.roots if root not in in_order
    }
    result.check(
        "roots whose running deployment + queue are exactly their revisions in delivery order",
        f"{len(in_order)} of {len(fleet.roots)}"
        + (f"; others (delivery positions): {wrong}" if wrong else ""),
        f"{len(fleet.roots)} of {len(fleet.roots)}",
        len(in_order) == len(fleet.roots),
    )
    # the roots' own check runs; a revision's `rollwright` summary (Approve all) is not one
    names = {check_run_name(root) for root in fleet.roots}
    runs = [run for run in fleet.check_runs() if run.name in names]
    summaries = len(fleet.check_runs()) - len(runs)
    per_revision: dict[tuple[str, str], int] = {}
    for run in runs:
        key = (run.name, run.state["head_sha"])
        per_revision[key] = per_revision.get(key, 0) + 1
    wanted = {(check_run_name(root_of[sha]), sha) for sha in shas}
    result.check(
        "check runs per root and revision",
        f"{sorted(set(per_revision.values()))} for {len(per_revision)} revisions",
        f"[1] for {PUSHES}",
        set(per_revision) == wanted and set(per_revision.values()) == {1},
    )
    result.note(
        "`rollwright` summary check runs (one per revision with a root in review)", summaries
    )


def _history(fleet: Fleet) -> tuple[list[str], dict[str, str]]:
    """PUSHES commits, commit i changing root i mod the number of roots; (shas, root of sha)."""
    edits = []
    roots = []
    originals = {
        root: (fleet.repo / f"deployments/{root}/cluster.values.yaml").read_text()
        for root in fleet.roots
    }
    for i in range(PUSHES):
        root = fleet.roots[i % len(fleet.roots)]
        roots.append(root)
        edits.append(
            (f"deployments/{root}/cluster.values.yaml", f"{originals[root]}  CHAOS_EDIT: '{i}'\n")
        )
    shas = gitrepo.commit_edits(fleet.repo, edits)
    return shas, dict(zip(shas, roots, strict=True))


def _positions(seen: list[str], expected: list[str]) -> list[int]:
    """Where each revision a root has sits in the delivery order of the root's pushes."""
    return [expected.index(sha) if sha in expected else -1 for sha in seen]


def _pending_activities(chaos: Cluster, query: str) -> dict[str, int]:
    """What the running workflows of `query` wait for: their pending activities by type and
    state (scheduled: no worker has taken it; started: a worker runs it)."""
    found: dict[str, int] = {}
    for execution in chaos.temporal.executions(f"{query} AND ExecutionStatus='Running'"):
        described = chaos.temporal.describe(execution.id)
        if described is None:
            continue
        for pending in described.raw_description.pending_activities:
            state = PendingActivityState.Name(pending.state).removeprefix("PENDING_ACTIVITY_STATE_")
            key = f"{pending.activity_type.name} {state.lower()}"
            found[key] = found.get(key, 0) + 1
    return found
