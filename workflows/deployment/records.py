"""What a deployment writes down about itself: its history row (DeploymentRecord), the root's
latest.json (LatestDeployment), the update its parent hears, its result, and the audit row of
a review click. Plain builders over what the deployment has learnt so far (`Progress`); the
workflow passes in the times from its own clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from shared.contracts.deploy import (
    TERMINAL_STATES,
    AuditRecord,
    DeploymentInput,
    DeploymentRecord,
    DeploymentResult,
    DeploymentState,
    DeploymentUpdate,
    DiffSummary,
    LatestDeployment,
    ReviewSignal,
)


@dataclass
class Progress:
    """One deployment so far: its check run, its render's digest and diff, and the latest.json
    it wrote (set only once that is really the root's latest.json)."""

    inp: DeploymentInput
    check_run_id: int | None = None
    digest: str | None = None
    diff: DiffSummary | None = None
    persisted: LatestDeployment | None = None

    def record(
        self, state: DeploymentState, message: str, approved_by: str | None, *, at: datetime
    ) -> DeploymentRecord:
        inp, diff = self.inp, self.diff
        return DeploymentRecord(
            deployment_id=inp.deployment_id,
            repo=inp.repo.full_name,
            root=inp.root,
            revision=inp.revision,
            trigger=inp.trigger,
            state=state,
            requested_by=inp.requested_by,
            approved_by=approved_by,
            check_run_id=self.check_run_id,
            render_digest=self.digest,
            added=diff.added if diff else None,
            removed=diff.removed if diff else None,
            changed=diff.changed if diff else None,
            message=message,
            at=at,
            hotfix=inp.hotfix,
        )

    def latest(
        self,
        state: DeploymentState,
        approved_by: str | None,
        published_prefix: str | None,
        *,
        started_at: datetime,
        finished_at: datetime,
    ) -> LatestDeployment:
        """The root's latest.json after this attempt. One that published nothing (a failed
        apply) keeps the previous published render as the diff base: the cluster runs it."""
        inp = self.inp
        previous = inp.latest
        return LatestDeployment(
            deployment_id=inp.deployment_id,
            revision=inp.revision,
            trigger=inp.trigger,
            state=state,
            render_digest=self.digest,
            approved_by=approved_by,
            started_at=started_at,
            finished_at=finished_at,
            check_run_id=self.check_run_id,
            published_prefix=published_prefix or (previous.published_prefix if previous else None),
            published_revision=(
                inp.revision
                if published_prefix
                else (previous.published_revision if previous else None)
            ),
            locks_queue=inp.locks_queue,
            hotfix=inp.hotfix,
        )

    def update(
        self, state: DeploymentState, message: str, approved_by: str | None
    ) -> DeploymentUpdate:
        return DeploymentUpdate(
            deployment_id=self.inp.deployment_id,
            state=state,
            check_run_id=self.check_run_id,
            message=message,
            render_digest=self.digest,
            approved_by=approved_by,
            # A parent that continued as new meanwhile learns the outcome this way.
            latest=self.persisted if state in TERMINAL_STATES else None,
        )

    def result(
        self,
        state: DeploymentState,
        message: str,
        approved_by: str | None,
        *,
        published: bool,
    ) -> DeploymentResult:
        return DeploymentResult(
            deployment_id=self.inp.deployment_id,
            state=state,
            message=message,
            render_digest=self.digest,
            approved_by=approved_by,
            check_run_id=self.check_run_id,
            published=published,
            latest=self.persisted,
        )


def audit_record(
    inp: DeploymentInput, signal: ReviewSignal, *, counted: bool, reason: str, at: datetime
) -> AuditRecord:
    """The audit row of one review click on the deployment, counted or not (and why)."""
    return AuditRecord(
        repo=inp.repo.full_name,
        root=inp.root,
        deployment_id=inp.deployment_id,
        action=signal.decision,
        actor=signal.by,
        source=signal.source,
        counted=counted,
        reason=reason,
        at=at,
    )
