"""The review gate: which clicks are ours, when a deployment approves itself, how approvals
add up, and what the check run says while it waits."""

from __future__ import annotations

from typing import Any

import pytest

from shared.contracts.deploy import LatestDeployment, ReviewSignal
from shared.contracts.governance import (
    POLICY_REQUIREMENT,
    CarryOver,
    OwnersRequirement,
    PolicyChecks,
    PolicyFinding,
    PolicySetRequirement,
    ReviewPolicy,
    Verdict,
)
from tests.support.deployment_inputs import REPO, REVISION, ROOT, deployment_input, diff
from workflows.deployment.review import ReviewGate, not_our_check_run
from workflows.refusals import SHOWN_REFUSALS

OWNERS = OwnersRequirement(
    name="owners:billing", application="billing", path="apps/billing/OWNERS", owners=["bo"]
)


def gate(policy: ReviewPolicy | None = None, *, changed: int = 1, **fields: Any) -> ReviewGate:
    return ReviewGate(deployment_input(**fields), policy or ReviewPolicy(), diff(changed=changed))


def click(decision: str = "approve", by: str | None = "ann", **where: Any) -> ReviewSignal:
    origin = {"repo": REPO.full_name, "check_run_name": f"rollwright/{ROOT}", "head_sha": REVISION}
    return ReviewSignal.model_validate({"decision": decision, "by": by} | origin | where)


# --- which clicks are ours --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ({"repo": None}, "does not say which check run"),
        ({"repo": "evil/fleet"}, "made in evil/fleet"),
        ({"check_run_name": "rollwright/prod/us"}, "on check run 'rollwright/prod/us'"),
        ({"head_sha": "b" * 40}, f"on commit {'b' * 12}"),
        # Approve all on the revision's summary still has to be on this revision.
        ({"check_run_name": "rollwright", "head_sha": "b" * 40}, "on commit"),
    ],
)
def test_a_click_elsewhere_is_not_ours(where: dict[str, Any], reason: str) -> None:
    found = not_our_check_run(deployment_input(), click(**where))
    assert found is not None and reason in found


def test_clicks_on_our_check_run_or_the_revision_summary_are_ours() -> None:
    inp = deployment_input()
    assert not_our_check_run(inp, click()) is None
    assert not_our_check_run(inp, click(check_run_name="rollwright")) is None


def test_ours_wait_for_a_verdict_and_the_others_for_their_record() -> None:
    g = gate()
    assert not g.has_news()
    g.take(click(by="ann"))
    g.take(click(by="eve", repo="evil/fleet"))
    assert [c.by for c in g.clicks] == ["ann"]
    assert [(c.by, "evil/fleet" in why) for c, why in g.elsewhere] == [("eve", True)]
    assert g.has_news()


# --- approval without a click -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "changed", "fields", "approved_by"),
    [
        (ReviewPolicy(), 0, {}, "rollwright (empty diff)"),
        (ReviewPolicy(), 1, {}, None),
        (ReviewPolicy(), 0, {"trigger": "manual", "require_confirmation": True}, None),
        (ReviewPolicy(), 0, {"relation": "diverged", "require_confirmation": True}, None),
        (ReviewPolicy(review="always"), 0, {}, None),
        (
            ReviewPolicy(review="never", rule="review.rules[1]"),
            1,
            {},
            "rollwright (review: never, review.rules[1])",
        ),
        (ReviewPolicy(review="never"), 1, {"trigger": "manual"}, None),
    ],
)
def test_who_approves_without_a_click(
    policy: ReviewPolicy, changed: int, fields: dict[str, Any], approved_by: str | None
) -> None:
    assert gate(policy, changed=changed, **fields).auto_approval() == approved_by


def test_review_never_names_the_defaults_when_no_rule_matched() -> None:
    g = gate(ReviewPolicy(review="never"))
    assert g.auto_approval() == "rollwright (review: never, policy)"


def test_review_never_waives_the_approvers_but_not_the_owners() -> None:
    g = gate(ReviewPolicy(review="never", owners=[OWNERS]))
    assert g.auto_approval() is None
    assert g.satisfied == [POLICY_REQUIREMENT]
    assert g.policy.outstanding(g.satisfied) == [OWNERS.name]
    # An empty diff still approves itself.
    assert gate(ReviewPolicy(review="never", owners=[OWNERS]), changed=0).auto_approval() == (
        "rollwright (empty diff)"
    )


SECURITY = PolicySetRequirement(
    name="policy-set:security", policy_set="security", owners=["sec"], denies=1
)
CHECKS = PolicyChecks(
    sets=["security"],
    denies=1,
    warnings=1,
    findings=[
        PolicyFinding(
            policy_set="security",
            level="deny",
            message="runs as root",
            policy="data.main.deny",
            kind="Deployment",
            namespace="web",
            name="api",
            file="web/api.yaml",
        ),
        PolicyFinding(
            policy_set="security", level="warn", message="no team label", policy="data.main.warn"
        ),
    ],
)


def test_review_never_does_not_waive_a_policy_sets_deny() -> None:
    g = gate(ReviewPolicy(review="never", policy_sets=[SECURITY], checks=CHECKS))
    assert g.auto_approval() is None
    assert g.policy.outstanding(g.satisfied) == [SECURITY.name]
    text = "\n\n".join(g.lines())
    assert "- an owner of policy set `security` (1 failing deny): @sec" in text
    assert "**Policy checks** (`security`): 1 denied, 1 warning(s)." in text
    assert "- ❌ deny `security` Deployment web/api (web/api.yaml): runs as root" in text
    assert "- ⚠️ warn `security` (the policy itself): no team label" in text
    # Warnings alone hold nothing, and show where a check run shows them.
    calm = gate(ReviewPolicy(review="never", checks=CHECKS))
    assert calm.auto_approval() is not None
    assert calm.policy_lines()[0].startswith("**Policy checks**")
    # The judge is not sent the findings.
    assert gate(ReviewPolicy(checks=CHECKS)).judge_request(click()).policy.checks is None


def test_findings_beyond_those_carried_are_counted() -> None:
    many = CHECKS.model_copy(update={"denies": 40, "warnings": 5})
    assert many.lines()[-1] == "_43 more finding(s) are on the job page._"
    assert PolicyChecks().lines() == []


# --- approvals adding up ------------------------------------------------------------------------


def test_a_click_that_does_not_count_is_shown_and_changes_nothing() -> None:
    g = gate()
    assert not g.decides(click(by="rita"), Verdict(counts=False, reason="rita has read access"))
    assert g.refusals == ["@rita clicked Approve: rita has read access"]
    assert g.approvers == [] and g.satisfied == []


def test_approvals_add_up_until_every_requirement_is_met() -> None:
    g = gate(ReviewPolicy(owners=[OWNERS]))
    assert not g.decides(click(by="ann"), Verdict(counts=True, satisfies=[POLICY_REQUIREMENT]))
    assert g.judge_request(click(by="bo")).satisfied == [POLICY_REQUIREMENT]
    last = click(by="bo")
    assert g.decides(last, Verdict(counts=True, satisfies=[OWNERS.name]))
    assert g.approvers == ["ann", "bo"]
    assert g.who(last) == "@ann, @bo"


def test_a_reject_that_counts_ends_the_review() -> None:
    g = gate()
    reject = click("reject", by="ann")
    assert g.decides(reject, Verdict(counts=True))
    assert g.who(reject) == "@ann"
    assert g.who(click("reject", by=None)) == "a reviewer"


def test_approvals_carried_over_from_the_pull_request() -> None:
    g = gate()
    carried = CarryOver(pr=12, approvers=["ann", "bo"], satisfies=[POLICY_REQUIREMENT])
    assert g.carried_over(carried) == "approved in #12 by @ann, @bo"

    partial = gate(ReviewPolicy(owners=[OWNERS]))
    assert partial.carried_over(carried.model_copy(update={"reason": "no owner"})) is None
    assert partial.approvers == ["ann", "bo"] and partial.satisfied == [POLICY_REQUIREMENT]
    assert partial.carry_note == "The pull request's approval does not carry over: no owner."

    pushed = gate()
    assert pushed.carried_over(CarryOver(reason="no pull request")) is None
    assert pushed.carry_note == ""  # a direct push has nothing to carry

    unchecked = gate()
    unchecked.carry_over_unchecked("GitHub is down")
    assert unchecked.carry_note == "Pull request approvals were not checked: GitHub is down."


# --- what the check run says ----------------------------------------------------------------


def test_the_check_run_says_why_it_asks_and_whose_approval_is_needed() -> None:
    latest = LatestDeployment(
        deployment_id="d0", revision="c" * 40, trigger="merge", state="published"
    )
    policy = ReviewPolicy(
        approvers=["ann"], rule="review.rules[0]", distinct_approver=True, author="carol"
    )
    g = gate(policy, trigger="manual", relation="diverged", latest=latest)
    g.carry_over_unchecked("GitHub is down")
    lines = g.lines()
    assert lines[0] == "This is a manual deployment: it always asks for confirmation."
    assert f"`{'c' * 12}`" in lines[1] and "**diverged**" in lines[1]
    assert lines[2] == "Pull request approvals were not checked: GitHub is down."
    assert lines[3] == "**Approval still needed** (`review.rules[0]`) from:\n- an approver: @ann"
    assert lines[4] == "@carol started this deployment and cannot approve it."


def test_the_check_run_shows_approvers_and_the_newest_refusals() -> None:
    g = gate(ReviewPolicy(owners=[OWNERS]))
    g.decides(click(by="ann"), Verdict(counts=True, satisfies=[POLICY_REQUIREMENT]))
    for n in range(SHOWN_REFUSALS + 2):
        g.refuse(click(by=f"u{n}"), "no access")
    lines = g.lines()
    assert lines[0] == "Approved so far by @ann."
    assert "an owner of `billing` (apps/billing/OWNERS): @bo" in lines[1]
    shown = lines[2].splitlines()[1:]
    assert len(shown) == SHOWN_REFUSALS and shown[-1].startswith(f"- @u{SHOWN_REFUSALS + 1} ")


def test_the_revision_summary_hears_what_a_root_still_needs_while_it_waits() -> None:
    g = gate(ReviewPolicy(), changed=2)
    waiting = g.root_review("awaiting_review")
    assert (waiting.root, waiting.counts, waiting.needs) == (
        ROOT,
        "0 added, 0 removed, 2 changed",
        ["anyone with write access"],
    )
    assert g.root_review("published").needs == []
    assert gate(changed=0).counts == "no changes"
