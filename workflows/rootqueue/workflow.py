"""RootQueueWorkflow (registered as `DeployWorkflow`): the queue, lock and history of one root
(`deploy:<owner>/<repo>:<root>`), one deployment at a time.

The queue's rules live in `RootQueue` (no Temporal in them); this is the loop around it.
Before an item runs it is compared with the latest deployed revision: behind → skipped;
diverged or manual → the review gate always asks. Signals keep being handled while a
deployment runs (queued check runs, duplicates, Unlock). An Unlock click is judged by the
review policy in its signal handler (`judge_action`, docs/governance.md) and opens the lock
only if it counts; one that does not is listed on the waiting merges' check runs, and both
are recorded in the audit trail. The history stays bounded: queued
items' check runs and rows are written in batches and only when they change, continue-as-new
is checked inside every long loop, and a deployment running when the run continues as new runs
on (abandoned, not terminated) and reports its end by signal. Idle for 60 minutes (nothing
queued, nothing running) → the workflow completes; the next signal-with-start begins a fresh
run that reloads latest.json and rebuilds the lock from it.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from shared.contracts import checkrun
    from shared.contracts.activityrefs import (
        ACT_CHECK_RUN,
        ACT_DEPLOYMENT_STATUS,
        ACT_LOAD_LATEST,
        ACT_NOTIFY_PROMOTIONS,
        ACT_PERSIST_LATEST,
        ACT_QUEUE_CHECK_RUNS,
        ACT_RECORD_DEPLOYMENT,
        ACT_RECORD_DEPLOYMENTS,
        ACT_REVISION_RELATION,
    )
    from shared.contracts.deploy import (
        DEPLOY_WORKFLOW,
        IDLE_TIMEOUT_SECONDS,
        QUERY_HOLDING,
        QUERY_STATE,
        SA_REPO,
        SA_ROOT,
        SA_STATE,
        SIGNAL_DEPLOYMENT_UPDATE,
        SIGNAL_HOTFIX_MERGED,
        SIGNAL_NEW_REVISION,
        SIGNAL_UNLOCK,
        STATE_QUEUE_ITEMS,
        TERMINAL_STATES,
        AuditRecord,
        CheckRunBatch,
        CurrentDeployment,
        DeploymentInput,
        DeploymentRecord,
        DeploymentRecords,
        DeploymentState,
        DeploymentUpdate,
        HotfixMerged,
        LatestDeployment,
        LoadLatestRequest,
        NewRevision,
        PersistLatestRequest,
        QueueItem,
        Relation,
        RelationRequest,
        RootQueueInput,
        RootQueueState,
        UnlockSignal,
        lock_from_latest,
    )
    from shared.contracts.governance import Verdict
    from shared.contracts.promotion import DeploymentFinished, NotifyPromotionsRequest
    from workflows import calls, clicks, refusals, searchattrs
    from workflows.deployment import DeploymentWorkflow
    from workflows.refusals import refusal
    from workflows.rootqueue import checkruns, unlocks
    from workflows.rootqueue.queue import MAX_QUEUED, RootQueue

# Only outcomes a rollout acts on are signalled to the PromotionWorkflows.
NOTIFY_STATES = frozenset({"published", "verified", "unhealthy", "failed", "rejected", "timed_out"})
# Long enough to keep a busy root's history readable, well under Temporal's limits.
MAX_HISTORY_EVENTS = 10_000
QUEUED_BATCH = 50  # queued check runs or rows per activity
# A deployment an earlier run started: how often to ask whether it ended without telling.
DETACHED_CHECK = timedelta(minutes=30)
# Unlock clicks are judged by the review policy (docs/workflow-versions.md).
JUDGED_UNLOCK = "DeployWorkflow-judged-unlock"
# A hotfix lock that opens as its deployment ends (its pull request merged meanwhile) is
# audited like one its merge opens (docs/workflow-versions.md).
MERGE_AUDIT = "DeployWorkflow-hotfix-merge-audit"


@workflow.defn(name=DEPLOY_WORKFLOW)
class RootQueueWorkflow:
    def __init__(self) -> None:
        self.queue = RootQueue()
        self.current: CurrentDeployment | None = None
        self.latest: LatestDeployment | None = None
        self.pending_signals: list[NewRevision] = []
        self.unlock_unsaved = False  # an Unlock not yet written to latest.json
        self.early_unlock: UnlockSignal | None = None  # arrived before latest.json was read
        self.unlock_refusals: list[str] = []  # Unlock clicks that did not count, shown
        self.started = False
        self.search_state = ""
        self.finished: DeploymentFinished | None = None  # the last item's outcome
        self.detached: QueueItem | None = None  # running, started by an earlier run
        self.running_done: Callable[[], bool] | None = None  # the running child's end
        self.ended: dict[str, DeploymentUpdate] = {}  # terminal updates, by deployment id
        self.idle_since: datetime | None = None
        # Hotfixed pull requests merged since, by number: their merge signals.
        self.merges: dict[int, HotfixMerged] = {}

    # --- signals and queries ---------------------------------------------------------------

    @workflow.signal(name=SIGNAL_NEW_REVISION)
    def new_revision(self, signal: NewRevision) -> None:
        # Handled in the main loop: enqueueing needs workflow.uuid4 and the latest deployment.
        self.pending_signals.append(signal)

    @workflow.signal(name=SIGNAL_UNLOCK)
    async def unlock(self, signal: UnlockSignal) -> None:
        if not self._judged():
            if not self.started:
                # Signal-with-start of a finished root: the lock is rebuilt from latest.json
                # first, then this Unlock applies to it.
                self.early_unlock = signal
                return
            self._unlock_now(signal)
            return
        # Signal-with-start of a finished root: the lock is rebuilt from latest.json first.
        await workflow.wait_condition(lambda: self.started)
        lock, root = self.queue.lock, self.inp.root
        reason = unlocks.nothing_to_unlock(root, lock, self.latest)
        if reason is None:
            asking = workflow.info().workflow_id
            verdict = await clicks.judge(unlocks.judge_request(self.inp.repo, root, signal, asking))
            if verdict.counts and (moved := unlocks.lock_moved(lock, self.queue.lock)):
                verdict = Verdict(counts=False, permission=verdict.permission, reason=moved)
        else:
            verdict = Verdict(counts=False, reason=reason)
        if verdict.counts:
            self._unlock_now(signal)
        else:
            line = refusal("unlock", signal.by, verdict.reason)
            self.unlock_refusals = refusals.keep(self.unlock_refusals, line)
            for item in unlocks.to_show(self.queue, signal):
                self.queue.item_changed(item)
        at = workflow.now()
        await clicks.audit(unlocks.audit_record(self.inp.repo, root, lock, signal, verdict, at=at))

    @workflow.signal(name=SIGNAL_HOTFIX_MERGED)
    async def hotfix_merged(self, merged: HotfixMerged) -> None:
        """A hotfixed pull request was merged: its lock opens now, or a hotfix of it still
        queued or running does not lock when it ends (docs/governance.md, "Hotfixes")."""
        # Signal-with-start of a finished root: the lock is rebuilt from latest.json first.
        await workflow.wait_condition(lambda: self.started)
        self.merges.setdefault(merged.pr, merged)
        lock = self.queue.lock
        if not unlocks.opened_by_merge(lock, merged):
            return
        self._unlock_now(UnlockSignal(by=unlocks.merge_by(merged)))
        at = workflow.now()
        await clicks.audit(
            unlocks.merge_audit_record(self.inp.repo, self.inp.root, lock, merged, at=at)
        )

    def _unlock_now(self, signal: UnlockSignal) -> None:
        if not self.queue.lock.locked or self.latest is None:
            return
        workflow.logger.info("queue unlocked by %s", signal.by or "someone")
        # The lock is a function of latest.json, so the Unlock is recorded there (by the main
        # loop, once no deployment is writing it) and survives an idle restart.
        self.latest = unlocks.unlocked(self.latest, signal.by, workflow.now())
        self.queue.follow_lock(lock_from_latest(self.latest))
        self.unlock_unsaved = True

    def _judged(self) -> bool:
        """Unlock clicks are judged by the review policy (patch `JUDGED_UNLOCK`; before it,
        every Unlock applied). Decided once per run: the first call records it."""
        return workflow.patched(JUDGED_UNLOCK)

    @workflow.signal(name=SIGNAL_DEPLOYMENT_UPDATE)
    def deployment_update(self, update: DeploymentUpdate) -> None:
        if update.state in TERMINAL_STATES:
            # A deployment an earlier run started tells its end only this way (it may come
            # before run() knows it is waiting for one).
            self.ended[update.deployment_id] = update
        if self.current and self.current.deployment_id == update.deployment_id:
            self.current.state = update.state
            if update.check_run_id:
                self.current.check_run_id = update.check_run_id
            self._details()

    @workflow.query(name=QUERY_STATE)
    def state(self) -> RootQueueState:
        now = workflow.now()
        front = self.queue.items[:STATE_QUEUE_ITEMS]
        return RootQueueState(
            repo=self.inp.repo.full_name,
            root=self.inp.root,
            queue=front,
            queue_ages_seconds=[(now - i.enqueued_at).total_seconds() for i in front],
            lock=self.queue.lock,
            current=self.current,
            latest=self.latest,
            queue_length=len(self.queue),
        )

    @workflow.query(name=QUERY_HOLDING)
    def holding(self, revision: str) -> str | None:
        for running in (self.current, self.detached):
            if running is not None and running.revision == revision:
                return running.deployment_id
        queued = self.queue.holding(revision)
        return queued.deployment_id if queued is not None else None

    # --- main loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: RootQueueInput) -> None:
        self.inp = inp
        self._judged()
        self.unlock_refusals = list(inp.unlock_refusals)
        # A signal that came before the run started was kept first; an older run's input has
        # the numbers alone.
        carried = {m.pr: m for m in inp.merged_hotfix_signals}
        for pr in inp.merged_hotfixes:
            self.merges.setdefault(pr, carried.get(pr) or HotfixMerged(pr=pr))
        self.queue = RootQueue.unpack(
            inp.queue_packed,
            inp.lock,
            max_queued=inp.max_queued or MAX_QUEUED,
            changed=inp.changed,
            unrecorded=inp.unrecorded,
        )
        self.latest = inp.latest
        if inp.running is not None:
            self.detached = inp.running
            self.current = inp.current
        self.unlock_unsaved = inp.unlock_unsaved
        self.max_history_events = inp.max_history_events or MAX_HISTORY_EVENTS
        searchattrs.upsert(repo=inp.repo.full_name, root=inp.root, keys=(SA_REPO, SA_ROOT))
        if not inp.loaded_latest:
            loaded = await calls.run(
                ACT_LOAD_LATEST,
                LoadLatestRequest(repo=inp.repo, root=inp.root),
                options=calls.STORE,
            )
            self.latest = loaded.latest
            self.queue.lock = lock_from_latest(self.latest)
        self.started = True
        if self.early_unlock is not None:
            self._unlock_now(self.early_unlock)
        self.idle_since = inp.last_activity_at or workflow.now()
        while not await self._round():
            pass

    async def _round(self) -> bool:
        """One turn of the loop: signals, then a continue-as-new, a deployment or waiting.
        True once the root has been idle long enough and the workflow may complete."""
        await self._housekeeping()
        if self._should_continue_as_new():
            await self._continue_as_new(self.detached, self._detached_ended)
            # Returned: the detached deployment's end came in; handled before anything.
            if await self._wait_detached():
                await self._item_done()
            return False
        if self._signals_came_in():
            return False
        if self.detached is not None:
            if await self._wait_detached():
                await self._item_done()
            return False
        item = self.queue.take_next()
        if item is not None:
            self.finished = None
            await self._run_item(item)
            await self._item_done()
            return False
        self._publish_state("locked" if self.queue.items else "idle")
        if self.queue.items:
            # Only merge items remain and the queue is locked: no idle timeout while they
            # wait; Unlock or a new signal wakes the loop.
            await workflow.wait_condition(self._has_work)
            return False
        assert self.idle_since is not None
        remaining = IDLE_TIMEOUT_SECONDS - (workflow.now() - self.idle_since).total_seconds()
        try:
            await workflow.wait_condition(
                self._has_work,
                timeout=timedelta(seconds=max(remaining, 1)),
                timeout_summary="idle",
            )
        except TimeoutError:
            if self._judged():  # an Unlock being judged is finished first
                await workflow.wait_condition(workflow.all_handlers_finished)
            # Signals that race this completion make the server reject it and replay the
            # task with them, so none is lost.
            return not self._has_work() and not self.queue.items
        return False

    def _has_work(self) -> bool:
        return (
            bool(self.pending_signals)
            or bool(self.queue.changed)
            or (self.unlock_unsaved and self.current is None)
        )

    def _signals_came_in(self) -> bool:
        """Signals arrived while housekeeping's last activity ran (an Unlock to persist, a
        manual revision that goes first): another round before the next item is picked.
        Queued check runs still to write do not hold the next item: they are written while
        it runs (an Unlock of 10,000 waiting revisions rewrites 10,000)."""
        return bool(self.pending_signals) or (self.unlock_unsaved and self.current is None)

    def _detached_ended(self) -> bool:
        return self.detached is not None and self.detached.deployment_id in self.ended

    async def _item_done(self) -> None:
        if self.finished is not None:
            await self._notify_promotions(self.finished)
        self.idle_since = workflow.now()

    # --- continue-as-new -------------------------------------------------------------------

    async def _continue_as_new(
        self, running: QueueItem | None, ended: Callable[[], bool] = lambda: False
    ) -> None:
        """Continue as new with the queue (packed), the lock, and `running`, a deployment that
        runs on and tells the next run of its end. Returns only if that end came in meanwhile
        (this run handles it, so it is not lost between two). Signals that arrived are queued
        first, without their check runs and rows: the next run writes those."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        while self.pending_signals:
            await self._enqueue(self.pending_signals.pop(0))
        if not ended():
            self._continue_with(running)

    def _continue_with(self, running: QueueItem | None) -> NoReturn:
        inp = self.inp
        workflow.continue_as_new(
            RootQueueInput(
                repo=inp.repo,
                root=inp.root,
                queue_packed=self.queue.pack(),
                lock=self.queue.lock,
                latest=self.latest,
                loaded_latest=True,
                last_activity_at=self.idle_since,
                max_history_events=inp.max_history_events,
                max_queued=inp.max_queued,
                detached_check_seconds=inp.detached_check_seconds,
                running=running,
                current=self.current if running is not None else None,
                changed=list(self.queue.changed),
                unrecorded=self.queue.unrecorded,
                unlock_unsaved=self.unlock_unsaved,
                unlock_refusals=self.unlock_refusals,
                merged_hotfixes=list(self.merges),
                merged_hotfix_signals=list(self.merges.values()),
            )
        )

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self.max_history_events
        )

    async def _wait_detached(self) -> bool:
        """For a deployment an earlier run started: wait until it ends (True, with the outcome
        handled like a child's), or until work comes in (False). Asks now and then whether it
        ended without telling (it failed), so the queue cannot wait for ever."""
        item = self.detached
        assert item is not None
        if item.deployment_id not in self.ended:
            seconds = self.inp.detached_check_seconds
            try:
                await workflow.wait_condition(
                    lambda: item.deployment_id in self.ended or self._has_work(),
                    timeout=timedelta(seconds=seconds) if seconds else DETACHED_CHECK,
                    timeout_summary="deployment",
                )
            except builtins.TimeoutError:
                return await self._ask_detached(item)
            if item.deployment_id not in self.ended:
                return False
        update = self.ended.pop(item.deployment_id)
        self.detached = None
        await self._after_deployment(item, update.state, update.message, update.latest)
        return True

    async def _ask_detached(self, item: QueueItem) -> bool:
        """Whether a detached deployment that has not told its end has ended all the same."""
        found = await calls.run(ACT_DEPLOYMENT_STATUS, item.deployment_id, options=calls.STORE)
        if found.status == "running" or item.deployment_id in self.ended:
            return False
        self.detached = None
        if found.result is not None:
            done = found.result
            await self._after_deployment(item, done.state, done.message, done.latest)
        else:
            await self._deployment_failed(item, f"The deployment workflow ended ({found.status}).")
        return True

    # --- signals' work -----------------------------------------------------------------------

    async def _housekeeping(self) -> None:
        """Everything a signal asks for, between and during deployments."""
        while self.pending_signals:
            await self._enqueue(self.pending_signals.pop(0))
        if self.unlock_unsaved and self.current is None and self.latest is not None:
            # Only between deployments: a running child writes latest.json itself.
            self.unlock_unsaved = False
            try:
                await calls.run(
                    ACT_PERSIST_LATEST,
                    PersistLatestRequest(
                        repo=self.inp.repo, root=self.inp.root, latest=self.latest
                    ),
                    options=calls.STORE,
                )
            except ActivityError as err:
                # Still unlocked in this run; only an idle restart would bring the lock back.
                workflow.logger.warning("recording the Unlock failed: %s", err.cause)
        await self._write_changed_check_runs()
        if self.queue.unrecorded:
            # after the check runs: the row links the item's queued check run
            await self._record_queued()

    async def _enqueue(self, signal: NewRevision) -> None:
        running = [d.revision for d in (self.current, self.detached) if d is not None]
        done = self.queue.enqueue(
            signal,
            running=running,
            latest=self.latest,
            # no uuid4 draw when the gateway chose the id: new signals only, replay-safe
            new_id=lambda: str(workflow.uuid4()),
            now=workflow.now(),
        )
        if done.outcome == "rerun_refused":
            await self._refuse_rerun(signal)
        elif done.outcome == "full":
            await self._refuse_full(signal)

    async def _refuse_rerun(self, signal: NewRevision) -> None:
        latest = self.latest.revision if self.latest else ""
        workflow.logger.info(
            "re-run of %s refused: the latest deployment attempt is %s", signal.revision, latest
        )
        # A check run says why, so the click on Re-run does not vanish without an answer.
        message = checkruns.rerun_refused(signal, latest)
        await self._refuse(signal, conclusion="skipped", title="Re-run refused", message=message)

    async def _refuse_full(self, signal: NewRevision) -> None:
        workflow.logger.warning(
            "merge %s not queued: the queue holds %d deployments, its most",
            signal.revision,
            len(self.queue),
        )
        message = checkruns.queue_full(signal, self.queue)
        await self._refuse(signal, conclusion="failure", title="Queue full", message=message)

    async def _refuse(
        self, signal: NewRevision, *, conclusion: str, title: str, message: str
    ) -> None:
        """A completed check run for a request that was not queued."""
        item = QueueItem(
            deployment_id=str(workflow.uuid4()),
            revision=signal.revision,
            trigger=signal.trigger,
            requested_by=signal.requested_by,
            reason=signal.reason,
            enqueued_at=workflow.now(),
        )
        await self._check_run(
            item, status="completed", conclusion=conclusion, title=title, message=message
        )

    # --- one deployment ----------------------------------------------------------------------

    def _item_ready(self) -> bool:
        """Nothing runs and the front of the queue may start (manual items come first)."""
        return self.current is None and self.detached is None and self.queue.front_may_start()

    async def _run_item(self, item: QueueItem) -> None:
        self.current = CurrentDeployment(
            deployment_id=item.deployment_id,
            revision=item.revision,
            trigger=item.trigger,
            state="queued",
            started_at=workflow.now(),
            check_run_id=item.check_run_id,
        )
        self._publish_state("running")
        relation = await self._relation(item)
        if relation is None:
            self.current = None
            return
        if relation == "behind" and item.trigger == "merge":
            await self._skip_behind(item)
            self.current = None
            return
        child = await workflow.start_child_workflow(
            DeploymentWorkflow.run,
            self._deployment_input(item, relation),
            id=item.deployment_id,
            static_summary=(
                f"{item.trigger} deployment of {self.inp.root} at {checkrun.short(item.revision)}"
            ),
            # When this run continues as new, the deployment runs on.
            parent_close_policy=ParentClosePolicy.ABANDON,
        )
        # The review gate can stay open for days: keep queueing, dropping duplicates and
        # unlocking meanwhile.
        self.running_done = child.done
        while not child.done():
            await workflow.wait_condition(lambda: child.done() or self._has_work())
            await self._housekeeping()
            if not child.done() and self._should_continue_as_new():
                await self._continue_as_new(item, child.done)  # it tells the next run its end
        self.running_done = None
        try:
            result = await child
        except ChildWorkflowError as err:
            workflow.logger.error("deployment %s failed: %s", item.deployment_id, err)
            await self._deployment_failed(
                item, f"The deployment workflow failed: {err.cause or err}"
            )
            return
        self.ended.pop(item.deployment_id, None)
        await self._after_deployment(item, result.state, result.message, result.latest)

    async def _relation(self, item: QueueItem) -> Relation | None:
        """How the item's revision stands to the latest deployed one; None when that cannot
        be told (the item has failed, not the root's queue)."""
        base = self.latest.revision if self.latest else None
        try:
            return await calls.run(
                ACT_REVISION_RELATION,
                RelationRequest(repo=self.inp.repo, base=base, head=item.revision),
                options=calls.STORE,
            )
        except ActivityError as err:
            # A non-retryable answer (say, a revision the mirror does not have).
            message = checkruns.not_compared(item, err.cause or err)
            await self._check_run(
                item, status="completed", conclusion="failure", title="Failed", message=message
            )
            await self._record(item, "failed", message)
            return None

    def _deployment_input(self, item: QueueItem, relation: Relation) -> DeploymentInput:
        return DeploymentInput(
            deployment_id=item.deployment_id,
            repo=self.inp.repo,
            root=self.inp.root,
            revision=item.revision,
            trigger=item.trigger,
            requested_by=item.requested_by,
            relation=relation,
            latest=self.latest,
            queued_check_run_id=item.check_run_id,
            queue_summary=self._queue_markdown(),
            require_confirmation=item.trigger == "manual" or relation == "diverged",
            locks_queue=item.locks_queue,
            hotfix=item.hotfix,
        )

    async def _after_deployment(
        self,
        item: QueueItem,
        state: DeploymentState,
        message: str,
        latest: LatestDeployment | None,
    ) -> None:
        """A deployment ended with `state`: remember the outcome for the rollouts, and follow
        the latest.json it wrote (the lock is a function of it)."""
        opened: AuditRecord | None = None  # a hotfix lock its merge opens as it ends
        self.finished = _finished(self.inp.root, item, state, message)
        if latest is not None:
            # The child persisted latest.json (published, or a failed apply); the lock follows
            # it. An Unlock clicked during the run applied to the previous latest, and a new
            # locking deployment supersedes it.
            self.latest = latest
            self.queue.follow_lock(lock_from_latest(latest))
            self.unlock_unsaved = False
            hotfix = latest.hotfix
            merged = self.merges.get(hotfix.pr) if hotfix is not None else None
            if merged is not None:
                # Its pull request was merged while it ran: the wait it locks for is over.
                lock = self.queue.lock
                if lock.locked:
                    opened = unlocks.merge_audit_record(
                        self.inp.repo,
                        self.inp.root,
                        lock,
                        merged,
                        at=workflow.now(),
                        while_deploying=True,
                    )
                self._unlock_now(UnlockSignal(by=unlocks.merge_by(merged)))
        self.current = None
        # Before the patch MERGE_AUDIT such a lock opened without an audit row.
        if opened is not None and workflow.patched(MERGE_AUDIT):
            await clicks.audit(opened)

    async def _deployment_failed(self, item: QueueItem, message: str) -> None:
        """The deployment workflow itself failed (not the deployment it ran): say so on its
        check run and in its history row; it may have written latest.json first."""
        if self.current and self.current.check_run_id:
            item.check_run_id = self.current.check_run_id
        await self._check_run(
            item,
            status="completed",
            conclusion="failure",
            title="Deployment failed",
            message=message,
        )
        await self._record(item, "failed", message)
        await self._reload_latest()
        self.current = None

    async def _reload_latest(self) -> None:
        try:
            loaded = await calls.run(
                ACT_LOAD_LATEST,
                LoadLatestRequest(repo=self.inp.repo, root=self.inp.root),
                options=calls.STORE,
            )
        except ActivityError as err:
            workflow.logger.warning("reloading latest.json failed: %s", err.cause)
            return
        fresh = loaded.latest
        if fresh is not None and (
            self.latest is None or fresh.deployment_id != self.latest.deployment_id
        ):
            self.latest = fresh
            self.queue.follow_lock(lock_from_latest(fresh))
            self.unlock_unsaved = False

    async def _skip_behind(self, item: QueueItem) -> None:
        message = checkruns.behind(item, self.latest.revision if self.latest else "")
        # A merge that cannot deploy should be red: a failed check run.
        await self._check_run(
            item,
            status="completed",
            conclusion="failure",
            title="Skipped: behind the latest deployment",
            message=message,
        )
        await self._record(item, "skipped", message)

    async def _notify_promotions(self, finished: DeploymentFinished) -> None:
        """Rollouts of version patches wait for deployments (PromotionWorkflow): tell them.
        Never fails the root's queue: a rollout also reads latest.json when it (re)starts."""
        try:
            await calls.run(
                ACT_NOTIFY_PROMOTIONS,
                NotifyPromotionsRequest(repo=self.inp.repo, finished=finished),
                options=calls.NOTIFY,
            )
        except ActivityError as err:
            workflow.logger.warning("promotions not notified: %s", err.cause or err)

    # --- rows and check runs -------------------------------------------------------------------

    async def _record(self, item: QueueItem, state: DeploymentState, message: str) -> None:
        self.finished = _finished(self.inp.root, item, state, message)
        try:
            await calls.run(
                ACT_RECORD_DEPLOYMENT, self._history(item, state, message), options=calls.STORE
            )
        except ActivityError as err:
            workflow.logger.warning("recording %s failed: %s", item.deployment_id, err.cause)

    def _history(
        self, item: QueueItem, state: DeploymentState, message: str = ""
    ) -> DeploymentRecord:
        """The SQL history row of a queue item in `state` (what only the queue knows)."""
        return DeploymentRecord(
            deployment_id=item.deployment_id,
            repo=self.inp.repo.full_name,
            root=self.inp.root,
            revision=item.revision,
            trigger=item.trigger,
            state=state,
            requested_by=item.requested_by,
            check_run_id=item.check_run_id,
            message=message,
            at=workflow.now(),
            hotfix=item.hotfix,
        )

    def _writing_on(self) -> bool:
        """Another batch of queued check runs or rows, unless the history should continue as
        new (the rest are carried) or a deployment can start: writes give way to it. The item
        that starts may have no check run yet: its deployment creates one."""
        # About to continue as new: writes stop and the next run does the rest.
        return not self._should_continue_as_new() and not self._next_may_start()

    def _next_may_start(self) -> bool:
        """A deployment can start, or the running one has ended and the next may follow."""
        return (
            self._item_ready()
            or self._detached_ended()
            or (self.running_done is not None and self.running_done())
        )

    def _starting(self) -> QueueItem | None:
        """The item about to start, which is written alone before the batches."""
        return self.queue.items[0] if self._item_ready() else None

    async def _record_queued(self) -> None:
        """Queued items as SQL rows in state "queued", with the trigger and requester only
        the queue knows: a job page or /roots shows a waiting manual deployment as one."""
        front = self._starting()
        if front is not None and self.queue.claim_row(front):
            await self._record_rows([front])
        while self.queue.unrecorded and self._writing_on():
            await self._record_rows(self.queue.take_unrecorded(QUEUED_BATCH))

    async def _record_rows(self, items: list[QueueItem]) -> None:
        if not items:
            return
        try:
            await calls.run(
                ACT_RECORD_DEPLOYMENTS,
                DeploymentRecords(records=[self._history(i, "queued") for i in items]),
                options=calls.RECORD,
            )
        except ActivityError as err:
            workflow.logger.warning("recording queued items failed: %s", err.cause)

    async def _write_changed_check_runs(self) -> None:
        """Write the queued check runs that changed (new items, promoted ones, all merged ones
        when the lock comes or goes), a batch per activity in the order they changed, for as
        long as `_writing_on` lets. An item about to start that has no check run yet is
        written alone first: a push shows as queued at once."""
        front = self._starting()
        if front is not None and self.queue.claim_check_run(front):
            await self._write_check_runs([front])
        while self.queue.changed and self._writing_on():
            await self._write_check_runs(self.queue.take_changed(QUEUED_BATCH))

    async def _write_check_runs(self, items: list[QueueItem]) -> None:
        if not items:
            return
        requests = [
            checkruns.queued(self.inp.repo, self.inp.root, self.queue, i, self.unlock_refusals)
            for i in items
        ]
        try:
            written = await calls.run(
                ACT_QUEUE_CHECK_RUNS, CheckRunBatch(requests=requests), options=calls.GITHUB_BATCH
            )
        except ActivityError as err:
            # Check runs only show the queue: never fail the root's queue for them.
            workflow.logger.warning("queued check runs failed: %s", err.cause)
            return
        for item, ref in zip(items, written.refs, strict=False):
            item.check_run_id = ref.check_run_id

    async def _check_run(
        self, item: QueueItem, *, status: str, conclusion: str | None, title: str, message: str
    ) -> None:
        """Create or update an item's check run. Check runs only show the queue: a GitHub
        error that outlasts the retries is logged, never allowed to fail the root's queue."""
        request = checkrun.queue_item_request(
            self.inp.repo,
            self.inp.root,
            item,
            status=status,
            conclusion=conclusion,
            title=title,
            queue_markdown=self._queue_markdown(),
            message=message,
        )
        try:
            ref = await calls.run(ACT_CHECK_RUN, request, options=calls.GITHUB)
        except ActivityError as err:
            workflow.logger.warning("check run of %s failed: %s", item.deployment_id, err.cause)
            return
        item.check_run_id = ref.check_run_id

    def _queue_markdown(self) -> str:
        return checkruns.queue_table(self.queue, workflow.now())

    # --- what the Temporal UI shows ------------------------------------------------------------

    def _publish_state(self, state: str) -> None:
        if state != self.search_state:  # every upsert is a history event
            self.search_state = state
            searchattrs.upsert(state=state, keys=(SA_STATE,))
        self._details()

    def _details(self) -> None:
        lines = [f"**{self.inp.root}**"]
        if self.current:
            lines.append(
                f"Running: `{checkrun.short(self.current.revision)}` ({self.current.trigger}, "
                f"{self.current.state}), deployment `{self.current.deployment_id}`"
            )
        if self.latest:
            lines.append(
                f"Latest: `{checkrun.short(self.latest.revision)}` {self.latest.state} "
                f"({self.latest.trigger})"
            )
        lines.append(self._queue_markdown())
        workflow.set_current_details("\n\n".join(lines))


def _finished(
    root: str, item: QueueItem, state: DeploymentState, message: str
) -> DeploymentFinished | None:
    if state not in NOTIFY_STATES:
        return None
    return DeploymentFinished(
        root=root,
        revision=item.revision,
        deployment_id=item.deployment_id,
        state=state,
        message=message,
    )
