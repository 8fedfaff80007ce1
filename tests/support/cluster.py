"""The embedded stack with two workers, generated fleets to drive on it, and the ways to look at
Temporal, SQL and processes from outside: the world of the fault-injection suite
(`tests/chaos/`) and of the fleet-wide benchmark (`tests/bench/fleetwide.py`).

Everything is a real process on 127.0.0.1 (`DevStack`: the Temporal dev server with its state in
a SQLite file, `python -m gateway`, and here two `python -m worker` processes with their own
`ROLLWRIGHT_WORKER_ID`s and git caches), the GitHub emulator in this process (a thread, driven
through its public methods), and real git repositories. The faults the chaos suite injects are
what an operator meets: SIGKILL of a process group, a restart on the same state.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.enums.v1 import EventType, PendingActivityState, TaskQueueType, TimeoutType
from temporalio.api.failure.v1 import Failure
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

from shared.contracts.deploy import QUERY_STATE, RootQueueState, deploy_workflow_id
from shared.devstack import fleetrepo, temporal
from shared.devstack.processes import Child
from shared.devstack.stack import DevStack, StackOptions
from shared.engine import yamldoc
from shared.stores.sql.engine import Database
from tests.bench import fleetgen
from tests.support.fleet import FleetDriver
from tests.support.stack import inherited_env

T = TypeVar("T")
WORKERS = ("w1", "w2")


def _quiet(line: str) -> None:
    return None


@dataclass
class ActivityRun:
    """One scheduling of an activity, as the workflow's history tells it."""

    task_queue: str
    attempt: int = 0  # of the last attempt started (0: none was)
    identity: str = ""  # the worker that started it
    earlier: str = ""  # why the attempt before it ended
    outcome: str = "pending"


def _failure(failure: Failure) -> str:
    """A history failure in a few words: the timeout's kind, or the message."""
    if failure.HasField("timeout_failure_info"):
        kind = TimeoutType.Name(failure.timeout_failure_info.timeout_type)
        return "timed out: " + kind.removeprefix("TIMEOUT_TYPE_").lower().replace("_", "-")
    return failure.message


class TemporalView:
    """A Temporal client on an event loop in a thread of its own, so the synchronous harness
    can query and describe workflows between its steps. The client reconnects by itself after
    the server was restarted."""

    def __init__(self, address: str, namespace: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.client: Client = self.run(temporal.connect(address, namespace))

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def describe(self, workflow_id: str) -> WorkflowExecutionDescription | None:
        async def describe() -> WorkflowExecutionDescription | None:
            try:
                return await self.client.get_workflow_handle(workflow_id).describe()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    return None
                raise

        return self.run(describe())

    def deploy_state(self, repo: str, root: str) -> RootQueueState | None:
        """The root's queue, lock and current deployment (None: no such workflow running)."""
        return self.query(deploy_workflow_id(repo, root), QUERY_STATE, RootQueueState)

    def query(self, workflow_id: str, name: str, result_type: type[T]) -> T | None:
        """Query `name` of the workflow (None: there is no such workflow)."""

        async def query() -> T | None:
            handle = self.client.get_workflow_handle(workflow_id)
            try:
                answer: T = await handle.query(name, result_type=result_type)
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    return None
                raise
            return answer

        return self.run(query())

    def pollers(self, task_queue: str) -> set[str]:
        """The identities (`<pid>@<host>`) polling `task_queue` for activities lately."""

        async def describe() -> set[str]:
            answer = await self.client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=self.client.namespace,
                    task_queue=TaskQueue(name=task_queue),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
                )
            )
            return {p.identity for p in answer.pollers}

        return self.run(describe())

    def running_activity(self, workflow_id: str, activity: str) -> str | None:
        """The identity of the worker running `activity` of the workflow right now (its
        attempt started and not finished), or None."""
        description = self.describe(workflow_id)
        if description is None:
            return None
        for pending in description.raw_description.pending_activities:
            if pending.activity_type.name == activity and pending.last_worker_identity:
                started = pending.last_started_time.ToSeconds() > 0
                if started and pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
                    return str(pending.last_worker_identity)
        return None

    def activity_runs(self, workflow_id: str, activity: str) -> list[ActivityRun]:
        """Each scheduling of `activity` by the workflow, from its history. Temporal records
        only the last attempt of a scheduling (its worker, and why the one before it ended),
        so attempts lost before it show in `attempt` and `earlier` only."""

        async def history() -> list[ActivityRun]:
            handle = self.client.get_workflow_handle(workflow_id)
            runs: dict[int, ActivityRun] = {}
            async for event in handle.fetch_history_events():
                kind = event.event_type
                if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    scheduled = event.activity_task_scheduled_event_attributes
                    if scheduled.activity_type.name == activity:
                        runs[event.event_id] = ActivityRun(scheduled.task_queue.name)
                elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                    started = event.activity_task_started_event_attributes
                    if (run := runs.get(started.scheduled_event_id)) is not None:
                        run.attempt, run.identity = started.attempt, started.identity
                        run.earlier = _failure(started.last_failure)
                elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                    completed = event.activity_task_completed_event_attributes
                    if (run := runs.get(completed.scheduled_event_id)) is not None:
                        run.outcome = "completed"
                elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
                    failed = event.activity_task_failed_event_attributes
                    if (run := runs.get(failed.scheduled_event_id)) is not None:
                        run.outcome = f"failed ({_failure(failed.failure)})"
                elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
                    timed_out = event.activity_task_timed_out_event_attributes
                    if (run := runs.get(timed_out.scheduled_event_id)) is not None:
                        run.outcome = _failure(timed_out.failure)
            return list(runs.values())

        return self.run(history())

    def executions(self, query: str) -> list[WorkflowExecution]:
        async def listing() -> list[WorkflowExecution]:
            return [w async for w in self.client.list_workflows(query)]

        return self.run(listing(), timeout=120)


class Fleet(FleetDriver):
    """A generated fleet repository (`<owner>/<name>`), committed and served."""

    def __init__(
        self,
        cluster: Cluster,
        name: str,
        repo: Path,
        roots: list[str],
        timeout: float,
        poll: float,
    ) -> None:
        super().__init__(cluster.stack, cluster.owner, name, repo, timeout=timeout, poll=poll)
        self.cluster = cluster
        self.roots = roots

    def deploy_state(self, root: str) -> RootQueueState | None:
        return self.cluster.temporal.deploy_state(self.full_name, root)


class Cluster:
    """The stack with two workers. `start()`, then `fleet()` per repository; `stop()` always."""

    def __init__(
        self,
        work: Path,
        *,
        owner: str,
        worker_env: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.work = work
        self.owner = owner
        # by worker id: variables on top of the stack's
        self.worker_env = {w: dict(env) for w, env in (worker_env or {}).items()}
        options = StackOptions(
            data_dir=work / "stack", worker=False, headless_ui=True, env=inherited_env()
        )
        self.stack = DevStack(options.with_free_ports(), out=_quiet)
        self.workers: dict[str, Child] = {}
        self._temporal: TemporalView | None = None
        self._database: Database | None = None
        self.started_workers = 0

    # --- lifecycle

    def start(self) -> None:
        try:
            self.stack.start()
            for worker_id in WORKERS:
                self.start_worker(worker_id)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Every process goes, whatever state it is in (children are process groups)."""
        if self._temporal is not None:
            self._temporal.close()
            self._temporal = None
        if self._database is not None:
            self._database.close()
            self._database = None
        # a short grace: a worker waits for its running activities, which only slows this
        self.stack.supervisor.stop(timeout=5)
        self.stack.stop()
        self.workers.clear()

    @property
    def temporal(self) -> TemporalView:
        if self._temporal is None:
            self._temporal = TemporalView(
                self.stack.urls.temporal_address, self.stack.options.namespace
            )
        return self._temporal

    # --- processes

    def start_worker(self, worker_id: str) -> Child:
        env = self.worker_env.get(worker_id)
        self.workers[worker_id] = child = self.stack.start_worker(worker_id, env=env)
        self.started_workers += 1
        return child

    def kill_worker(self, worker_id: str) -> None:
        """SIGKILL the worker's process group (the worker and its git, helm children)."""
        self.stack.supervisor.kill(self.workers.pop(worker_id))

    def stop_worker(self, worker_id: str, timeout: float = 45.0) -> int:
        """Stop the worker as an upgrade does (SIGTERM: it finishes or hands back its running
        activities within its 30 s graceful shutdown); SIGKILL after `timeout`."""
        return self.stack.supervisor.terminate(self.workers.pop(worker_id), timeout)

    def worker_of(self, identity: str) -> str | None:
        """Which of our workers has the Temporal identity `identity` (`<pid>@<host>`)."""
        pid = identity.partition("@")[0]
        for worker_id, child in self.workers.items():
            if str(child.pid) == pid:
                return worker_id
        return None

    def fresh_worker_id(self) -> str:
        return f"w{self.started_workers + 1}"

    def kill_temporal(self) -> None:
        self.stack.supervisor.kill(self.stack.supervisor.child("temporal"))

    def restart_temporal(self) -> None:
        self.stack.start_temporal()

    @property
    def gateway_pid(self) -> int:
        return self.stack.supervisor.child("gateway").pid

    # --- state outside Temporal

    @property
    def database(self) -> Database:
        """The service's database (opened once: opening checks the schema's revision)."""
        if self._database is None:
            url = self.stack.env.get("ROLLWRIGHT_DATABASE_URL")
            self._database = Database(url or f"sqlite:///{self.stack.data_dir / 'rollwright.db'}")
        return self._database

    # --- fleets

    def fleet(
        self,
        name: str,
        *,
        groups: int = 1,
        clusters_per_group: int = 2,
        releases: int = 1,
        settings: dict[str, Any] | None = None,
        timeout: float = 120.0,
        poll: float = 0.05,
    ) -> Fleet:
        """A generated atlas fleet (`fleetgen`) with `settings` as its rollwright.yaml,
        committed on `main` and installed in the emulator as `<owner>/<name>`."""
        repo = self.work / name
        fleetgen.generate(
            repo, groups=groups, clusters_per_group=clusters_per_group, releases=releases
        )
        if settings:
            (repo / "rollwright.yaml").write_text(yamldoc.dumps(settings))
        fleetrepo.git(repo, "init", "-q", "-b", "main")
        fleetrepo.commit_all(repo, "fleet")
        self.stack.add_repository(self.owner, name, repo)
        roots = [
            f"g{g:03d}/c{g:03d}-{c:03d}" for g in range(groups) for c in range(clusters_per_group)
        ]
        return Fleet(self, name, repo, roots, timeout, poll)
