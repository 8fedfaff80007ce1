"""Where work goes: signal-with-start of DeployWorkflows, and this worker's own task queue."""

from __future__ import annotations

import asyncio
import contextlib
import time

from temporalio import activity
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.admission import Admission
from activities.heartbeat import HEARTBEAT_SECONDS, beat
from shared.contracts.activityrefs import (
    ACT_AWAIT_DISPATCH,
    ACT_DEPLOYMENT_STATUS,
    ACT_REPORT_REVIEW,
    ACT_SIGNAL_DEPLOYS,
    ACT_WORKER_ALIVE,
    ACT_WORKER_TASK_QUEUE,
)
from shared.contracts.deploy import (
    AwaitDispatchRequest,
    DeploymentResult,
    DeploymentStatus,
    SignalDeploysRequest,
    admission_task_queue,
)
from shared.contracts.governance import (
    REVISION_REVIEW_WORKFLOW,
    SIGNAL_ROOT_REVIEW,
    ReportReview,
    RevisionReviewInput,
    revision_review_workflow_id,
)
from shared.contracts.queueing import await_closed, queue_revision
from shared.settings import Settings

# Signal-with-starts in flight at once while a push queues its roots.
SIGNALS_AT_ONCE = 8


class DispatchActivities:
    """Needs the Temporal client (workflows cannot signal-with-start themselves)."""

    def __init__(self, client: Client, settings: Settings) -> None:
        self.client = client
        self.settings = settings

    @activity.defn(name=ACT_AWAIT_DISPATCH.name)
    async def await_dispatch(self, request: AwaitDispatchRequest) -> str:
        """Wait for the repository's previous dispatch to finish (delivery order)."""
        outcome = await await_closed(
            self.client,
            request.workflow_id,
            request.timeout_seconds,
            beat=beat,
            every=HEARTBEAT_SECONDS,
        )
        activity.logger.info(
            "previous dispatch awaited",
            extra={"workflow": request.workflow_id, "outcome": outcome},
        )
        return outcome

    @activity.defn(name=ACT_REPORT_REVIEW.name)
    async def report_review(self, report: ReportReview) -> None:
        """Tell the revision's summary (RevisionReviewWorkflow, started if needed) how one
        root's deployment of it stands."""
        workflow_id = revision_review_workflow_id(report.repo.full_name, report.revision)
        await self.client.start_workflow(
            REVISION_REVIEW_WORKFLOW,
            RevisionReviewInput(repo=report.repo, revision=report.revision),
            id=workflow_id,
            task_queue=self.settings.task_queue,
            start_signal=SIGNAL_ROOT_REVIEW,
            start_signal_args=[report.review],
            static_summary=f"Approve all of {report.revision[:12]} in {report.repo.full_name}",
        )
        activity.logger.info(
            "root review reported",
            extra={
                "workflow": workflow_id,
                "root": report.review.root,
                "state": report.review.state,
            },
        )

    @activity.defn(name=ACT_DEPLOYMENT_STATUS.name)
    async def deployment_status(self, workflow_id: str) -> DeploymentStatus:
        """How a deployment workflow stands, with its result once it completed (a root's
        queue asks about a deployment an earlier run of it started, which did not tell)."""
        handle = self.client.get_workflow_handle(workflow_id, result_type=DeploymentResult)
        try:
            description = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return DeploymentStatus(status="not_found")
            raise
        status = description.status.name.lower() if description.status else "running"
        if status != "completed":
            return DeploymentStatus(status=status)
        result = await handle.result()
        return DeploymentStatus(status=status, result=result)

    @activity.defn(name=ACT_SIGNAL_DEPLOYS.name)
    async def signal_deploys(self, request: SignalDeploysRequest) -> None:
        """Queue the revision on every root's DeployWorkflow, starting the ones not running.

        A retry signals again; DeployWorkflow drops a revision it already has queued or
        running, so that is harmless. The roots' queues are independent, so a few are
        signalled at once: one after the other, a fleet-wide change on a busy server took
        longer to queue than to review (0.3 s a root).
        """
        slots = asyncio.Semaphore(SIGNALS_AT_ONCE)

        async def signal(root: str) -> None:
            async with slots:
                workflow_id = await queue_revision(
                    self.client, self.settings.task_queue, request.repo, root, request.revision
                )
            beat()
            activity.logger.info(
                "deploy signalled",
                extra={
                    "workflow": workflow_id,
                    "revision": request.revision.revision,
                    "trigger": request.revision.trigger,
                },
            )

        outcomes = await asyncio.gather(
            *(signal(root) for root in request.roots), return_exceptions=True
        )
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        if failed:
            raise failed[0]  # the activity is retried; the roots signalled drop the repeat


# A worker polls its own queue whenever it has a free slot: within seconds of finishing a task
# when busy, and again when a long poll (about a minute) ends when idle. One that has not
# polled for this long is gone.
ALIVE_WINDOW_SECONDS = 90.0


class QueueActivities:
    """Pins a deployment to the worker that picked up its first activity, and tells a busy
    worker from a lost one."""

    def __init__(
        self, settings: Settings, client: Client, admission: Admission | None = None
    ) -> None:
        self.settings = settings
        self.client = client
        self.admission = admission

    @activity.defn(name=ACT_WORKER_TASK_QUEUE.name)
    async def worker_task_queue(self) -> str:
        """Every later activity of the deployment goes to the queue returned here, so the
        checkout stays on this worker's disk. Asked on the admission queue (deployments), the
        answer waits until this worker has room for the deployment (activities.admission);
        on the shared queue (previews, deployments started before admission) it comes at
        once. A worker that begins to stop hands its waiting deployments back: Temporal asks
        again, and another worker answers."""
        info = activity.info()
        admitting = info.task_queue == admission_task_queue(self.settings.task_queue)
        if self.admission is not None and admitting and info.workflow_id:
            admitted = asyncio.ensure_future(
                self.admission.admit(info.workflow_id, on_wait=activity.heartbeat)
            )
            stopping = asyncio.ensure_future(activity.wait_for_worker_shutdown())
            try:
                await asyncio.wait({admitted, stopping}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
                if not admitted.done():
                    admitted.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await admitted
            if admitted.cancelled():
                raise ApplicationError(
                    f"worker {self.settings.worker_id} is stopping: another worker takes the "
                    "deployment"
                )
            admitted.result()
        return self.settings.worker_task_queue

    @activity.defn(name=ACT_WORKER_ALIVE.name)
    async def worker_alive(self, task_queue: str) -> bool:
        """Whether a worker polled `task_queue` for activities lately (Temporal keeps each
        poller's last access): a task nobody took within the pinned start limit waits on a
        busy worker, not a lost one, when the answer is yes."""
        answer = await self.client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=self.client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
        now = time.time()
        return any(
            now - poller.last_access_time.ToSeconds() <= ALIVE_WINDOW_SECONDS
            for poller in answer.pollers
        )
