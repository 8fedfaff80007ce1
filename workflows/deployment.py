"""DeploymentWorkflow (registered as `RenderWorkflow`): one deployment of one root to one
revision, a child of DeployWorkflow.

Pin to one worker → checkout → render → diff against the last published render → check run
→ review (or auto-approve an empty, ahead, merge-triggered diff) → publish → persist latest.
The parent hears about every state change through `deployment_update` signals.
"""

from __future__ import annotations

import builtins
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
    TimeoutError,
    TimeoutType,
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
        ERR_CHECKOUT_GONE,
        ERR_FLEET,
        REVIEW_TIMEOUT_SECONDS,
        SA_STATE,
        SIGNAL_DEPLOYMENT_UPDATE,
        SIGNAL_REVIEW,
        TERMINAL_STATES,
        AuditRecord,
        CheckoutRequest,
        CheckoutResult,
        CheckRunAction,
        DeploymentInput,
        DeploymentRecord,
        DeploymentResult,
        DeploymentState,
        DeploymentUpdate,
        DiffRequest,
        DiffSummary,
        LatestDeployment,
        PersistLatestRequest,
        PublishRequest,
        PublishResult,
        RenderRequest,
        RenderSummary,
        ReviewSignal,
    )
    from shared.contracts.governance import (
        POLICY_REQUIREMENT,
        CarryOverRequest,
        JudgeRequest,
        ReportReview,
        ReviewPolicy,
        ReviewPolicyRequest,
        RootReview,
        Verdict,
    )
    from shared.contracts.verify import (
        VerifyPlanRequest,
        VerifyRequest,
        VerifyResult,
    )
    from workflows import calls, searchattrs


# A pinned worker that is lost (no heartbeat, nobody takes its task, its checkout gone) gets the
# checkout, render and diff redone on another worker, up to MAX_WORKER_LOSSES times.
MAX_WORKER_LOSSES = 3
# The checkout clean-up is started and not awaited beyond this.
CLEANUP_WAIT = timedelta(seconds=15)
# Refused clicks the check run lists (the newest; the audit trail keeps them all).
SHOWN_REFUSALS = 5


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentWorkflow:
    def __init__(self) -> None:
        self._refused: list[tuple[ReviewSignal, str]] = []  # clicks to record, and why
        self._state: DeploymentState = "queued"
        self.check_run_id: int | None = None
        self.digest: str | None = None
        self.diff: DiffSummary | None = None
        self.persisted: LatestDeployment | None = None
        self.task_queue = ""
        # The review policy, the clicks waiting for their verdict, the requirements met so
        # far and by whom, and the refusals to show.
        self.policy: ReviewPolicy | None = None
        self._clicks: list[ReviewSignal] = []
        self._satisfied: list[str] = []
        self._approvers: list[str] = []
        self._refusals: list[str] = []
        self._why: list[str] = []  # why the deployment asks (manual, diverged)
        self._counts = ""  # the diff's counts, for the check run title
        self._reported = False  # told the revision's summary (Approve all) it waits
        self._carry_note = ""  # why the pull request's approvals did not carry over

    @workflow.signal(name=SIGNAL_REVIEW)
    def review(self, signal: ReviewSignal) -> None:
        # The first decision wins; clicks before the gate opens or after it closed are ignored.
        if self._state != "awaiting_review":
            return
        reason = self._not_our_check_run(signal)
        if reason is not None:
            self._refused.append((signal, reason))
            return
        self._clicks.append(signal)  # counts only if judge_review says so

    def _not_our_check_run(self, signal: ReviewSignal) -> str | None:
        """Why a click was not made on this deployment's own check run (None: it was). The
        check run's external id names the deployment; its repository, name and head commit
        must name it too, or anyone could approve any deployment by its id."""
        inp = self.inp
        if signal.repo is None or signal.check_run_name is None or signal.head_sha is None:
            return "the click does not say which check run it was made on"
        if signal.repo != inp.repo.full_name:
            return f"it was made in {signal.repo}, and this deployment is in {inp.repo.full_name}"
        # Approve all on the revision's summary check run (governed merge deployments report
        # there) is a click on this revision too; the head commit check below still applies.
        summary = self.policy is not None and signal.check_run_name == checkrun.REVISION_CHECK_NAME
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

    @workflow.query(name="deployment_state")
    def deployment_state(self) -> str:
        return self._state

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        self.inp = inp
        self.check_run_id = inp.queued_check_run_id
        # The same attributes as the parent's, so `RollwrightRoot = "x"` lists a root's
        # deployments next to its queue in the Temporal UI.
        searchattrs.upsert(
            repo=inp.repo.full_name,
            root=inp.root,
            revision=inp.revision,
            trigger=inp.trigger,
            state="rendering",
        )
        self.task_queue = await calls.run(ACT_WORKER_TASK_QUEUE, None, options=calls.WORKER_QUEUE)
        await self._set_state("rendering", status="in_progress", title="Rendering")
        losses = 0
        while True:
            try:
                checkout = await calls.run(
                    ACT_CHECKOUT,
                    CheckoutRequest(repo=inp.repo, revision=inp.revision),
                    options=self._pinned(calls.CHECKOUT),
                    task_queue=self.task_queue,
                )
            except ActivityError as err:
                lost = await self._worker_lost(err, losses)
                if lost is None:
                    continue
                if lost:
                    losses += 1
                    await self._repin(losses, "checking out")
                    continue
                title = "Checkout failed" if _is_fleet_error(err) else "Deployment failed"
                return await self._finish("failed", "failure", title, _message(err))
            # No `finally:` here: a workflow evicted from a worker's cache is closed with
            # GeneratorExit, and a finally block would try to schedule an activity outside
            # the workflow's event loop. The checkout is removed before the review gate: a
            # review can take days, and the worker holding it may restart meanwhile (publish
            # works from the stored render on any worker).
            rendered: DeploymentResult | tuple[RenderSummary, DiffSummary]
            try:
                rendered = await self._render_and_diff(checkout)
            except ActivityError as err:
                lost = await self._worker_lost(err, losses)
                if lost is None:
                    continue  # from the checkout, on the same worker: it keeps its checkouts
                if lost:
                    # The render is deterministic: redo it all on a live worker. The lost
                    # worker's checkout is left to its own sweep (it may never answer).
                    losses += 1
                    await self._repin(losses, "rendering")
                    continue
                rendered = await self._finish(
                    "failed", "failure", _failed_title(err), _message(err)
                )
            break
        await self._cleanup(checkout)
        if isinstance(rendered, DeploymentResult):
            return rendered
        try:
            return await self._review_and_publish(*rendered)
        except ActivityError as err:
            return await self._finish("failed", "failure", "Deployment failed", _message(err))

    async def _render_and_diff(self, checkout: CheckoutResult) -> tuple[RenderSummary, DiffSummary]:
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
        self.digest = render.digest
        self.diff = diff = await calls.run(
            ACT_DIFF_RENDER,
            DiffRequest(
                repo=inp.repo,
                root=inp.root,
                new_prefix=render.blob_prefix,
                old_prefix=inp.latest.published_prefix if inp.latest else None,
                deployment_id=inp.deployment_id,
            ),
            options=self._pinned(calls.DIFF),
            task_queue=self.task_queue,
        )
        self.policy = await calls.run(
            ACT_REVIEW_POLICY,
            ReviewPolicyRequest(
                repo=inp.repo,
                root=inp.root,
                revision=inp.revision,
                checkout_path=checkout.path,
                deployment_id=inp.deployment_id,
                author=inp.requested_by,
                new_prefix=render.blob_prefix,
                old_prefix=inp.latest.published_prefix if inp.latest else None,
            ),
            options=self._pinned(calls.POLICY),
            task_queue=self.task_queue,
        )
        return render, diff

    async def _review_and_publish(
        self, render: RenderSummary, diff: DiffSummary
    ) -> DeploymentResult:
        inp = self.inp
        routine = (
            inp.trigger == "merge"
            and inp.relation in ("ahead", "first", "same")
            and not inp.require_confirmation
        )
        auto = routine and diff.empty
        approved_by = "rollwright (empty diff)"
        policy = self.policy
        if policy is not None and policy.review == "always":
            auto = False
        elif policy is not None and policy.review == "never" and routine:
            if policy.owners:
                # `never` waives the rule's approvers, not the owners of what the diff touches.
                self._satisfied.append(POLICY_REQUIREMENT)
            else:
                auto, approved_by = True, f"rollwright (review: never, {policy.rule or 'policy'})"
        carried = None
        if not auto and policy is not None and inp.trigger == "merge":
            carried = await self._carry_over(policy, render)
        if carried is not None:
            auto, approved_by = True, carried
        if not auto:
            review = await self._await_review(diff)
            if review is None:
                return await self._finish(
                    "timed_out",
                    "timed_out",
                    "Review timed out",
                    "Nobody approved or rejected this deployment within 7 days.",
                )
            who = f"@{review.by}" if review.by else "a reviewer"
            if review.decision == "approve" and self._approvers:
                who = ", ".join(f"@{a}" for a in self._approvers)
            if review.decision == "reject":
                return await self._finish("rejected", "cancelled", f"Rejected by {who}", "")
            approved_by = who
        await self._set_state(
            "publishing",
            status="in_progress",
            title=f"Publishing (approved by {approved_by})",
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
        """Verify the delivery the root's `verify` rule asks for, or end at "published"."""
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

    async def _await_review(self, diff: DiffSummary) -> ReviewSignal | None:
        inp = self.inp
        why = []
        if inp.trigger == "manual":
            why.append("This is a manual deployment: it always asks for confirmation.")
        if inp.relation == "diverged":
            latest = checkrun.short(inp.latest.revision if inp.latest else "")
            why.append(
                f"This revision has **diverged** from the latest deployed revision `{latest}`: "
                "confirm that it should replace it."
            )
        self._why = why
        self._counts = (
            "no changes"
            if diff.empty
            else f"{diff.added} added, {diff.removed} removed, {diff.changed} changed"
        )
        await self._show_review()
        assert self.policy is not None
        return await self._wait_for_governed_review(self.policy)

    async def _show_review(self) -> None:
        """The check run of a deployment waiting for review: why it asks, and for governed
        deployments whose approval is still needed and which clicks did not count."""
        message = list(self._why)
        if self._carry_note:
            message.append(self._carry_note)
        policy = self.policy
        if policy is not None:
            rule = f" (`{policy.rule}`)" if policy.rule else ""
            if self._approvers:
                message.append(
                    "Approved so far by " + ", ".join(f"@{a}" for a in self._approvers) + "."
                )
            needed = policy.outstanding(self._satisfied)
            message.append(
                f"**Approval still needed**{rule} from:\n"
                + "\n".join(f"- {policy.whose(r)}" for r in needed)
            )
            if policy.distinct_approver and policy.author:
                message.append(f"@{policy.author} started this deployment and cannot approve it.")
            if self._refusals:
                message.append(
                    "**Clicks that did not count** (nothing changed):\n"
                    + "\n".join(f"- {r}" for r in self._refusals[-SHOWN_REFUSALS:])
                )
        await self._set_state(
            "awaiting_review",
            status="completed",
            conclusion="action_required",
            title=f"Review: {self._counts}",
            message="\n\n".join(message),
            actions=[checkrun.APPROVE, checkrun.REJECT],
        )
        if policy is not None and self.inp.trigger == "merge":
            await self._report("awaiting_review")

    async def _carry_over(self, policy: ReviewPolicy, render: RenderSummary) -> str | None:
        """Approvals of the merged pull request that carry over (its GitHub reviews of its
        last head, when this diff is the one previewed for it): who approved, once they meet
        every requirement; otherwise None, and the check run will say why."""
        inp = self.inp
        try:
            carried = await calls.run(
                ACT_CARRY_OVER,
                CarryOverRequest(
                    repo=inp.repo,
                    root=inp.root,
                    revision=inp.revision,
                    deployment_id=inp.deployment_id,
                    policy=policy,
                    new_prefix=render.blob_prefix,
                    old_prefix=inp.latest.published_prefix if inp.latest else None,
                ),
                options=calls.JUDGE,
            )
        except ActivityError as err:
            self._carry_note = f"Pull request approvals were not checked: {_message(err)}."
            return None
        for login in carried.approvers:
            if login not in self._approvers:
                self._approvers.append(login)
            await self._audit(
                ReviewSignal(decision="approve", by=login, source="pr_review"), counted=True
            )
        self._satisfied += [r for r in carried.satisfies if r not in self._satisfied]
        if carried.pr is not None and carried.approvers and not policy.outstanding(self._satisfied):
            return f"approved in #{carried.pr} by " + ", ".join(f"@{a}" for a in carried.approvers)
        if carried.reason and carried.pr is not None:  # a direct push has nothing to carry
            self._carry_note = f"The pull request's approval does not carry over: {carried.reason}."
        return None

    async def _report(self, state: DeploymentState) -> None:
        """Tell the revision's summary check run (Approve all) how this root stands."""
        inp, policy = self.inp, self.policy
        self._reported = True
        needs = [policy.whose(r) for r in policy.outstanding(self._satisfied)] if policy else []
        review = RootReview(
            root=inp.root,
            deployment_id=inp.deployment_id,
            state=state,
            counts=self._counts,
            needs=needs if state == "awaiting_review" else [],
            approved_by=list(self._approvers),
        )
        try:
            await calls.run(
                ACT_REPORT_REVIEW,
                ReportReview(repo=inp.repo, revision=inp.revision, review=review),
                options=calls.RECORD,
            )
        except ActivityError as err:  # the root's own check run still works
            workflow.logger.warning("reporting to the revision summary failed: %s", err.cause)

    async def _wait_for_governed_review(self, policy: ReviewPolicy) -> ReviewSignal | None:
        """The reject that counts, or the approval that meets the last outstanding
        requirement, or None after the review timeout. Each click is judged by an activity
        (GitHub's permission and teams); one that does not count is recorded with why, shown
        on the check run, and changes nothing else."""
        deadline = workflow.now() + timedelta(seconds=REVIEW_TIMEOUT_SECONDS)
        while True:
            try:
                await workflow.wait_condition(
                    lambda: bool(self._clicks) or bool(self._refused),
                    timeout=deadline - workflow.now(),
                    timeout_summary="review",
                )
            except builtins.TimeoutError:
                return None
            changed = False
            while self._refused:
                signal, reason = self._refused.pop(0)
                await self._audit(signal, counted=False, reason=reason)
                self._refusals.append(_refusal(signal, reason))
                changed = True
            while self._clicks:
                click = self._clicks.pop(0)
                verdict = await self._judge(policy, click)
                await self._audit(click, counted=verdict.counts, reason=verdict.reason)
                changed = True
                if not verdict.counts:
                    self._refusals.append(_refusal(click, verdict.reason))
                    continue
                if click.decision == "reject":
                    return click
                if click.by and click.by not in self._approvers:
                    self._approvers.append(click.by)
                self._satisfied += [r for r in verdict.satisfies if r not in self._satisfied]
                if not policy.outstanding(self._satisfied):
                    return click
            if changed:
                await self._show_review()

    async def _judge(self, policy: ReviewPolicy, click: ReviewSignal) -> Verdict:
        inp = self.inp
        try:
            return await calls.run(
                ACT_JUDGE_REVIEW,
                JudgeRequest(
                    repo=inp.repo,
                    root=inp.root,
                    deployment_id=inp.deployment_id,
                    policy=policy,
                    decision=click.decision,
                    actor=click.by,
                    satisfied=list(self._satisfied),
                ),
                options=calls.JUDGE,
            )
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
        record = AuditRecord(
            repo=inp.repo.full_name,
            root=inp.root,
            deployment_id=inp.deployment_id,
            action=signal.decision,
            actor=signal.by,
            source=signal.source,
            counted=counted,
            reason=reason,
            at=workflow.now(),
        )
        try:
            await calls.run(ACT_RECORD_AUDIT, record, options=calls.RECORD)
        except ActivityError as err:
            workflow.logger.warning("recording the review click failed: %s", err.cause)

    async def _persist(
        self, state: DeploymentState, approved_by: str | None, published_prefix: str | None
    ) -> None:
        inp = self.inp
        previous = inp.latest
        latest = LatestDeployment(
            deployment_id=inp.deployment_id,
            revision=inp.revision,
            trigger=inp.trigger,
            state=state,
            render_digest=self.digest,
            approved_by=approved_by,
            started_at=workflow.info().workflow_start_time,
            finished_at=workflow.now(),
            check_run_id=self.check_run_id,
            published_prefix=published_prefix or (previous.published_prefix if previous else None),
            published_revision=(
                inp.revision
                if published_prefix
                else (previous.published_revision if previous else None)
            ),
            locks_queue=inp.locks_queue,
        )
        await calls.run(
            ACT_PERSIST_LATEST,
            PersistLatestRequest(repo=inp.repo, root=inp.root, latest=latest),
            options=calls.STORE,
        )
        self.persisted = latest  # only once it is really the root's latest.json

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
        inp = self.inp
        self._state = state
        searchattrs.upsert(state=state, keys=(SA_STATE,))
        workflow.set_current_details(
            f"**{state}** — `{inp.root}` at `{checkrun.short(inp.revision)}` ({inp.trigger})"
            + (f"\n\n{message}" if message else "")
        )
        request = checkrun.request(
            repo=inp.repo,
            root=inp.root,
            revision=inp.revision,
            deployment_id=inp.deployment_id,
            check_run_id=self.check_run_id,
            status=status,
            conclusion=conclusion,
            title=title,
            trigger=inp.trigger,
            requested_by=inp.requested_by,
            approved_by=approved_by,
            queue_markdown=inp.queue_summary,
            message=message,
            text=self.diff.text if self.diff else "",
            actions=actions,
        )
        try:
            ref = await calls.run(ACT_CHECK_RUN, request, options=calls.GITHUB)
            self.check_run_id = ref.check_run_id
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
                SIGNAL_DEPLOYMENT_UPDATE,
                DeploymentUpdate(
                    deployment_id=self.inp.deployment_id,
                    state=state,
                    check_run_id=self.check_run_id,
                    message=message,
                    render_digest=self.digest,
                    approved_by=approved_by,
                    # A parent that continued as new meanwhile learns the outcome this way.
                    latest=self.persisted if state in TERMINAL_STATES else None,
                ),
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
        inp = self.inp
        if self._reported:
            await self._report(state)
        try:
            await calls.run(
                ACT_RECORD_DEPLOYMENT,
                self._record_of(state, message, approved_by),
                options=calls.STORE,
            )
        except ActivityError as err:  # history is the query side; the outcome stands
            workflow.logger.warning("recording the deployment failed: %s", err.cause)
        return DeploymentResult(
            deployment_id=inp.deployment_id,
            state=state,
            message=message,
            render_digest=self.digest,
            approved_by=approved_by,
            check_run_id=self.check_run_id,
            published=published,
            latest=self.persisted,
        )

    def _record_of(
        self, state: DeploymentState, message: str, approved_by: str | None
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
            at=workflow.now(),
        )

    async def _record(self, state: DeploymentState, message: str, approved_by: str | None) -> None:
        """A state on its way: a few quick attempts, then only a warning (the deployment
        does not wait for the query side)."""
        try:
            await calls.run(
                ACT_RECORD_DEPLOYMENT,
                self._record_of(state, message, approved_by),
                options=calls.RECORD,
            )
        except ActivityError as err:
            workflow.logger.warning("recording state %s failed: %s", state, err.cause)

    def _pinned(self, options: calls.Options) -> calls.Options:
        """Options of the activities pinned to the deployment's worker (a seam for tests)."""
        return options

    async def _worker_lost(self, err: ActivityError, losses: int) -> bool | None:
        """Whether a failed pinned activity means its worker went away (it stopped
        heartbeating, nobody took the task, or the checkout it left is gone), and the work may
        be redone on another worker: at most MAX_WORKER_LOSSES times, then it fails visibly.
        None: nobody took the task because the worker is busy; it is asked again there."""
        cause = err.cause
        lost = isinstance(cause, TimeoutError) or (
            isinstance(cause, ApplicationError) and cause.type == ERR_CHECKOUT_GONE
        )
        if not lost:
            return False
        # A task nobody took within the start limit: a busy worker (a fleet-wide change queues
        # hundreds of renders on each) is waited for, not replaced.
        if isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START:
            try:
                alive = await calls.run(
                    ACT_WORKER_ALIVE, self.task_queue, options=calls.WORKER_ALIVE
                )
            except ActivityError:
                alive = False
            if alive:
                workflow.logger.info(
                    "worker busy: asking it again", extra={"queue": self.task_queue}
                )
                return None
        return losses < MAX_WORKER_LOSSES

    async def _repin(self, losses: int, doing: str) -> None:
        """Ask the shared queue for a live worker and tell the check run why it starts over."""
        lost = self.task_queue
        self.task_queue = await calls.run(ACT_WORKER_TASK_QUEUE, None, options=calls.WORKER_QUEUE)
        workflow.logger.warning(
            "worker lost: rendering again",
            extra={"lost": lost, "now": self.task_queue, "losses": losses},
        )
        await self._set_state(
            "rendering",
            status="in_progress",
            title="Rendering (a worker was lost)",
            message=(
                f"The worker {doing} this deployment (`{lost}`) was lost; rendering again on "
                f"`{self.task_queue}` (attempt {losses + 1} of {MAX_WORKER_LOSSES + 1})."
            ),
        )

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


def _refusal(signal: ReviewSignal, reason: str) -> str:
    who = f"@{signal.by}" if signal.by else "someone"
    return f"{who} clicked {signal.decision.capitalize()}: {reason}"


def _message(err: ActivityError) -> str:
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    if isinstance(cause, TimeoutError):
        kind = cause.type.name.lower() if cause.type else "unknown"
        return f"the worker did not finish in time ({kind} timeout)"
    return str(cause or err)


def _failed_title(err: ActivityError) -> str:
    return "Render failed" if _is_fleet_error(err) else "Deployment failed"


def _is_fleet_error(err: ActivityError) -> bool:
    return isinstance(err.cause, ApplicationError) and err.cause.type == ERR_FLEET
