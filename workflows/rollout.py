"""What a patch's rollout shows, and the plain rules behind it (no Temporal): the node table
(which node is passed, deploying, soaking, at its gate or pending, and since when), the
deployments table, the rollout check run's title, buttons and requests, why a node halts, and
when an evaluation of the patch is stale. PromotionWorkflow decides and acts; this module
only computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.contracts.deploy import CheckRunAction, CheckRunRequest, RepoRef
from shared.contracts.promotion import (
    Evaluation,
    NodeState,
    Phase,
    RolloutRow,
    RootDeployment,
    promotion_check_run_name,
    promotion_workflow_id,
)

# Dependencies only change with a new revision (a signal); this is a safety net for a missed
# one. The same interval re-reads a window that gave no next opening.
RECHECK = timedelta(hours=1)

PROMOTE = CheckRunAction(
    label="Promote", description="Promote the patch to the next node", identifier="promote"
)
HALT = CheckRunAction(label="Halt", description="Stop this rollout here", identifier="halt")
RESUME = CheckRunAction(
    label="Resume", description="Continue the rollout after a fix", identifier="resume"
)
ROLLBACK = CheckRunAction(
    label="Roll back", description="Revert the promotion to this node", identifier="rollback"
)

# The rollout's phase while the current row is in this state (anything else: at the gate).
_PHASES: dict[NodeState, Phase] = {
    "deploying": "deploying",
    "soaking": "soaking",
    "promoting": "promoting",
    "graduating": "promoting",
}
# States of the next node's row: the gate it waits at.
_GATE_STATES = ("window_closed", "dependencies_unmet", "awaiting_promote", "promoting")
# States the current node's row shows (otherwise it is healthy).
_CURRENT_STATES = ("deploying", "soaking", "halted", "blocked", "graduated")


@dataclass(frozen=True)
class CheckRunWant:
    """What the rollout check run should say; `key` tells whether it changed."""

    key: tuple[object, ...]
    status: str
    conclusion: str | None
    title: str
    message: str
    actions: list[CheckRunAction]


def phase_of(state: NodeState) -> Phase:
    return _PHASES.get(state, "gate")


def rows(
    ev: Evaluation,
    state: NodeState,
    detail: str,
    *,
    old: list[RolloutRow],
    healthy: Callable[[str], bool],
    now: datetime,
) -> list[RolloutRow]:
    """The table: nodes behind the current one passed, the current one deploying / soaking /
    healthy / halted / blocked, the next one at its gate, the rest pending. A row keeps its
    `since` while its state stays; `healthy(root)` says whether a root is deployed."""
    before = {r.node: r for r in old}
    active = set(ev.active_nodes)
    table = []
    for info in ev.plan:
        path = info.path
        row_state: NodeState = "pending"
        row_detail = ""
        if path == ev.current_node:
            row_state = "healthy"
            if state in _CURRENT_STATES:
                row_state, row_detail = state, detail
            if state == "deploying":
                done = sum(1 for r in ev.roots if healthy(r))
                row_detail = f"{done}/{len(ev.roots)} roots"
        elif path == ev.next_node and state in _GATE_STATES:
            row_state = state
        elif path in active:
            row_state = "passed"
        previous = before.get(path)
        since = previous.since if previous and previous.state == row_state else now
        table.append(RolloutRow(node=path, state=row_state, since=since, detail=row_detail))
    return table


def evidence(deployments: dict[str, RootDeployment]) -> list[RootDeployment]:
    """What a node passed on, kept for the rollout page: each root's deployment without its
    message (the table stays small across continue-as-new)."""
    return [
        RootDeployment(
            root=d.root,
            revision=d.revision,
            deployment_id=d.deployment_id,
            state=d.state,
            contains_patch=d.contains_patch,
        )
        for d in sorted(deployments.values(), key=lambda d: d.root)
    ]


def halt_reason(failed: list[RootDeployment]) -> str:
    """Why a node halts on failed deployments: each root's state and the first line of its
    message (a verification's account goes on with a table)."""
    return "; ".join(
        f"`{d.root}`: deployment of `{d.revision[:12]}` {d.state.replace('_', ' ')}"
        + (f" ({d.message.splitlines()[0]})" if d.message else "")
        for d in failed
        if d.state
    )


def stale(ev: Evaluation, evaluated_at: datetime | None, now: datetime) -> bool:
    """The window may have opened or closed since, or it is time for the safety recheck."""
    if evaluated_at is None or now - evaluated_at >= RECHECK:
        return True
    window = ev.window
    if window.open:
        return window.closes_at is not None and now >= window.closes_at
    return window.next_open is not None and now >= window.next_open


def rollout_table(rows: list[RolloutRow]) -> str:
    if not rows:
        return "Rollout: not evaluated yet."
    lines = ["| node | state | since |", "|---|---|---|"]
    for row in rows:
        state = row.state.replace("_", " ") + (f" ({row.detail})" if row.detail else "")
        lines.append(f"| `{row.node}` | {state} | {when(row.since)} |")
    return "\n".join(lines)


def deployments_table(deployments: dict[str, RootDeployment]) -> str:
    if not deployments:
        return ""
    lines = ["| root | latest deployment | revision | has the patch |", "|---|---|---|---|"]
    for root in sorted(deployments):
        d = deployments[root]
        state = (d.state or "none").replace("_", " ")
        lines.append(
            f"| `{root}` | {state} | `{d.revision[:12]}` | {'yes' if d.contains_patch else 'no'} |"
        )
    return "\n".join(lines)


def when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC") if at else "—"


def title(state: NodeState, ev: Evaluation) -> str:
    node, nxt = ev.current_node or "", ev.next_node or ""
    return {
        "deploying": f"Deploying at {node}",
        "soaking": f"Soaking at {node}",
        "window_closed": f"Waiting: promotion window of {nxt} closed",
        "dependencies_unmet": f"Waiting: dependencies unmet at {nxt}",
        "awaiting_promote": f"Promote to {nxt}?",
        "promoting": f"Promoting to {nxt}",
        "graduating": "Opening the graduation pull request",
    }.get(state, state)


def check_run_request(
    repo: RepoRef,
    patch_id: str,
    revision: str,
    want: CheckRunWant,
    *,
    check_run_id: int | None,
    summary: str,
) -> CheckRunRequest:
    """The rollout check run on `revision` (the default branch's tip) saying `want`."""
    return CheckRunRequest.model_validate(
        {
            "repo": repo,
            "check_run_id": check_run_id,
            "name": promotion_check_run_name(patch_id),
            "head_sha": revision,
            "external_id": promotion_workflow_id(repo.full_name, patch_id),
            "status": want.status,
            "conclusion": want.conclusion,
            "title": want.title,
            "summary": summary,
            "actions": want.actions,
            # the check_run activity links the rollout page instead (details_url_of)
            "details_url": repo.html_url or None,
        }
    )


def retired_request(
    repo: RepoRef, patch_id: str, *, check_run_id: int | None, old_sha: str, tip: str
) -> CheckRunRequest:
    """The old tip's check run, without its buttons, saying where the rollout went."""
    return CheckRunRequest.model_validate(
        {
            "repo": repo,
            "check_run_id": check_run_id,
            "name": promotion_check_run_name(patch_id),
            "head_sha": old_sha,
            "external_id": promotion_workflow_id(repo.full_name, patch_id),
            "status": "completed",
            "conclusion": "neutral",
            "title": f"Moved on to {tip[:12]}",
            "summary": f"The rollout of `{patch_id}` continues on the check run "
            f"of `{tip[:12]}`, the new tip of the default branch.",
            "actions": [],
        }
    )
