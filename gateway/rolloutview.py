"""What the rollout page draws: the patch's sequence as nodes, each with the state its
evidence supports, its own since-time, the soak or gate still to wait and the deployments
that are its evidence.

The PromotionWorkflow's table (the `rollout` query) says where the patch is active; its
evidence says which deployment of each root it judged, with the patch, when a node passed (the
current node: the deployments it watches). The deployments recorded in SQL say how those
deployments stand now. A node the workflow calls passed is shown passed only when every root it
holds has such a deployment that ended published or verified (what the rollout itself counts as
healthy); otherwise it is "unconfirmed", naming the roots that are not there. Its since-time is
when the last of those deployments finished.

A node passed in a run from before the workflow recorded its evidence has none: its roots'
newest delivered deployments stand in, and the page says so.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from gateway.jobviews import JobReader
from shared.contracts.promotion import RolloutRow, RolloutView, RootDeployment
from shared.stores.sql.deployments import FleetRoot
from shared.stores.sql.tables import DeploymentRow, utc

HEALTHY = frozenset({"published", "verified"})  # the rollout's own rule (RootDeployment)
CLAIMS_PASSED = frozenset({"passed", "graduated", "healthy"})


class Evidence(BaseModel):
    """One root of a node and the deployment that shows it ran the patch (None: none known)."""

    root: str
    deployment_id: str | None = None
    revision: str | None = None
    state: str | None = None
    contains_patch: bool | None = None  # None: not judged (a stand-in, see the module)
    healthy: bool = False
    finished: datetime | None = None
    page: str | None = None  # its job page
    revision_page: str | None = None


class NodeView(BaseModel):
    node: str
    state: str  # what the page shows
    claimed: str  # what the workflow's table says
    since: datetime | None = None
    detail: str = ""
    gate: str = "automated"
    soak_seconds: int = 0
    wait: str = ""  # the soak or gate still to wait, in words
    until: datetime | None = None  # when that wait ends, if known
    left: str = ""  # the time still to wait, as `wait` words it
    roots: list[Evidence] = Field(default_factory=list)
    judged: bool = True  # False: the roots' newest deployments stand in for the evidence

    @property
    def confirmed(self) -> int:
        return sum(1 for r in self.roots if r.healthy)


def pipeline(view: RolloutView, reader: JobReader, now: datetime) -> list[NodeView]:
    """The nodes in sequence order, as the page draws them."""
    store = reader.deployments
    judged = dict(view.evidence)
    if view.current_node is not None:
        judged[view.current_node] = view.deployments
    rows = store.many([d.deployment_id for ds in judged.values() for d in ds if d.deployment_id])
    newest: dict[str, FleetRoot] | None = None
    infos = {n.path: n for n in view.nodes}
    out = []
    for row in view.rows:
        info = infos.get(row.node)
        roots = _roots(view, row.node)
        if row.node in judged:
            by_root = {d.root: d for d in judged[row.node]}
            evidence = [_judged(reader, view.repo, r, by_root.get(r), rows) for r in roots]
        else:
            if newest is None:
                newest = {found.root: found for found in store.fleet(view.repo)}
            evidence = [_standing_in(reader, view.repo, r, newest.get(r)) for r in roots]
        node = NodeView(
            node=row.node,
            state=row.state,
            claimed=row.state,
            since=row.since,
            detail=row.detail,
            gate=info.gate if info else "automated",
            soak_seconds=info.soak_seconds if info else 0,
            roots=evidence,
            judged=row.node in judged,
        )
        _judge(node, row)
        _wait(node, view, now)
        out.append(node)
    return out


def _roots(view: RolloutView, node: str) -> list[str]:
    roots = view.node_roots.get(node)
    if roots is not None:
        return roots
    if node == view.current_node:  # an evaluation from before node_roots: what it watched
        return [d.root for d in view.deployments]
    return sorted(d.root for d in view.evidence.get(node, []))


def _judged(
    reader: JobReader,
    repo: str,
    root: str,
    found: RootDeployment | None,
    rows: dict[str, DeploymentRow],
) -> Evidence:
    """The deployment the workflow judged for the root; SQL says how it stands now."""
    if found is None or not found.deployment_id:
        return Evidence(root=root, contains_patch=False)
    row = rows.get(found.deployment_id)
    state = row.state if row is not None else found.state
    return Evidence(
        root=root,
        deployment_id=found.deployment_id,
        revision=found.revision,
        state=state,
        contains_patch=found.contains_patch,
        healthy=found.contains_patch and state in HEALTHY,
        finished=_utc(row) if row is not None else None,
        page=reader.settings.job_url(found.deployment_id),
        revision_page=reader.settings.revision_url(repo, found.revision),
    )


def _standing_in(reader: JobReader, repo: str, root: str, found: FleetRoot | None) -> Evidence:
    if found is None:
        return Evidence(root=root)
    # what the root runs (its newest delivered deployment), else how its newest one stands
    row: DeploymentRow = found.delivered or found.latest
    settings = reader.settings
    return Evidence(
        root=root,
        deployment_id=row.deployment_id,
        revision=row.revision,
        state=row.state,
        healthy=row.state in HEALTHY,
        finished=_utc(row),
        page=settings.job_url(row.deployment_id),
        revision_page=settings.revision_url(repo, row.revision),
    )


def _judge(node: NodeView, row: RolloutRow) -> None:
    """Passed only with every root deployed with the patch and verified (or published without
    a verify rule); since then, the last of them finishing."""
    if row.state not in CLAIMS_PASSED or not node.roots:
        return
    missing = [r for r in node.roots if not r.healthy]
    if missing:
        node.state = "unconfirmed"
        shown = ", ".join(f"{r.root} ({_why(r)})" for r in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        node.detail = (
            f"{node.confirmed}/{len(node.roots)} roots deployed and verified; not yet: "
            f"{shown}{more}"
        )
        return
    known = [r.finished for r in node.roots if r.finished is not None]
    if known:
        node.since = max(known)


def _why(evidence: Evidence) -> str:
    if evidence.deployment_id is None:
        return "never deployed"
    if evidence.contains_patch is False:
        return f"{evidence.state}, without the patch"
    return evidence.state or "no state"


def _wait(node: NodeView, view: RolloutView, now: datetime) -> None:
    """The soak of the current node, or the gate of the next one, still to wait; `left` is
    the part of `wait` the page's script counts down."""
    if node.claimed == "soaking" and view.soak_started is not None:
        node.until = utc(view.soak_started) + timedelta(seconds=node.soak_seconds)
        node.left = _left(node.until - now)
        node.wait = f"soak: {node.left} left (of {_left_s(node.soak_seconds)})"
    elif node.claimed == "window_closed" and view.window and view.window.next_open:
        node.until = utc(view.window.next_open)
        node.left = _left(node.until - now)
        node.wait = f"promotion window opens in {node.left}"
    elif node.claimed == "awaiting_promote":
        node.wait = "gate: waits for a Promote click on the rollout's check run"
    elif node.claimed == "dependencies_unmet":
        node.wait = "gate: waits for a revision where the patch's dependencies hold"
    elif node.node == view.next_node and node.gate == "automated" and view.phase != "halted":
        node.wait = "gate: automated, promoted once the current node is done"


def _left(delta: timedelta) -> str:
    return _left_s(max(0, int(delta.total_seconds())))


def _left_s(seconds: int) -> str:
    """As gateway/static/rollout.js writes it while it counts down."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _utc(row: DeploymentRow) -> datetime | None:
    at = row.finished_at or row.updated_at
    return None if at is None else utc(at)
