"""Clicks on a rollout's check run, as plain rules (docs/promotion.md, docs/governance.md):
whether Promote, Halt, Resume or Roll back applies to the rollout as it stands, which node's
roots judge it, what the judge is asked and the audit row of the verdict. No Temporal here:
PromotionWorkflow judges and records clicks through `workflows.clicks`.

A Promote applies to the manual gate its check run offered, a Resume or Roll back to the halt
its check run showed: a click on an older check run (still open in someone's browser) is
stale. Judged clicks (`judged=True`) are also refused when there is nothing to act on: a Halt
of a halted rollout, a Resume of one that is not halted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from shared.contracts.deploy import AuditRecord, RepoRef
from shared.contracts.governance import ActionRequest, GovernedAction, Verdict
from shared.contracts.promotion import HaltState, rollout_audit_root


@dataclass(frozen=True)
class Standing:
    """What a click on the rollout is judged against."""

    awaiting_node: str | None  # the manual gate on offer
    halt: HaltState | None
    halt_requested: bool  # a Halt counted and not yet taken by the loop
    offers: Mapping[str, str]  # check run commit -> the node it offered
    resume_offers: Mapping[str, datetime]  # check run commit -> `since` of the halt it showed
    node: str | None  # the node whose deployments are watched


def ignored(
    action: GovernedAction, head_sha: str | None, s: Standing, *, judged: bool
) -> str | None:
    """Why the click does not apply to the rollout as it stands (None: it does)."""
    halted = s.halt is not None or s.halt_requested
    if action == "promote":
        if s.awaiting_node is None or halted:
            return "no manual gate is waiting for a Promote"
        if head_sha and s.offers.get(head_sha) != s.awaiting_node:
            # Approving what waits now would skip the clicker's look at it.
            return "the check run clicked offered another node; the rollout has moved on"
        return None
    if action == "halt":
        return "the rollout is already halted" if judged and halted else None
    if action == "resume":
        if head_sha and (s.halt is None or s.resume_offers.get(head_sha) != s.halt.since):
            return "the check run clicked showed another halt"
        return "the rollout is not halted" if judged and s.halt is None else None
    if s.halt is None or s.halt.rolled_back or not s.halt.deployment_ids:
        return "no halt on failed deployments to revert"
    if head_sha and s.resume_offers.get(head_sha) != s.halt.since:
        return "the check run clicked showed another halt"
    return None


def node_of(action: GovernedAction, s: Standing) -> str | None:
    """The node whose roots' review policies judge the click: the node a Promote promotes
    to, the node a Halt stops at, the halted node a Resume or Roll back acts on."""
    if action == "promote":
        return s.awaiting_node
    if action == "halt":
        return s.node
    return s.halt.node if s.halt is not None else None


MOVED = "the rollout moved on while the click was judged; look at its check run and click again"


def judge_request(
    repo: RepoRef,
    patch_id: str,
    action: GovernedAction,
    by: str | None,
    node: str | None,
    *,
    revision: str,
    workflow_id: str,
) -> ActionRequest:
    """What `judge_action` is asked: the node's roots' policies at the tip the rollout read
    (none yet: the default branch's tip)."""
    return ActionRequest(
        repo=repo,
        action=action,
        actor=by,
        patch_id=patch_id,
        node=node,
        revision=revision or None,
        workflow_id=workflow_id,
    )


def audit_record(
    repo: str, patch_id: str, action: GovernedAction, by: str | None, verdict: Verdict, at: datetime
) -> AuditRecord:
    return AuditRecord(
        repo=repo,
        root=rollout_audit_root(patch_id),
        action=action,
        actor=by,
        counted=verdict.counts,
        reason=verdict.reason,
        at=at,
    )
