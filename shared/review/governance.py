"""Who may approve what (docs/governance.md): a root's review policy from `rollwright.yaml`,
and the decision table for "does this click count".

Pure functions: the caller (activities/governance.py) asks GitHub for the clicker's
permission and team memberships and passes the answers in.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.contracts.deploy import Decision
from shared.contracts.governance import (
    POLICY_REQUIREMENT,
    WRITE_PERMISSIONS,
    OwnersRequirement,
    ReviewPolicy,
    Verdict,
)
from shared.engine.config.fleet import FleetConfig


def policy_for(
    config: FleetConfig,
    root: str,
    layout: str,
    *,
    author: str | None,
    owners: Iterable[OwnersRequirement] = (),
) -> ReviewPolicy:
    """The review policy of one root: the last matching rule of `review.rules`, or the
    defaults (review on change, anyone with write access)."""
    settings = config.review
    found = settings.rule_for(root, layout)
    if found is None:
        return ReviewPolicy(admins=list(settings.admins), author=author, owners=list(owners))
    index, rule = found
    return ReviewPolicy(
        review=rule.review,
        approvers=list(rule.approvers),
        admins=list(settings.admins),
        distinct_approver=rule.distinct_approver,
        author=author,
        rule=f"review.rules[{index}]",
        owners=list(owners),
    )


def teams_named(policy: ReviewPolicy) -> list[tuple[str, str]]:
    """Every `@org/team` the policy names, as (org, team slug): the memberships to ask for."""
    entries = [*policy.approvers, *policy.admins, *(o for r in policy.owners for o in r.owners)]
    teams = {tuple(e[1:].split("/", 1)) for e in entries if e.startswith("@") and "/" in e}
    return sorted((org, slug) for org, slug in teams)


def matches(entries: Iterable[str], actor: str, teams: set[str]) -> bool:
    """Whether `actor` is one of `entries`: a login (case-insensitive, as GitHub's) or a team
    (`@org/slug`) the actor is an active member of (`teams`: such names, lowercased)."""
    login = actor.lower()
    for entry in entries:
        if entry.startswith("@"):
            if entry.lower() in teams:
                return True
        elif entry.lower() == login:
            return True
    return False


def decide(
    policy: ReviewPolicy,
    decision: Decision,
    actor: str | None,
    *,
    repo: str,
    permission: str,
    teams: set[str],
    satisfied: Iterable[str] = (),
) -> Verdict:
    """Does this click count (the decision table of docs/governance.md, in its order)?

    `permission` is GitHub's collaborator permission of the actor on `repo`; `teams` the
    `@org/slug` names (lowercased) of the policy's teams the actor is an active member of.
    """
    verb = "approve" if decision == "approve" else "reject"
    if not actor:
        return Verdict(counts=False, reason="the click does not say who made it")
    if permission not in WRITE_PERMISSIONS:
        return Verdict(
            counts=False,
            permission=permission,
            reason=f"@{actor} has {permission or 'no'} access to {repo}; only people with "
            f"write access may {verb} deployments",
        )
    admin = matches(policy.admins, actor, teams)
    meets = [POLICY_REQUIREMENT] if not policy.approvers else []
    if policy.approvers and matches(policy.approvers, actor, teams):
        meets.append(POLICY_REQUIREMENT)
    meets += [o.name for o in policy.owners if matches(o.owners, actor, teams)]
    if admin:
        meets = policy.requirements()
    if not meets:
        # Nobody outside the approvers, owners and admins decides, either way.
        return Verdict(
            counts=False,
            permission=permission,
            reason=f"@{actor} may not {verb} this deployment: "
            + "; ".join(policy.whose(r) for r in policy.outstanding(satisfied)),
        )
    if decision == "reject":
        # Anyone who could approve some part may stop it, the author included (withdrawing
        # one's own change needs no second person).
        return Verdict(counts=True, permission=permission)
    if policy.distinct_approver and policy.author and policy.author.lower() == actor.lower():
        where = f" ({policy.rule})" if policy.rule else ""
        return Verdict(
            counts=False,
            permission=permission,
            reason=f"@{actor} pushed or asked for this deployment, and its review policy"
            f"{where} wants a distinct approver",
        )
    return Verdict(counts=True, permission=permission, satisfies=meets)
