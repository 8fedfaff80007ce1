"""RevisionReviewWorkflow (`revision:<owner>/<repo>:<sha>`): the `rollwright` summary check run
of one merged revision, and its *Approve all* button (docs/governance.md).

Each governed merge deployment of the revision reports its state here (`root_review`, by
signal-with-start from the `report_review` activity). The check run lists every root
awaiting review with its change counts and whose approval it still needs. A click on
*Approve all* comes in as a `review` signal and is passed on, as a click on this check run,
to every deployment of the revision still awaiting review: each one judges it by its own
policy (write access, approvers, OWNERS, distinct approver), so the clicker approves exactly
what they may approve, and the summary then says which roots still need someone else.
"""

from __future__ import annotations

import builtins
import contextlib
from datetime import datetime, timedelta
from typing import Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from shared.contracts import checkrun
    from shared.contracts.activityrefs import (
        ACT_CHECK_RUN,
    )
    from shared.contracts.deploy import (
        SIGNAL_REVIEW,
        TERMINAL_STATES,
        CheckRunRequest,
        ReviewSignal,
    )
    from shared.contracts.governance import (
        QUERY_REVISION_REVIEW,
        REVISION_REVIEW_WORKFLOW,
        SIGNAL_ROOT_REVIEW,
        RevisionReviewInput,
        RootReview,
    )
    from workflows import calls

CheckConclusion = Literal["action_required", "neutral", "success"]
# Continue as new past this many events (or when Temporal suggests it): a revision touching
# thousands of roots reports about ten events' worth per root.
MAX_HISTORY_EVENTS = 10_000
# Once every reported deployment has finished and nothing was reported for this long, the
# workflow ends (a later report starts it again, with a fresh check run).
QUIET = timedelta(hours=1)
# A fleet-wide change reports by the hundred, and every report asked for the whole summary
# (a row a root) to be written again: one write per report made the summary most of the
# change's GitHub requests and Temporal payloads. Written at most this often; clicks act at
# once (patch PACED_WRITES, docs/workflow-versions.md).
PACE = timedelta(seconds=3)
PACED_WRITES = "RevisionReviewWorkflow-paced-writes"


@workflow.defn(name=REVISION_REVIEW_WORKFLOW)
class RevisionReviewWorkflow:
    def __init__(self) -> None:
        self.roots: dict[str, RootReview] = {}
        self.dirty = False
        self.clicks: list[ReviewSignal] = []
        self.check_run_id: int | None = None
        self.written_at: datetime | None = None

    @workflow.signal(name=SIGNAL_ROOT_REVIEW)
    def root_review(self, review: RootReview) -> None:
        known = self.roots.get(review.root)
        if (
            known is not None
            and known.deployment_id != review.deployment_id
            and review.state in TERMINAL_STATES
            and known.state not in TERMINAL_STATES
        ):
            return  # another deployment's end must not hide the one now waiting
        self.roots[review.root] = review
        self.dirty = True

    @workflow.signal(name=SIGNAL_REVIEW)
    def review(self, click: ReviewSignal) -> None:
        # Only Approve all is offered here; anything else is not ours to pass on.
        if click.decision == "approve":
            self.clicks.append(click)

    @workflow.query(name=QUERY_REVISION_REVIEW)
    def revision_review(self) -> list[RootReview]:
        return [self.roots[r] for r in sorted(self.roots)]

    @workflow.run
    async def run(self, inp: RevisionReviewInput) -> None:
        self.inp = inp
        for carried in inp.roots:
            self.roots.setdefault(carried.root, carried)  # a signal that came first is newer
        self.check_run_id = self.check_run_id or inp.check_run_id
        paced = workflow.patched(PACED_WRITES)  # decided once a run, at its start
        while True:
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                # Clicks and unwritten reports are handled below first (neither is carried);
                # the next turn continues as new.
                if not self.clicks and not self.dirty:
                    workflow.continue_as_new(
                        RevisionReviewInput(
                            repo=inp.repo,
                            revision=inp.revision,
                            roots=[self.roots[r] for r in sorted(self.roots)],
                            check_run_id=self.check_run_id,
                            max_history_events=inp.max_history_events,
                        )
                    )
            try:
                await workflow.wait_condition(
                    lambda: self.dirty or bool(self.clicks),
                    timeout=QUIET,
                    timeout_summary="quiet",
                )
            except builtins.TimeoutError:
                if self._waiting():
                    continue  # deployments still wait (their review times out in 7 days)
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not (self.dirty or self.clicks):
                    return
            if paced and self.dirty and not self.clicks:
                await self._paced()
            while self.clicks:
                await self._approve_all(self.clicks.pop(0))
            if self.dirty:
                self.dirty = False
                await self._write()
                self.written_at = workflow.now()

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        limit = self.inp.max_history_events or MAX_HISTORY_EVENTS
        return info.is_continue_as_new_suggested() or info.get_current_history_length() > limit

    async def _paced(self) -> None:
        """Wait out what is left of PACE since the last write (reports gather meanwhile);
        a click ends the wait."""
        if self.written_at is None:
            return
        left = self.written_at + PACE - workflow.now()
        if left <= timedelta(0):
            return
        with contextlib.suppress(builtins.TimeoutError):
            await workflow.wait_condition(
                lambda: bool(self.clicks), timeout=left, timeout_summary="pace"
            )

    def _waiting(self) -> list[RootReview]:
        return [
            self.roots[r] for r in sorted(self.roots) if self.roots[r].state == "awaiting_review"
        ]

    async def _approve_all(self, click: ReviewSignal) -> None:
        """Pass the click on to every deployment awaiting review; each judges it itself."""
        for waiting in self._waiting():
            handle = workflow.get_external_workflow_handle(waiting.deployment_id)
            try:
                await handle.signal(SIGNAL_REVIEW, click)
            except FailureError:
                # Finished meanwhile: its own report updates the summary.
                workflow.logger.info(
                    "approve all: deployment gone", extra={"deployment": waiting.deployment_id}
                )

    async def _write(self) -> None:
        inp = self.inp
        waiting = self._waiting()
        lines = ["| root | changes | state | still needs |", "|---|---|---|---|"]
        for name in sorted(self.roots):
            root = self.roots[name]
            needs = "; ".join(root.needs) if root.state == "awaiting_review" else ""
            state = root.state.replace("_", " ")
            if root.approved_by:
                state += " (" + ", ".join(f"@{a}" for a in root.approved_by) + ")"
            lines.append(f"| `{name}` | {root.counts or '—'} | {state} | {needs or '—'} |")
        summary = (
            f"Deployments of `{checkrun.short(inp.revision)}`. *Approve all* approves every "
            "root you may approve; each root's own check run has its diff.\n\n" + "\n".join(lines)
        )
        done = all(r.state in TERMINAL_STATES for r in self.roots.values())
        failed = any(r.state not in ("published", "skipped") for r in self.roots.values())
        conclusion: CheckConclusion | None = "action_required" if waiting else None
        if not waiting and done:
            conclusion = "neutral" if failed else "success"
        request = CheckRunRequest(
            repo=inp.repo,
            check_run_id=self.check_run_id,
            name=checkrun.REVISION_CHECK_NAME,
            head_sha=inp.revision,
            external_id=f"revision:{inp.revision}",
            status="completed" if conclusion else "in_progress",
            conclusion=conclusion,
            title=(
                f"{len(waiting)} of {len(self.roots)} roots awaiting review"
                if waiting
                else f"{len(self.roots)} roots: none awaiting review"
            ),
            summary=summary,
            actions=[checkrun.APPROVE_ALL] if waiting else [],
        )
        try:
            ref = await calls.run(ACT_CHECK_RUN, request, options=calls.GITHUB)
            self.check_run_id = ref.check_run_id
        except ActivityError as err:  # the roots' own check runs still work
            workflow.logger.warning("summary check run failed: %s", err.cause)
