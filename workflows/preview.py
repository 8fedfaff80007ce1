"""PreviewWorkflow: the rendered diff of one pull request (`preview:<owner>/<repo>:<pr>`).

The gateway signal-with-starts it with `pr_head` for every new head and signals `pr_closed`
when the pull request closes. For each head, in order:

1. check run `rollwright/preview` on the PR head, in progress;
2. on one worker (its own task queue, like a deployment): fetch the PR refs into the mirror and
   pick both sides (`preview_revisions`), then render the affected roots and store the report
   (`preview_build`, heartbeating);
3. the sticky PR comment, edited in place (`preview_comment`);
4. the check run completed: success, or failure when the PR side does not render.

Step 2 is the long one and the only one a newer head (or closing) interrupts: its task is
cancelled, which cancels the running activity (it notices at its next heartbeat and stops
rendering), and the check run of the old head ends neutral "Superseded". Steps 1, 3 and 4 are
short and always finish, so an old head's report never lands after a newer one's.

The workflow keeps only the newest pending head (older ones are never rendered), ends when the
pull request closes or after 30 idle days (the next push starts it again), and continues as new
after `max_previews_per_run` heads or a long history.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from shared.contracts import checkrun
    from shared.contracts.activityrefs import (
        ACT_CHECK_RUN,
        ACT_PREVIEW_BUILD,
        ACT_PREVIEW_COMMENT,
        ACT_PREVIEW_REVISIONS,
        ACT_WORKER_TASK_QUEUE,
    )
    from shared.contracts.deploy import (
        QUERY_STATE,
        SA_REPO,
        SA_REVISION,
        SA_STATE,
        SA_TRIGGER,
        CheckRunRequest,
    )
    from shared.contracts.preview import (
        FORCING_ACTIONS,
        PREVIEW_CHECK_NAME,
        PREVIEW_WORKFLOW,
        SIGNAL_PR_CLOSED,
        SIGNAL_PR_HEAD,
        PreviewBuildRequest,
        PreviewCommentRequest,
        PreviewInput,
        PreviewOutcome,
        PreviewResult,
        PreviewRevisions,
        PreviewRevisionsRequest,
        PreviewRun,
        PreviewState,
        PullRequestClosed,
        PullRequestHead,
        preview_external_id,
    )
    from workflows import calls, searchattrs
    from workflows.quoting import quoted

# Long enough that a busy pull request's history stays readable, well under Temporal's limits
# (each head carries its check run text, up to 64 KiB, twice).
MAX_HISTORY_EVENTS = 5_000
MAX_PREVIEWS_PER_RUN = 20
IDLE_TIMEOUT = timedelta(days=30)
# An infrastructure failure (the pinned worker gone, a timeout, a retryable error that used up
# the retries of `calls.PREVIEW_BUILD`) is not the pull request's fault: fetch and render
# again on a freshly picked worker after each pause, and fail the check run only after the
# last. A newer head or closing interrupts the pause like the render.
INFRA_RETRY_PAUSES = (
    timedelta(minutes=1),
    timedelta(minutes=2),
    timedelta(minutes=4),
    timedelta(minutes=8),
)


@workflow.defn(name=PREVIEW_WORKFLOW)
class PreviewWorkflow:
    @workflow.init
    def __init__(self, inp: PreviewInput) -> None:
        # The input is known here, so signals and queries that come before `run` work.
        self.inp = inp
        self.pending: PullRequestHead | None = inp.pending
        self.closing: PullRequestClosed | None = None
        self.current: PreviewRun | None = None
        self.last: PreviewRun | None = inp.last
        self.comment_id: int | None = inp.comment_id
        self.previews = inp.previews
        self.previews_this_run = 0

    # --- signals and queries ---------------------------------------------------------------

    @workflow.signal(name=SIGNAL_PR_HEAD)
    def pr_head(self, head: PullRequestHead) -> None:
        # The newest event wins: a head after `closed` is a reopen, and only the newest head
        # is worth rendering. The head being rendered, sent again, changes nothing.
        current = self.current
        if (
            current is not None
            and self.closing is None
            and current.head_sha == head.head_sha
            and current.base_ref == head.base_ref
            and head.action not in FORCING_ACTIONS
        ):
            return
        self.closing = None
        self.pending = head
        self._details()

    @workflow.signal(name=SIGNAL_PR_CLOSED)
    def pr_closed(self, closed: PullRequestClosed) -> None:
        self.closing = closed
        self.pending = None

    @workflow.query(name=QUERY_STATE)
    def state(self) -> PreviewState:
        return PreviewState(
            repo=self.inp.repo.full_name,
            pr=self.inp.pr,
            closed=self.closing is not None,
            current=self.current,
            last=self.last,
            pending_head=self.pending.head_sha if self.pending else None,
            comment_id=self.comment_id,
            previews=self.previews,
        )

    # --- main loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: PreviewInput) -> PreviewResult:
        max_events = inp.max_history_events or MAX_HISTORY_EVENTS
        max_previews = inp.max_previews_per_run or MAX_PREVIEWS_PER_RUN
        searchattrs.upsert(repo=inp.repo.full_name, trigger="preview", keys=(SA_REPO, SA_TRIGGER))
        self._details()
        while True:
            if self.closing is not None:
                return self._finish("closed")
            head = self.pending
            if head is None:
                info = workflow.info()
                if (
                    self.previews_this_run >= max_previews
                    or info.is_continue_as_new_suggested()
                    or info.get_current_history_length() > max_events
                ):
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    if self.pending is None and self.closing is None:
                        workflow.continue_as_new(
                            PreviewInput(
                                repo=inp.repo,
                                pr=inp.pr,
                                last=self.last,
                                comment_id=self.comment_id,
                                previews=self.previews,
                                max_history_events=inp.max_history_events,
                                max_previews_per_run=inp.max_previews_per_run,
                            )
                        )
                    continue
                try:
                    await workflow.wait_condition(
                        lambda: self.pending is not None or self.closing is not None,
                        timeout=IDLE_TIMEOUT,
                        timeout_summary="idle",
                    )
                except TimeoutError:
                    if self.pending is None and self.closing is None:
                        return self._finish("idle")
                continue
            self.pending = None
            if self._already_previewed(head):
                workflow.logger.info(
                    "head already previewed", extra={"head": head.head_sha, "action": head.action}
                )
                continue
            await self._preview(head)

    def _already_previewed(self, head: PullRequestHead) -> bool:
        last = self.last
        return (
            head.action not in FORCING_ACTIONS
            and last is not None
            and last.head_sha == head.head_sha
            and last.base_ref == head.base_ref
            and last.state in ("done", "failed")
        )

    def _finish(self, reason: str) -> PreviewResult:
        searchattrs.upsert(state=reason, keys=(SA_STATE,))
        self._details(f"finished: {reason}")
        return PreviewResult.model_validate({"reason": reason, "last": self.last})

    # --- one head --------------------------------------------------------------------------

    async def _preview(self, head: PullRequestHead) -> None:
        run = PreviewRun(
            head_sha=head.head_sha,
            base_ref=head.base_ref,
            action=head.action,
            started_at=workflow.now(),
        )
        self.current = run
        self.previews += 1
        self.previews_this_run += 1
        searchattrs.upsert(revision=head.head_sha, state="rendering", keys=(SA_REVISION, SA_STATE))
        self._details()
        await self._check_run(
            run,
            status="in_progress",
            title="Rendering preview",
            summary=f"Rendering the roots this pull request affects, against `{head.base_ref}`.",
        )
        work = asyncio.create_task(self._render_retrying(run, head))
        await workflow.wait_condition(lambda: work.done() or self._interrupted(run))
        if not work.done():
            await self._interrupt(run, work)
            return
        try:
            outcome = work.result()
        except ActivityError as err:
            await self._failed(run, quoted(err))
            return
        run.base_sha = outcome.revisions.base_sha
        run.rendered_sha = outcome.revisions.head_sha
        run.merge_sha = outcome.revisions.merge_sha
        run.counts = outcome.outcome.counts
        run.warnings = list(outcome.outcome.warnings)
        run.state = "reporting"
        self._details()
        await self._report(run, outcome.outcome)

    def _interrupted(self, run: PreviewRun) -> bool:
        """Closing, or another head to render (see `pr_head` for the same head again)."""
        return self.closing is not None or self.pending is not None

    async def _interrupt(self, run: PreviewRun, work: asyncio.Task[_Rendered]) -> None:
        work.cancel()
        # What cancelling an activity looks like from here; the activity stops at its next
        # heartbeat.
        with contextlib.suppress(asyncio.CancelledError, ActivityError):
            await work
        if self.closing is not None:
            run.state = "cancelled"
            title, conclusion = "Pull request closed", "cancelled"
            summary = "The pull request was closed before its preview finished."
        else:
            newer = self.pending.head_sha if self.pending else ""
            run.state, run.superseded_by = "superseded", newer or None
            title, conclusion = "Superseded", "neutral"
            summary = f"A newer head, `{checkrun.short(newer)}`, is being previewed instead."
        workflow.logger.info(
            "preview interrupted", extra={"head": run.head_sha, "state": run.state}
        )
        await self._check_run(
            run, status="completed", conclusion=conclusion, title=title, summary=summary
        )
        self._done(run)

    async def _render_retrying(self, run: PreviewRun, head: PullRequestHead) -> _Rendered:
        """`_render`, again after a pause while it fails on infrastructure. No check run
        update in here: this task can be cancelled, and a cancelled update could still land
        after the "Superseded" one."""
        pauses = list(INFRA_RETRY_PAUSES)
        while True:
            try:
                return await self._render(head)
            except ActivityError as err:
                if not pauses or not _infrastructure(err):
                    raise
                pause = pauses.pop(0)
                run.message = f"retrying in {pause}: {quoted(err)}"
                workflow.logger.warning(
                    "preview failed on infrastructure, retrying",
                    extra={"head": head.head_sha, "error": quoted(err), "pause": str(pause)},
                )
                self._details()
                await workflow.sleep(pause, summary="infrastructure retry")
                run.message = ""

    async def _render(self, head: PullRequestHead) -> _Rendered:
        """Fetch and render on one worker: the part a newer head cancels."""
        inp = self.inp
        task_queue = await calls.run(ACT_WORKER_TASK_QUEUE, None, options=calls.WORKER_QUEUE)
        revisions = await calls.run(
            ACT_PREVIEW_REVISIONS,
            PreviewRevisionsRequest(
                repo=inp.repo, pr=inp.pr, head_sha=head.head_sha, base_ref=head.base_ref
            ),
            options=calls.PREVIEW_FETCH,
            task_queue=task_queue,
        )
        outcome = await calls.run(
            ACT_PREVIEW_BUILD,
            PreviewBuildRequest(
                repo=inp.repo,
                pr=inp.pr,
                revisions=revisions,
                base_ref=head.base_ref,
                title=head.title,
            ),
            options=calls.PREVIEW_BUILD,
            task_queue=task_queue,
        )
        return _Rendered(revisions, outcome)

    async def _report(self, run: PreviewRun, outcome: PreviewOutcome) -> None:
        inp = self.inp
        comment_note = ""
        try:
            ref = await calls.run(
                ACT_PREVIEW_COMMENT,
                PreviewCommentRequest(
                    repo=inp.repo,
                    pr=inp.pr,
                    body_key=outcome.comment_key,
                    head_sha=run.head_sha,
                    prefix=outcome.prefix,
                    conclusion=outcome.conclusion,
                ),
                options=calls.GITHUB,
            )
            self.comment_id = ref.comment_id
        except ActivityError as err:
            workflow.logger.warning("writing the preview comment failed: %s", quoted(err))
            # At most 1,000 characters: the summary leaves room for this much (SUMMARY_RESERVE).
            comment_note = (
                f"\n\nThe pull request comment could not be written: {quoted(err)[:1000]}"
            )
        run.conclusion = outcome.conclusion
        await self._check_run(
            run,
            status="completed",
            conclusion=outcome.conclusion,
            title=outcome.title,
            summary=outcome.summary + comment_note,
            text=outcome.text,
            details_url=outcome.full_url or None,
        )
        run.state = "done" if outcome.conclusion == "success" else "failed"
        run.message = outcome.error
        self._done(run)

    async def _failed(self, run: PreviewRun, message: str) -> None:
        run.state, run.message, run.conclusion = "failed", message, "failure"
        await self._check_run(
            run,
            status="completed",
            conclusion="failure",
            title="Preview failed",
            summary=f"The preview of `{checkrun.short(run.head_sha)}` failed: {message}",
        )
        self._done(run)

    def _done(self, run: PreviewRun) -> None:
        run.finished_at = workflow.now()
        self.last = run
        self.current = None
        searchattrs.upsert(state=run.state, keys=(SA_STATE,))
        self._details()

    async def _check_run(
        self,
        run: PreviewRun,
        *,
        status: str,
        title: str,
        summary: str,
        conclusion: str | None = None,
        text: str = "",
        details_url: str | None = None,
    ) -> None:
        request = CheckRunRequest.model_validate(
            {
                "repo": self.inp.repo,
                "check_run_id": run.check_run_id,
                "name": PREVIEW_CHECK_NAME,
                "head_sha": run.head_sha,
                "external_id": preview_external_id(self.inp.pr, run.head_sha),
                "status": status,
                "conclusion": conclusion,
                "title": title,
                "summary": summary,
                "text": text,
                "details_url": details_url,
            }
        )
        try:
            ref = await calls.run(ACT_CHECK_RUN, request, options=calls.GITHUB)
        except ActivityError as err:
            # The comment still tells the story; a refused check run must not stop previews.
            workflow.logger.warning("writing the preview check run failed: %s", quoted(err))
            return
        run.check_run_id = ref.check_run_id

    def _details(self, note: str = "") -> None:
        lines = [f"**Preview of #{self.inp.pr}** in {self.inp.repo.full_name}"]
        if note:
            lines.append(note)
        if self.current:
            lines.append(
                f"Rendering: `{checkrun.short(self.current.head_sha)}` "
                f"({self.current.action or 'head'}, {self.current.state})"
            )
        if self.pending:
            lines.append(f"Next: `{checkrun.short(self.pending.head_sha)}`")
        if self.last:
            counts = self.last.counts
            lines.append(
                f"Last: `{checkrun.short(self.last.head_sha)}` {self.last.state}"
                + (
                    f" — {counts.roots} root(s), +{counts.added} −{counts.removed} "
                    f"~{counts.changed} resources"
                    if counts
                    else ""
                )
            )
        workflow.set_current_details("\n\n".join(lines))


class _Rendered:
    """What `_render` hands back (a plain holder: it never leaves the workflow)."""

    def __init__(self, revisions: PreviewRevisions, outcome: PreviewOutcome) -> None:
        self.revisions = revisions
        self.outcome = outcome


def _infrastructure(err: ActivityError) -> bool:
    """A timeout, or a retryable error whose retries ran out (a non-retryable one is a real
    answer: a head or base branch the repository does not have)."""
    cause = err.cause
    if isinstance(cause, ActivityTimeout):
        return True
    return isinstance(cause, ApplicationError) and not cause.non_retryable
