"""DeployWorkflow: the queue, lock and history of one root (`deploy:<owner>/<repo>:<root>`).

One deployment at a time. Manual items run before merge items (FIFO within each); a manual
deployment that reaches publish locks the queue for merge items until someone clicks Unlock.
Before an item runs it is validated against the latest deployed revision: behind → skipped;
diverged or manual → the review gate always asks. Signals keep being handled while a
deployment runs (queued check runs, duplicates, Unlock). Idle for 60 minutes (nothing queued,
nothing running) → the workflow completes; the next signal-with-start begins a fresh run that
reloads latest.json and rebuilds the lock from it.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NoReturn, cast

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
        IDLE_TIMEOUT_SECONDS,
        QUERY_HOLDING,
        QUERY_STATE,
        SA_REPO,
        SA_ROOT,
        SA_STATE,
        SIGNAL_DEPLOYMENT_UPDATE,
        SIGNAL_NEW_REVISION,
        SIGNAL_UNLOCK,
        STATE_QUEUE_ITEMS,
        TERMINAL_STATES,
        CheckRunBatch,
        CheckRunRequest,
        CurrentDeployment,
        DeployInput,
        DeploymentInput,
        DeploymentRecord,
        DeploymentRecords,
        DeploymentState,
        DeploymentUpdate,
        DeployState,
        LatestDeployment,
        LoadLatestRequest,
        LockState,
        NewRevision,
        PersistLatestRequest,
        QueueItem,
        Relation,
        RelationRequest,
        UnlockSignal,
        lock_from_latest,
        locks_queue,
        pack_queue,
        unpack_queue,
    )
    from shared.contracts.promotion import (
        DeploymentFinished,
        NotifyPromotionsRequest,
    )
    from workflows import calls, searchattrs
    from workflows.deployment import DeploymentWorkflow

# Finished deployments are signalled to PromotionWorkflows; older histories replay
# without it. Only outcomes a rollout acts on are sent.
PATCH_NOTIFY_PROMOTIONS = "deploy-notify-promotions"
NOTIFY_STATES = frozenset({"published", "verified", "unhealthy", "failed", "rejected", "timed_out"})
# Queued items get their SQL row when they enter the queue (job pages, /roots); older
# histories recorded a deployment only once it ran.
PATCH_RECORD_QUEUED = "record-queued"
# Signals that arrive during housekeeping's last activity are handled before the next item is
# picked (`_signals_came_in`); older histories picked the next item at once.
PATCH_SIGNALS_BEFORE_NEXT = "deploy-signals-before-next-item"
# Long enough to keep a busy root's history readable, well under Temporal's limits.
MAX_HISTORY_EVENTS = 10_000
# A long queue keeps the history bounded: queued items' check runs and rows are
# written in batches and only when they change, continue-as-new is checked inside every long
# loop, and a deployment running when the run continues as new runs on (abandoned, not
# terminated) and reports its end by signal. Older histories did none of this.
PATCH_BOUNDED = "deploy-bounded-queue"
QUEUED_BATCH = 50  # queued check runs or rows per activity
# A deployment an earlier run started: how often to ask whether it ended without telling.
DETACHED_CHECK = timedelta(minutes=30)
# The most merges one root's queue holds. The continue-as-new input carries the queue packed
# and the ids still to write; at 10,000 it measured 0.72 MB (docs/benchmarks.md, "Long
# queue"), well under Temporal's 2 MB payload limit, which a run could not continue past.
# A merge beyond it is refused on its check run; manual deployments are always queued.
MAX_QUEUED = 10_000
PATCH_QUEUE_FULL = "deploy-queue-full"
# Queued check runs and rows give way to a deployment that can start: none is written while
# one can (checked between batches, so a deployment that ends during a long rewrite is
# followed at once); they are written while it runs. Older histories wrote every batch first.
PATCH_WRITES_YIELD = "deploy-writes-yield"


@workflow.defn(name="DeployWorkflow")
class DeployWorkflow:
    def __init__(self) -> None:
        self.queue: list[QueueItem] = []
        self.lock = LockState()
        self.current: CurrentDeployment | None = None
        self.latest: LatestDeployment | None = None
        self.pending_signals: list[NewRevision] = []
        self.dirty_check_runs = False  # queued items' check runs need creating or refreshing
        self.unlock_unsaved = False  # an Unlock not yet written to latest.json
        self.early_unlock: UnlockSignal | None = None  # arrived before latest.json was read
        self.started = False
        self.search_state = ""
        self.finished: DeploymentFinished | None = None  # the last item's outcome
        self.unrecorded: list[str] = []  # queued items whose SQL row is missing or stale
        self.bounded = False  # PATCH_BOUNDED, decided once per run
        # bounded: queued items whose check run must be written (an ordered set of ids)
        self.changed: dict[str, None] = {}
        self.by_revision: dict[str, QueueItem] = {}  # the queue by revision: finds duplicates
        self.detached: QueueItem | None = None  # bounded: running, started by an earlier run
        self.running_done: Callable[[], bool] | None = None  # the running child's end
        self.ended: dict[str, DeploymentUpdate] = {}  # terminal updates, by deployment id
        self.idle_since: datetime | None = None

    # --- signals and queries ---------------------------------------------------------------

    @workflow.signal(name=SIGNAL_NEW_REVISION)
    def new_revision(self, signal: NewRevision) -> None:
        # Handled in the main loop: enqueueing needs workflow.uuid4 and the latest deployment.
        self.pending_signals.append(signal)

    @workflow.signal(name=SIGNAL_UNLOCK)
    def unlock(self, signal: UnlockSignal) -> None:
        if not self.started:
            # Signal-with-start of a finished root: the lock is rebuilt from latest.json
            # first, then this Unlock applies to it.
            self.early_unlock = signal
            return
        if not self.lock.locked or self.latest is None:
            return
        workflow.logger.info("queue unlocked by %s", signal.by or "someone")
        # The lock is a function of latest.json, so the Unlock is recorded there (by the main
        # loop, once no deployment is writing it) and survives an idle restart.
        self.latest = self.latest.model_copy(
            update={"unlocked_by": signal.by, "unlocked_at": workflow.now()}
        )
        self.lock = _lock_from(self.latest)
        self.unlock_unsaved = True
        self.dirty_check_runs = True
        self._merge_items_changed()

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
    def state(self) -> DeployState:
        now = workflow.now()
        front = self.queue[:STATE_QUEUE_ITEMS]
        return DeployState(
            repo=self.inp.repo.full_name,
            root=self.inp.root,
            queue=front,
            queue_ages_seconds=[(now - i.enqueued_at).total_seconds() for i in front],
            lock=self.lock,
            current=self.current,
            latest=self.latest,
            queue_length=len(self.queue),
        )

    @workflow.query(name=QUERY_HOLDING)
    def holding(self, revision: str) -> str | None:
        for running in (self.current, self.detached):
            if running is not None and running.revision == revision:
                return running.deployment_id
        queued = self.by_revision.get(revision)
        return queued.deployment_id if queued is not None else None

    # --- main loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        self.inp = inp
        self.bounded = self._bounds_history()
        self.queue = unpack_queue(inp.queue_packed) if inp.queue_packed else list(inp.queue)
        self.by_revision = {item.revision: item for item in self.queue}
        self.lock = inp.lock or LockState()
        self.latest = inp.latest
        if inp.running is not None:
            self.detached = inp.running
            self.current = inp.current
        # Queued items whose check run was not written yet when the last run ended.
        self.changed = dict.fromkeys(inp.changed)
        self.unrecorded = list(inp.unrecorded)
        self.unlock_unsaved = inp.unlock_unsaved
        for queued in self.queue:
            if queued.check_run_id is None:
                self._item_changed(queued)
        self.max_history_events = inp.max_history_events or MAX_HISTORY_EVENTS
        searchattrs.upsert(repo=inp.repo.full_name, root=inp.root, keys=(SA_REPO, SA_ROOT))
        if not inp.loaded_latest:
            loaded = await calls.run(
                ACT_LOAD_LATEST,
                LoadLatestRequest(repo=inp.repo, root=inp.root),
                options=calls.STORE,
            )
            self.latest = loaded.latest
            self.lock = _lock_from(self.latest)
        self.started = True
        if self.early_unlock is not None:
            self.unlock(self.early_unlock)
        self.idle_since = inp.last_activity_at or workflow.now()
        while True:
            await self._housekeeping()
            if self.bounded and self._should_continue_as_new():
                await self._continue_as_new(self.detached, self._detached_ended)
                # Returned: the detached deployment's end came in; handled before anything.
                if await self._wait_detached():
                    await self._item_done()
                continue
            if self._signals_came_in():
                continue
            if not self.bounded and self._should_continue_as_new():
                # Between deployments (a running child would be cut off), queue carried along.
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self._has_work():
                    workflow.continue_as_new(
                        DeployInput(
                            repo=inp.repo,
                            root=inp.root,
                            queue=self.queue,
                            lock=self.lock,
                            latest=self.latest,
                            loaded_latest=True,
                            last_activity_at=self.idle_since,
                            max_history_events=inp.max_history_events,
                        )
                    )
                continue
            if self.detached is not None:
                if await self._wait_detached():
                    await self._item_done()
                continue
            item = self._next_item()
            if item is not None:
                self.finished = None
                await self._run_item(item)
                await self._item_done()
                continue
            self._publish_state("locked" if self.queue else "idle")
            if self.queue:
                # Only merge items remain and the queue is locked: no idle timeout while they
                # wait; Unlock or a new signal wakes the loop.
                await workflow.wait_condition(self._has_work)
                continue
            remaining = IDLE_TIMEOUT_SECONDS - (workflow.now() - self.idle_since).total_seconds()
            try:
                await workflow.wait_condition(
                    self._has_work,
                    timeout=timedelta(seconds=max(remaining, 1)),
                    timeout_summary="idle",
                )
            except TimeoutError:
                if not self._has_work() and not self.queue:
                    # Signals that race this completion make the server reject it and replay
                    # the task with them, so none is lost.
                    return

    def _has_work(self) -> bool:
        return (
            bool(self.pending_signals)
            or (bool(self.changed) if self.bounded else self.dirty_check_runs)
            or (self.unlock_unsaved and self.current is None)
        )

    def _bounds_history(self) -> bool:
        return workflow.patched(PATCH_BOUNDED)

    def _detached_ended(self) -> bool:
        return self.detached is not None and self.detached.deployment_id in self.ended

    def _detached_check(self) -> timedelta:
        return DETACHED_CHECK

    def _detaches(self) -> bool:
        """Whether a running deployment may outlive this run (continue-as-new during it)."""
        return self.bounded

    async def _item_done(self) -> None:
        if self.finished is not None and workflow.patched(PATCH_NOTIFY_PROMOTIONS):
            await self._notify_promotions(self.finished)
        self.idle_since = workflow.now()

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
            DeployInput(
                repo=inp.repo,
                root=inp.root,
                queue_packed=pack_queue(self.queue),
                lock=self.lock,
                latest=self.latest,
                loaded_latest=True,
                last_activity_at=self.idle_since,
                max_history_events=inp.max_history_events,
                running=running,
                current=self.current if running is not None else None,
                changed=list(self.changed),
                unrecorded=self.unrecorded,
                unlock_unsaved=self.unlock_unsaved,
            )
        )

    async def _wait_detached(self) -> bool:
        """For a deployment an earlier run started: wait until it ends (True, with the outcome
        handled like a child's), or until work comes in (False). Asks now and then whether it
        ended without telling (it failed), so the queue cannot wait for ever."""
        item = self.detached
        assert item is not None
        if item.deployment_id not in self.ended:
            try:
                await workflow.wait_condition(
                    lambda: item.deployment_id in self.ended or self._has_work(),
                    timeout=self._detached_check(),
                    timeout_summary="deployment",
                )
            except builtins.TimeoutError:
                found = await calls.run(
                    ACT_DEPLOYMENT_STATUS,
                    item.deployment_id,
                    options=calls.STORE,
                )
                if found.status == "running" or item.deployment_id in self.ended:
                    return False
                self.detached = None
                if found.result is not None:
                    done = found.result
                    self._after_deployment(item, done.state, done.message, done.latest)
                else:
                    message = f"The deployment workflow ended ({found.status})."
                    await self._deployment_failed(item, message)
                return True
            if item.deployment_id not in self.ended:
                return False
        update = self.ended.pop(item.deployment_id)
        self.detached = None
        self._after_deployment(item, update.state, update.message, update.latest)
        return True

    def _signals_came_in(self) -> bool:
        """Signals arrived while housekeeping's last activity ran (an Unlock to persist, a
        manual revision that goes first): another round before the next item is picked."""
        if self.bounded:
            # Queued check runs still to write do not hold the next item: they are written
            # while it runs (an Unlock of 10,000 waiting revisions rewrites 10,000).
            return bool(self.pending_signals) or (self.unlock_unsaved and self.current is None)
        return self._has_work() and workflow.patched(PATCH_SIGNALS_BEFORE_NEXT)

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
        yields = self._writes_yield()
        if self.bounded:
            await self._write_changed_check_runs(yields)
        elif self.dirty_check_runs:
            await self._refresh_queued_check_runs()
        if self.unrecorded:
            # after the check runs: the row links the item's queued check run
            await self._record_queued(yields)

    def _writes_yield(self) -> bool:
        return self.bounded and workflow.patched(PATCH_WRITES_YIELD)

    def _writing_on(self, yields: bool) -> bool:
        """Bounded writes: another batch, unless the history should continue as new (the
        rest are carried) or, when they yield, a deployment can start. The item that starts
        may have no check run yet: its deployment creates one."""
        return not self._continuing() and not (yields and self._next_may_start())

    def _next_may_start(self) -> bool:
        """A deployment can start, or the running one has ended and the next may follow."""
        return (
            self._item_ready()
            or self._detached_ended()
            or (self.running_done is not None and self.running_done())
        )

    async def _enqueue(self, signal: NewRevision) -> None:
        locks = signal.trigger == "manual" and (
            # A re-run repeats the latest attempt, lock included; any other manual deployment
            # (the API, a rollback) locks the queue.
            signal.reason != "rerequested" or (self.latest is not None and _locks(self.latest))
        )
        queued = self.by_revision.get(signal.revision)
        if queued is not None:
            if signal.trigger == "manual" and queued.trigger == "merge":
                # A manual request for a queued merge revision promotes it.
                queued.trigger = "manual"
                queued.requested_by = signal.requested_by
                queued.reason = signal.reason
                queued.locks_queue = locks
                self._sort_queue()
                self.dirty_check_runs = True
                self._item_changed(queued)
                self.unrecorded.append(queued.deployment_id)
            return
        if self.current and self.current.revision == signal.revision:
            return
        if self.detached and self.detached.revision == signal.revision:
            return
        if (
            signal.reason == "rerequested"
            and self.latest is not None
            and signal.revision != self.latest.revision
        ):
            await self._refuse_rerun(signal)
            return
        if (
            signal.trigger == "merge"
            and len(self.queue) >= self._max_queued()
            and workflow.patched(PATCH_QUEUE_FULL)
        ):
            await self._refuse_full(signal)
            return
        item = QueueItem(
            # no uuid4 draw when the gateway chose the id: new signals only, replay-safe
            deployment_id=signal.deployment_id or str(workflow.uuid4()),
            revision=signal.revision,
            trigger=signal.trigger,
            requested_by=signal.requested_by,
            reason=signal.reason,
            enqueued_at=workflow.now(),
            locks_queue=locks,
        )
        self._insert(item)
        self.dirty_check_runs = True  # creates its check run and refreshes the others' tables
        self._item_changed(item)
        self.unrecorded.append(item.deployment_id)

    async def _refuse_rerun(self, signal: NewRevision) -> None:
        latest = self.latest.revision if self.latest else ""
        workflow.logger.info(
            "re-run of %s refused: the latest deployment attempt is %s", signal.revision, latest
        )
        # A check run says why, so the click on Re-run does not vanish without an answer.
        await self._refuse(
            signal,
            conclusion="skipped",
            title="Re-run refused",
            message=(
                f"Only the latest deployment attempt can be re-run, and that is "
                f"`{checkrun.short(latest)}`, not `{checkrun.short(signal.revision)}`. "
                "Use a manual deployment to go to another revision."
            ),
        )

    async def _refuse_full(self, signal: NewRevision) -> None:
        workflow.logger.warning(
            "merge %s not queued: the queue holds %d deployments, its most",
            signal.revision,
            len(self.queue),
        )
        waiting = "a lock" if self.lock.locked else "the deployments ahead"
        await self._refuse(
            signal,
            conclusion="failure",
            title="Queue full",
            message=(
                f"This root's queue already holds {len(self.queue):,} deployments waiting "
                f"(held by {waiting}), the most one root's queue keeps, so "
                f"`{checkrun.short(signal.revision)}` was not queued. A later merge carries "
                "its changes; to deploy it now, deploy it manually (manual deployments are "
                "always queued, ahead of merges)"
                + (" or unlock the root." if self.lock.locked else ".")
            ),
        )

    def _max_queued(self) -> int:
        return MAX_QUEUED

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

    def _sort_queue(self) -> None:
        # Stable: manual before merge, FIFO within each priority.
        self.queue.sort(key=lambda i: 0 if i.trigger == "manual" else 1)

    def _insert(self, item: QueueItem) -> None:
        """Where _sort_queue would put a new item, without sorting a long queue again."""
        self.by_revision[item.revision] = item
        if item.trigger != "manual":
            self.queue.append(item)
            return
        at = next((n for n, other in enumerate(self.queue) if other.trigger != "manual"), None)
        self.queue.insert(len(self.queue) if at is None else at, item)

    def _item_ready(self) -> bool:
        """Nothing runs and the front of the queue may start (manual items come first)."""
        return (
            self.current is None
            and self.detached is None
            and bool(self.queue)
            and (self.queue[0].trigger == "manual" or not self.lock.locked)
        )

    def _next_item(self) -> QueueItem | None:
        for item in self.queue:
            if item.trigger == "manual" or not self.lock.locked:
                self.queue.remove(item)
                del self.by_revision[item.revision]
                return item
        return None

    async def _run_item(self, item: QueueItem) -> None:
        inp = self.inp
        self.current = CurrentDeployment(
            deployment_id=item.deployment_id,
            revision=item.revision,
            trigger=item.trigger,
            state="queued",
            started_at=workflow.now(),
            check_run_id=item.check_run_id,
        )
        self.dirty_check_runs = True  # the others' queue tables lost this item
        self._publish_state("running")
        base = self.latest.revision if self.latest else None
        try:
            relation = cast(
                Relation,
                await calls.run(
                    ACT_REVISION_RELATION,
                    RelationRequest(repo=inp.repo, base=base, head=item.revision),
                    options=calls.STORE,
                ),
            )
        except ActivityError as err:
            # A non-retryable answer (say, a revision the mirror does not have) fails this
            # item, not the root's queue.
            message = f"Could not compare `{checkrun.short(item.revision)}` with the latest "
            message += f"deployed revision: {err.cause or err}"
            await self._check_run(
                item, status="completed", conclusion="failure", title="Failed", message=message
            )
            await self._record(item, "failed", message)
            self.current = None
            return
        if relation == "behind" and item.trigger == "merge":
            await self._skip_behind(item)
            self.current = None
            return
        child = await workflow.start_child_workflow(
            DeploymentWorkflow.run,
            DeploymentInput(
                deployment_id=item.deployment_id,
                repo=inp.repo,
                root=inp.root,
                revision=item.revision,
                trigger=item.trigger,
                requested_by=item.requested_by,
                relation=relation,
                latest=self.latest,
                queued_check_run_id=item.check_run_id,
                queue_summary=self._queue_markdown(),
                require_confirmation=item.trigger == "manual" or relation == "diverged",
                locks_queue=item.locks_queue,
            ),
            id=item.deployment_id,
            static_summary=(
                f"{item.trigger} deployment of {inp.root} at {checkrun.short(item.revision)}"
            ),
            # Bounded: when this run continues as new, the deployment runs on.
            parent_close_policy=(
                ParentClosePolicy.ABANDON if self._detaches() else ParentClosePolicy.TERMINATE
            ),
        )
        # The review gate can stay open for days: keep queueing, dropping duplicates and
        # unlocking meanwhile.
        self.running_done = child.done
        while not child.done():
            await workflow.wait_condition(lambda: child.done() or self._has_work())
            await self._housekeeping()
            if self._detaches() and not child.done() and self._should_continue_as_new():
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
        self._after_deployment(item, result.state, result.message, result.latest)

    def _after_deployment(
        self,
        item: QueueItem,
        state: DeploymentState,
        message: str,
        latest: LatestDeployment | None,
    ) -> None:
        """A deployment ended with `state`: remember the outcome for the rollouts, and follow
        the latest.json it wrote (the lock is a function of it)."""
        self.finished = _finished(self.inp.root, item, state, message)
        if latest is not None:
            # The child persisted latest.json (published, or a failed apply); the lock follows
            # it. An Unlock clicked during the run applied to the previous latest, and a new
            # locking deployment supersedes it.
            before = self.lock
            self.latest = latest
            self.lock = _lock_from(self.latest)
            self.unlock_unsaved = False
            self._lock_moved(before)
        self.current = None
        self.dirty_check_runs = True

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
        before = self.lock
        await self._reload_latest()
        self._lock_moved(before)
        self.current = None
        self.dirty_check_runs = True

    def _item_changed(self, item: QueueItem) -> None:
        """Bounded: this queued item's check run must be written (new, or its state moved)."""
        self.changed[item.deployment_id] = None

    def _lock_moved(self, before: LockState) -> None:
        # Waiting check runs name the locking deployment, so a new lock by another
        # deployment rewrites them as much as a lock that came or went.
        if (self.lock.locked, self.lock.by_deployment) != (before.locked, before.by_deployment):
            self._merge_items_changed()

    def _merge_items_changed(self) -> None:
        """The lock came or went: merged items wait for an Unlock, or no longer."""
        for item in self.queue:
            if item.trigger == "merge":
                self._item_changed(item)

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
            self.lock = _lock_from(self.latest)
            self.unlock_unsaved = False

    async def _skip_behind(self, item: QueueItem) -> None:
        latest = self.latest.revision if self.latest else ""
        message = (
            f"Skipped: `{checkrun.short(item.revision)}` is behind the latest deployed revision "
            f"`{checkrun.short(latest)}`; deploying it would roll the root back. Use a manual "
            "deployment (rollback) if that is what you want."
        )
        # The issue asks for a failed check run: a merge that cannot deploy should be red.
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

    async def _record(self, item: QueueItem, state: DeploymentState, message: str) -> None:
        self.finished = _finished(self.inp.root, item, state, message)
        try:
            await calls.run(
                ACT_RECORD_DEPLOYMENT,
                self._history(item, state, message),
                options=calls.STORE,
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
        )

    async def _record_queued(self, yields: bool = False) -> None:
        """Queued items as SQL rows in state "queued", with the trigger and requester only
        the queue knows: a job page or /roots shows a waiting manual deployment as one."""
        if not workflow.patched(PATCH_RECORD_QUEUED):
            self.unrecorded = []
            return
        if self.bounded:
            # the item about to start first, alone; then a batch per activity, for as long as
            # `_writing_on` lets
            front = self._starting(yields)
            if front is not None and front.deployment_id in self.unrecorded:
                self.unrecorded.remove(front.deployment_id)
                await self._record_rows([front])
            while self.unrecorded and self._writing_on(yields):
                wanted = set(self.unrecorded[:QUEUED_BATCH])
                self.unrecorded = self.unrecorded[QUEUED_BATCH:]
                await self._record_rows([i for i in self.queue if i.deployment_id in wanted])
            return
        pending, self.unrecorded = self.unrecorded, []
        for item in [i for i in self.queue if i.deployment_id in pending]:
            try:
                await calls.run(
                    ACT_RECORD_DEPLOYMENT,
                    self._history(item, "queued"),
                    options=calls.RECORD,
                )
            except ActivityError as err:
                workflow.logger.warning(
                    "recording queued %s failed: %s", item.deployment_id, err.cause
                )

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

    def _starting(self, yields: bool) -> QueueItem | None:
        """The item about to start, when writes yield to it."""
        return self.queue[0] if yields and self._item_ready() else None

    async def _write_changed_check_runs(self, yields: bool = False) -> None:
        """Bounded: write the queued check runs that changed (new items, promoted ones, all
        merged ones when the lock comes or goes), a batch per activity in the order they
        changed, for as long as `_writing_on` lets. When they yield to an item about to start
        that has no check run yet, that one is written alone first: a push shows as queued
        at once, as before."""
        front = self._starting(yields)
        if front is not None and front.check_run_id is None and front.deployment_id in self.changed:
            del self.changed[front.deployment_id]
            await self._write_check_runs([front])
        while self.changed and self._writing_on(yields):
            wanted = set(itertools.islice(self.changed, QUEUED_BATCH))
            for deployment_id in wanted:
                del self.changed[deployment_id]
            await self._write_check_runs([i for i in self.queue if i.deployment_id in wanted])

    async def _write_check_runs(self, items: list[QueueItem]) -> None:
        if not items:
            return
        requests = [self._queued_request(i) for i in items]
        try:
            written = await calls.run(
                ACT_QUEUE_CHECK_RUNS,
                CheckRunBatch(requests=requests),
                options=calls.GITHUB_BATCH,
            )
        except ActivityError as err:
            # Check runs only show the queue: never fail the root's queue for them.
            workflow.logger.warning("queued check runs failed: %s", err.cause)
            return
        for item, ref in zip(items, written.refs, strict=False):
            item.check_run_id = ref.check_run_id

    def _queued_request(self, item: QueueItem) -> CheckRunRequest:
        """A queued item's check run: waiting for an Unlock, or queued with where it stands."""
        waiting = item.trigger == "merge" and self.lock.locked
        request = checkrun.request(
            repo=self.inp.repo,
            root=self.inp.root,
            revision=item.revision,
            deployment_id=item.deployment_id,
            check_run_id=item.check_run_id,
            status="completed" if waiting else "queued",
            conclusion="action_required" if waiting else None,
            title="Waiting: the queue is locked" if waiting else "Queued",
            trigger=item.trigger,
            requested_by=item.requested_by,
            approved_by=None,
            queue_markdown=(checkrun.lock_line(self.lock) + "\n\n" if waiting else "")
            + checkrun.queued_summary(self.queue, item),
            message=(
                "A manual deployment locked this root's queue. Merged revisions wait until "
                "someone clicks **Unlock**."
                if waiting
                else ""
            ),
            actions=[checkrun.UNLOCK] if waiting else [],
        )
        return request.model_copy(update={"root_page": True})

    async def _refresh_queued_check_runs(self) -> None:
        """Create missing queued check runs and bring every queued one's summary up to date."""
        self.dirty_check_runs = False
        for item in list(self.queue):
            if item.trigger == "merge" and self.lock.locked:
                await self._check_run(
                    item,
                    status="completed",
                    conclusion="action_required",
                    title="Waiting: the queue is locked",
                    message=(
                        "A manual deployment locked this root's queue. Merged revisions wait "
                        "until someone clicks **Unlock**."
                    ),
                    unlock=True,
                )
            else:
                await self._check_run(item, status="queued", conclusion=None, title="Queued")

    async def _check_run(
        self,
        item: QueueItem,
        *,
        status: str,
        conclusion: str | None,
        title: str,
        message: str = "",
        unlock: bool = False,
    ) -> None:
        """Create or update an item's check run. Check runs only show the queue: a GitHub
        error that outlasts the retries is logged, never allowed to fail the root's queue."""
        inp = self.inp
        request = checkrun.request(
            repo=inp.repo,
            root=inp.root,
            revision=item.revision,
            deployment_id=item.deployment_id,
            check_run_id=item.check_run_id,
            status=status,
            conclusion=conclusion,
            title=title,
            trigger=item.trigger,
            requested_by=item.requested_by,
            approved_by=None,
            queue_markdown=self._queue_markdown(),
            message=message,
            actions=[checkrun.UNLOCK] if unlock else [],
        )
        try:
            ref = await calls.run(ACT_CHECK_RUN, request, options=calls.GITHUB)
        except ActivityError as err:
            workflow.logger.warning("check run of %s failed: %s", item.deployment_id, err.cause)
            return
        item.check_run_id = ref.check_run_id

    def _queue_markdown(self) -> str:
        return checkrun.queue_table(self.queue, workflow.now(), self.lock)

    def _continuing(self) -> bool:
        """Bounded: this run is about to continue as new, so writes stop and the next run
        does the rest. Not while a deployment it cannot leave runs (it waits that out)."""
        return self._should_continue_as_new() and (self.current is None or self._detaches())

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self.max_history_events
        )

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
        lines.append(checkrun.queue_table(self.queue, workflow.now(), self.lock))
        workflow.set_current_details("\n\n".join(lines))


def _locks(latest: LatestDeployment) -> bool:
    return locks_queue(latest)


def _lock_from(latest: LatestDeployment | None) -> LockState:
    """The queue lock is a function of latest.json, so a restarted workflow rebuilds it (the
    same function the root page reads it with)."""
    return lock_from_latest(latest)


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
