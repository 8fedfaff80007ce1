"""Whether a `/rollwright hotfix <root>…` command may deploy the pull request's head, as plain
rules over what GitHub and the default branch's rollwright.yaml say (docs/governance.md,
"Hotfixes"). The `hotfix_judge` activity gathers the facts; this decides. Every unmet
requirement is listed, not only the first, so one comment tells the author all that is missing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.engine.config.hotfix import HotfixSettings
from shared.github.app import CommitCheck, PullInfo, PullReview
from shared.review.governance import approvers_of, standing_reviews

WRITES = frozenset({"write", "admin"})
GREEN = frozenset({"success", "neutral", "skipped"})


@dataclass(frozen=True)
class HotfixFacts:
    """What was learned about the command: the repository, the commenter's permission, the
    pull request, its reviews and checks, the author's team membership (None: not asked)."""

    repo: str
    default_branch: str
    settings: HotfixSettings | None
    commenter: str
    permission: str
    pull: PullInfo
    roots: Sequence[str]
    roots_at_head: frozenset[str] | None = None  # None: the fleet could not be read there
    fleet_error: str = ""
    reviews: Sequence[PullReview] = ()
    checks: Sequence[CommitCheck] = ()
    own_app: int | None = None  # rollwright's App: its own check runs do not count
    author_in_team: bool | None = None


@dataclass
class Judgement:
    reasons: list[str] = field(default_factory=list)
    met: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.reasons


def judge(facts: HotfixFacts) -> Judgement:
    out = Judgement()
    settings = facts.settings
    if settings is None:
        out.reasons.append(
            f"hotfixes are off in {facts.repo}: rollwright.yaml on `{facts.default_branch}` "
            "has no `hotfix` section"
        )
        return out
    _commenter(facts, out)
    _pull(facts, out)
    _roots(facts, settings, out)
    _approvals(facts, settings, out)
    _team(facts, settings, out)
    if settings.checks:
        _checks(facts, out)
    return out


def _commenter(facts: HotfixFacts, out: Judgement) -> None:
    if facts.permission in WRITES:
        out.met.append(f"@{facts.commenter} has {facts.permission} access")
    else:
        out.reasons.append(
            f"@{facts.commenter} has {facts.permission} access to {facts.repo}: a hotfix needs "
            "write access"
        )


def _pull(facts: HotfixFacts, out: Judgement) -> None:
    pull = facts.pull
    if pull.merged:
        out.reasons.append(
            f"pull request #{pull.number} is merged already: its merge deploys as every merge"
        )
    elif pull.state != "open":
        out.reasons.append(f"pull request #{pull.number} is closed")
    if pull.head_repo is None or pull.head_repo.lower() != facts.repo.lower():
        # A fork's head would be rendered with this repository's secrets and deployed.
        out.reasons.append(
            f"pull request #{pull.number} comes from a fork ({pull.head_repo or 'deleted'}): "
            "only branches of the repository itself can be hotfixed"
        )
    else:
        out.met.append("the head is a branch of the repository, not a fork")


def _roots(facts: HotfixFacts, settings: HotfixSettings, out: Judgement) -> None:
    if not facts.roots:
        out.reasons.append("name the roots to deploy to: `/rollwright hotfix <root> [<root>…]`")
        return
    allowed = [r for r in facts.roots if any(fnmatch.fnmatchcase(r, g) for g in settings.roots)]
    for root in facts.roots:
        if root not in allowed:
            globs = ", ".join(f"`{g}`" for g in settings.roots)
            out.reasons.append(f"root `{root}` is not one hotfixes may deploy to ({globs})")
    if facts.roots_at_head is None:
        out.reasons.append(
            f"the fleet cannot be read at the head `{facts.pull.head_sha[:12]}`: "
            f"{facts.fleet_error or 'unknown error'}"
        )
        return
    missing = [r for r in facts.roots if r not in facts.roots_at_head]
    for root in missing:
        out.reasons.append(f"root `{root}` does not exist at the head `{facts.pull.head_sha[:12]}`")
    if not missing and len(allowed) == len(facts.roots):
        out.met.append("every root named exists at the head and may be hotfixed")


def _approvals(facts: HotfixFacts, settings: HotfixSettings, out: Judgement) -> None:
    pull = facts.pull
    standing = standing_reviews(facts.reviews)
    author = (pull.author or "").lower()
    blocking = sorted(r.login for r in standing.values() if r.state == "CHANGES_REQUESTED")
    for login in blocking:
        out.reasons.append(f"@{login} requested changes")
    approvers = [a for a in approvers_of(facts.reviews, pull.head_sha) if a != author]
    if settings.approvals == 0:
        return
    if len(approvers) >= settings.approvals:
        names = ", ".join(f"@{a}" for a in approvers)
        out.met.append(f"approved on the head by {names}")
    else:
        out.reasons.append(
            f"{settings.approvals} approving review(s) of the head `{pull.head_sha[:12]}` by "
            f"others than its author are needed; it has {len(approvers)} (approvals of an "
            "earlier head do not count)"
        )


def _team(facts: HotfixFacts, settings: HotfixSettings, out: Judgement) -> None:
    team = settings.author_team
    if team is None:
        return
    author = facts.pull.author or "(unknown)"
    if facts.author_in_team:
        out.met.append(f"the author @{author} is in {team}")
    else:
        out.reasons.append(f"the author @{author} is not in {team}")


def _checks(facts: HotfixFacts, out: Judgement) -> None:
    others = [c for c in facts.checks if c.kind == "status" or c.app != facts.own_app]
    red = [c for c in others if c.outcome not in GREEN]
    for check in red:
        out.reasons.append(f"{check.kind} `{check.name}` on the head is {check.outcome}")
    if not red:
        out.met.append(f"{len(others)} check(s) on the head are green")
