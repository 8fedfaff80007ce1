"""DeploymentWorkflow (registered as `RenderWorkflow`): one deployment of one root to one
revision, a child of DeployWorkflow.

Pin to one worker → checkout → render → diff against the last published render → review
policy → check run → review (or approval without a click) → publish → verify delivery →
persist latest. The parent hears about every state change through `deployment_update`
signals. The rules are plain modules beside this one (the review gate, worker pinning, the
records); this class runs the activities they call for.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
from datetime import timedelta
from typing import ClassVar

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
    TimeoutError,
)

with workflow.unsafe.imports_passed_through():
    from shared.contracts import checkrun
    from shared.contracts.activityrefs import (
        ACT_CARRY_OVER,
        ACT_CHECK_RUN,
        ACT_CHECKOUT,
        ACT_CLEANUP_CHECKOUT,
        ACT_DIFF_RENDER,
        ACT_JUDGE_REVIEW,
        ACT_PERSIST_LATEST,
        ACT_PUBLISH,
        ACT_RECORD_AUDIT,
        ACT_RECORD_DEPLOYMENT,
        ACT_RENDER_ROOT,
        ACT_REPORT_REVIEW,
        ACT_REVIEW_POLICY,
        ACT_VERIFY_DELIVERY,
        ACT_VERIFY_PLAN,
        ACT_WORKER_ALIVE,
        ACT_WORKER_TASK_QUEUE,
    )
    from shared.contracts.deploy import (
        DEPLOYMENT_WORKFLOW,
        ERR_FLEET,
        REVIEW_TIMEOUT_SECONDS,
        SA_STATE,
        SIGNAL_DEPLOYMENT_UPDATE,
        SIGNAL_REVIEW,
        TERMINAL_STATES,
        CheckoutRequest,
        CheckoutResult,
        CheckRunAction,
        DeploymentInput,
        DeploymentResult,
        DeploymentState,
        DiffRequest,
        PersistLatestRequest,
        PublishRequest,
        PublishResult,
        RenderRequest,
        RenderSummary,
        ReviewSignal,
        admission_task_queue,
    )
    from shared.contracts.governance import (
        CarryOverRequest,
        ReportReview,
        ReviewPolicyRequest,
        Verdict,
    )
    from shared.contracts.verify import (
        VerifyPlanRequest,
        VerifyRequest,
        VerifyResult,
    )
    from workflows import calls, searchattrs
    from workflows.deployment import pinning
    from workflows.deployment.records import Progress, audit_record
    from workflows.deployment.review import ReviewGate

# The checkout clean-up is started and not awaited beyond this.
CLEANUP_WAIT = timedelta(seconds=15)


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentWorkflow:
    # How long a pinned task may wait for its worker before the worker counts as lost (None:
    # the calls table's 30 s). Tests on the dev server declare a subclass with 2 s.
    pinned_start: ClassVar[timedelta | None] = None

    def __init__(self) -> None:
        self._state: DeploymentState = "queued"
        self.task_queue = ""  # the pinned worker's own queue
        self.losses = 0  # workers lost so far
        self.gate: ReviewGate | None = None  # once the review policy is read

    @workflow.signal(name=SIGNAL_REVIEW)
    def review(self, signal: ReviewSignal) -> None:
        # Clicks before the gate opens or after it closed are ignored.
        if self._state != "awaiting_review" or self.gate is None:
            return
        self.gate.take(signal)

    @workflow.query(name="deployment_state")
    def deployment_state(self) -> str:
        return self._state

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        self.inp = inp
        self.progress = Progress(inp, check_run_id=inp.queued_check_run_id)
        # The same attributes as the parent's, so `RollwrightRoot = "x"` lists a root's
        # deployments next to its queue in the Temporal UI.
        searchattrs.upsert(
            repo=inp.repo.full_name,
            root=inp.root,
            revision=inp.revision,
            # `RollwrightTrigger = "hotfix"` lists the hotfixes
            trigger="hotfix" if inp.hotfix is not None else inp.trigger,
            state="rendering",
        )
        self.task_queue = await self._admitted_worker()
        await self._set_state("rendering", status="in_progress", title="Rendering")
        while True:
            try:
                checkout = await calls.run(
                    ACT_CHECKOUT,
                    CheckoutRequest(repo=inp.repo, revision=inp.revision),
                    options=self._pinned(calls.CHECKOUT),
                    task_queue=self.task_queue,
                )
            except ActivityError as err:
                if await self._tries_again(err, "checking out"):
                    continue
                title = "Checkout failed" if _is_fleet_error(err) else "Deployment failed"
                return await self._finish("failed", "failure", title, _message(err))
            # No `finally:` here: a workflow evicted from a worker's cache is closed with
            # GeneratorExit, and a finally block would try to schedule an activity outside
            # the workflow's event loop. The checkout is removed before the review gate: a
            # review can take days, and the worker holding it may restart meanwhile (publish
            # works from the stored render on any worker).
            rendered: DeploymentResult | tuple[RenderSummary, ReviewGate]
            try:
                rendered = await self._render_and_diff(checkout)
            except ActivityError as err:
                # Again from the checkout: on the same worker (it keeps its checkouts), or, the
                # render being deterministic, all of it on a live worker (a lost worker's
                # checkout is left to its own sweep: it may never answer).
                if await self._tries_again(err, "rendering"):
                    continue
                title = "Render failed" if _is_fleet_error(err) else "Deployment failed"
                rendered = await self._finish("failed", "failure", title, _message(err))
            break
        await self._cleanup(checkout)
        if isinstance(rendered, DeploymentResult):
            return rendered
        try:
            return await self._review_and_publish(*rendered)
        except ActivityError as err:
            return await self._finish("failed", "failure", "Deployment failed", _message(err))

    # --- the pinned worker ------------------------------------------------------------------

    def _pinned(self, options: calls.Options) -> calls.Options:
        """Options of the activities pinned to the deployment's worker."""
        if self.pinned_start is None:
            return options
        return dataclasses.replace(options, schedule_to_start=self.pinned_start)

    async def _admitted_worker(self) -> str:
        """The own queue of a worker with room for this deployment: asked on the admission
        queue, where it may wait through a fleet-wide change (calls.ADMISSION). The same
        activity, command and result as before admission: only where it runs changed."""
        return await calls.run(
            ACT_WORKER_TASK_QUEUE,
            None,
            options=calls.ADMISSION,
            task_queue=admission_task_queue(workflow.info().task_queue),
        )

    async def _tries_again(self, err: ActivityError, doing: str) -> bool:
        """Whether pinned work that failed with `err` is done again: asked again of its worker
        when that is only busy, or redone on a live worker when it was lost, up to
        MAX_WORKER_LOSSES times; False: the deployment fails visibly."""
        failure = pinning.classify(timeout=_timeout_kind(err), error_type=_error_type(err))
        busy = failure == "unstarted" and await self._worker_alive()
        step = pinning.next_step(failure, losses=self.losses, busy=busy)
        if step == "again":
            workflow.logger.info("worker busy: asking it again", extra={"queue": self.task_queue})
        elif step == "repin":
            self.losses += 1
            await self._repin(doing)
        # The SDK's metrics (ROLLWRIGHT_TEMPORAL_METRICS_ADDRESS); never emitted on replay.
        workflow.metric_meter().create_counter(
            pinning.FAILURES_METRIC,
            "Pinned work that failed on its worker, by what the deployment did next: "
            "again (the worker was busy), repin (it was lost: redone on another), fail.",
        ).add(1, {"step": step})
        return step != "fail"

    async def _worker_alive(self) -> bool:
        """Whether the pinned worker still polls its queue; unanswered, it counts as lost."""
        try:
            return await calls.run(ACT_WORKER_ALIVE, self.task_queue, options=calls.WORKER_ALIVE)
        except ActivityError:
            return False

    async def _repin(self, doing: str) -> None:
        """Ask the shared queue for a live worker and tell the check run why it starts over."""
        lost = self.task_queue
        self.task_queue = await self._admitted_worker()
        workflow.logger.warning(
            "worker lost: rendering again",
            extra={"lost": lost, "now": self.task_queue, "losses": self.losses},
        )
        await self._set_state(
            "rendering",
            status="in_progress",
            title="Rendering (a worker was lost)",
            message=pinning.repin_message(
                doing=doing, lost=lost, now=self.task_queue, losses=self.losses
            ),
        )

    async def _render_and_diff(self, checkout: CheckoutResult) -> tuple[RenderSummary, ReviewGate]:
        inp = self.inp
        render = await calls.run(
            ACT_RENDER_ROOT,
            RenderRequest(
                repo=inp.repo,
                root=inp.root,
                revision=inp.revision,
                checkout_path=checkout.path,
                deployment_id=inp.deployment_id,
            ),
            options=self._pinned(calls.RENDER),
            task_queue=self.task_queue,
        )
        self.progress.digest = render.digest
        old_prefix = inp.latest.published_prefix if inp.latest else None
        self.progress.diff = diff = await calls.run(
            ACT_DIFF_RENDER,
            DiffRequest(
                repo=inp.repo,
                root=inp.root,
                new_prefix=render.blob_prefix,
                old_prefix=old_prefix,
                deployment_id=inp.deployment_id,
            ),
            options=self._pinned(calls.DIFF),
            task_queue=self.task_queue,
        )
        policy = await calls.run(
            ACT_REVIEW_POLICY,
            ReviewPolicyRequest(
                repo=inp.repo,
                root=inp.root,
                revision=inp.revision,
                checkout_path=checkout.path,
                deployment_id=inp.deployment_id,
                author=inp.requested_by,
                new_prefix=render.blob_prefix,
                old_prefix=old_prefix,
            ),
            options=self._pinned(calls.POLICY),
            task_queue=self.task_queue,
        )
        self.gate = ReviewGate(inp, policy, diff)
        return render, self.gate

    async def _cleanup(self, checkout: CheckoutResult) -> None:
        # A live worker removes it in a moment; one that died after the diff never answers,
        # and its checkout must not hold the deployment (or the root's queue behind it).
        removal = calls.start(
            ACT_CLEANUP_CHECKOUT,
            checkout,
            options=self._pinned(calls.CLEANUP),
            task_queue=self.task_queue,
        )
        with contextlib.suppress(builtins.TimeoutError):
            await workflow.wait_condition(removal.done, timeout=CLEANUP_WAIT)

    # --- review, publish, verify ------------------------------------------------------------

    async def _review_and_publish(
        self, render: RenderSummary, gate: ReviewGate
    ) -> DeploymentResult:
        inp = self.inp
        approved_by = gate.auto_approval()
        if approved_by is None and inp.trigger == "merge":
            approved_by = await self._carry_over(gate, render)
        if approved_by is None:
            review = await self._await_review(gate)
            if review is None:
                return await self._finish(
                    "timed_out",
                    "timed_out",
                    "Review timed out",
                    "Nobody approved or rejected this deployment within 7 days.",
                )
            if review.decision == "reject":
                return await self._finish(
                    "rejected", "cancelled", f"Rejected by {gate.who(review)}", ""
                )
            approved_by = gate.who(review)
        await self._set_state(
            "publishing",
            status="in_progress",
            title=f"Publishing (approved by {approved_by})",
            # The policy sets' warnings stay visible when nobody had to click.
            message="\n\n".join(gate.policy_lines()),
            approved_by=approved_by,
        )
        try:
            # Not pinned: the publisher reads the stored render, so any worker can publish.
            published = await calls.run(
                ACT_PUBLISH,
                PublishRequest(
                    repo=inp.repo,
                    root=inp.root,
                    revision=inp.revision,
                    deployment_id=inp.deployment_id,
                    trigger=inp.trigger,
                    approved_by=approved_by,
                    blob_prefix=render.blob_prefix,
                    render_digest=render.digest,
                ),
                options=calls.PUBLISH,
            )
        except ActivityError as err:
            # A failed apply still becomes the root's latest deployment attempt.
            await self._persist("failed", approved_by, published_prefix=None)
            return await self._finish(
                "failed", "failure", "Publish failed", _message(err), approved_by
            )
        return await self._verify(render, published, approved_by)

    async def _verify(
        self, render: RenderSummary, published: PublishResult, approved_by: str
    ) -> DeploymentResult:
        """Verify the delivery the root's `verify` rule asks for (Argo CD Synced at the
        published commit and Healthy, an HTTP check), or end at "published"."""
        inp = self.inp
        where = f"Published to {published.target}."
        try:
            planned = await calls.run(
                ACT_VERIFY_PLAN,
                VerifyPlanRequest(
                    repo=inp.repo,
                    root=inp.root,
                    revision=inp.revision,
                    deployment_id=inp.deployment_id,
                    commit=published.commit,
                ),
                options=calls.VERIFY_PLAN,
            )
        except ActivityError as err:
            # Published all the same: the cluster gets the render, unverified.
            await self._persist("unhealthy", approved_by, published_prefix=render.blob_prefix)
            return await self._finish(
                "unhealthy",
                "failure",
                "Unhealthy: verification could not start",
                f"Reading the verify rule failed: {_message(err)}\n\n{where}",
                approved_by,
                published=True,
            )
        plan = planned.plan
        if plan is None:
            await self._persist("published", approved_by, published_prefix=render.blob_prefix)
            return await self._finish(
                "published", "success", "Published", where, approved_by, published=True
            )
        # Persisted before the wait: a promotion reading latest.json sees "verifying", not a
        # finished deployment, and the diff base is already the published render.
        await self._persist("verifying", approved_by, published_prefix=render.blob_prefix)
        await self._set_state(
            "verifying",
            status="in_progress",
            title="Verifying delivery",
            message=f"{where}\n\n{plan.describe()}",
            approved_by=approved_by,
        )
        try:
            result = await calls.run(
                ACT_VERIFY_DELIVERY,
                VerifyRequest(repo=inp.repo, deployment_id=inp.deployment_id, plan=plan),
                options=calls.verify(plan.timeout_seconds),
            )
        except ActivityError as err:
            result = VerifyResult(
                verdict="unhealthy", reason=f"Verification failed: {_message(err)}"
            )
        await self._persist(result.verdict, approved_by, published_prefix=render.blob_prefix)
        verified = result.verdict == "verified"
        return await self._finish(
            result.verdict,
            "success" if verified else "failure",
            "Verified" if verified else "Unhealthy",
            # The reason first: promotions quote the first line when they halt.
            f"{result.markdown()}\n\n{where}",
            approved_by,
            published=True,
        )

    # --- the review gate's activities -------------------------------------------------------

    async def _carry_over(self, gate: ReviewGate, render: RenderSummary) -> str | None:
        """Who approved in the merged pull request, once that meets every requirement."""
        inp = self.inp
        try:
            carried = await calls.run(
                ACT_CARRY_OVER,
                CarryOverRequest(
                    repo=inp.repo,
                    root=inp.root,
                    revision=inp.revision,
                    deployment_id=inp.deployment_id,
                    policy=gate.policy,
                    new_prefix=render.blob_prefix,
                    old_prefix=inp.latest.published_prefix if inp.latest else None,
                ),
                options=calls.JUDGE,
            )
        except ActivityError as err:
            gate.carry_over_unchecked(_message(err))
            return None
        for login in carried.approvers:
            await self._audit(
                ReviewSignal(decision="approve", by=login, source="pr_review"), counted=True
            )
        return gate.carried_over(carried)

    async def _await_review(self, gate: ReviewGate) -> ReviewSignal | None:
        """The reject that counts, or the approval that meets the last outstanding
        requirement, or None after the review timeout. Each click is judged by an activity
        (GitHub's permission and teams); one that does not count is recorded with why, shown
        on the check run, and changes nothing else."""
        await self._show_review(gate)
        deadline = workflow.now() + timedelta(seconds=REVIEW_TIMEOUT_SECONDS)
        while True:
            try:
                await workflow.wait_condition(
                    gate.has_news, timeout=deadline - workflow.now(), timeout_summary="review"
                )
            except builtins.TimeoutError:
                return None
            while gate.elsewhere:
                signal, reason = gate.elsewhere.pop(0)
                await self._audit(signal, counted=False, reason=reason)
                gate.refuse(signal, reason)
            while gate.clicks:
                click = gate.clicks.pop(0)
                verdict = await self._judge(gate, click)
                await self._audit(click, counted=verdict.counts, reason=verdict.reason)
                if gate.decides(click, verdict):
                    return click
            await self._show_review(gate)

    async def _show_review(self, gate: ReviewGate) -> None:
        await self._set_state(
            "awaiting_review",
            status="completed",
            conclusion="action_required",
            title=f"Review: {gate.counts}",
            message="\n\n".join(gate.lines()),
            actions=[checkrun.APPROVE, checkrun.REJECT],
        )
        if self.inp.trigger == "merge":
            await self._report(gate, "awaiting_review")

    async def _report(self, gate: ReviewGate, state: DeploymentState) -> None:
        """Tell the revision's summary check run (Approve all) how this root stands."""
        gate.reported = True
        report = ReportReview(
            repo=self.inp.repo, revision=self.inp.revision, review=gate.root_review(state)
        )
        try:
            await calls.run(ACT_REPORT_REVIEW, report, options=calls.RECORD)
        except ActivityError as err:  # the root's own check run still works
            workflow.logger.warning("reporting to the revision summary failed: %s", err.cause)

    async def _judge(self, gate: ReviewGate, click: ReviewSignal) -> Verdict:
        try:
            return await calls.run(ACT_JUDGE_REVIEW, gate.judge_request(click), options=calls.JUDGE)
        except ActivityError as err:
            # Without GitHub's word nobody's click counts; the clicker may click again.
            return Verdict(
                counts=False,
                reason=f"rollwright could not check @{click.by}'s access ({_message(err)}); "
                "click again",
            )

    async def _audit(self, signal: ReviewSignal, *, counted: bool, reason: str = "") -> None:
        inp = self.inp
        if not counted:
            workflow.logger.warning(
                "review click refused",
                extra={"deployment": inp.deployment_id, "by": signal.by, "reason": reason},
            )
        record = audit_record(inp, signal, counted=counted, reason=reason, at=workflow.now())
        try:
            await calls.run(ACT_RECORD_AUDIT, record, options=calls.RECORD)
        except ActivityError as err:
            workflow.logger.warning("recording the review click failed: %s", err.cause)

    # --- state, records, the parent -------------------------------------------------------

    async def _persist(
        self, state: DeploymentState, approved_by: str | None, published_prefix: str | None
    ) -> None:
        inp = self.inp
        latest = self.progress.latest(
            state,
            approved_by,
            published_prefix,
            started_at=workflow.info().workflow_start_time,
            finished_at=workflow.now(),
        )
        await calls.run(
            ACT_PERSIST_LATEST,
            PersistLatestRequest(repo=inp.repo, root=inp.root, latest=latest),
            options=calls.STORE,
        )
        self.progress.persisted = latest  # only once it is really the root's latest.json

    async def _set_state(
        self,
        state: DeploymentState,
        *,
        status: str,
        title: str,
        conclusion: str | None = None,
        message: str = "",
        actions: list[CheckRunAction] | None = None,
        approved_by: str | None = None,
    ) -> None:
        inp, progress = self.inp, self.progress
        self._state = state
        searchattrs.upsert(state=state, keys=(SA_STATE,))
        workflow.set_current_details(
            f"**{state}** — `{inp.root}` at `{checkrun.short(inp.revision)}` "
            f"({inp.hotfix.label if inp.hotfix else inp.trigger})"
            + (f"\n\n{message}" if message else "")
        )
        request = checkrun.deployment_request(
            inp,
            check_run_id=progress.check_run_id,
            status=status,
            conclusion=conclusion,
            title=title,
            approved_by=approved_by,
            message=message,
            text=progress.diff.text if progress.diff else "",
            actions=actions,
        )
        try:
            ref = await calls.run(ACT_CHECK_RUN, request, options=calls.GITHUB)
            progress.check_run_id = ref.check_run_id
        except ActivityError as err:
            if state == "awaiting_review":
                raise  # without its check run nobody can approve: the deployment fails
            # Otherwise the check run only reports; the deployment goes on.
            workflow.logger.warning("check run update (%s) failed: %s", state, err.cause)
        await self._tell_parent(state, message, approved_by)
        # The job page's timeline: every state lands in SQL as it happens (`_finish` records
        # the terminal one).
        if state not in TERMINAL_STATES:
            await self._record(state, message, approved_by)

    async def _tell_parent(
        self, state: DeploymentState, message: str, approved_by: str | None
    ) -> None:
        parent = workflow.info().parent
        if parent is None:
            return
        handle = workflow.get_external_workflow_handle(parent.workflow_id)
        try:
            await handle.signal(
                SIGNAL_DEPLOYMENT_UPDATE, self.progress.update(state, message, approved_by)
            )
        except FailureError:
            # The parent may be between runs; it learns the outcome from our result anyway.
            workflow.logger.info("parent did not take the update", extra={"state": state})

    async def _finish(
        self,
        state: DeploymentState,
        conclusion: str,
        title: str,
        message: str,
        approved_by: str | None = None,
        *,
        published: bool = False,
    ) -> DeploymentResult:
        await self._set_state(
            state,
            status="completed",
            conclusion=conclusion,
            title=title,
            message=message,
            approved_by=approved_by,
        )
        if self.gate is not None and self.gate.reported:
            await self._report(self.gate, state)
        try:
            await calls.run(
                ACT_RECORD_DEPLOYMENT,
                self.progress.record(state, message, approved_by, at=workflow.now()),
                options=calls.STORE,
            )
        except ActivityError as err:  # history is the query side; the outcome stands
            workflow.logger.warning("recording the deployment failed: %s", err.cause)
        return self.progress.result(state, message, approved_by, published=published)

    async def _record(self, state: DeploymentState, message: str, approved_by: str | None) -> None:
        """A state on its way: a few quick attempts, then only a warning (the deployment
        does not wait for the query side)."""
        try:
            await calls.run(
                ACT_RECORD_DEPLOYMENT,
                self.progress.record(state, message, approved_by, at=workflow.now()),
                options=calls.RECORD,
            )
        except ActivityError as err:
            workflow.logger.warning("recording state %s failed: %s", state, err.cause)


def _timeout_kind(err: ActivityError) -> str | None:
    """The kind of timeout `err` is (`schedule_to_start`, `heartbeat`, …, `unknown`); None
    when it is no timeout."""
    cause = err.cause
    if not isinstance(cause, TimeoutError):
        return None
    return cause.type.name.lower() if cause.type else "unknown"


def _error_type(err: ActivityError) -> str | None:
    cause = err.cause
    return cause.type if isinstance(cause, ApplicationError) else None


def _is_fleet_error(err: ActivityError) -> bool:
    return _error_type(err) == ERR_FLEET


def _message(err: ActivityError) -> str:
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    kind = _timeout_kind(err)
    if kind is not None:
        return f"the worker did not finish in time ({kind} timeout)"
    return str(cause or err)
