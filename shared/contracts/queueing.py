"""Queueing a revision on a root: the one signal-with-start of `DeployWorkflow`, used by the
gateway (manual deployments, re-runs and Unlock) and by the dispatch activity (merges); and
waiting for a dispatch to finish, so one repository's revisions are queued in delivery order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio.client import Client, WorkflowFailureError
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from shared.contracts.deploy import (
    DEPLOY_WORKFLOW,
    SA_REPO,
    SA_ROOT,
    SIGNAL_NEW_REVISION,
    HotfixMerged,
    NewRevision,
    RepoRef,
    RootQueueInput,
    UnlockSignal,
    deploy_workflow_id,
)


async def queue_revision(
    client: Client,
    task_queue: str,
    repo: RepoRef,
    root: str,
    revision: NewRevision,
    *,
    rpc_timeout: timedelta | None = None,
) -> str:
    """Signal `revision` to the root's DeployWorkflow, starting the workflow when it is not
    running; returns the workflow id. Signalling twice is harmless: the workflow drops a
    revision it already has queued or running."""
    return await signal_queue(
        client, task_queue, repo, root, SIGNAL_NEW_REVISION, revision, rpc_timeout=rpc_timeout
    )


async def signal_queue(
    client: Client,
    task_queue: str,
    repo: RepoRef,
    root: str,
    signal: str,
    arg: NewRevision | UnlockSignal | HotfixMerged,
    *,
    rpc_timeout: timedelta | None = None,
) -> str:
    """Send `signal` to the root's DeployWorkflow, starting the workflow when it is not
    running; returns the workflow id. `new_revision` queues; `unlock` and `hotfix_merged`
    reach a finished queue too, which rebuilds its lock from latest.json first.
    `RollwrightRepo` and `RollwrightRoot` are set from the start, so the Temporal UI finds a
    root's queue before its first task runs."""
    workflow_id = deploy_workflow_id(repo.full_name, root)
    await client.start_workflow(
        DEPLOY_WORKFLOW,
        RootQueueInput(repo=repo, root=root),
        id=workflow_id,
        task_queue=task_queue,
        start_signal=signal,
        start_signal_args=[arg],
        search_attributes=TypedSearchAttributes(
            [
                SearchAttributePair(SearchAttributeKey.for_keyword(SA_REPO), repo.full_name),
                SearchAttributePair(SearchAttributeKey.for_keyword(SA_ROOT), root),
            ]
        ),
        static_summary=f"Deploy queue of `{root}` in {repo.full_name}",
        rpc_timeout=rpc_timeout,
    )
    return workflow_id


async def await_closed(
    client: Client, workflow_id: str, timeout: float, *, beat: Callable[[], None], every: float
) -> str:
    """Wait until workflow `workflow_id` is closed: `completed` or `failed`, `not_found` when it
    does not exist, or `timed_out` after `timeout` seconds; `beat()` every `every` seconds
    meanwhile (an activity's heartbeat)."""
    handle = client.get_workflow_handle(workflow_id)
    result = asyncio.ensure_future(handle.result(follow_runs=True))
    deadline = asyncio.get_running_loop().time() + timeout
    try:
        while True:
            beat()
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return "timed_out"
            done, _ = await asyncio.wait({result}, timeout=min(every, left))
            if done:
                break
    finally:
        if not result.done():
            result.cancel()
    try:
        result.result()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return "not_found"
        raise
    except WorkflowFailureError:
        return "failed"  # closed all the same: failed, cancelled, terminated or timed out
    return "completed"
