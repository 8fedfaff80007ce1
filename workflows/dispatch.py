"""DispatchWorkflow: a push to the default branch becomes one queued revision per affected root.

`dispatch:<owner>/<repo>:<after-sha>`. The affected roots come from an activity working on the
worker's cached bare mirror (fetched incrementally); each root's DeployWorkflow is then
signal-with-started by another activity (workflows cannot signal-with-start directly).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from shared.contracts import checkrun
    from shared.contracts.activityrefs import (
        ACT_AFFECTED_ROOTS,
        ACT_AWAIT_DISPATCH,
        ACT_CHECK_RUN,
        ACT_PROMOTION_SIGNAL,
        ACT_PROMOTION_TOUCHED,
        ACT_SIGNAL_DEPLOYS,
    )
    from shared.contracts.deploy import (
        ERR_FLEET,
        SA_REPO,
        SA_REVISION,
        SA_STATE,
        SA_TRIGGER,
        AffectedRequest,
        AffectedResult,
        AwaitDispatchRequest,
        DispatchInput,
        DispatchResult,
        NewRevision,
        SignalDeploysRequest,
        waits_task_queue,
    )
    from shared.contracts.promotion import (
        SignalPromotionsRequest,
        TouchedRequest,
    )
    from workflows import calls, searchattrs


@workflow.defn(name="DispatchWorkflow")
class DispatchWorkflow:
    @workflow.run
    async def run(self, inp: DispatchInput) -> DispatchResult:
        searchattrs.upsert(
            repo=inp.repo.full_name,
            revision=inp.after,
            trigger=inp.trigger,
            state="dispatching",
            keys=(SA_REPO, SA_REVISION, SA_TRIGGER, SA_STATE),
        )
        if inp.roots is not None:
            affected = AffectedResult(roots=sorted(set(inp.roots)), reason="requested")
        else:
            try:
                affected = await calls.run(
                    ACT_AFFECTED_ROOTS,
                    AffectedRequest(
                        repo=inp.repo, before=inp.before, after=inp.after, forced=inp.forced
                    ),
                    options=calls.AFFECTED,
                )
            except ActivityError as err:
                message = _fleet_error(err)
                if message is None:
                    raise
                await _report_unreadable_fleet(inp, message)
                searchattrs.upsert(state="failed", keys=(SA_STATE,))
                return DispatchResult(roots=[], error=message)
        workflow.set_current_details(
            f"`{inp.after[:12]}`: {len(affected.roots)} affected root(s)"
            + (f" ({affected.reason})" if affected.reason else "")
            + "".join(f"\n- `{r}`" for r in affected.roots[:50])
        )
        if affected.roots:
            if inp.after_dispatch:
                # Queue the revisions only after the previous delivery's dispatch queued its
                # own, whichever computed its affected roots first.
                outcome = await calls.run(
                    ACT_AWAIT_DISPATCH,
                    AwaitDispatchRequest(workflow_id=inp.after_dispatch),
                    options=calls.AWAIT_DISPATCH,
                    # The waits queue beside this workflow's own: waiting must not take the
                    # shared queue's slots.
                    task_queue=waits_task_queue(workflow.info().task_queue),
                )
                if outcome == "timed_out":
                    workflow.logger.warning(
                        "previous dispatch %s still running: queueing anyway", inp.after_dispatch
                    )
            await calls.run(
                ACT_SIGNAL_DEPLOYS,
                SignalDeploysRequest(
                    repo=inp.repo,
                    roots=affected.roots,
                    revision=NewRevision(
                        revision=inp.after,
                        trigger=inp.trigger,
                        requested_by=inp.pusher,
                        reason=inp.reason or _default_reason(inp),
                    ),
                ),
                options=calls.SIGNAL_DEPLOYS,
            )
        if inp.roots is None and inp.trigger == "merge":
            await _promotions(inp)
        searchattrs.upsert(state="dispatched", keys=(SA_STATE,))
        return DispatchResult(roots=affected.roots, all_roots=affected.all_roots)


def _fleet_error(err: ActivityError) -> str | None:
    """The message of a fleet mistake (`path:line: message`), None for anything else."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type == ERR_FLEET and cause.non_retryable:
        return cause.message
    return None


async def _report_unreadable_fleet(inp: DispatchInput, message: str) -> None:
    """The commit's `rollwright` check run says why nothing was deployed. When even that
    cannot be written, the dispatch fails with the fleet error, as before."""
    workflow.logger.warning("fleet unreadable at %s: %s", inp.after[:12], message)
    await calls.run(
        ACT_CHECK_RUN,
        checkrun.unreadable_fleet(inp.repo, inp.after, message),
        options=calls.GITHUB,
    )


async def _promotions(inp: DispatchInput) -> None:
    """Start the rollout of every patch the push added or changed, and hand the new revision
    to the running rollouts. They only follow the branch: a failure here is logged and never
    fails the dispatch (a rollout also re-reads the branch when its deployments report)."""
    try:
        touched = await calls.run(
            ACT_PROMOTION_TOUCHED,
            TouchedRequest(repo=inp.repo, before=inp.before, after=inp.after),
            options=calls.PROMOTION_TOUCHED,
        )
        await calls.run(
            ACT_PROMOTION_SIGNAL,
            SignalPromotionsRequest(repo=inp.repo, revision=inp.after, start=touched.patch_ids),
            options=calls.PROMOTION_SIGNAL,
        )
    except ActivityError as err:
        workflow.logger.warning("promotions not signalled: %s", err.cause or err)


def _default_reason(inp: DispatchInput) -> str:
    # Named roots and manual triggers are re-runs (check_run / check_suite rerequested).
    return "push" if inp.roots is None and inp.trigger == "merge" else "rerequested"
