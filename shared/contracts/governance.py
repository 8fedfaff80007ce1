"""Governance payloads (docs/governance.md): a deployment's review policy, and the verdict on
one click — does it count, and which of the deployment's requirements does it satisfy.

The workflow only keeps the set of satisfied requirements and asks `outstanding()`; whether a
click counts is decided by the `judge_review` activity (it asks GitHub who has write access
and who is in which team, then applies `shared/review/governance.py`'s decision table), and
for Unlock and the rollout buttons by `judge_action` (`ActionRequest`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import Field

from shared.contracts.deploy import Decision, DeploymentState, Payload, RepoRef

ReviewMode = Literal["always", "on-change", "never"]
# The requirement the matching rule's `approvers` set (every deployment has it).
POLICY_REQUIREMENT = "policy"
# GitHub's collaborator permissions that are write access (maintain reads as write there).
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})


class OwnersRequirement(Payload):
    """One OWNERS file whose application the deployment's diff touches."""

    name: str  # the requirement's key: `owners:<application>`
    application: str
    path: str  # the OWNERS file in the fleet repo
    owners: list[str] = Field(default_factory=list)  # logins and @org/team


PolicyLevel = Literal["deny", "warn"]
# A policy set's requirement: `policy-set:<name>` (rollwright.yaml `policies`).
POLICY_SET_PREFIX = "policy-set:"
# Findings a review policy carries for the check run (the job log has more).
MAX_FINDINGS = 30


class PolicyFinding(Payload):
    """One failing rule of a policy set on one rendered object (docs/governance.md)."""

    policy_set: str
    level: PolicyLevel
    message: str  # from the redacted render: never a secret value
    policy: str  # the rule: `data.main.deny`, `ValidatingAdmissionPolicy x: validations[0]`
    kind: str = ""
    namespace: str = ""
    name: str = ""
    file: str = ""

    def subject(self) -> str:
        """`Deployment shop/web (apps/web.yaml)`."""
        if not self.kind:
            return "(the policy itself)"
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where} ({self.file})"


class PolicyChecks(Payload):
    """What the root's policy sets found on its render: totals, and the first findings
    (denies first) up to MAX_FINDINGS."""

    sets: list[str] = Field(default_factory=list)  # the sets that checked the root
    denies: int = 0
    warnings: int = 0
    findings: list[PolicyFinding] = Field(default_factory=list)

    def lines(self) -> list[str]:
        """Markdown for a check run: one bullet per finding shown, and how many are not."""
        if not self.sets:
            return []
        head = (
            f"**Policy checks** ({', '.join(f'`{s}`' for s in self.sets)}): "
            f"{self.denies} denied, {self.warnings} warning(s)."
        )
        out = [head]
        if self.findings:
            out.append(
                "\n".join(
                    f"- {'❌ deny' if f.level == 'deny' else '⚠️ warn'} `{f.policy_set}` "
                    f"{f.subject()}: {f.message}"
                    for f in self.findings
                )
            )
        hidden = self.denies + self.warnings - len(self.findings)
        if hidden > 0:
            out.append(f"_{hidden} more finding(s) are on the job page._")
        return out


class PolicySetRequirement(Payload):
    """A policy set with failing `deny` results: an owner of the set must approve."""

    name: str  # the requirement's key: `policy-set:<set>`
    policy_set: str
    owners: list[str] = Field(default_factory=list)  # logins and @org/team
    denies: int = 0


class ReviewPolicy(Payload):
    """What a root's deployment needs before it publishes, resolved at its revision."""

    review: ReviewMode = "on-change"
    approvers: list[str] = Field(default_factory=list)  # empty: anyone with write access
    admins: list[str] = Field(default_factory=list)  # satisfy every requirement
    distinct_approver: bool = False
    author: str | None = None  # who pushed or asked for it (distinctApprover)
    rule: str = ""  # `review.rules[2]` or "" (the defaults)
    owners: list[OwnersRequirement] = Field(default_factory=list)
    # Policy sets whose `deny` rules fail on the render, and what every set found.
    policy_sets: list[PolicySetRequirement] = Field(default_factory=list)
    checks: PolicyChecks | None = None

    def requirements(self) -> list[str]:
        return [
            POLICY_REQUIREMENT,
            *(o.name for o in self.owners),
            *(p.name for p in self.policy_sets),
        ]

    def waived_by_admins(self) -> list[str]:
        """The requirements an admin's approval meets: all but the policy sets', which only
        their owners may let through."""
        sets = {p.name for p in self.policy_sets}
        return [r for r in self.requirements() if r not in sets]

    def outstanding(self, satisfied: Iterable[str]) -> list[str]:
        done = set(satisfied)
        return [name for name in self.requirements() if name not in done]

    def whose(self, requirement: str) -> str:
        """Whose approval satisfies a requirement, for the check run."""
        if requirement == POLICY_REQUIREMENT:
            people = self.approvers
            what = "an approver" if people else "anyone with write access"
        elif requirement.startswith(POLICY_SET_PREFIX):
            policy_set = next((p for p in self.policy_sets if p.name == requirement), None)
            if policy_set is None:
                return requirement
            names = ", ".join(_mention(p) for p in policy_set.owners)
            denied = f"{policy_set.denies} failing " + (
                "deny" if policy_set.denies == 1 else "denies"
            )
            return f"an owner of policy set `{policy_set.policy_set}` ({denied}): {names}"
        else:
            found = next((o for o in self.owners if o.name == requirement), None)
            people = found.owners if found else []
            what = f"an owner of `{found.application}` ({found.path})" if found else requirement
        names = ", ".join(_mention(p) for p in [*people, *self.admins])
        return f"{what}: {names}" if people and names else what


def _mention(entry: str) -> str:
    return entry if entry.startswith("@") else f"@{entry}"


class ReviewPolicyRequest(Payload):
    repo: RepoRef
    root: str
    revision: str
    checkout_path: str
    deployment_id: str
    author: str | None = None
    # The blob prefixes of the render and of the last published one: OWNERS apply to the
    # applications whose rendered files differ between them.
    new_prefix: str | None = None
    old_prefix: str | None = None


class JudgeRequest(Payload):
    repo: RepoRef
    root: str
    deployment_id: str
    policy: ReviewPolicy
    decision: Decision
    actor: str | None
    satisfied: list[str] = Field(default_factory=list)


# The buttons besides Approve / Reject that change what gets deployed: a root's Unlock and a
# rollout's Promote, Halt, Resume and Roll back. Each is judged by `judge_action`.
GovernedAction = Literal["unlock", "promote", "halt", "resume", "rollback"]


class ActionRequest(Payload):
    """One click on a governed button, to judge by the review policy in force: the policies of
    the roots it acts on, read from rollwright.yaml at `revision` (None: the tip of the
    default branch). Unlock acts on `root`; a rollout's buttons on the roots `node` holds in
    the rollout of `patch_id` (none: only write access counts)."""

    repo: RepoRef
    action: GovernedAction
    actor: str | None
    root: str | None = None
    patch_id: str | None = None
    node: str | None = None
    revision: str | None = None
    workflow_id: str = ""  # for the logs: the workflow that asks


class Verdict(Payload):
    counts: bool
    reason: str = ""  # why it does not count (empty when it does)
    satisfies: list[str] = Field(default_factory=list)  # requirements this approval meets
    permission: str = ""  # GitHub's answer: admin, write, read, none


# --- Approve all: one summary check run per merged revision ----------------------------------

REVISION_REVIEW_WORKFLOW = "RevisionReviewWorkflow"
SIGNAL_ROOT_REVIEW = "root_review"  # RootReview: a root's deployment of the revision, as it is
QUERY_REVISION_REVIEW = "revision_review"  # -> list[RootReview]
# The `rollwright` check run's button (GitHub: label ≤ 20, description ≤ 40 characters). A
# click arrives as the `review` signal (decision approve) on the revision's workflow.
APPROVE_ALL_ID = "approve_all"


def revision_review_workflow_id(repo: str, revision: str) -> str:
    return f"revision:{repo}:{revision}"


class RootReview(Payload):
    """What the revision's summary shows of one root's (merge) deployment."""

    root: str
    deployment_id: str
    state: DeploymentState
    counts: str = ""  # "1 added, 0 removed, 2 changed"
    needs: list[str] = Field(default_factory=list)  # whose approval is still needed
    approved_by: list[str] = Field(default_factory=list)


class RevisionReviewInput(Payload):
    repo: RepoRef
    revision: str
    # Carried by continue-as-new: what the roots reported, the summary check run, and a lower
    # history limit than Temporal's suggestion (tests).
    roots: list[RootReview] = Field(default_factory=list)
    check_run_id: int | None = None
    max_history_events: int | None = None


class ReportReview(Payload):
    repo: RepoRef
    revision: str
    review: RootReview


# --- approvals carried over from the pull request --------------------------------------------


class CarryOverRequest(Payload):
    repo: RepoRef
    root: str
    revision: str
    deployment_id: str
    policy: ReviewPolicy
    new_prefix: str
    old_prefix: str | None = None


class CarryOver(Payload):
    """What the merged pull request's GitHub reviews approve of this deployment."""

    pr: int | None = None
    approvers: list[str] = Field(default_factory=list)  # whose reviews counted
    satisfies: list[str] = Field(default_factory=list)  # the requirements they meet
    reason: str = ""  # why nothing (or not everything) carries over
