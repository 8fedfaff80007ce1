"""Review policy (rollwright.yaml `review:`), the decision table for "does this click count"
and the GitHub answers it rests on (collaborator permission, team membership) through the
App client against the GitHub emulator over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from shared.contracts.deploy import Decision
from shared.contracts.governance import (
    GovernedAction,
    OwnersRequirement,
    PolicySetRequirement,
    ReviewPolicy,
    Verdict,
)
from shared.devstack.credentials import new_app_key
from shared.devstack.emulator.server import GitHubEmulator
from shared.engine.config.fleet import CONFIG_FILE, FleetConfig
from shared.engine.config.parsing import parse_model
from shared.engine.errors import FleetErrors
from shared.engine.tree import WorkTree
from shared.github.app import GitHubApp
from shared.review.governance import (
    ACTION_WORDS,
    decide,
    decide_action,
    policy_for,
    teams_named,
)

REPO = "acme/fleet"


def config(review: dict[str, object]) -> FleetConfig:
    return FleetConfig.model_validate({"review": review})


def test_the_last_matching_rule_wins_and_roots_without_one_get_the_defaults() -> None:
    cfg = config(
        {
            "admins": ["@acme/platform"],
            "rules": [
                {"roots": ["*"], "review": "always"},
                {"roots": ["prod/*"], "approvers": ["alice"], "distinctApprover": True},
            ],
        }
    )
    prod = policy_for(cfg, "prod/eu", "atlas", author="carol")
    assert (prod.rule, prod.review, prod.approvers, prod.distinct_approver) == (
        "review.rules[1]",
        "on-change",
        ["alice"],
        True,
    )
    assert prod.admins == ["@acme/platform"] and prod.author == "carol"
    assert policy_for(cfg, "staging/a", "atlas", author=None).review == "always"
    bare = policy_for(FleetConfig(), "x", "atlas", author=None)
    assert (bare.rule, bare.review, bare.approvers) == ("", "on-change", [])


def test_environment_rules_match_dimensions_roots_only() -> None:
    cfg = config({"rules": [{"environments": ["prod*"], "review": "always"}]})
    assert policy_for(cfg, "mgmt/production/s1/eu", "dimensions", author=None).review == "always"
    assert policy_for(cfg, "mgmt/staging/s1/eu", "dimensions", author=None).rule == ""
    # An atlas root has no environment: the rule never matches it.
    assert policy_for(cfg, "production/x", "atlas", author=None).rule == ""


def test_bad_approvers_and_review_modes_are_refused() -> None:
    text = "review:\n  rules:\n    - roots: [prod/*]\n      approvers: ['@acme']\n"
    with pytest.raises(FleetErrors) as err:
        parse_model(
            FleetConfig,
            {"review": {"rules": [{"approvers": ["@acme"]}]}},
            text=text,
            source=CONFIG_FILE,
        )
    assert "neither a GitHub login nor a team" in str(err.value)
    with pytest.raises(FleetErrors) as err:
        parse_model(
            FleetConfig,
            {"review": {"rules": [{"review": "sometimes"}]}},
            text="",
            source=CONFIG_FILE,
        )
    assert "review/rules/0/review" in str(err.value)


def test_rollwright_yaml_with_a_review_section_loads(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).write_text(
        "review:\n  admins: [root-admin]\n  rules:\n    - roots: ['prod/*']\n"
        "      review: always\n      approvers: [alice, '@acme/sre']\n"
    )
    loaded = FleetConfig.load(WorkTree(tmp_path))
    assert loaded.review.rules[0].approvers == ["alice", "@acme/sre"]
    assert loaded.review.admins == ["root-admin"]


# --- the decision table, row by row (docs/governance.md) -----------------------------------

OWNED = OwnersRequirement(
    name="owners:payments", application="payments", path="x/OWNERS", owners=["olga"]
)


def judge(
    policy: ReviewPolicy,
    actor: str | None,
    permission: str = "write",
    *,
    decision: Decision = "approve",
    teams: frozenset[str] = frozenset(),
) -> Verdict:
    return decide(policy, decision, actor, repo=REPO, permission=permission, teams=set(teams))


def test_who_made_the_click_must_be_known() -> None:
    verdict = judge(ReviewPolicy(), None)
    assert not verdict.counts and "does not say who" in verdict.reason


@pytest.mark.parametrize("permission", ["read", "none", ""])
def test_no_write_access_never_counts_even_for_admins(permission: str) -> None:
    policy = ReviewPolicy(admins=["alice"])
    for decision in ("approve", "reject"):
        verdict = judge(policy, "alice", permission, decision=decision)
        assert not verdict.counts and "only people with write access" in verdict.reason


@pytest.mark.parametrize("permission", ["write", "maintain", "admin"])
def test_without_approvers_anyone_with_write_access_approves(permission: str) -> None:
    verdict = judge(ReviewPolicy(), "bob", permission)
    assert verdict.counts and verdict.satisfies == ["policy"]


def test_approvers_are_logins_or_active_team_members() -> None:
    policy = ReviewPolicy(approvers=["Alice", "@acme/sre"])
    assert judge(policy, "alice").counts  # GitHub logins are case-insensitive
    assert judge(policy, "sam", teams=frozenset({"@acme/sre"})).counts
    refused = judge(policy, "bob")
    assert not refused.counts and "@bob may not approve" in refused.reason
    assert "@Alice, @acme/sre" in refused.reason
    assert teams_named(policy) == [("acme", "sre")]


def test_distinct_approver_refuses_the_author_but_lets_them_reject() -> None:
    policy = ReviewPolicy(distinct_approver=True, author="carol", rule="review.rules[0]")
    refused = judge(policy, "CAROL")
    assert not refused.counts and "wants a distinct approver" in refused.reason
    assert judge(policy, "carol", decision="reject").counts
    assert judge(policy, "dave").counts
    assert judge(ReviewPolicy(author="carol"), "carol").counts  # without the key: allowed


def test_owners_and_admins_meet_their_requirements() -> None:
    policy = ReviewPolicy(approvers=["alice"], admins=["@acme/platform"], owners=[OWNED])
    assert policy.requirements() == ["policy", "owners:payments"]
    assert judge(policy, "alice").satisfies == ["policy"]
    assert judge(policy, "olga").satisfies == ["owners:payments"]
    assert (
        judge(policy, "pia", teams=frozenset({"@acme/platform"})).satisfies == policy.requirements()
    )
    assert policy.outstanding(["policy"]) == ["owners:payments"]
    assert (
        policy.whose("owners:payments")
        == "an owner of `payments` (x/OWNERS): @olga, @acme/platform"
    )


SECURITY = PolicySetRequirement(
    name="policy-set:security", policy_set="security", owners=["sec", "@acme/security"], denies=2
)


def test_only_a_policy_sets_owners_meet_its_requirement() -> None:
    policy = ReviewPolicy(admins=["@acme/platform"], owners=[OWNED], policy_sets=[SECURITY])
    assert policy.requirements() == ["policy", "owners:payments", "policy-set:security"]
    assert judge(policy, "sec").satisfies == ["policy", "policy-set:security"]
    assert judge(policy, "sid", teams=frozenset({"@acme/security"})).satisfies == [
        "policy",
        "policy-set:security",
    ]
    # An admin meets the rule and the OWNERS files, not another team's policy set.
    admin = judge(policy, "pia", teams=frozenset({"@acme/platform"}))
    assert admin.satisfies == ["policy", "owners:payments"]
    both = judge(policy, "pia", teams=frozenset({"@acme/platform", "@acme/security"}))
    assert both.satisfies == policy.requirements()
    assert policy.whose("policy-set:security") == (
        "an owner of policy set `security` (2 failing denies): @sec, @acme/security"
    )
    assert ("acme", "security") in teams_named(policy)
    # With approvers set, someone who is only a set's owner meets the set alone.
    strict = ReviewPolicy(approvers=["alice"], policy_sets=[SECURITY])
    assert judge(strict, "sec").satisfies == ["policy-set:security"]
    assert not judge(strict, "bob").counts


# --- GitHub's answers through the App client, against the emulator -----------------------


# --- Unlock and the rollout buttons (decide_action) ------------------------------------------

PROD = ReviewPolicy(approvers=["alice", "@acme/sre"], admins=["root-admin"], rule="review.rules[1]")
OPEN = ReviewPolicy(admins=["root-admin"])  # a rule without approvers, or the defaults


def act(
    action: GovernedAction,
    actor: str | None,
    policies: dict[str, ReviewPolicy],
    permission: str = "write",
    teams: frozenset[str] = frozenset(),
) -> Verdict:
    return decide_action(
        action, actor, repo=REPO, permission=permission, teams=set(teams), policies=policies
    )


@pytest.mark.parametrize("action", ["unlock", "promote", "halt", "resume", "rollback"])
def test_governed_buttons_need_a_named_clicker_with_write_access(action: GovernedAction) -> None:
    assert act(action, None, {"staging/a": OPEN}).reason == "the click does not say who made it"
    for permission in ("read", "triage", "none"):
        # admins too: write access comes first, as for Approve
        refused = act(action, "root-admin", {"prod/eu": PROD}, permission)
        assert not refused.counts and refused.permission == permission
        assert f"only people with write access may {ACTION_WORDS[action]}" in refused.reason
    assert act(action, "bob", {"staging/a": OPEN}).counts
    assert act(action, "bob", {}).counts  # acting on no root: write access is enough


def test_each_root_the_click_acts_on_must_let_the_clicker() -> None:
    policies = {"staging/a": OPEN, "prod/eu": PROD}
    refused = act("promote", "bob", policies)
    assert not refused.counts
    assert refused.reason == (
        "@bob may not promote the rollout to `prod/eu` (review.rules[1]): only an approver: "
        "@alice, @acme/sre, @root-admin"
    )
    assert act("promote", "Alice", policies).counts  # logins are case-insensitive
    assert act("promote", "sam", policies, teams=frozenset({"@acme/sre"})).counts
    assert act("promote", "root-admin", policies).counts  # admins always, with write access
    unlock = act("unlock", "bob", {"prod/eu": PROD})
    assert unlock.reason.startswith("@bob may not unlock `prod/eu` (review.rules[1])")
    halt = act("halt", "bob", {"prod/eu": PROD})
    assert halt.reason.startswith("@bob may not halt the rollout at `prod/eu`")


def test_owners_and_the_distinct_approver_rule_do_not_judge_these_clicks() -> None:
    """They are about a diff; an Unlock or a Promote decides none (each deployment it lets
    through asks for its own review)."""
    policy = ReviewPolicy(owners=[OWNED], distinct_approver=True, author="carol")
    assert act("unlock", "carol", {"prod/eu": policy}).counts
    assert act("promote", "bob", {"prod/eu": policy}).counts


def test_teams_named_by_several_policies_are_asked_once() -> None:
    other = ReviewPolicy(approvers=["@acme/web", "@acme/sre"])
    assert teams_named(PROD, other, OPEN) == [("acme", "sre"), ("acme", "web")]


@pytest.fixture
def github() -> Iterator[tuple[GitHubEmulator, GitHubApp]]:
    key = new_app_key()
    emulator = GitHubEmulator(app_id=99, app_key=key)
    emulator.seed_repository("acme", "fleet", 5)
    emulator.seed_repository("other", "fleet", 6)
    with emulator:
        app = GitHubApp(99, key, emulator.url, min_request_interval=0, min_write_interval=0)
        try:
            yield emulator, app
        finally:
            app.close()


def test_collaborator_permissions_as_github_reports_them(
    github: tuple[GitHubEmulator, GitHubApp],
) -> None:
    emulator, app = github
    for login, role in [("ann", "admin"), ("max", "maintain"), ("wes", "write"), ("tia", "triage")]:
        emulator.set_permission("acme", "fleet", login, role)
    answers = {
        login: app.collaborator_permission(REPO, login)
        for login in ("ann", "max", "wes", "tia", "stranger")
    }
    assert answers == {
        "ann": "admin",
        "max": "write",
        "wes": "write",
        "tia": "read",
        "stranger": "none",
    }
    with pytest.raises(ValueError):
        emulator.set_permission("acme", "fleet", "x", "owner")


def test_team_membership_is_active_membership_of_an_org_the_app_sees(
    github: tuple[GitHubEmulator, GitHubApp],
) -> None:
    emulator, app = github
    emulator.add_team_member("acme", "sre", "sam")
    emulator.add_team_member("acme", "sre", "pat", state="pending")
    emulator.add_team_member("other", "sre", "oscar")
    assert app.is_team_member(REPO, "acme", "SRE", "Sam")
    assert not app.is_team_member(REPO, "acme", "sre", "pat")
    assert not app.is_team_member(REPO, "acme", "sre", "nobody")
    # acme/fleet's installation cannot see another organization's teams.
    assert not app.is_team_member(REPO, "other", "sre", "oscar")
    assert app.is_team_member("other/fleet", "other", "sre", "oscar")


def test_the_control_api_sets_permissions_and_memberships(
    github: tuple[GitHubEmulator, GitHubApp],
) -> None:
    """What `rollwright dev` users (and the demo) call to change who may approve."""
    emulator, app = github
    with httpx.Client(base_url=emulator.url) as http:
        answer = http.put(
            "/_emulator/repos/acme/fleet/collaborators/rita", json={"permission": "read"}
        )
        assert answer.status_code == 200
        assert http.put("/_emulator/orgs/acme/teams/sre/memberships/sam").status_code == 200
        bad = http.put("/_emulator/repos/acme/fleet/collaborators/x", json={"permission": "god"})
        assert bad.status_code == 400
    assert app.collaborator_permission(REPO, "rita") == "read"
    assert app.is_team_member(REPO, "acme", "sre", "sam")


def test_the_dev_stack_emulator_answers_write_for_strangers() -> None:
    key = new_app_key()
    with GitHubEmulator(app_id=99, app_key=key, default_permission="write") as emulator:
        emulator.seed_repository("acme", "fleet", 5)
        emulator.set_permission("acme", "fleet", "rita", "read")
        app = GitHubApp(99, key, emulator.url, min_request_interval=0, min_write_interval=0)
        try:
            assert app.collaborator_permission(REPO, "anyone") == "write"
            assert app.collaborator_permission(REPO, "rita") == "read"
        finally:
            app.close()
