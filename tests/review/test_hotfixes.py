"""The rules a hotfix command is judged by (shared/review/hotfixes.py), over facts as GitHub
and the default branch give them; the activity test runs them on the emulator's answers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from shared.engine.config.hotfix import HotfixSettings
from shared.github.app import CommitCheck, PullInfo, PullReview
from shared.review.hotfixes import HotfixFacts, judge

HEAD, OLD = "a" * 40, "b" * 40
PULL = PullInfo(
    number=4,
    state="open",
    merged=False,
    draft=False,
    head_sha=HEAD,
    head_repo="acme/fleet",
    author="sam",
    html_url="https://github.example/acme/fleet/pull/4",
)
FACTS = HotfixFacts(
    repo="acme/fleet",
    default_branch="main",
    settings=HotfixSettings(),
    commenter="alice",
    permission="write",
    pull=PULL,
    roots=["prod/eu"],
    roots_at_head=frozenset({"prod/eu", "prod/us"}),
    reviews=[PullReview("bob", "APPROVED", HEAD)],
    own_app=7,
)


def test_the_defaults_need_one_approval_of_the_head_and_green_checks() -> None:
    judged = judge(FACTS)
    assert judged.allowed, judged.reasons
    assert "approved on the head by @bob" in judged.met
    assert "0 check(s) on the head are green" in judged.met


@pytest.mark.parametrize(
    ("reviews", "allowed"),
    [
        # a comment after an approval leaves it standing
        ([PullReview("bob", "APPROVED", HEAD), PullReview("bob", "COMMENTED", HEAD)], True),
        # a dismissed approval, or one of an earlier head, does not count
        ([PullReview("bob", "APPROVED", HEAD), PullReview("bob", "DISMISSED", HEAD)], False),
        ([PullReview("bob", "APPROVED", OLD)], False),
        # the author approving their own pull request does not count (case aside)
        ([PullReview("Sam", "APPROVED", HEAD)], False),
        # a change request after an approval replaces it
        (
            [PullReview("bob", "APPROVED", HEAD), PullReview("bob", "CHANGES_REQUESTED", HEAD)],
            False,
        ),
    ],
)
def test_which_reviews_approve(reviews: list[PullReview], allowed: bool) -> None:
    assert judge(replace(FACTS, reviews=reviews)).allowed is allowed


def test_approvals_zero_still_refuses_a_change_request() -> None:
    facts = replace(
        FACTS,
        settings=HotfixSettings(approvals=0),
        reviews=[PullReview("carol", "CHANGES_REQUESTED", HEAD)],
    )
    assert judge(facts).reasons == ["@carol requested changes"]
    assert judge(replace(facts, reviews=[])).allowed


def test_checks_green_are_required_unless_switched_off() -> None:
    checks = [
        CommitCheck("check run", "ci", "success", app=99),
        CommitCheck("check run", "rollwright/preview", "failure", app=7),  # rollwright's own
        CommitCheck("check run", "e2e", "in_progress", app=99),
        CommitCheck("status", "lint", "pending"),
    ]
    facts = replace(FACTS, checks=checks)
    assert judge(facts).reasons == [
        "check run `e2e` on the head is in_progress",
        "status `lint` on the head is pending",
    ]
    assert judge(replace(facts, settings=HotfixSettings(checks=False))).allowed


def test_a_merged_pull_request_and_no_roots_are_refused() -> None:
    merged = replace(FACTS, pull=replace(PULL, state="closed", merged=True), roots=[])
    assert judge(merged).reasons == [
        "pull request #4 is merged already: its merge deploys as every merge",
        "name the roots to deploy to: `/rollwright hotfix <root> [<root>…]`",
    ]


def test_an_unreadable_fleet_at_the_head_refuses() -> None:
    facts = replace(FACTS, roots_at_head=None, fleet_error="rollwright.yaml:3: bad")
    assert judge(facts).reasons == [
        f"the fleet cannot be read at the head `{HEAD[:12]}`: rollwright.yaml:3: bad"
    ]


def test_the_section_is_strict() -> None:
    with pytest.raises(ValueError, match="is not a team"):
        HotfixSettings.model_validate({"authorTeam": "not a team"})
    with pytest.raises(ValueError):
        HotfixSettings.model_validate({"approvals": -1})
    assert HotfixSettings.model_validate({"authorTeam": "acme/sre"}).author_team == "@acme/sre"
