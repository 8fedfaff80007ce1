"""DispatchWorkflow: a push to the default branch becomes one queued revision per affected root.

`dispatch:<owner>/<repo>:<after-sha>`. The affected roots come from an activity working on the
worker's cached bare mirror (fetched incrementally); each root's DeployWorkflow is then
signal-with-started by another activity (workflows cannot signal-with-start directly).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from shared.payloads import (
        ACT_AFFECTED_ROOTS,
        ACT_SIGNAL_DEPLOYS,
        SA_REPO,
        SA_REVISION,
        SA_STATE,
        SA_TRIGGER,
        AffectedRequest,
        AffectedResult,
        DispatchInput,
        DispatchResult,
        NewRevision,
        SignalDeploysRequest,
    )
    from workflows import searchattrs


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
            affected = await workflow.execute_activity(
                ACT_AFFECTED_ROOTS,
                AffectedRequest(
                    repo=inp.repo, before=inp.before, after=inp.after, forced=inp.forced
                ),
                start_to_close_timeout=timedelta(minutes=15),
                heartbeat_timeout=timedelta(minutes=1),
                retry_policy=RetryPolicy(maximum_interval=timedelta(minutes=1)),
                result_type=AffectedResult,
            )
        workflow.set_current_details(
            f"`{inp.after[:12]}`: {len(affected.roots)} affected root(s)"
            + (f" ({affected.reason})" if affected.reason else "")
            + "".join(f"\n- `{r}`" for r in affected.roots[:50])
        )
        if affected.roots:
            await workflow.execute_activity(
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
                start_to_close_timeout=timedelta(minutes=5),
                heartbeat_timeout=timedelta(minutes=1),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
            )
        searchattrs.upsert(state="dispatched", keys=(SA_STATE,))
        return DispatchResult(roots=affected.roots, all_roots=affected.all_roots)


def _default_reason(inp: DispatchInput) -> str:
    # Named roots and manual triggers are re-runs (check_run / check_suite rerequested).
    return "push" if inp.roots is None and inp.trigger == "merge" else "rerequested"
