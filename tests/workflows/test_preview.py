"""PreviewWorkflow on Temporal's time-skipping test server with activity doubles.

The doubles keep every call; the build double can be held "rendering" (heartbeating, like the
real one) until the workflow cancels it, so the tests see a newer head or a close really reach
the running activity. The real activities, gateway and GitHub are in tests/e2e/test_preview.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.errors import (
    ERR_GITHUB_REQUEST,
    ERR_GITHUB_RETRYABLE,
    ERR_NOT_CONFIGURED,
    ERR_REVISION_NOT_FOUND,
)
from shared.contracts.activityrefs import (
    ACT_CHECK_RUN,
    ACT_PREVIEW_BUILD,
    ACT_PREVIEW_COMMENT,
    ACT_PREVIEW_REVISIONS,
    ACT_WORKER_TASK_QUEUE,
)
from shared.contracts.deploy import (
    ERR_FLEET,
    QUERY_STATE,
    TASK_QUEUE,
    CheckRunRef,
    CheckRunRequest,
    RepoRef,
)
from shared.contracts.preview import (
    ERR_PREVIEW_REVISION,
    PREVIEW_CHECK_NAME,
    PREVIEW_WORKFLOW,
    SIGNAL_PR_CLOSED,
    SIGNAL_PR_HEAD,
    PreviewBuildRequest,
    PreviewCommentRef,
    PreviewCommentRequest,
    PreviewCounts,
    PreviewInput,
    PreviewOutcome,
    PreviewResult,
    PreviewRevisions,
    PreviewRevisionsRequest,
    PreviewState,
    PullRequestClosed,
    PullRequestHead,
    preview_external_id,
    preview_workflow_id,
)
from tests.support import queries, timeskip
from tests.support.deploy_world import sha, until
from tests.support.histories import keep, run_chain_to
from workflows.preview import PreviewWorkflow
from workflows.quoting import QUOTED_ERRORS

pytestmark = pytest.mark.timeout(120)

REPO = RepoRef(owner="acme", name="fleet", installation_id=7, clone_url="/nowhere/fleet.git")
PR = 12
WORKER_QUEUE = "preview-worker-1"
LEAKED = "-".join(["hunter2", "s3cr3t"])  # a secret value an exception message quotes


@dataclass
class PreviewWorld:
    """Activity doubles: what they were asked, and which builds to hold or fail."""

    check_runs: dict[int, list[CheckRunRequest]] = field(default_factory=dict)
    revisions: list[PreviewRevisionsRequest] = field(default_factory=list)
    builds: list[str] = field(default_factory=list)  # PR heads, in start order
    cancelled: list[str] = field(default_factory=list)  # builds that saw the cancellation
    comments: list[PreviewCommentRequest] = field(default_factory=list)
    hold: set[str] = field(default_factory=set)  # heads whose build runs until cancelled
    broken: set[str] = field(default_factory=set)  # heads whose build fails (not retryable)
    flaky: dict[str, int] = field(default_factory=dict)  # head → builds that fail (retryable)
    leaky: set[str] = field(default_factory=set)  # heads whose build raises quoting a secret
    task_queues: list[str] = field(default_factory=list)  # where the pinned work ran

    @activity.defn(name=ACT_CHECK_RUN.name)
    async def check_run(self, req: CheckRunRequest) -> CheckRunRef:
        run_id = req.check_run_id or 100 + len(self.check_runs)
        self.check_runs.setdefault(run_id, []).append(req)
        return CheckRunRef(check_run_id=run_id)

    @activity.defn(name=ACT_WORKER_TASK_QUEUE.name)
    async def worker_task_queue(self) -> str:
        return WORKER_QUEUE

    @activity.defn(name=ACT_PREVIEW_REVISIONS.name)
    async def preview_revisions(self, req: PreviewRevisionsRequest) -> PreviewRevisions:
        self.revisions.append(req)
        self.task_queues.append(activity.info().task_queue)
        return PreviewRevisions(
            base_sha=sha("ba5e"),
            head_sha=sha("3e"),  # the merge commit
            pr_head_sha=req.head_sha,
            base_tip_sha=sha("ba5e"),
            merge_sha=sha("3e"),
        )

    @activity.defn(name=ACT_PREVIEW_BUILD.name)
    async def preview_build(self, req: PreviewBuildRequest) -> PreviewOutcome:
        head = req.revisions.pr_head_sha
        self.builds.append(head)
        self.task_queues.append(activity.info().task_queue)
        if head in self.broken:
            raise ApplicationError(
                "the mirror is broken", type=ERR_PREVIEW_REVISION, non_retryable=True
            )
        if self.flaky.get(head, 0) > 0:
            self.flaky[head] -= 1
            raise ApplicationError("the blob store is down")  # infrastructure: retryable
        if head in self.leaky:
            raise KeyError(f"no key for {LEAKED} in the values")
        if head in self.hold:
            try:
                while True:  # rendering: heartbeats are how a cancellation arrives
                    activity.heartbeat(head)
                    await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                self.cancelled.append(head)
                raise
        prefix = f"previews/acme/fleet/{req.pr}/{head}/"
        return PreviewOutcome(
            conclusion="success",
            title="1 of 1 root(s) change",
            summary=f"summary of {head}",
            text=f"text of {head}",
            counts=PreviewCounts(roots=1, roots_changed=1, changed=1),
            prefix=prefix,
            comment_key=f"{prefix}comment.md",
            full_url=f"http://rollwright.test/previews/acme/fleet/{req.pr}/{head}",
        )

    @activity.defn(name=ACT_PREVIEW_COMMENT.name)
    async def preview_comment(self, req: PreviewCommentRequest) -> PreviewCommentRef:
        self.comments.append(req)
        return PreviewCommentRef(comment_id=900)

    # --- reading

    def runs_for(self, head: str) -> list[list[CheckRunRequest]]:
        return [reqs for reqs in self.check_runs.values() if reqs[0].head_sha == head]

    def final(self, head: str) -> CheckRunRequest:
        (run,) = self.runs_for(head)
        return run[-1]


@dataclass
class Harness:
    env: WorkflowEnvironment
    world: PreviewWorld

    @property
    def client(self) -> Client:
        return self.env.client

    def handle(self, pr: int = PR) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(preview_workflow_id(REPO.full_name, pr))

    async def push(
        self, head: str, action: str = "synchronize", *, pr: int = PR, **inp: Any
    ) -> WorkflowHandle[Any, Any]:
        """What the gateway does for opened / synchronize / reopened: signal-with-start."""
        return await self.client.start_workflow(
            PREVIEW_WORKFLOW,
            PreviewInput(repo=REPO, pr=pr, **inp),
            id=preview_workflow_id(REPO.full_name, pr),
            task_queue=TASK_QUEUE,
            result_type=PreviewResult,
            start_signal=SIGNAL_PR_HEAD,
            start_signal_args=[
                PullRequestHead.model_validate(
                    {"head_sha": head, "base_ref": "main", "action": action, "sender": "octocat"}
                )
            ],
        )

    async def close(self, pr: int = PR) -> None:
        await self.handle(pr).signal(SIGNAL_PR_CLOSED, PullRequestClosed(merged=True))

    async def state(self, pr: int = PR) -> PreviewState:
        return await queries.query(self.handle(pr), QUERY_STATE, PreviewState)

    async def until_done(self, head: str, *, skipping: bool = False) -> PreviewState:
        """Wait for `head`'s preview to finish; `skipping` moves the test server's clock a
        minute on between looks (for the workflow's own pauses)."""

        async def probe() -> PreviewState | None:
            state = await self.state()
            last = state.last
            if last and last.head_sha == head and last.finished_at:
                return state
            if skipping:
                await self.env.sleep(timedelta(minutes=1))
            return None

        result: PreviewState = await until(probe, f"preview of {head[:8]} finished")
        return result


@asynccontextmanager
async def harness(world: PreviewWorld | None = None) -> AsyncIterator[Harness]:
    world = world or PreviewWorld()
    async with timeskip.environment() as env:
        shared = Worker(
            env.client,
            task_queue=TASK_QUEUE,
            workflows=[PreviewWorkflow],
            activities=[
                world.check_run,
                world.worker_task_queue,
                world.preview_comment,
            ],
        )
        pinned = Worker(
            env.client,
            task_queue=WORKER_QUEUE,
            activities=[
                world.preview_revisions,
                world.preview_build,
            ],
            # the production worker's setting: cancellations arrive within a second or so
            max_heartbeat_throttle_interval=timedelta(seconds=1),
        )
        async with shared, pinned:
            yield Harness(env=env, world=world)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --------------------------------------------------------------------------- tests


def test_a_head_gets_a_check_run_a_comment_and_its_conclusion() -> None:
    async def scenario() -> None:
        async with harness() as h:
            head = sha("a1")
            await h.push(head, "opened")
            state = await h.until_done(head)
            w = h.world
            (run,) = w.runs_for(head)
            assert [r.status for r in run] == ["in_progress", "completed"]
            assert run[0].name == PREVIEW_CHECK_NAME
            assert run[0].external_id == preview_external_id(PR, head)
            assert run[-1].conclusion == "success" and run[-1].text == f"text of {head}"
            assert run[-1].details_url == f"http://rollwright.test/previews/acme/fleet/12/{head}"
            (comment,) = w.comments
            assert comment.body_key == f"previews/acme/fleet/12/{head}/comment.md"
            assert comment.head_sha == head and comment.conclusion == "success"
            # the fetch and the render ran on the worker's own queue
            assert w.task_queues == [WORKER_QUEUE, WORKER_QUEUE]
            assert state.last is not None and state.last.state == "done"
            assert state.last.rendered_sha == sha("3e") and state.last.base_sha == sha("ba5e")
            assert state.comment_id == 900 and state.previews == 1 and state.current is None

    run(scenario())


def test_a_newer_head_cancels_the_running_render_and_supersedes_its_check_run() -> None:
    async def scenario() -> None:
        world = PreviewWorld()
        old, new = sha("01d"), sha("e3")
        world.hold.add(old)
        async with harness(world) as h:
            await h.push(old, "opened")
            await until(lambda: old in world.builds, "the first head rendering")
            await h.push(new, "synchronize")
            await h.until_done(new)
            # the running activity itself sees the cancellation (at its next heartbeat)
            await until(lambda: world.cancelled == [old], "the old render cancelled")
            superseded = world.final(old)
            assert superseded.status == "completed" and superseded.conclusion == "neutral"
            assert superseded.title == "Superseded" and new[:12] in superseded.summary
            assert world.final(new).conclusion == "success"
            # only the newest head reached the pull request
            assert [c.head_sha for c in world.comments] == [new]
            state = await h.state()
            assert state.last is not None and state.last.head_sha == new

    run(scenario())


def test_heads_pushed_while_rendering_collapse_to_the_newest() -> None:
    async def scenario() -> None:
        world = PreviewWorld()
        a, b, c = sha("a"), sha("b"), sha("c")
        world.hold.update({a})
        async with harness(world) as h:
            await h.push(a, "opened")
            await until(lambda: a in world.builds, "a rendering")
            # b and c arrive in the same breath: b is never rendered
            handle = h.handle()
            await handle.signal(SIGNAL_PR_HEAD, PullRequestHead(head_sha=b, base_ref="main"))
            await handle.signal(SIGNAL_PR_HEAD, PullRequestHead(head_sha=c, base_ref="main"))
            await h.until_done(c)
            assert b not in world.builds
            assert world.builds[-1] == c

    run(scenario())


def test_the_same_head_again_does_not_restart_the_render() -> None:
    async def scenario() -> None:
        world = PreviewWorld()
        head = sha("5a3e")
        async with harness(world) as h:
            await h.push(head, "opened")
            await h.until_done(head)
            await h.push(head, "ready_for_review")  # a draft marked ready: same head
            await h.push(sha("f00"), "synchronize")
            await h.until_done(sha("f00"))
            assert world.builds == [head, sha("f00")]
            # a Re-run click previews the head again
            await h.push(sha("f00"), "rerequested")
            await until(lambda: len(world.builds) == 3, "the re-run")
            await until(lambda: len(world.comments) == 3, "the re-run's comment")

    run(scenario())


def test_closing_cancels_the_render_and_ends_the_workflow() -> None:
    async def scenario() -> None:
        world = PreviewWorld()
        head = sha("c105e")
        world.hold.add(head)
        async with harness(world) as h:
            handle = await h.push(head, "opened")
            await until(lambda: head in world.builds, "rendering")
            await h.close()
            result = await handle.result()
            assert result.reason == "closed"
            await until(lambda: world.cancelled == [head], "the render cancelled")
            closed = world.final(head)
            assert closed.conclusion == "cancelled" and closed.title == "Pull request closed"
            assert world.comments == []

    run(scenario())


def test_reopening_a_closed_pull_request_previews_it_again() -> None:
    async def scenario() -> None:
        world = PreviewWorld()
        head = sha("0be")
        async with harness(world) as h:
            handle = await h.push(head, "opened")
            await h.until_done(head)
            await h.close()
            assert (await handle.result()).reason == "closed"
            reopened = await h.push(head, "reopened")
            assert reopened.result_run_id != handle.result_run_id  # a new run
            await until(lambda: len(world.builds) == 2, "the reopened preview")
            await until(lambda: len(world.comments) == 2, "its comment")
            assert len(world.runs_for(head)) == 2  # a fresh check run on the same head

    run(scenario())


def test_a_failing_build_fails_the_check_run_and_the_next_head_still_works() -> None:
    async def scenario() -> None:
        world = PreviewWorld()
        bad, good = sha("bad"), sha("600d")
        world.broken.add(bad)
        async with harness(world) as h:
            await h.push(bad, "opened")
            state = await h.until_done(bad)
            assert state.last is not None and state.last.state == "failed"
            failed = world.final(bad)
            assert failed.conclusion == "failure" and "the mirror is broken" in failed.summary
            await h.push(good)
            await h.until_done(good)
            assert world.final(good).conclusion == "success"

    run(scenario())


def test_an_infrastructure_failure_retries_instead_of_failing_the_check_run() -> None:
    async def scenario() -> None:
        world = PreviewWorld()
        head, down = sha("f1a4"), sha("d0d0")
        # more failures than one round of activity attempts: the workflow tries again later
        world.flaky[head] = 5
        world.flaky[down] = 1_000
        async with harness(world) as h:
            await h.push(head, "opened")
            state = await h.until_done(head, skipping=True)
            assert state.last is not None and state.last.state == "done"
            (run,) = world.runs_for(head)
            assert [r.conclusion for r in run] == [None, "success"]
            assert world.builds.count(head) == 6
            # an outage that never ends fails in the end, saying what failed
            await h.push(down)
            state = await h.until_done(down, skipping=True)
            assert state.last is not None and state.last.state == "failed"
            failed = world.final(down)
            assert failed.conclusion == "failure" and "`ApplicationError`" in failed.summary
            assert "see the worker log" in failed.summary

    run(scenario())


def test_an_unexpected_error_fails_the_check_run_without_its_message() -> None:
    async def scenario() -> None:
        world = PreviewWorld()
        head = sha("1ea4")
        world.leaky.add(head)
        async with harness(world) as h:
            await h.push(head, "opened")
            state = await h.until_done(head, skipping=True)
            assert state.last is not None and state.last.state == "failed"
            assert LEAKED not in state.last.message and "`KeyError`" in state.last.message
            failed = world.final(head)
            assert failed.conclusion == "failure" and failed.title == "Preview failed"
            assert "`KeyError` in `preview_build`" in failed.summary
            assert "see the worker log" in failed.summary
            (run,) = world.runs_for(head)
            assert all(LEAKED not in r.model_dump_json() for r in run)

    run(scenario())


def test_only_errors_rollwright_words_itself_are_quoted() -> None:
    # the types the activities give their own messages (the workflow cannot import them)
    assert {
        ERR_FLEET,
        ERR_PREVIEW_REVISION,
        ERR_REVISION_NOT_FOUND,
        ERR_GITHUB_REQUEST,
        ERR_GITHUB_RETRYABLE,
        ERR_NOT_CONFIGURED,
    } == QUOTED_ERRORS


def test_continues_as_new_after_many_heads_and_keeps_its_state() -> None:
    async def scenario() -> None:
        world = PreviewWorld()
        a, b, c = sha("1a"), sha("2a"), sha("3a")
        async with harness(world) as h:
            first = await h.push(a, "opened", max_previews_per_run=2)
            await h.until_done(a)
            await h.push(b)
            await h.until_done(b)

            async def continued() -> bool:
                desc = await h.handle().describe()
                return desc.run_id != first.result_run_id

            await until(continued, "continue-as-new")
            state = await h.state()
            assert state.previews == 2 and state.comment_id == 900
            assert state.last is not None and state.last.head_sha == b
            # the new run knows what was previewed last, and takes new heads
            await h.push(b, "ready_for_review")
            await h.push(c)
            await h.until_done(c)
            assert world.builds == [a, b, c]
            assert (await h.state()).previews == 3
            # from the run now current back to the first (the start's handle may name a later
            # run when the first push raced the continue-as-new under load)
            current = (await h.handle().describe()).run_id or ""
            chain = await run_chain_to(h.env.client, first.id, current)
            assert len(chain) >= 2
            keep("preview-continued", chain)

    run(scenario())


def test_an_idle_pull_request_workflow_finishes() -> None:
    async def scenario() -> None:
        async with harness() as h:
            handle = await h.push(sha("1d1e"), "opened")
            await h.until_done(sha("1d1e"))
            result = await handle.result()  # time skips 30 days
            assert result.reason == "idle"
            assert result.last is not None and result.last.head_sha == sha("1d1e")

    run(scenario())
