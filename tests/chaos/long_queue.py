"""Case 4: a thousand revisions queued for one root."""

from __future__ import annotations

import time

from temporalio.client import WorkflowExecutionStatus

from shared.contracts.deploy import TASK_QUEUE, NewRevision, RepoRef, deploy_workflow_id
from shared.contracts.queueing import queue_revision
from shared.devstack.emulator.model import CheckRunRecord
from tests.chaos import gitrepo
from tests.chaos.report import CaseFailed, CaseResult
from tests.support.cluster import Cluster, Fleet

NUMBER = 4
KEY = "long_queue"
TITLE = "1,000 queued revisions for one root"
REVISIONS = 1000
TRANSITIONS = 3
ENQUEUE_LIMIT = 240.0  # s for all of them to be in the queue
NEXT_LIMIT = 5.0  # s from a deployment's end to the next one's start: "within seconds"
FIRST_LIMIT = 150.0  # s for the first revision to reach review once all are queued
NEXT_WAIT = 60.0  # s to wait for each next review before giving up on the transitions
SETUP = f"""
{REVISIONS} commits, each changing the same root, signalled to the root's DeployWorkflow in
order as merges — the signal-with-start the DispatchWorkflow's `signal_deploys` activity sends
(`shared/contracts/queueing.py`), sent directly so that the case measures the queue, not the
dispatch (case 3 covers that path). The first revision goes to review, the other
{REVISIONS - 1} wait. Then the running deployment is approved {TRANSITIONS} times; each time
the gap between its DeploymentWorkflow closing and the next one starting is read from
Temporal. Checked: no run of the DeployWorkflow was terminated or failed (Temporal terminates
a workflow whose history passes its size or length limit), the queue keeps every revision in
order, and the history of each run stays within Temporal's limits (events and bytes from
Temporal's describe). The requirement is 10,000 queued revisions surviving; 1,000 keeps the
case within the suite's time.
"""
# Temporal's default limits: a workflow is terminated at 50 MB or 51,200 events and warned
# at 10 MB / 10,240 events (dynamic config limit.historySize.*, limit.historyCount.*).
HISTORY_BYTES_WARN = 10 << 20
HISTORY_EVENTS_WARN = 10_240


def run(chaos: Cluster, result: CaseResult) -> None:
    fleet = chaos.fleet("longqueue", groups=1, clusters_per_group=1, timeout=120.0, poll=1.0)
    (root,) = fleet.roots
    path = f"deployments/{root}/cluster.values.yaml"
    original = (fleet.repo / path).read_text()
    shas = gitrepo.commit_edits(
        fleet.repo, [(path, f"{original}  CHAOS_EDIT: '{i}'\n") for i in range(REVISIONS)]
    )
    workflow_id = deploy_workflow_id(fleet.full_name, root)
    started = time.monotonic()
    _signal_all(chaos, fleet, root, shas)
    result.note(f"{REVISIONS} signals sent", f"in {time.monotonic() - started:.0f} s")

    def queued() -> list[str] | None:
        _fail_if_ended(chaos, workflow_id)
        state = fleet.deploy_state(root)
        if state is None:
            return None
        revisions = ([state.current.revision] if state.current else []) + [
            q.revision for q in state.queue
        ]
        return revisions if len(revisions) >= REVISIONS else None

    seen = fleet.wait("every revision queued", queued, poll=2.0, timeout=ENQUEUE_LIMIT)
    result.check(
        "the running deployment + queue after the signals",
        f"{len(seen)} revisions, in signal order: {seen == shas} "
        f"(after {time.monotonic() - started:.0f} s)",
        f"{REVISIONS}, in order",
        seen == shas,
    )
    started = time.monotonic()
    run = _review_within(chaos, fleet, root, shas[0], FIRST_LIMIT)
    result.check(
        "the first revision's deployment asks for review",
        f"after {time.monotonic() - started:.0f} s"
        if run
        else f"not within {FIRST_LIMIT:.0f} s: {_diagnosis(chaos, fleet, workflow_id)}",
        f"≤ {FIRST_LIMIT:.0f} s",
        run is not None,
    )
    gaps: list[float | None] = []
    approved = 0
    while run is not None and approved < TRANSITIONS:
        previous = run.state["external_id"]
        fleet.approve(run, "alice")
        approved += 1
        run = _review_within(chaos, fleet, root, shas[approved], NEXT_WAIT)
        if run is None:
            gaps.append(None)
            break
        ended = chaos.temporal.describe(previous)
        following = chaos.temporal.describe(run.state["external_id"])
        assert ended is not None and following is not None
        assert ended.close_time is not None and following.start_time is not None
        gaps.append((following.start_time - ended.close_time).total_seconds())
    if gaps:
        result.check(
            "from a deployment's end (approved, published) to the next one's start",
            ", ".join(
                f"{g:.1f} s" if g is not None else f"none within {NEXT_WAIT:.0f} s" for g in gaps
            )
            + ("" if gaps[-1] is not None else f": {_diagnosis(chaos, fleet, workflow_id)}"),
            f"{TRANSITIONS} times, each ≤ {NEXT_LIMIT:.0f} s",
            len(gaps) == TRANSITIONS and all(g is not None and g <= NEXT_LIMIT for g in gaps),
        )
    state = fleet.deploy_state(root)
    assert state is not None
    left = ([state.current.revision] if state.current else []) + [q.revision for q in state.queue]
    result.check(
        f"the queue afterwards ({approved} published)",
        f"{len(left)} revisions, the remaining ones in order: {left == shas[approved:]}",
        f"{REVISIONS - approved}, in order",
        left == shas[approved:],
    )
    _histories(chaos, workflow_id, result)


def _review_within(
    chaos: Cluster, fleet: Fleet, root: str, revision: str, limit: float
) -> CheckRunRecord | None:
    """The revision's check run once it asks for review; None when it did not within `limit`
    seconds (a Temporal that ended the workflow fails the case at once)."""
    try:
        return fleet.review(root, revision, timeout=limit)
    except AssertionError:
        _fail_if_ended(chaos, deploy_workflow_id(fleet.full_name, root))
        return None


def _diagnosis(chaos: Cluster, fleet: Fleet, workflow_id: str) -> str:
    """Where the root's workflow is: its history so far and the check-run requests made."""
    described = chaos.temporal.describe(workflow_id)
    info = described.raw_description.workflow_execution_info if described else None
    prefix = f"/repos/{fleet.full_name}/check-runs"
    requests = sum(1 for r in fleet.emulator.requests() if r.path.startswith(prefix))
    history = (
        f"{info.history_length:,} events, {info.history_size_bytes / 2**20:.1f} MB" if info else "?"
    )
    return f"its DeployWorkflow's history {history}; {requests:,} check-run requests so far"


def _signal_all(chaos: Cluster, fleet: Fleet, root: str, shas: list[str]) -> None:
    repo = RepoRef(
        owner=fleet.owner,
        name=fleet.name,
        installation_id=1,
        clone_url=chaos.stack.clone_url(fleet.owner, fleet.name),
        default_branch="main",
        html_url=f"{fleet.emulator.url}/{fleet.full_name}",
    )

    async def signal() -> None:
        client = chaos.temporal.client
        for sha in shas:  # one after the other: the queue's order is the signals' order
            revision = NewRevision(revision=sha, trigger="merge", reason="push")
            await queue_revision(client, TASK_QUEUE, repo, root, revision)

    chaos.temporal.run(signal(), timeout=ENQUEUE_LIMIT)


def _fail_if_ended(chaos: Cluster, workflow_id: str) -> None:
    """Stop waiting at once when Temporal ended the root's workflow (a lost queue)."""
    for execution in chaos.temporal.executions(f'WorkflowId="{workflow_id}"'):
        if execution.status in (
            WorkflowExecutionStatus.TERMINATED,
            WorkflowExecutionStatus.FAILED,
            WorkflowExecutionStatus.TIMED_OUT,
        ):
            described = chaos.temporal.describe(workflow_id)
            size = (
                described.raw_description.workflow_execution_info.history_size_bytes
                if described
                else 0
            )
            raise CaseFailed(
                f"Temporal ended {workflow_id} ({execution.status.name}) with "
                f"{execution.history_length} events, {size / 2**20:.1f} MB of history"
            )


def _histories(chaos: Cluster, workflow_id: str, result: CaseResult) -> None:
    runs = chaos.temporal.executions(f'WorkflowId="{workflow_id}"')
    statuses: dict[str, int] = {}
    for execution in runs:
        name = execution.status.name if execution.status else "?"
        statuses[name] = statuses.get(name, 0) + 1
    result.check(
        "runs of the root's DeployWorkflow (continue-as-new makes a new run)",
        statuses,
        "none TERMINATED or FAILED; one RUNNING",
        statuses.get("RUNNING") == 1 and not {"TERMINATED", "FAILED"} & set(statuses),
    )
    sizes = []
    for execution in runs:
        if execution.status == WorkflowExecutionStatus.RUNNING:
            # visibility records a run's history size when it closes: ask the running one
            described = chaos.temporal.describe(workflow_id)
            assert described is not None
            info = described.raw_description.workflow_execution_info
            sizes.append((info.history_length, info.history_size_bytes))
        else:
            sizes.append((execution.history_length, execution.raw_info.history_size_bytes))
    events = max(n for n, _ in sizes)
    largest = max(b for _, b in sizes)
    result.check(
        "largest history of a run: events, bytes",
        f"{events:,} events, {largest / 2**20:.1f} MB",
        f"< {HISTORY_EVENTS_WARN:,} events and < {HISTORY_BYTES_WARN >> 20} MB "
        "(Temporal's warning levels)",
        events < HISTORY_EVENTS_WARN and largest < HISTORY_BYTES_WARN,
    )
