"""DeployWorkflow: the queue, lock and history of one root (`deploy:<owner>/<repo>:<root>`).

One deployment at a time. Manual items run before merge items (FIFO within each); a manual
deployment locks the queue for merge items until someone clicks Unlock. Before an item runs it
is validated against the latest deployed revision: behind → skipped; diverged or manual → the
review gate always asks. Idle for 60 minutes (nothing queued, nothing running) → the workflow
completes; the next signal-with-start begins a fresh run that reloads latest.json.
"""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from shared import checkrun
    from shared.payloads import (
        ACT_CHECK_RUN,
        ACT_LOAD_LATEST,
        ACT_REVISION_RELATION,
        IDLE_TIMEOUT_SECONDS,
        QUERY_STATE,
        SA_REPO,
        SA_ROOT,
        SA_STATE,
        SIGNAL_DEPLOYMENT_UPDATE,
        SIGNAL_NEW_REVISION,
        SIGNAL_UNLOCK,
        CheckRunRef,
        CurrentDeployment,
        DeployInput,
        DeploymentUpdate,
        DeployState,
        LatestDeployment,
        LatestLookup,
        LoadLatestRequest,
        LockState,
        NewRevision,
        QueueItem,
        Relation,
        RelationRequest,
        RenderInput,
        RenderResult,
        UnlockSignal,
    )
    from workflows import calls, searchattrs
    from workflows.render import RenderWorkflow

# Long enough to keep a busy root's history readable, well under Temporal's limits.
MAX_HISTORY_EVENTS = 10_000


@workflow.defn(name="DeployWorkflow")
class DeployWorkflow:
    def __init__(self) -> None:
        self.queue: list[QueueItem] = []
        self.lock = LockState()
        self.current: CurrentDeployment | None = None
        self.latest: LatestDeployment | None = None
        self.pending_signals: list[NewRevision] = []
        self.dirty_check_runs = False  # queued items' check runs need refreshing

    # --- signals and queries ---------------------------------------------------------------

    @workflow.signal(name=SIGNAL_NEW_REVISION)
    def new_revision(self, signal: NewRevision) -> None:
        # Handled in the main loop: enqueueing needs workflow.uuid4 and the latest deployment.
        self.pending_signals.append(signal)

    @workflow.signal(name=SIGNAL_UNLOCK)
    def unlock(self, signal: UnlockSignal) -> None:
        if self.lock.locked:
            workflow.logger.info("queue unlocked", extra={"by": signal.by})
            self.lock = LockState()
            self.dirty_check_runs = True

    @workflow.signal(name=SIGNAL_DEPLOYMENT_UPDATE)
    def deployment_update(self, update: DeploymentUpdate) -> None:
        if self.current and self.current.deployment_id == update.deployment_id:
            self.current.state = update.state
            if update.check_run_id:
                self.current.check_run_id = update.check_run_id
            self._details()

    @workflow.query(name=QUERY_STATE)
    def state(self) -> DeployState:
        now = workflow.now()
        return DeployState(
            repo=self.inp.repo.full_name,
            root=self.inp.root,
            queue=self.queue,
            queue_ages_seconds=[(now - i.enqueued_at).total_seconds() for i in self.queue],
            lock=self.lock,
            current=self.current,
            latest=self.latest,
        )

    # --- main loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        self.inp = inp
        self.queue = list(inp.queue)
        self.lock = inp.lock or LockState()
        self.latest = inp.latest
        searchattrs.upsert(repo=inp.repo.full_name, root=inp.root, keys=(SA_REPO, SA_ROOT))
        if not inp.loaded_latest:
            loaded = await calls.short(
                ACT_LOAD_LATEST, LoadLatestRequest(repo=inp.repo, root=inp.root), LatestLookup
            )
            self.latest = loaded.latest
            self.lock = _lock_from(self.latest)
        idle_since = inp.last_activity_at or workflow.now()
        while True:
            await self._take_signals()
            if self.dirty_check_runs:
                await self._refresh_queued_check_runs()
            item = self._next_item()
            if item is not None:
                await self._run_item(item)
                idle_since = workflow.now()
                continue
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                await self._take_signals()
                workflow.continue_as_new(
                    DeployInput(
                        repo=inp.repo,
                        root=inp.root,
                        queue=self.queue,
                        lock=self.lock,
                        latest=self.latest,
                        loaded_latest=True,
                        last_activity_at=idle_since,
                    )
                )
            self._publish_state("locked" if self.queue else "idle")
            if self.queue:
                # Only merge items remain and the queue is locked: wait for Unlock or a signal.
                await workflow.wait_condition(
                    lambda: (
                        bool(self.pending_signals) or not self.lock.locked or self.dirty_check_runs
                    )
                )
                continue
            remaining = IDLE_TIMEOUT_SECONDS - (workflow.now() - idle_since).total_seconds()
            if remaining <= 0:
                return
            try:
                await workflow.wait_condition(
                    lambda: bool(self.pending_signals),
                    timeout=timedelta(seconds=remaining),
                    timeout_summary="idle",
                )
            except TimeoutError:
                if not self.pending_signals and not self.queue:
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    if not self.pending_signals:
                        return

    async def _take_signals(self) -> None:
        while self.pending_signals:
            signal = self.pending_signals.pop(0)
            await self._enqueue(signal)

    async def _enqueue(self, signal: NewRevision) -> None:
        running = self.current.revision if self.current else None
        if (
            signal.reason == "rerequested"
            and self.latest
            and signal.revision != self.latest.revision
        ):
            workflow.logger.info(
                "re-run refused: not the latest deployment attempt",
                extra={"revision": signal.revision, "latest": self.latest.revision},
            )
            return
        for item in self.queue:
            if item.revision == signal.revision:
                if signal.trigger == "manual" and item.trigger == "merge":
                    # A manual request for a queued merge revision promotes it.
                    item.trigger = "manual"
                    item.requested_by = signal.requested_by
                    item.reason = signal.reason
                    self._sort_queue()
                    self.dirty_check_runs = True
                return
        if running == signal.revision and signal.reason != "rerequested":
            return
        item = QueueItem(
            deployment_id=str(workflow.uuid4()),
            revision=signal.revision,
            trigger=signal.trigger,
            requested_by=signal.requested_by,
            reason=signal.reason,
            enqueued_at=workflow.now(),
        )
        self.queue.append(item)
        self._sort_queue()
        ref = await self._queued_check_run(item)
        item.check_run_id = ref.check_run_id
        self.dirty_check_runs = True

    def _sort_queue(self) -> None:
        # Stable: manual before merge, FIFO within each priority.
        self.queue.sort(key=lambda i: 0 if i.trigger == "manual" else 1)

    def _next_item(self) -> QueueItem | None:
        for item in self.queue:
            if item.trigger == "manual" or not self.lock.locked:
                self.queue.remove(item)
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
        self._publish_state("running")
        base = self.latest.revision if self.latest else None
        relation = cast(
            Relation,
            await calls.short(
                ACT_REVISION_RELATION,
                RelationRequest(repo=inp.repo, base=base, head=item.revision),
                str,
            ),
        )
        if relation == "behind" and item.trigger == "merge":
            await self._skip_behind(item)
            self.current = None
            self.dirty_check_runs = True
            return
        try:
            result: RenderResult = await workflow.execute_child_workflow(
                RenderWorkflow.run,
                RenderInput(
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
                ),
                id=item.deployment_id,
                static_summary=(
                    f"{item.trigger} deployment of {inp.root} at {checkrun.short(item.revision)}"
                ),
            )
        except ChildWorkflowError as err:
            workflow.logger.error(
                "deployment workflow failed",
                extra={"deployment": item.deployment_id, "error": str(err)},
            )
            self.current = None
            self.dirty_check_runs = True
            return
        if result.latest is not None:
            # The child persisted latest.json; mirror it here for the next validation.
            self.latest = result.latest
            if item.trigger == "manual" and item.reason not in ("rerequested",):
                self.lock = LockState(
                    locked=True,
                    by_deployment=item.deployment_id,
                    revision=item.revision,
                    since=workflow.now(),
                )
        self.current = None
        self.dirty_check_runs = True

    async def _skip_behind(self, item: QueueItem) -> None:
        latest = self.latest.revision if self.latest else ""
        message = (
            f"Skipped: `{checkrun.short(item.revision)}` is behind the latest deployed revision "
            f"`{checkrun.short(latest)}`; deploying it would roll the root back. Use a manual "
            "deployment (rollback) if that is what you want."
        )
        await self._check_run(
            item,
            status="completed",
            conclusion="skipped",
            title="Skipped: behind the latest deployment",
            message=message,
        )

    async def _queued_check_run(self, item: QueueItem) -> CheckRunRef:
        return await self._check_run(item, status="queued", conclusion=None, title="Queued")

    async def _refresh_queued_check_runs(self) -> None:
        self.dirty_check_runs = False
        for item in list(self.queue):
            blocked = item.trigger == "merge" and self.lock.locked
            if blocked:
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
    ) -> CheckRunRef:
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
            summary_text=checkrun.summary(
                state=title,
                root=inp.root,
                revision=item.revision,
                trigger=item.trigger,
                requested_by=item.requested_by,
                approved_by=None,
                queue_markdown=self._queue_markdown(),
                message=message,
            ),
            actions=[checkrun.UNLOCK] if unlock else [],
        )
        ref = await calls.short(ACT_CHECK_RUN, request, CheckRunRef)
        item.check_run_id = ref.check_run_id
        return ref

    def _queue_markdown(self) -> str:
        return checkrun.queue_table(self.queue, workflow.now(), self.lock)

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > MAX_HISTORY_EVENTS
        )

    def _publish_state(self, state: str) -> None:
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


def _lock_from(latest: LatestDeployment | None) -> LockState:
    """After a restart the lock is rebuilt from latest.json: a manual deployment that reached
    publish (successfully or not) keeps merged revisions waiting."""
    if latest and latest.trigger == "manual" and latest.state in ("published", "failed"):
        return LockState(
            locked=True,
            by_deployment=latest.deployment_id,
            revision=latest.revision,
            since=latest.finished_at,
        )
    return LockState()
