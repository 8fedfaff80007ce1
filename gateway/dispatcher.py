"""How the gateway reaches Temporal: start or signal workflows by name, nothing else.

The gateway never imports workflow code; it uses the names and payload models of
shared/contracts/deploy.py with the pydantic data converter, so the worker decodes exactly the
models it declares. `Dispatcher` is the small surface the HTTP handlers need; `TemporalDispatcher`
is the real implementation (tests run it against a real Temporal dev server).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, Protocol, cast

from temporalio.client import (
    Client,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.common import QueryRejectCondition, WorkflowIDReusePolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RetryConfig, RPCError, RPCStatusCode

from shared.contracts.deploy import (
    DEPLOY_WORKFLOW,
    DISPATCH_WORKFLOW,
    QUERY_HOLDING,
    SIGNAL_REVIEW,
    SIGNAL_UNLOCK,
    DispatchInput,
    NewRevision,
    RepoRef,
    ReviewSignal,
    UnlockSignal,
    deploy_workflow_id,
)
from shared.contracts.hotfix import (
    HOTFIX_WORKFLOW,
    SIGNAL_HOTFIX,
    SIGNAL_HOTFIX_CLOSED,
    HotfixCommand,
    HotfixInput,
    hotfix_workflow_id,
)
from shared.contracts.preview import (
    PREVIEW_WORKFLOW,
    SIGNAL_PR_CLOSED,
    SIGNAL_PR_HEAD,
    PreviewInput,
    PullRequestClosed,
    PullRequestHead,
    preview_workflow_id,
)
from shared.contracts.promotion import (
    QUERY_ROLLOUT,
    SIGNAL_HALT,
    SIGNAL_PROMOTE,
    SIGNAL_RESUME,
    SIGNAL_ROLLBACK,
    HaltSignal,
    PromoteSignal,
    ResumeSignal,
    RollbackSignal,
    RolloutView,
    promotion_workflow_id,
)
from shared.contracts.queueing import queue_revision, signal_queue
from shared.settings import Settings

log = logging.getLogger("rollwright.gateway")

Outcome = Literal["started", "already_started", "signaled", "queued", "not_running"]

# GitHub gives up on a webhook after 10 s; answer well before that even when Temporal hangs.
RPC_TIMEOUT = timedelta(seconds=5)
# Asking a deploy queue which deployment holds a revision only improves the answer's link:
# a queue whose worker is away must not hold the request for long.
LOOKUP_TIMEOUT = timedelta(seconds=2)
HEALTH_TIMEOUT = timedelta(seconds=2)
# The SDK retries an unreachable server for 10 s by default; the outbox drainer has its own
# backoff (and keeps the row), so a short SDK retry for blips is enough.
SDK_RETRIES = RetryConfig(max_elapsed_time_millis=2000, max_retries=5)
# Temporal refused the request itself: retrying the same request cannot succeed.
PERMANENT = frozenset({RPCStatusCode.INVALID_ARGUMENT})


@dataclass(frozen=True)
class Dispatched:
    """What happened to a start or signal. `not_running`: the target workflow is gone.
    `deployment_id`: for a queued revision, the deployment it belongs to (see `queue_revision`)."""

    workflow_id: str
    outcome: Outcome
    deployment_id: str | None = None


class DispatchError(Exception):
    """Temporal could not be reached or refused the call. `retryable` is False only when
    Temporal rejected the request itself (INVALID_ARGUMENT: say, an id over its length limit),
    which no retry can fix; everything else is an outage to wait out."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class Dispatcher(Protocol):
    async def start_dispatch(self, workflow_id: str, inp: DispatchInput) -> Dispatched:
        """Start a DispatchWorkflow; an existing one with that id counts as done."""
        ...

    async def review(self, deployment_id: str, review: ReviewSignal) -> Dispatched:
        """Signal the DeploymentWorkflow of a deployment (id = deployment id)."""
        ...

    async def unlock(
        self, repo: str, root: str, unlock: UnlockSignal, repo_ref: RepoRef | None = None
    ) -> Dispatched:
        """Signal an Unlock click to the root's DeployWorkflow, which judges it; with
        `repo_ref`, signal-with-start (a finished queue starts and rebuilds its lock)."""
        ...

    async def queue_revision(self, repo: RepoRef, root: str, revision: NewRevision) -> Dispatched:
        """Signal-with-start the root's DeployWorkflow with a revision to deploy. When the
        gateway chose the deployment id and the revision is already queued or running for the
        root, the queue keeps that deployment: `deployment_id` names it."""
        ...

    async def preview_head(self, repo: RepoRef, pr: int, head: PullRequestHead) -> Dispatched:
        """Signal-with-start the pull request's PreviewWorkflow with a head to preview."""
        ...

    async def preview_closed(self, repo: str, pr: int, closed: PullRequestClosed) -> Dispatched:
        """Tell the pull request's PreviewWorkflow it closed (none running: nothing to do)."""
        ...

    async def hotfix(self, repo: RepoRef, pr: int, command: HotfixCommand) -> Dispatched:
        """Signal-with-start the pull request's HotfixWorkflow with a hotfix command."""
        ...

    async def hotfix_closed(self, repo: str, pr: int, closed: PullRequestClosed) -> Dispatched:
        """Tell the pull request's HotfixWorkflow it closed (none running: nothing to do)."""
        ...

    async def promotion_click(
        self, repo: str, patch_id: str, action: str, by: str | None, head_sha: str | None = None
    ) -> Dispatched:
        """Signal promote / halt / resume to the patch's PromotionWorkflow (`head_sha`: the
        clicked check run's commit; a stale Promote or Resume is ignored, Halt always counts)."""
        ...

    async def rollout(self, repo: str, patch_id: str) -> RolloutView | None:
        """Where a patch's rollout stands (its PromotionWorkflow's `rollout` query); None when
        there is no such rollout."""
        ...

    async def check_health(self) -> None:
        """Raise DispatchError when Temporal is not reachable."""
        ...


class TemporalDispatcher:
    """Dispatcher over a Temporal client (pydantic data converter, shared task queue)."""

    def __init__(
        self, client: Client, task_queue: str, *, rpc_timeout: timedelta = RPC_TIMEOUT
    ) -> None:
        self.client = client
        self.task_queue = task_queue
        self.rpc_timeout = rpc_timeout

    @classmethod
    async def connect(cls, settings: Settings) -> TemporalDispatcher:
        # Lazy: the gateway starts (and /healthz says why it is unhealthy) while Temporal is
        # still coming up; every call connects if needed and fails fast with DispatchError.
        client = await Client.connect(
            settings.temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=pydantic_data_converter,
            lazy=True,
            retry_config=SDK_RETRIES,
        )
        return cls(client, settings.task_queue)

    async def start_dispatch(self, workflow_id: str, inp: DispatchInput) -> Dispatched:
        async with _calling(f"starting {DISPATCH_WORKFLOW} {workflow_id}"):
            try:
                await self.client.start_workflow(
                    DISPATCH_WORKFLOW,
                    inp,
                    id=workflow_id,
                    task_queue=self.task_queue,
                    # One dispatch per pushed commit; only a failed one may be tried again.
                    id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                    static_summary=_dispatch_summary(inp),
                    rpc_timeout=self.rpc_timeout,
                )
            except WorkflowAlreadyStartedError:
                return Dispatched(workflow_id, "already_started")
        return Dispatched(workflow_id, "started")

    async def review(self, deployment_id: str, review: ReviewSignal) -> Dispatched:
        return await self._signal(deployment_id, SIGNAL_REVIEW, review)

    async def unlock(
        self, repo: str, root: str, unlock: UnlockSignal, repo_ref: RepoRef | None = None
    ) -> Dispatched:
        workflow_id = deploy_workflow_id(repo, root)
        if repo_ref is None:
            return await self._signal(workflow_id, SIGNAL_UNLOCK, unlock)
        async with _calling(f"signal-with-start {DEPLOY_WORKFLOW} {workflow_id} {SIGNAL_UNLOCK}"):
            await signal_queue(
                self.client,
                self.task_queue,
                repo_ref,
                root,
                SIGNAL_UNLOCK,
                unlock,
                rpc_timeout=self.rpc_timeout,
            )
        return Dispatched(workflow_id, "signaled")

    async def queue_revision(self, repo: RepoRef, root: str, revision: NewRevision) -> Dispatched:
        workflow_id = deploy_workflow_id(repo.full_name, root)
        existing = None
        if revision.deployment_id is not None:
            # Asked before the signal: the queue drops a revision it already holds, so the
            # caller must link that deployment instead of one that will never exist.
            existing = await self._deployment_holding(workflow_id, revision.revision)
        async with _calling(f"signal-with-start {DEPLOY_WORKFLOW} {workflow_id}"):
            await queue_revision(
                self.client, self.task_queue, repo, root, revision, rpc_timeout=self.rpc_timeout
            )
        return Dispatched(workflow_id, "queued", existing or revision.deployment_id)

    async def _deployment_holding(self, workflow_id: str, revision: str) -> str | None:
        """The id of the deployment of `revision` running or queued in a deploy queue; None
        when there is none, the queue is not running, or it does not answer in time."""
        handle = self.client.get_workflow_handle(workflow_id)
        try:
            holding: str | None = await handle.query(
                QUERY_HOLDING,
                revision,
                result_type=cast(type, str | None),
                reject_condition=QueryRejectCondition.NOT_OPEN,
                rpc_timeout=LOOKUP_TIMEOUT,
            )
        except (RPCError, WorkflowQueryRejectedError, WorkflowQueryFailedError) as err:
            if not (isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND):
                log.info("asking %s which deployment holds %s: %s", workflow_id, revision, err)
            return None
        except (RuntimeError, TimeoutError) as err:  # the core bridge's connection failures
            log.info("asking %s which deployment holds %s: %s", workflow_id, revision, err)
            return None
        return holding

    async def preview_head(self, repo: RepoRef, pr: int, head: PullRequestHead) -> Dispatched:
        return await self._signal_with_start(
            PREVIEW_WORKFLOW,
            PreviewInput(repo=repo, pr=pr),
            preview_workflow_id(repo.full_name, pr),
            SIGNAL_PR_HEAD,
            head,
            f"Preview of pull request #{pr} in {repo.full_name}",
        )

    async def preview_closed(self, repo: str, pr: int, closed: PullRequestClosed) -> Dispatched:
        return await self._signal(preview_workflow_id(repo, pr), SIGNAL_PR_CLOSED, closed)

    async def hotfix(self, repo: RepoRef, pr: int, command: HotfixCommand) -> Dispatched:
        return await self._signal_with_start(
            HOTFIX_WORKFLOW,
            HotfixInput(repo=repo, pr=pr),
            hotfix_workflow_id(repo.full_name, pr),
            SIGNAL_HOTFIX,
            command,
            f"Hotfixes of pull request #{pr} in {repo.full_name}",
        )

    async def _signal_with_start(
        self,
        workflow: str,
        inp: object,
        workflow_id: str,
        signal: str,
        arg: object,
        summary: str,
    ) -> Dispatched:
        """Signal `workflow_id` (a pull request's workflow), starting it with `inp` first
        when it is not running."""
        async with _calling(f"signal-with-start {workflow} {workflow_id}"):
            await self.client.start_workflow(
                workflow,
                inp,
                id=workflow_id,
                task_queue=self.task_queue,
                start_signal=signal,
                start_signal_args=[arg],
                static_summary=summary,
                rpc_timeout=self.rpc_timeout,
            )
        return Dispatched(workflow_id, "queued")

    async def hotfix_closed(self, repo: str, pr: int, closed: PullRequestClosed) -> Dispatched:
        return await self._signal(hotfix_workflow_id(repo, pr), SIGNAL_HOTFIX_CLOSED, closed)

    async def promotion_click(
        self, repo: str, patch_id: str, action: str, by: str | None, head_sha: str | None = None
    ) -> Dispatched:
        workflow_id = promotion_workflow_id(repo, patch_id)
        if action == "promote":
            signal = PromoteSignal(by=by, head_sha=head_sha)
            return await self._signal(workflow_id, SIGNAL_PROMOTE, signal)
        if action == "halt":
            reason = f"Halt clicked by @{by}" if by else "Halt clicked"
            halt = HaltSignal(by=by, reason=reason, head_sha=head_sha)
            return await self._signal(workflow_id, SIGNAL_HALT, halt)
        if action == "rollback":
            rollback = RollbackSignal(by=by, head_sha=head_sha)
            return await self._signal(workflow_id, SIGNAL_ROLLBACK, rollback)
        resume = ResumeSignal(by=by, head_sha=head_sha)
        return await self._signal(workflow_id, SIGNAL_RESUME, resume)

    async def rollout(self, repo: str, patch_id: str) -> RolloutView | None:
        handle = self.client.get_workflow_handle(promotion_workflow_id(repo, patch_id))
        doing = f"asking {handle.id} where its rollout stands"
        try:
            view: RolloutView = await handle.query(
                QUERY_ROLLOUT, result_type=RolloutView, rpc_timeout=self.rpc_timeout
            )
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise DispatchError(f"{doing}: {err.status.name}: {err.message}") from err
        except (WorkflowQueryFailedError, WorkflowQueryRejectedError) as err:
            raise DispatchError(f"{doing}: {err}") from err
        return view

    async def check_health(self) -> None:
        async with _calling("checking Temporal health"):
            healthy = await self.client.service_client.check_health(timeout=HEALTH_TIMEOUT)
        if not healthy:
            raise DispatchError("Temporal answered the health check with NOT_SERVING")

    async def _signal(self, workflow_id: str, name: str, arg: object) -> Dispatched:
        async with _calling(f"signalling {name} to {workflow_id}"):
            try:
                await self.client.get_workflow_handle(workflow_id).signal(
                    name, arg, rpc_timeout=self.rpc_timeout
                )
            except RPCError as err:
                # Finished or never started: a stale button. Nothing to retry.
                if err.status == RPCStatusCode.NOT_FOUND:
                    return Dispatched(workflow_id, "not_running")
                raise
        return Dispatched(workflow_id, "signaled")


@asynccontextmanager
async def _calling(operation: str) -> AsyncIterator[None]:
    """Turn Temporal's transport failures into DispatchError naming what was being done."""
    try:
        yield
    except RPCError as err:
        raise DispatchError(
            f"{operation}: {err.status.name}: {err.message}",
            retryable=err.status not in PERMANENT,
        ) from err
    except RuntimeError as err:  # the core bridge reports connection failures this way
        raise DispatchError(f"{operation}: {err}") from err
    except TimeoutError as err:
        raise DispatchError(f"{operation}: timed out") from err
    except asyncio.CancelledError:
        log.warning("%s: cancelled", operation)
        raise


def _dispatch_summary(inp: DispatchInput) -> str:
    what = "Re-run" if inp.trigger == "manual" else "Push"
    return f"{what} of `{inp.after[:12]}` in {inp.repo.full_name}: find affected roots"
