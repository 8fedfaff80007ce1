"""Judging and recording a click on Unlock or a rollout's button, from workflow code
(docs/governance.md, "Unlock and the rollout buttons").

The root's queue and the rollout judge such clicks in their signal handlers: `judge` runs the
`judge_action` activity (when GitHub or the mirror cannot be asked, the click is refused with
that reason and may be clicked again), `audit` records the outcome in the audit trail (a
failure to record is logged; the click's effect stands, like a review click's).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from shared.contracts.activityrefs import ACT_JUDGE_ACTION, ACT_RECORD_AUDIT
    from shared.contracts.deploy import AuditRecord
    from shared.contracts.governance import ActionRequest, Verdict
    from workflows import calls


async def judge(request: ActionRequest) -> Verdict:
    """Whether the click counts (`judge_action`), or a refusal saying why it was not judged."""
    try:
        return await calls.run(ACT_JUDGE_ACTION, request, options=calls.JUDGE_CLICK)
    except ActivityError as err:
        who = f"@{request.actor}" if request.actor else "the clicker"
        return Verdict(
            counts=False,
            reason=f"rollwright could not check {who}'s access ({err.cause or err}); click again",
        )


async def audit(record: AuditRecord) -> None:
    """Record a judged click (`record_audit`)."""
    try:
        await calls.run(ACT_RECORD_AUDIT, record, options=calls.RECORD)
    except ActivityError as err:
        workflow.logger.warning("recording the %s click failed: %s", record.action, err.cause)
