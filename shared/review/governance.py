"""Who may approve what (docs/governance.md): a root's review policy from `rollwright.yaml`,
and the decision tables for "does this click count": Approve / Reject on a deployment
(`decide`), Unlock and the rollout buttons (`decide_action`).

Pure functions: the callers (activities/governance.py, activities/authority.py) ask GitHub
for the clicker's permission and team memberships and pass the answers in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shared.contracts.deploy import Decision
from shared.contracts.governance import (
    POLICY_REQUIREMENT,
    POLICY_SET_PREFIX,
    WRITE_PERMISSIONS,
    GovernedAction,
    OwnersRequirement,
    ReviewPolicy,
    Verdict,
)
from shared.engine.config.fleet import FleetConfig
from shared.github.app import PullReview

# What each governed button does, as the refusals say it ("only people with write access
# may unlock a root's queue").
ACTION_WORDS: dict[GovernedAction, str] = {
    "unlock": "unlock a root's queue",
    "promote": "promote a rollout",
    "halt": "halt a rollout",
    "resume": "resume a rollout",
    "rollback": "roll back a rollout",
}
# What a click would do to one root, as a refusal says it ("may not unlock `prod/eu`").
ACTION_ON_ROOT: dict[GovernedAction, str] = {
    "unlock": "unlock `{root}`",
    "promote": "promote the rollout to `{root}`",
    "halt": "halt the rollout at `{root}`",
    "resume": "resume the rollout at `{root}`",
    "rollback": "roll back the rollout at `{root}`",
}
NO_ACTOR = "the click does not say who made it"


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


def teams_named(*policies: ReviewPolicy) -> list[tuple[str, str]]:
    """Every `@org/team` the policies name, as (org, team slug): the memberships to ask for."""
    entries = [
        entry
        for policy in policies
        for entry in [
            *policy.approvers,
            *policy.admins,
            *(o for r in policy.owners for o in r.owners),
            *(o for p in policy.policy_sets for o in p.owners),
        ]
    ]
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
    if (refused := _first_rows(actor, permission, repo, f"{verb} deployments")) or not actor:
        return refused or Verdict(counts=False, reason=NO_ACTOR)
    admin = matches(policy.admins, actor, teams)
    meets = [POLICY_REQUIREMENT] if not policy.approvers else []
    if policy.approvers and matches(policy.approvers, actor, teams):
        meets.append(POLICY_REQUIREMENT)
    meets += [o.name for o in policy.owners if matches(o.owners, actor, teams)]
    meets += [p.name for p in policy.policy_sets if matches(p.owners, actor, teams)]
    if admin:
        # Admins stand for the rules and OWNERS files, not for a policy set's owners.
        meets = [*policy.waived_by_admins(), *(m for m in meets if m.startswith(POLICY_SET_PREFIX))]
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


def decide_action(
    action: GovernedAction,
    actor: str | None,
    *,
    repo: str,
    permission: str,
    teams: set[str],
    policies: Mapping[str, ReviewPolicy],
) -> Verdict:
    """Does a click on Unlock or a rollout's button count (docs/governance.md, "Unlock and the
    rollout buttons")? `policies`: the review policy of every root the click acts on (the
    unlocked root; the roots of the rollout's node), by root id.

    Write access at least, like every decision; then, root by root, an admin or one of the
    matching rule's approvers (a rule without approvers: anyone with write access). OWNERS
    files and `distinctApprover` are about a diff, and these clicks decide none: each
    deployment they let through still asks for its own review.
    """
    if (refused := _first_rows(actor, permission, repo, ACTION_WORDS[action])) or not actor:
        return refused or Verdict(counts=False, reason=NO_ACTOR)
    for root, policy in sorted(policies.items()):
        if matches(policy.admins, actor, teams):
            return Verdict(counts=True, permission=permission)
        if policy.approvers and not matches(policy.approvers, actor, teams):
            rule = f" ({policy.rule})" if policy.rule else ""
            what = ACTION_ON_ROOT[action].format(root=root)
            why = f"@{actor} may not {what}{rule}: only {policy.whose(POLICY_REQUIREMENT)}"
            return Verdict(counts=False, permission=permission, reason=why)
    return Verdict(counts=True, permission=permission)


def _first_rows(actor: str | None, permission: str, repo: str, what: str) -> Verdict | None:
    """Rows 1 and 2 of every decision table: nobody unnamed, nobody without write access
    (None: neither applies)."""
    if not actor:
        return Verdict(counts=False, reason=NO_ACTOR)
    if permission not in WRITE_PERMISSIONS:
        return Verdict(
            counts=False,
            permission=permission,
            reason=f"@{actor} has {permission or 'no'} access to {repo}; only people with "
            f"write access may {what}",
        )
    return None


# A review's state that stands until the same reviewer submits another (a comment does not
# replace an approval or a change request, as on GitHub).
STANDING = frozenset({"APPROVED", "CHANGES_REQUESTED", "DISMISSED"})


def standing_reviews(reviews: Iterable[PullReview]) -> dict[str, PullReview]:
    """Each reviewer's last standing review (by lowercase login), from reviews oldest first."""
    standing: dict[str, PullReview] = {}
    for review in reviews:
        if review.state in STANDING and review.login:
            standing[review.login.lower()] = review
    return standing


def approvers_of(reviews: Iterable[PullReview], head: str) -> list[str]:
    """Who approves the commit `head`: reviewers whose standing review approves that very
    commit (an approval of an earlier head vouches for nothing later)."""
    return sorted(
        login
        for login, review in standing_reviews(reviews).items()
        if review.state == "APPROVED" and review.commit_id == head
    )
