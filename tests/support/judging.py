"""The `judge_action` activity's answers for the workflow tests' doubles: the real decision
table (`decide_action`) over a fleet's `review:` section, with GitHub's answers given."""

from __future__ import annotations

from typing import Any

from shared.contracts.governance import ActionRequest, Verdict
from shared.engine.config.fleet import FleetConfig
from shared.review.governance import decide_action, policy_for


def judge_click(
    req: ActionRequest,
    roots: list[str],
    review: dict[str, Any],
    access: tuple[dict[str, str], dict[str, set[str]]],
) -> Verdict:
    """What `judge_action` answers for a fleet whose rollwright.yaml has this `review:`
    section (atlas roots), when GitHub says `access`: each login's permission (anyone else:
    write) and each team's members (`@org/slug`, lowercase)."""
    permissions, members = access
    actor = req.actor or ""
    teams = {team for team, logins in members.items() if actor.lower() in logins}
    config = FleetConfig.model_validate({"review": review})
    return decide_action(
        req.action,
        req.actor,
        repo=req.repo.full_name,
        permission=permissions.get(actor, "write"),
        teams=teams,
        policies={root: policy_for(config, root, "atlas", author=None) for root in roots},
    )
