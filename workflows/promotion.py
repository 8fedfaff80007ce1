"""PromotionWorkflow: one version patch walking the rollout sequence (`promote:<repo>:<patch>`).

Every pass of the loop reads the patch at the newest default-branch revision it knows (an
activity: sequence, active nodes, roots under the current node, next node's gate, window and
dependencies, conflicts) and decides one step:

    deploying (every root under the current node runs a revision containing the patch:
    deployment_finished signals, latest.json on start and on a new node)
      → soaking (the current node's soak, a durable timer)
      → the next node's gate: promotion window open? dependencies met? automated → commit,
        manual → a check run with Promote / Halt, waiting as long as it takes
      → the commit moves the patch on; the loop watches the next node's deployments
    … until the patch is active on every node: a graduation pull request, and the end.

A failed, rejected or timed-out deployment of a revision containing the patch under the current
node (or a Halt click) halts the rollout until someone clicks Resume. Every click (Promote,
Halt, Resume, Roll back) is judged in its signal handler, by the review policy of the node it
acts on (`judge_action`, docs/governance.md), and recorded; one that does not count changes
nothing and is listed on the check run. Conflicting patches or a
broken fleet repo block it until a new revision fixes them. The rollout table (node, state,
since) is the workflow's current details and the `rollout` query; the check run
`rollwright/promote: <patch>` on the default branch's tip carries the same table and buttons.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from shared.contracts.activityrefs import (
        ACT_CHECK_RUN,
        ACT_PROMOTION_COMMIT,
        ACT_PROMOTION_DEPLOYMENTS,
        ACT_PROMOTION_EVALUATE,
        ACT_PROMOTION_GRADUATE,
        ACT_PROMOTION_ROLLBACK,
    )
    from shared.contracts.deploy import (
        SA_REPO,
        SA_REVISION,
        SA_STATE,
        CheckRunAction,
    )
    from shared.contracts.governance import GovernedAction, Verdict
    from shared.contracts.promotion import (
        PROMOTION_WORKFLOW,
        QUERY_ROLLOUT,
        SIGNAL_DEPLOYMENT_FINISHED,
        SIGNAL_HALT,
        SIGNAL_PROMOTE,
        SIGNAL_PROMOTION_REVISION,
        SIGNAL_RESUME,
        SIGNAL_ROLLBACK,
        CommitRequest,
        DeploymentFinished,
        DeploymentsRequest,
        EvaluateRequest,
        Evaluation,
        GraduateRequest,
        HaltSignal,
        HaltState,
        NodeState,
        Phase,
        PromoteSignal,
        PromotionInput,
        PromotionRevision,
        ResumeSignal,
        RollbackRequest,
        RollbackSignal,
        RolloutRow,
        RolloutView,
        RootDeployment,
    )
    from workflows import calls, clicks, refusals, rollout, rolloutclicks, searchattrs
    from workflows.refusals import refusal, refusals_block
    from workflows.rollout import (
        HALT,
        PROMOTE,
        RECHECK,
        RESUME,
        ROLLBACK,
        CheckRunWant,
        rollout_table,
        when,
    )

MAX_HISTORY_EVENTS = 5_000
# Clicks on the rollout's check run are judged by the review policy (docs/workflow-versions.md).
JUDGED_CLICKS = "PromotionWorkflow-judged-clicks"
Click = PromoteSignal | HaltSignal | ResumeSignal | RollbackSignal


@workflow.defn(name=PROMOTION_WORKFLOW)
class PromotionWorkflow:
    @workflow.init
    def __init__(self, inp: PromotionInput) -> None:
        self.revision = ""
        self.pending_revision: str | None = None
        self.reported: dict[str, DeploymentFinished] = {}
        self.halt_request: HaltSignal | None = None
        self.resume_request: ResumeSignal | None = None
        self.rollback_request: RollbackSignal | None = None
        self.wakeups = 0
        # Wakeups already looked at: signals that arrive while an activity of this pass runs
        # must end the pass's wait, not be waited past.
        self.seen = 0
        self.ev: Evaluation | None = None
        self.ev_at: datetime | None = None
        self.phase: Phase = "starting"
        self.waiting_for = ""
        self.pull_request_url: str | None = None
        self.shown: tuple[object, ...] | None = None
        self.want_check_run: CheckRunWant | None = None
        self.search_state = ""
        self.search_revision = ""
        # From the input here, not in run(): signals that arrive with the start (a click that
        # reached the run a continue-as-new began) are handled before run() starts.
        self.approved: dict[str, str] = dict(inp.approved)
        self.offers: dict[str, str] = dict(inp.offers)
        self.resume_offers: dict[str, datetime] = dict(inp.resume_offers)
        self.awaiting_node: str | None = inp.awaiting_node
        self.halt: HaltState | None = inp.halt
        # What a click that arrives before run() starts is judged with.
        self.inp = inp
        self.node = inp.node
        self.refusals: list[str] = list(inp.refusals)  # clicks that did not count, shown
        # node → the deployments it passed on (state only: it orders no command)
        self.evidence: dict[str, list[RootDeployment]] = dict(inp.evidence)

    # --- signals and query -----------------------------------------------------------------

    @workflow.signal(name=SIGNAL_DEPLOYMENT_FINISHED)
    def deployment_finished(self, signal: DeploymentFinished) -> None:
        # Roots outside the current node are dropped once the loop has read the revision.
        self.reported[signal.root] = signal
        self.wakeups += 1

    @workflow.signal(name=SIGNAL_PROMOTE)
    async def promote(self, signal: PromoteSignal) -> None:
        # A click approves the node the check run offered; a stale click is ignored.
        await self._click("promote", signal)

    @workflow.signal(name=SIGNAL_HALT)
    async def halt_signal(self, signal: HaltSignal) -> None:
        # From any of the rollout's check runs, however old: halting is always safe.
        await self._click("halt", signal)

    @workflow.signal(name=SIGNAL_RESUME)
    async def resume(self, signal: ResumeSignal) -> None:
        # A click resumes the halt its check run showed; a stale one is ignored.
        await self._click("resume", signal)

    @workflow.signal(name=SIGNAL_ROLLBACK)
    async def rollback_click(self, signal: RollbackSignal) -> None:
        # Only the halt the clicked check run showed, once: the button comes with that halt.
        await self._click("rollback", signal)

    async def _click(self, action: GovernedAction, signal: Click) -> None:
        """A click on the rollout's check run: before the patch `JUDGED_CLICKS` it applied
        unless stale; now it is judged by the review policy of the node it acts on
        (docs/governance.md), recorded either way, and a refusal is shown on the check run."""
        standing = self._standing()
        why = rolloutclicks.ignored(action, signal.head_sha, standing, judged=self._judged())
        if not self._judged():
            if why is None:
                self._apply(signal)
            else:
                workflow.logger.info("%s ignored: %s", action, why)
            return
        node = rolloutclicks.node_of(action, standing)
        verdict = Verdict(counts=False, reason=why or "")
        if why is None:
            request = rolloutclicks.judge_request(
                self.inp.repo,
                self.inp.patch_id,
                action,
                signal.by,
                node,
                revision=self.revision,
                workflow_id=workflow.info().workflow_id,
            )
            verdict = await clicks.judge(request)
            now = self._standing()
            moved = rolloutclicks.MOVED if rolloutclicks.node_of(action, now) != node else None
            why = moved or rolloutclicks.ignored(action, signal.head_sha, now, judged=True)
            if verdict.counts and why is not None:
                verdict = Verdict(counts=False, permission=verdict.permission, reason=why)
        if verdict.counts:
            self._apply(signal)
        else:
            line = refusal(action, signal.by, verdict.reason)
            self.refusals = refusals.keep(self.refusals, line)
            self.wakeups += 1  # the check run lists it
        repo, patch = self.inp.repo.full_name, self.inp.patch_id
        record = rolloutclicks.audit_record(repo, patch, action, signal.by, verdict, workflow.now())
        await clicks.audit(record)

    def _apply(self, signal: Click) -> None:
        """A click that counts (the loop takes it on its next pass)."""
        match signal:
            case PromoteSignal():
                assert self.awaiting_node is not None
                self.approved[self.awaiting_node] = signal.by or "someone"
            case HaltSignal():
                self.halt_request = signal
            case ResumeSignal():
                self.resume_request = signal
            case RollbackSignal():
                self.rollback_request = signal
        self.wakeups += 1

    def _standing(self) -> rolloutclicks.Standing:
        return rolloutclicks.Standing(
            awaiting_node=self.awaiting_node,
            halt=self.halt,
            halt_requested=self.halt_request is not None,
            offers=dict(self.offers),
            resume_offers=dict(self.resume_offers),
            node=self.node,
        )

    def _judged(self) -> bool:
        """Clicks are judged by the review policy (patch `JUDGED_CLICKS`, decided once per
        run: the first call records it)."""
        return workflow.patched(JUDGED_CLICKS)

    @workflow.signal(name=SIGNAL_PROMOTION_REVISION)
    def new_revision(self, signal: PromotionRevision) -> None:
        if signal.revision and signal.revision != self.revision:
            self.pending_revision = signal.revision
            self.wakeups += 1

    @workflow.query(name=QUERY_ROLLOUT)
    def rollout(self) -> RolloutView:
        ev = self.ev
        nxt = ev.node(ev.next_node) if ev else None
        return RolloutView(
            repo=self.inp.repo.full_name,
            patch_id=self.inp.patch_id,
            revision=self.revision,
            phase=self.phase,
            current_node=ev.current_node if ev else None,
            next_node=ev.next_node if ev else None,
            gate=nxt.gate if nxt else None,
            waiting_for=self.waiting_for,
            rows=self.rows,
            deployments=[self.deployments[r] for r in sorted(self.deployments)],
            halt=self.halt,
            pull_request_url=self.pull_request_url,
            nodes=list(ev.plan) if ev else [],
            node_roots=dict(ev.node_roots) if ev else {},
            soak_started=self.healthy_since,
            window=ev.window if ev and ev.next_node else None,
            evidence=self.evidence,
        )

    # --- main loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: PromotionInput) -> RolloutView:
        self.inp = inp
        self._judged()
        self.revision = inp.revision
        self.rows: list[RolloutRow] = list(inp.rows)
        self.node = inp.node
        self.deployments: dict[str, RootDeployment] = {d.root: d for d in inp.deployments}
        self.acknowledged: set[str] = set(inp.acknowledged)
        self.healthy_since = inp.healthy_since
        self.check_run_id = inp.check_run_id
        self.check_run_sha = inp.check_run_sha
        for report in inp.reported:
            self.reported[report.root] = report
        self.max_history_events = inp.max_history_events or MAX_HISTORY_EVENTS
        searchattrs.upsert(repo=inp.repo.full_name, keys=(SA_REPO,))
        if not self.revision:
            await workflow.wait_condition(lambda: self.pending_revision is not None)
        # A fresh start reads every root's latest.json; a continued run keeps what it knew.
        reload_all = inp.node is None
        while True:
            self.seen = self.wakeups
            self._take_signals()
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._carry())
            ev = await self._evaluation()
            if ev.error or ev.conflicts:
                self._block(ev)
                await self._wait()
                continue
            if not ev.found:
                return await self._gone()
            if ev.current_node != self.node:
                self.node = ev.current_node
                self.deployments = {}
                self.healthy_since = None
                reload_all = True
            await self._read_deployments(ev, reload_all)
            reload_all = False
            if self.halt is not None:
                if self.rollback_request is not None:
                    by, self.rollback_request = self.rollback_request.by, None
                    await self._roll_back(ev, self.halt.node, by=by)
                    continue  # the revert moved the tip: read the patch there
                self._show_halted(ev)
                await self._wait()
                continue
            if not await self._deployed_and_soaked(ev):
                continue
            if ev.next_node is None:
                if ev.graduation_ready:
                    done = await self._graduate(ev)
                    if done is not None:
                        return done
                    continue
                self._set("deploying", f"the patch is active on `{self.node}`", ev)
                await self._wait()
                continue
            await self._gate(ev)

    def _take_signals(self) -> None:
        if self.pending_revision is not None:
            self.revision = self.pending_revision
            self.pending_revision = None
        now = workflow.now()
        if self.halt_request is not None:
            request, self.halt_request = self.halt_request, None
            if self.halt is None:
                who = request.by or "someone"
                self.halt = HaltState(
                    node=self.node or "",
                    reason=request.reason or f"halted by @{who}",
                    by=who,
                    since=now,
                )
        if self.resume_request is not None:
            resume, self.resume_request = self.resume_request, None
            if self.halt is not None:
                workflow.logger.info("rollout resumed by %s", resume.by or "someone")
                # The failures that halted it no longer halt it; the node still waits for a
                # successful deployment of every root.
                self.acknowledged.update(self.halt.deployment_ids)
                self.halt = None
                self.resume_offers = {}
                self.healthy_since = None

    async def _evaluation(self) -> Evaluation:
        now = workflow.now()
        ev = self.ev
        if ev is None or ev.revision != self.revision or rollout.stale(ev, self.ev_at, now):
            ev = await calls.run(
                ACT_PROMOTION_EVALUATE,
                EvaluateRequest(
                    repo=self.inp.repo, patch_id=self.inp.patch_id, revision=self.revision, now=now
                ),
                options=calls.PROMOTION_READ,
            )
            self.ev, self.ev_at = ev, now
            if self.search_revision != ev.revision:
                self.search_revision = ev.revision
                searchattrs.upsert(revision=ev.revision, keys=(SA_REVISION,))
        return ev

    async def _read_deployments(self, ev: Evaluation, reload_all: bool) -> None:
        roots = set(ev.roots)
        reported = [r for root, r in sorted(self.reported.items()) if root in roots]
        self.reported = {}
        missing = [r for r in ev.roots if r not in self.deployments]
        wanted = sorted(set(ev.roots) if reload_all else {r.root for r in reported} | set(missing))
        for root in list(self.deployments):
            if root not in roots:  # the node lost a root (a removed cluster)
                del self.deployments[root]
        if not wanted:
            return
        result = await calls.run(
            ACT_PROMOTION_DEPLOYMENTS,
            DeploymentsRequest(
                repo=self.inp.repo, patch_id=self.inp.patch_id, roots=wanted, reported=reported
            ),
            options=calls.PROMOTION_READ,
        )
        for deployment in result.deployments:
            self.deployments[deployment.root] = deployment

    async def _deployed_and_soaked(self, ev: Evaluation) -> bool:
        """True once every root under the current node is healthy and the soak is over; else
        it shows why not, waits, and the loop starts again."""
        node = self.node or ""
        failed = [
            d
            for d in self.deployments.values()
            if d.failed and d.deployment_id not in self.acknowledged
        ]
        if failed:
            failed.sort(key=lambda d: d.root)
            self.halt = HaltState(
                node=node,
                reason=rollout.halt_reason(failed),
                roots=[d.root for d in failed],
                deployment_ids=[d.deployment_id for d in failed],
                since=workflow.now(),
            )
            # `rollout.rollback: auto`: the halt also commits the revert of the promotion.
            if ev.rollback == "auto":
                await self._roll_back(ev, node)
            self._show_halted(ev)
            await self._wait()
            return False
        waiting = [r for r in ev.roots if not self._healthy(r)]
        if waiting:
            self.healthy_since = None
            done = len(ev.roots) - len(waiting)
            self._set(
                "deploying",
                f"deployments under `{node}`: {done} of {len(ev.roots)} roots run a revision "
                f"with the patch; waiting for "
                + ", ".join(f"`{r}`" for r in waiting[:10])
                + (" …" if len(waiting) > 10 else ""),
                ev,
            )
            await self._wait()
            return False
        now = workflow.now()
        if self.healthy_since is None:
            self.healthy_since = now
        info = ev.node(node)
        soak = timedelta(seconds=info.soak_seconds if info else 0)
        remaining = self.healthy_since + soak - now
        if remaining > timedelta(0):
            until = self.healthy_since + soak
            self._set("soaking", f"soaking at `{node}` until {when(until)}", ev)
            await self._wait(remaining)
            return False
        self.evidence[node] = [
            RootDeployment(
                root=d.root,
                revision=d.revision,
                deployment_id=d.deployment_id,
                state=d.state,
                contains_patch=d.contains_patch,
            )
            for d in sorted(self.deployments.values(), key=lambda d: d.root)
        ]
        return True

    async def _gate(self, ev: Evaluation) -> None:
        nxt = ev.node(ev.next_node)
        assert nxt is not None and ev.next_node is not None
        window = ev.window
        if not window.open:
            opens = f"; it opens {when(window.next_open)}" if window.next_open else ""
            why = f" ({window.reason})" if window.reason else ""
            self._set(
                "window_closed",
                f"the promotion window of `{nxt.path}` is closed{why}{opens}",
                ev,
            )
            wait = window.next_open - workflow.now() if window.next_open else RECHECK
            await self._wait(max(wait, timedelta(seconds=1)))
            return
        if ev.unmet_dependencies:
            self._set(
                "dependencies_unmet",
                f"dependencies of the patch are not met at `{nxt.path}`: "
                + "; ".join(ev.unmet_dependencies),
                ev,
            )
            await self._wait(RECHECK)
            return
        if nxt.gate == "manual" and nxt.path not in self.approved:
            self.awaiting_node = nxt.path
            # The check run on this commit offers this node (older offers are for other nodes).
            self.offers = {sha: node for sha, node in self.offers.items() if node == nxt.path} | {
                self.revision: nxt.path
            }
            self._set("awaiting_promote", f"a Promote click to move the patch to `{nxt.path}`", ev)
            # A window that closes meanwhile takes the button away (the loop re-reads it then).
            closes = window.closes_at - workflow.now() if window.closes_at else None
            await self._wait(max(closes, timedelta(seconds=1)) if closes is not None else None)
            return
        await self._commit(ev, nxt.path)

    async def _commit(self, ev: Evaluation, node: str) -> None:
        by = self.approved.get(node)
        self._set("promoting", f"committing the promotion to `{node}`", ev)
        await self._flush_check_run()  # the gate's buttons go away
        try:
            result = await calls.run(
                ACT_PROMOTION_COMMIT,
                CommitRequest(
                    repo=self.inp.repo,
                    patch_id=self.inp.patch_id,
                    to_node=node,
                    actor=by,
                    expected_revision=self.revision,
                ),
                options=calls.GITHUB,
            )
        except ActivityError as err:
            # GitHub refused (permissions, branch protection): a person has to look.
            self.halt = HaltState(
                node=node,
                reason=f"committing the promotion to `{node}` failed: {err.cause or err}",
                since=workflow.now(),
            )
            return
        workflow.logger.info(
            "promotion to %s: %s", node, result.revision if result.committed else result.message
        )
        if result.revision:
            self.revision = result.revision

    async def _roll_back(self, ev: Evaluation, node: str, by: str | None = None) -> None:
        """Revert the promotion to `node` (a commit through the App, like the promotion):
        the roots under it deploy the previous render again, and verify it. The rollout stays
        halted: Resume promotes again once someone has looked."""
        halt = self.halt
        assert halt is not None
        halt.rolled_back = True
        if by is not None:
            halt.reason += f". Roll back clicked by @{by}"
        self._set("promoting", f"rolling back the promotion to `{node}`", ev)
        try:
            result = await calls.run(
                ACT_PROMOTION_ROLLBACK,
                RollbackRequest(
                    repo=self.inp.repo,
                    patch_id=self.inp.patch_id,
                    node=node,
                    reason=halt.reason,
                    by=by,
                ),
                options=calls.GITHUB,
            )
        except ActivityError as err:
            halt.reason += f". Rolling back failed: {err.cause or err}"
            return
        if result.committed:
            halt.reason += (
                f". Rolled back: `{result.revision[:12]}` reverts the promotion "
                f"`{result.reverted[:12]}`"
            )
            self.revision = result.revision
        else:
            halt.reason += f". Not rolled back: {result.message}"

    async def _graduate(self, ev: Evaluation) -> RolloutView | None:
        """The graduation pull request, and the end; None when it failed (halted: Resume
        tries again)."""
        self._set("graduating", "opening the graduation pull request", ev)
        await self._flush_check_run()
        try:
            pr = await calls.run(
                ACT_PROMOTION_GRADUATE,
                GraduateRequest(repo=self.inp.repo, patch_id=self.inp.patch_id),
                options=calls.GITHUB,
            )
        except ActivityError as err:
            self.halt = HaltState(
                node=self.node or "",
                reason=f"opening the graduation pull request failed: {err.cause or err}",
                since=workflow.now(),
            )
            return None
        self.pull_request_url = pr.url
        self.phase = "graduated"
        self._rows(ev, "graduated", f"pull request #{pr.number}")
        self.waiting_for = ""
        await self._check_run(
            CheckRunWant(
                ("graduated", pr.number),
                status="completed",
                conclusion="success",
                title=f"Graduated: pull request #{pr.number}",
                message=(
                    f"`{self.inp.patch_id}` is active on every node. Pull request "
                    f"[#{pr.number}]({pr.url}) folds it into the base values and deletes its "
                    "copies; this rollout is done."
                ),
                actions=[],
            )
        )
        self._details()
        searchattrs.upsert(state="graduated", keys=(SA_STATE,))
        return self.rollout()

    async def _gone(self) -> RolloutView:
        self.phase = "gone"
        self.waiting_for = ""
        await self._check_run(
            CheckRunWant(
                ("gone",),
                status="completed",
                conclusion="neutral",
                title="Patch no longer in the fleet repository",
                message=(
                    f"No file of `{self.inp.patch_id}` is left at `{self.revision[:12]}` "
                    "(graduated or deleted): this rollout is over."
                ),
                actions=[],
            )
        )
        self._details()
        searchattrs.upsert(state="gone", keys=(SA_STATE,))
        return self.rollout()

    # --- showing state ---------------------------------------------------------------------

    def _block(self, ev: Evaluation) -> None:
        if ev.error:
            why = f"the fleet repository cannot be read at `{ev.revision[:12]}`: {ev.error}"
        else:
            why = "conflicting patches: " + "; ".join(ev.conflicts)
        self.phase = "blocked"
        self.waiting_for = f"a revision that fixes it ({why})"
        self._rows(ev, "blocked", why)
        self._post(
            ("blocked", self.revision, why),
            status="completed",
            conclusion="failure",
            title="Blocked: " + ("conflicting patches" if ev.conflicts else "fleet repo error"),
            message=f"The rollout of `{self.inp.patch_id}` is blocked: {why}\n\nIt goes on "
            "by itself once a new revision of the default branch fixes this.",
            actions=[],
        )

    def _show_halted(self, ev: Evaluation) -> None:
        halt = self.halt
        assert halt is not None
        self.phase = "halted"
        self.waiting_for = "a Resume click"
        self.awaiting_node = None
        # The check run on this commit shows this halt (older runs showed it or earlier ones).
        self.resume_offers = {
            sha: since for sha, since in self.resume_offers.items() if since == halt.since
        } | {self.revision: halt.since}
        self._rows(ev, "halted", halt.reason)
        # `rollback: manual` offers the revert a failed node would get with `auto`.
        offer = ev.rollback == "manual" and bool(halt.deployment_ids) and not halt.rolled_back
        self._post(
            ("halted", self.revision, halt.reason, offer),
            status="completed",
            conclusion="failure",
            title=f"Halted at {halt.node or 'the start'}",
            message=f"**Halted at `{halt.node}`**: {halt.reason}\n\nFix the cause, then click "
            "**Resume**; the node still waits for a successful deployment of every root."
            + (" **Roll back** reverts the promotion to this node." if offer else ""),
            actions=[RESUME, ROLLBACK] if offer else [RESUME],
        )

    def _set(self, state: NodeState, waiting_for: str, ev: Evaluation) -> None:
        self.phase = rollout.phase_of(state)
        self.waiting_for = waiting_for
        if state != "awaiting_promote":
            self.awaiting_node = None
        self._rows(ev, state, "")
        manual = state == "awaiting_promote"
        self._post(
            (state, self.revision, waiting_for),
            status="completed" if manual else "in_progress",
            conclusion="action_required" if manual else None,
            title=rollout.title(state, ev),
            message=f"Waiting for {waiting_for}.",
            actions=[PROMOTE, HALT] if manual else ([] if state == "promoting" else [HALT]),
        )

    def _rows(self, ev: Evaluation, state: NodeState, detail: str) -> None:
        self.rows = rollout.rows(
            ev, state, detail, old=self.rows, healthy=self._healthy, now=workflow.now()
        )
        self._details()
        if self.phase != self.search_state:  # every upsert is a history event
            self.search_state = self.phase
            searchattrs.upsert(state=self.phase, keys=(SA_STATE,))

    def _healthy(self, root: str) -> bool:
        deployment = self.deployments.get(root)
        return deployment is not None and deployment.healthy

    def _details(self) -> None:
        workflow.set_current_details(
            f"**{self.inp.patch_id}** at `{self.revision[:12]}` — {self.phase}"
            + (f": waiting for {self.waiting_for}" if self.waiting_for else "")
            + "\n\n"
            + rollout_table(self.rows)
        )

    def _post(
        self,
        key: tuple[object, ...],
        *,
        status: str,
        conclusion: str | None,
        title: str,
        message: str,
        actions: list[CheckRunAction],
    ) -> None:
        """Remember what the check run should say; `_wait` sends it (once per change)."""
        self.want_check_run = CheckRunWant(key, status, conclusion, title, message, actions)

    async def _flush_check_run(self) -> None:
        want = self.want_check_run
        # A click that did not count is shown at once, whatever else the check run says.
        key = (want.key, tuple(self.refusals)) if want is not None else None
        if want is None or self.shown == key:
            return
        self.shown = key
        await self._check_run(want)

    async def _check_run(self, want: CheckRunWant) -> None:
        """Create or update the rollout's check run on the current tip. Check runs only show
        the rollout: a GitHub error that outlasts the retries is logged, never fatal."""
        inp = self.inp
        if self.check_run_sha != self.revision and self.check_run_id is not None:
            # The tip moved: the rollout continues on a new check run on the new tip.
            await self._retire_check_run()
        summary = "\n\n".join(
            [
                f"**{want.title}** — patch `{inp.patch_id}` at `{self.revision[:12]}`",
                want.message,
                rollout_table(self.rows),
                rollout.deployments_table(self.deployments),
                *filter(None, [refusals_block(self.refusals)]),
            ]
        )
        request = rollout.check_run_request(
            inp.repo,
            inp.patch_id,
            self.revision,
            want,
            check_run_id=self.check_run_id,
            summary=summary,
        )
        try:
            ref = await calls.run(ACT_CHECK_RUN, request, options=calls.GITHUB)
        except ActivityError as err:
            workflow.logger.warning("rollout check run failed: %s", err.cause)
            return
        self.check_run_id = ref.check_run_id
        self.check_run_sha = self.revision

    async def _retire_check_run(self) -> None:
        """The old tip's run loses its buttons and says where the rollout went."""
        old_id, old_sha = self.check_run_id, self.check_run_sha
        self.check_run_id = None
        request = rollout.retired_request(
            self.inp.repo,
            self.inp.patch_id,
            check_run_id=old_id,
            old_sha=old_sha or self.revision,
            tip=self.revision,
        )
        try:
            await calls.run(ACT_CHECK_RUN, request, options=calls.GITHUB)
        except ActivityError as err:
            workflow.logger.warning("retiring the old rollout check run failed: %s", err.cause)

    # --- waiting ---------------------------------------------------------------------------

    async def _wait(self, timeout: timedelta | None = None) -> None:
        """Send the check run if it changed, then sleep until a signal (one since this pass
        of the loop took its signals) or the timeout."""
        seen = self.seen
        await self._flush_check_run()
        if self.wakeups != seen:
            return
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self.wakeups != seen,
                timeout=timeout,
                timeout_summary=self.phase if timeout else None,
            )

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self.max_history_events
        )

    def _carry(self) -> PromotionInput:
        return PromotionInput(
            repo=self.inp.repo,
            patch_id=self.inp.patch_id,
            revision=self.pending_revision or self.revision,
            rows=self.rows,
            node=self.node,
            deployments=list(self.deployments.values()),
            acknowledged=sorted(self.acknowledged),
            halt=self.halt,
            approved=self.approved,
            offers=self.offers,
            resume_offers=self.resume_offers,
            awaiting_node=self.awaiting_node,
            healthy_since=self.healthy_since,
            check_run_id=self.check_run_id,
            check_run_sha=self.check_run_sha,
            max_history_events=self.inp.max_history_events,
            reported=list(self.reported.values()),
            refusals=self.refusals,
            evidence=self.evidence,
        )
