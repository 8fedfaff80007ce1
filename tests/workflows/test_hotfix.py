"""HotfixWorkflow with the root's queue and deployment on Temporal's test server: a
`/rollwright hotfix` command judged allowed deploys the pull request's head through review,
locks the root for merges, and the pull request's merge opens the lock; a refused command
deploys nothing and says why. The judge and the comment are doubles (their real activities are
tested against the GitHub emulator); the queue, the deployment and the merge signal are real.

The scenario here is also recorded for the replay suite (`make histories`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client

from shared.contracts.activityrefs import ACT_HOTFIX_COMMENT, ACT_HOTFIX_JUDGE, ACT_HOTFIX_MERGED
from shared.contracts.deploy import SIGNAL_HOTFIX_MERGED, TASK_QUEUE
from shared.contracts.hotfix import (
    HOTFIX_WORKFLOW,
    SIGNAL_HOTFIX,
    SIGNAL_HOTFIX_CLOSED,
    HotfixCommand,
    HotfixCommentRequest,
    HotfixInput,
    HotfixJudgeRequest,
    HotfixMergedRequest,
    HotfixVerdict,
    hotfix_workflow_id,
)
from shared.contracts.preview import PullRequestClosed
from shared.contracts.queueing import signal_queue
from tests.support.deploy_world import REPO, Harness, World, harness, latest, sha, until
from tests.support.histories import keep
from workflows.registry import WORKFLOWS

ROOT = "prod/eu-west"
OTHER = "prod/us-east"
L, HEAD, MERGE = sha("1"), sha("f"), sha("m")
PR = 7


class HotfixDoubles:
    """The judge answers what the test set; comments and merge signals are kept (the merge
    signal is really sent, as the real activity sends it)."""

    def __init__(self) -> None:
        self.verdicts: list[HotfixVerdict] = []
        self.judged: list[HotfixJudgeRequest] = []
        self.comments: list[str] = []
        self.merged: list[HotfixMergedRequest] = []
        self.client: Client | None = None

    @activity.defn(name=ACT_HOTFIX_JUDGE.name)
    async def hotfix_judge(self, request: HotfixJudgeRequest) -> HotfixVerdict:
        self.judged.append(request)
        return self.verdicts.pop(0)

    @activity.defn(name=ACT_HOTFIX_COMMENT.name)
    async def hotfix_comment(self, request: HotfixCommentRequest) -> int:
        self.comments.append(request.body)
        return 901

    @activity.defn(name=ACT_HOTFIX_MERGED.name)
    async def hotfix_merged(self, request: HotfixMergedRequest) -> None:
        self.merged.append(request)
        assert self.client is not None
        for root in request.roots:
            await signal_queue(
                self.client, TASK_QUEUE, request.repo, root, SIGNAL_HOTFIX_MERGED, request.merged
            )

    def activities(self) -> list[Any]:
        return [self.hotfix_judge, self.hotfix_comment, self.hotfix_merged]


def allowed(head: str = HEAD) -> HotfixVerdict:
    return HotfixVerdict(
        allowed=True,
        met=["@alice has write access", "approved on the head by @bob"],
        head_sha=head,
        url=f"https://github.example/{REPO.full_name}/pull/{PR}",
    )


async def command(client: Client, by: str, roots: list[str], problem: str = "") -> Any:
    return await client.start_workflow(
        HOTFIX_WORKFLOW,
        HotfixInput(repo=REPO, pr=PR),
        id=hotfix_workflow_id(REPO.full_name, PR),
        task_queue=TASK_QUEUE,
        start_signal=SIGNAL_HOTFIX,
        start_signal_args=[HotfixCommand(by=by, roots=roots, problem=problem)],
    )


def hotfix_world() -> tuple[World, HotfixDoubles]:
    """ROOT runs L; the judge allows one command. The merge renders what the hotfix published:
    it deploys without asking."""
    world = World(latest={ROOT: latest(L)}, empty_diffs={MERGE})
    world.relations[(L, HEAD)] = "diverged"  # the head is not a descendant of what runs
    doubles = HotfixDoubles()
    doubles.verdicts = [allowed()]
    return world, doubles


async def hotfix_awaiting_review(h: Harness, doubles: HotfixDoubles) -> tuple[Any, str]:
    """@alice's hotfix of ROOT, up to its deployment awaiting review: (the HotfixWorkflow's
    handle, the deployment id)."""
    doubles.client = h.client
    handle = await command(h.client, "alice", [ROOT])
    return handle, await h.awaiting_review(ROOT, HEAD)


def _waiting_for_unlock(world: World, revision: str) -> bool:
    return any(
        any(a.identifier == "unlock" for a in world.last(run).actions)
        for run in world.runs_for(revision, ROOT)
    )


@pytest.mark.timeout(120)
def test_a_hotfix_locks_its_root_until_its_pull_request_is_merged() -> None:
    async def scenario() -> None:
        world, doubles = hotfix_world()
        async with harness(world, WORKFLOWS, activities=doubles.activities()) as h:
            handle, deployment = await hotfix_awaiting_review(h, doubles)
            asking = world.last(world.check_run_of(deployment))
            assert asking.title.startswith("Hotfix: ")
            assert f"**Hotfix** from pull request [#{PR}]" in asking.summary
            assert "Trigger: manual by @alice" in asking.summary
            assert "This is a **hotfix** from pull request #7" in asking.summary + asking.text

            done = await h.review(deployment, "approve", "bob")
            assert done.state == "published"
            assert done.latest is not None and done.latest.hotfix is not None
            assert done.latest.hotfix.pr == PR and done.latest.hotfix.head == HEAD
            rows = [r for r in world.records if r.deployment_id == deployment]
            assert rows and all(r.hotfix is not None and r.hotfix.pr == PR for r in rows)

            # Locked: a merge waits (its check run offers Unlock) ...
            await h.push(ROOT, MERGE)
            await until(lambda: _waiting_for_unlock(world, MERGE), "the merge waits")
            state = await h.state(ROOT)
            assert state.lock.locked and state.lock.hotfix is not None
            assert state.lock.hotfix.pr == PR
            # ... until the pull request is merged: the lock opens, the merge deploys.
            await handle.signal(
                SIGNAL_HOTFIX_CLOSED,
                PullRequestClosed(merged=True, sender="carol", merge_commit_sha=MERGE),
            )
            assert await handle.result() == [ROOT]
            await until(
                lambda: any(r.revision == MERGE and r.state == "published" for r in world.records),
                "the merge published",
            )
            opened = [a for a in world.audits if a.source == "pr_merge"]
            assert len(opened) == 1 and opened[0].counted and opened[0].actor == "carol"
            assert opened[0].deployment_id == deployment
            assert f"pull request #{PR} was merged as {MERGE[:12]}" in opened[0].reason
            unlocked = world.latest[ROOT]
            assert unlocked.revision == MERGE  # the merge's deployment is the latest now

            asked = [a for a in world.audits if a.action == "hotfix"]
            assert [(a.root, a.actor, a.counted, a.source) for a in asked] == [
                (ROOT, "alice", True, "pr_comment")
            ]
            assert len(doubles.comments) == 1
            assert f"Hotfix of #{PR} queued by @alice" in doubles.comments[0]
            assert f"`rollwright/{ROOT}`" in doubles.comments[0]
            assert doubles.merged[0].roots == [ROOT]

            histories = await h.run_chain(handle.id, handle.result_run_id or "")
            queue = h.deploy(ROOT)
            desc = await queue.describe()
            histories += await h.run_chain(queue.id, desc.run_id or "")
            histories.append(await h.client.get_workflow_handle(deployment).fetch_history())
            keep("hotfix-merged", histories)

    asyncio.run(scenario())


@pytest.mark.timeout(120)
def test_a_refused_hotfix_deploys_nothing_and_says_why() -> None:
    async def scenario() -> None:
        world = World(latest={ROOT: latest(L)})
        doubles = HotfixDoubles()
        doubles.verdicts = [
            HotfixVerdict(
                allowed=False,
                reasons=["1 approving review(s) of the head are needed; it has 0"],
                head_sha=HEAD,
            )
        ]
        async with harness(world, WORKFLOWS, activities=doubles.activities()) as h:
            doubles.client = h.client
            handle = await command(h.client, "mallory", [ROOT, OTHER])
            await until(lambda: doubles.comments, "the refusal comment")
            # A malformed command is answered without asking the judge.
            await handle.signal(
                SIGNAL_HOTFIX,
                HotfixCommand(by="mallory", roots=[], problem="`../x` is not a root id"),
            )
            await until(lambda: len(doubles.comments) == 2, "the second refusal")
            await handle.signal(SIGNAL_HOTFIX_CLOSED, PullRequestClosed(merged=True))
            assert await handle.result() == []
        assert "refused" in doubles.comments[0]
        assert "1 approving review(s)" in doubles.comments[0]
        assert "`../x` is not a root id" in doubles.comments[1]
        assert len(doubles.judged) == 1
        assert world.signalled == [] and doubles.merged == []
        refused = [(a.root, a.counted) for a in world.audits if a.action == "hotfix"]
        assert refused == [(ROOT, False), (OTHER, False)]

    asyncio.run(scenario())


@pytest.mark.timeout(120)
def test_a_hotfix_whose_pull_request_merges_while_it_deploys_leaves_the_root_unlocked() -> None:
    async def scenario() -> None:
        world, doubles = hotfix_world()
        async with harness(world, WORKFLOWS, activities=doubles.activities()) as h:
            handle, deployment = await hotfix_awaiting_review(h, doubles)
            # Merged while the hotfix waits for its review: nothing is locked yet ...
            await handle.signal(
                SIGNAL_HOTFIX_CLOSED,
                PullRequestClosed(merged=True, sender="carol", merge_commit_sha=MERGE),
            )
            assert await handle.result() == [ROOT]
            await until(lambda: doubles.merged != [], "the merge signalled")
            assert [a for a in world.audits if a.source == "pr_merge"] == []

            # ... and the hotfix, published, does not lock: the lock it takes opens at once,
            # audited as the merge's, and the latest render says who opened it.
            done = await h.review(deployment, "approve", "bob")
            assert done.state == "published"
            await until(
                lambda: any(a.source == "pr_merge" for a in world.audits), "the lock audited"
            )
            opened = [a for a in world.audits if a.source == "pr_merge"]
            assert len(opened) == 1
            assert (opened[0].action, opened[0].actor, opened[0].counted) == (
                "unlock",
                "carol",
                True,
            )
            assert opened[0].deployment_id == deployment
            assert opened[0].reason == (
                f"pull request #{PR} was merged as {MERGE[:12]}: the hotfix lock opens as its "
                "deployment ends"
            )
            state = await h.state(ROOT)
            assert not state.lock.locked
            assert world.latest[ROOT].unlocked_by == f"merge of #{PR} by carol"

            # The merge deploys without anyone clicking Unlock.
            await h.push(ROOT, MERGE)
            await until(
                lambda: any(r.revision == MERGE and r.state == "published" for r in world.records),
                "the merge published",
            )
            assert not _waiting_for_unlock(world, MERGE)

            queue = h.deploy(ROOT)
            desc = await queue.describe()
            keep("hotfix-merged-while-deploying", await h.run_chain(queue.id, desc.run_id or ""))

    asyncio.run(scenario())
