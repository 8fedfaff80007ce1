"""The review gate of one deployment, as plain bookkeeping (no Temporal).

Why the deployment asks (manual, diverged), whether it approves itself (a routine merge with
an empty diff, the policy's `review: always / never`, the owners `never` does not waive), which
clicks were made on its own check run, the requirements met so far and by whom, which clicks
did not count and why, the approvals carried over from the merged pull request, and what the
check run says while it waits. The workflow feeds it clicks, verdicts and carried-over
approvals, and runs the activities (judge, audit, check run) around it.
"""

from __future__ import annotations

from shared.contracts import checkrun
from shared.contracts.deploy import (
    DeploymentInput,
    DeploymentState,
    DiffSummary,
    ReviewSignal,
)
from shared.contracts.governance import (
    POLICY_REQUIREMENT,
    CarryOver,
    JudgeRequest,
    ReviewPolicy,
    RootReview,
    Verdict,
)
from workflows.refusals import refusal, refusals_block


class ReviewGate:
    """The review of one deployment under its root's review policy."""

    def __init__(self, inp: DeploymentInput, policy: ReviewPolicy, diff: DiffSummary) -> None:
        self.inp = inp
        self.policy = policy
        self.empty = diff.empty
        self.counts = (  # the diff's counts, for the check run title and the summary
            "no changes"
            if diff.empty
            else f"{diff.added} added, {diff.removed} removed, {diff.changed} changed"
        )
        self.clicks: list[ReviewSignal] = []  # made on our check run: waiting for a verdict
        # Clicks made anywhere else: to record as refused, with why.
        self.elsewhere: list[tuple[ReviewSignal, str]] = []
        self.satisfied: list[str] = []  # the policy's requirements met so far
        self.approvers: list[str] = []  # who met them (or carried them over)
        self.refusals: list[str] = []  # clicks that did not count, as the check run shows them
        self.carry_note = ""  # why the pull request's approvals did not carry over
        self.reported = False  # told the revision's summary (Approve all) that it waits

    # --- clicks ---------------------------------------------------------------------------

    def take(self, signal: ReviewSignal) -> None:
        """A click that came in while the gate is open: judged later if it was made on this
        deployment's check run, recorded as refused otherwise."""
        reason = not_our_check_run(self.inp, signal)
        if reason is None:
            self.clicks.append(signal)
        else:
            self.elsewhere.append((signal, reason))

    def has_news(self) -> bool:
        return bool(self.clicks) or bool(self.elsewhere)

    def judge_request(self, click: ReviewSignal) -> JudgeRequest:
        inp = self.inp
        return JudgeRequest(
            repo=inp.repo,
            root=inp.root,
            deployment_id=inp.deployment_id,
            # The judge needs no findings (they only make the request bigger).
            policy=self.policy.model_copy(update={"checks": None}),
            decision=click.decision,
            actor=click.by,
            satisfied=list(self.satisfied),
        )

    def refuse(self, click: ReviewSignal, reason: str) -> None:
        """Show a click that did not count (it changes nothing else)."""
        self.refusals.append(refusal(click.decision, click.by, reason))

    def decides(self, click: ReviewSignal, verdict: Verdict) -> bool:
        """Take a judged click; True when it ends the review: a reject that counts, or the
        approval that meets the last outstanding requirement."""
        if not verdict.counts:
            self.refuse(click, verdict.reason)
            return False
        if click.decision == "reject":
            return True
        if click.by and click.by not in self.approvers:
            self.approvers.append(click.by)
        self._satisfy(verdict.satisfies)
        return not self.policy.outstanding(self.satisfied)

    def who(self, review: ReviewSignal) -> str:
        """Who decided, for the check run: every approver once approvals add up."""
        if review.decision == "approve" and self.approvers:
            return ", ".join(f"@{a}" for a in self.approvers)
        return f"@{review.by}" if review.by else "a reviewer"

    # --- approval without a click ---------------------------------------------------------

    def auto_approval(self) -> str | None:
        """Who approves without a click (None: the deployment asks). A routine merge (ahead of
        the latest, nothing asking for confirmation) with an empty diff approves itself,
        unless the policy says `review: always`; `review: never` approves a routine merge,
        but waives only the rule's approvers, not the owners of what the diff touches."""
        inp, policy = self.inp, self.policy
        routine = (
            inp.trigger == "merge"
            and inp.relation in ("ahead", "first", "same")
            and not inp.require_confirmation
        )
        if policy.review == "always":
            return None
        if policy.review == "never" and routine:
            # Neither OWNERS nor a policy set's failing deny is the rule's to waive.
            if not policy.owners and not policy.policy_sets:
                return f"rollwright (review: never, {policy.rule or 'policy'})"
            self._satisfy([POLICY_REQUIREMENT])
        # A revision that changes a policy set publishes and becomes the base the next
        # deployment compares the sets with: an empty diff does not let it through unseen.
        if any(p.changed for p in policy.policy_sets):
            return None
        return "rollwright (empty diff)" if routine and self.empty else None

    def carried_over(self, carried: CarryOver) -> str | None:
        """Take the merged pull request's approvals (its GitHub reviews of its last head, when
        this diff is the one previewed for it): who approved, once they meet every
        requirement; otherwise None, and the check run will say why."""
        for login in carried.approvers:
            if login not in self.approvers:
                self.approvers.append(login)
        self._satisfy(carried.satisfies)
        if (
            carried.pr is not None
            and carried.approvers
            and not self.policy.outstanding(self.satisfied)
        ):
            return f"approved in #{carried.pr} by " + ", ".join(f"@{a}" for a in carried.approvers)
        if carried.reason and carried.pr is not None:  # a direct push has nothing to carry
            self.carry_note = f"The pull request's approval does not carry over: {carried.reason}."
        return None

    def carry_over_unchecked(self, why: str) -> None:
        self.carry_note = f"Pull request approvals were not checked: {why}."

    # --- what the check run and the revision's summary say ----------------------------------

    def lines(self) -> list[str]:
        """The check run's paragraphs while the deployment waits: why it asks, whose approval
        is still needed, and which clicks did not count."""
        policy = self.policy
        lines = why_asked(self.inp)
        if self.carry_note:
            lines.append(self.carry_note)
        if self.approvers:
            lines.append("Approved so far by " + ", ".join(f"@{a}" for a in self.approvers) + ".")
        rule = f" (`{policy.rule}`)" if policy.rule else ""
        lines.append(
            f"**Approval still needed**{rule} from:\n"
            + "\n".join(f"- {policy.whose(r)}" for r in policy.outstanding(self.satisfied))
        )
        if policy.distinct_approver and policy.author:
            lines.append(f"@{policy.author} started this deployment and cannot approve it.")
        if (refused := refusals_block(self.refusals)) is not None:
            lines.append(refused)
        return lines + self.policy_lines()

    def policy_lines(self) -> list[str]:
        """What the root's policy sets found (none configured: nothing)."""
        return self.policy.checks.lines() if self.policy.checks else []

    def root_review(self, state: DeploymentState) -> RootReview:
        """How this root stands, for the revision's summary check run (Approve all)."""
        policy = self.policy
        needs = [policy.whose(r) for r in policy.outstanding(self.satisfied)]
        return RootReview(
            root=self.inp.root,
            deployment_id=self.inp.deployment_id,
            state=state,
            counts=self.counts,
            needs=needs if state == "awaiting_review" else [],
            approved_by=list(self.approvers),
        )

    def _satisfy(self, requirements: list[str]) -> None:
        self.satisfied += [r for r in requirements if r not in self.satisfied]


def why_asked(inp: DeploymentInput) -> list[str]:
    """Why the deployment asks for a review whatever its policy: manual, or diverged."""
    why = []
    if inp.hotfix is not None:
        why.append(
            f"This is a **hotfix** from pull request #{inp.hotfix.pr}, not merged: it always "
            "asks for confirmation, and once published it locks the root until the pull "
            "request is merged or someone clicks Unlock."
        )
    elif inp.trigger == "manual":
        why.append("This is a manual deployment: it always asks for confirmation.")
    if inp.relation == "diverged":
        latest = checkrun.short(inp.latest.revision if inp.latest else "")
        why.append(
            f"This revision has **diverged** from the latest deployed revision `{latest}`: "
            "confirm that it should replace it."
        )
    return why


def not_our_check_run(inp: DeploymentInput, signal: ReviewSignal) -> str | None:
    """Why a click was not made on this deployment's own check run (None: it was). The check
    run's external id names the deployment; its repository, name and head commit must name it
    too, or anyone could approve any deployment by its id."""
    if signal.repo is None or signal.check_run_name is None or signal.head_sha is None:
        return "the click does not say which check run it was made on"
    if signal.repo != inp.repo.full_name:
        return f"it was made in {signal.repo}, and this deployment is in {inp.repo.full_name}"
    # Approve all on the revision's summary check run (merge deployments report there) is a
    # click on this revision too; the head commit check below still applies.
    summary = signal.check_run_name == checkrun.REVISION_CHECK_NAME
    if not summary and signal.check_run_name != checkrun.check_run_name(inp.root):
        return (
            f"it was made on check run {signal.check_run_name!r}, and this deployment's is "
            f"{checkrun.check_run_name(inp.root)!r}"
        )
    if signal.head_sha != inp.revision:
        return (
            f"it was made on commit {checkrun.short(signal.head_sha)}, and this deployment "
            f"deploys {checkrun.short(inp.revision)}"
        )
    return None
