"""Review policies on the DeploymentWorkflow: when a review is needed, whose click
counts, and what a click that does not count does (nothing, but it is recorded and shown).

The time-skipping server with the deploy doubles (tests/support/deploy_world.py), whose
`judge_review` applies the real decision table; the team test runs the real `judge_review`
activity against the GitHub emulator over HTTP.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from temporalio.api.enums.v1 import EventType

from activities.github import GitHubAccess
from activities.governance import GovernanceActivities
from shared.contracts.activityrefs import ACT_CHECK_RUN
from shared.contracts.deploy import SIGNAL_REVIEW, TASK_QUEUE, CheckRunRequest, ReviewSignal
from shared.contracts.governance import (
    REVISION_REVIEW_WORKFLOW,
    SIGNAL_ROOT_REVIEW,
    CarryOver,
    OwnersRequirement,
    RevisionReviewInput,
    revision_review_workflow_id,
)
from shared.devstack.credentials import new_app_key
from shared.devstack.emulator.server import GitHubEmulator
from shared.settings import Settings
from shared.stores.blob import FileBlobStore
from tests.support.deploy_world import REPO, Harness, World, harness, latest, sha, until
from tests.support.histories import keep
from workflows.revision import PACE

ROOT = "staging/cluster-a"
A, L = sha("a"), sha("1")


def scenario(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def test(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 180))

    return test


async def still_waiting(h: Harness, deployment_id: str) -> None:
    state = await h.until_state(ROOT, "still waiting", lambda s: s.current is not None)
    assert state.current is not None and state.current.deployment_id == deployment_id
    assert state.current.state == "awaiting_review"


def summary_of(world: World, deployment_id: str) -> str:
    return world.last(world.check_run_of(deployment_id)).summary


def titled(world: World, title: str) -> CheckRunRequest | None:
    """The revision's summary check run, once its title is `title`."""
    runs = [world.last(i) for i in world.revision_runs(A)]
    return next((r for r in runs if r.title == title), None)


@scenario
async def test_a_click_without_write_access_changes_nothing_and_is_reported() -> None:
    world = World(latest={ROOT: latest(L)}, permissions={"rita": "read", "nobody": "none"})
    async with harness(world) as h:
        await h.push(ROOT, A, by="carol")
        deployment_id = await h.awaiting_review(ROOT, A)
        await h.click(deployment_id, "approve", "rita")
        await h.click(deployment_id, "reject", "nobody")
        await until(lambda: len(world.audits) == 2, "both clicks recorded")
        assert [(a.action, a.actor, a.counted) for a in world.audits] == [
            ("approve", "rita", False),
            ("reject", "nobody", False),
        ]
        assert "@rita has read access to acme/fleet" in world.audits[0].reason
        assert "only people with write access may reject" in world.audits[1].reason
        await until(lambda: "@nobody clicked Reject" in summary_of(world, deployment_id), "shown")
        summary = summary_of(world, deployment_id)
        assert "Clicks that did not count" in summary and "@rita clicked Approve" in summary
        await still_waiting(h, deployment_id)
        assert world.publish_attempts == []

        result = await h.review(deployment_id, "approve", "alice")
        assert result.state == "published" and result.approved_by == "@alice"
        assert [(a.actor, a.counted) for a in world.audits[2:]] == [("alice", True)]


@scenario
async def test_the_author_cannot_approve_with_distinct_approver() -> None:
    world = World(
        latest={ROOT: latest(L)},
        review={"rules": [{"roots": ["staging/*"], "distinctApprover": True}]},
    )
    async with harness(world) as h:
        await h.push(ROOT, A, by="carol")
        deployment_id = await h.awaiting_review(ROOT, A)
        assert "@carol started this deployment and cannot approve it" in summary_of(
            world, deployment_id
        )
        await h.click(deployment_id, "approve", "Carol")  # logins compare case-insensitively
        await until(lambda: world.audits, "the refusal recorded")
        assert not world.audits[0].counted
        assert "wants a distinct approver" in world.audits[0].reason
        assert "review.rules[0]" in world.audits[0].reason
        await still_waiting(h, deployment_id)
        result = await h.review(deployment_id, "approve", "dave")
        assert result.state == "published" and result.approved_by == "@dave"


@scenario
async def test_the_author_may_withdraw_with_reject() -> None:
    world = World(
        latest={ROOT: latest(L)}, review={"rules": [{"roots": ["*"], "distinctApprover": True}]}
    )
    async with harness(world) as h:
        await h.push(ROOT, A, by="carol")
        deployment_id = await h.awaiting_review(ROOT, A)
        result = await h.review(deployment_id, "reject", "carol")
        assert result.state == "rejected"
        assert [(a.action, a.actor, a.counted) for a in world.audits] == [("reject", "carol", True)]


@scenario
async def test_review_always_asks_even_for_an_empty_diff() -> None:
    world = World(
        latest={ROOT: latest(L)},
        empty_diffs={A},
        review={"rules": [{"roots": ["staging/*"], "review": "always"}]},
    )
    async with harness(world) as h:
        await h.push(ROOT, A)
        deployment_id = await h.awaiting_review(ROOT, A)
        assert world.last(world.check_run_of(deployment_id)).title == "Review: no changes"
        assert (await h.review(deployment_id, "approve", "alice")).state == "published"


@scenario
async def test_review_never_publishes_merges_and_still_asks_for_manual_ones() -> None:
    world = World(latest={ROOT: latest(L)}, review={"rules": [{"roots": ["*"], "review": "never"}]})
    async with harness(world) as h:
        await h.push(ROOT, A)
        await until(lambda: world.outcomes, "the merge deployment published")
        (outcome,) = world.outcomes
        assert outcome.state == "published"
        assert outcome.approved_by == "rollwright (review: never, review.rules[0])"
        # A manual deployment is a person's request to confirm: it still asks.
        await h.push(ROOT, sha("b"), "manual", by="ops")
        deployment_id = await h.awaiting_review(ROOT, sha("b"))
        assert (await h.review(deployment_id, "approve", "alice")).state == "published"


@scenario
async def test_only_listed_approvers_count_and_a_reject_needs_one_too() -> None:
    world = World(
        latest={ROOT: latest(L)},
        review={"rules": [{"roots": ["staging/*"], "approvers": ["alice", "@acme/sre"]}]},
        teams={"@acme/sre": {"sam"}},
    )
    async with harness(world) as h:
        await h.push(ROOT, A, by="carol")
        deployment_id = await h.awaiting_review(ROOT, A)
        summary = summary_of(world, deployment_id)
        assert "**Approval still needed** (`review.rules[0]`)" in summary
        assert "@alice, @acme/sre" in summary
        await h.click(deployment_id, "reject", "bob")
        await until(lambda: world.audits, "bob's reject recorded")
        assert not world.audits[0].counted
        assert "@bob may not reject this deployment" in world.audits[0].reason
        await still_waiting(h, deployment_id)
        result = await h.review(deployment_id, "approve", "sam")  # through the team
        assert result.state == "published" and result.approved_by == "@sam"


# --- the real judge_review activity against the GitHub emulator ----------------------------


@asynccontextmanager
async def emulated_judge(tmp_path: Path) -> AsyncIterator[tuple[GitHubEmulator, Any]]:
    key = new_app_key()
    emulator = GitHubEmulator(app_id=4242, app_key=key)
    emulator.seed_repository(REPO.owner, REPO.name, REPO.installation_id or 0, "main")
    with emulator:
        settings = Settings(
            data_dir=tmp_path,
            github_api_url=emulator.url,
            github_app_id="4242",
            github_private_key=SecretStr(key),
        )
        access = GitHubAccess(settings)
        try:
            yield (
                emulator,
                GovernanceActivities(access, FileBlobStore(tmp_path / "blobs")).judge_review,
            )
        finally:
            access.close()


@scenario
async def test_teams_and_permissions_come_from_github(tmp_path: Path) -> None:
    async with emulated_judge(tmp_path) as (emulator, judge):
        for login in ("sam", "bob", "pat"):
            emulator.set_permission("acme", "fleet", login, "write")
        emulator.set_permission("acme", "fleet", "tina", "triage")  # reads as read
        emulator.add_team_member("acme", "sre", "sam")
        emulator.add_team_member("acme", "sre", "tina")
        emulator.add_team_member("acme", "sre", "pat", state="pending")
        world = World(
            latest={ROOT: latest(L)},
            review={"rules": [{"roots": ["*"], "approvers": ["@acme/sre"]}]},
            judge=judge,
        )
        async with harness(world) as h:
            await h.push(ROOT, A, by="carol")
            deployment_id = await h.awaiting_review(ROOT, A)
            for login in ("bob", "tina", "pat"):
                await h.click(deployment_id, "approve", login)
            await until(lambda: len(world.audits) == 3, "three refusals recorded")
            reasons = {a.actor: a.reason for a in world.audits if not a.counted}
            assert "@bob may not approve" in reasons["bob"]
            assert "@tina has read access" in reasons["tina"]
            assert "@pat may not approve" in reasons["pat"]  # an invitation is not membership
            await still_waiting(h, deployment_id)
            result = await h.review(deployment_id, "approve", "sam")
            assert result.state == "published" and result.approved_by == "@sam"
        paths = {r.path for r in emulator.requests()}
        assert "/repos/acme/fleet/collaborators/sam/permission" in paths
        assert "/orgs/acme/teams/sre/memberships/sam" in paths


# --- Approve all on the revision's summary check run ----------------------------------------


@scenario
async def test_approve_all_approves_only_what_the_clicker_may_approve() -> None:
    prod = "prod/eu"
    world = World(
        latest={ROOT: latest(L), prod: latest(L)},
        review={"rules": [{"roots": ["prod/*"], "approvers": ["bob"]}]},
    )
    async with harness(world) as h:
        await h.push(ROOT, A, by="carol")
        await h.push(prod, A, by="carol")
        staging_id = await h.awaiting_review(ROOT, A)
        prod_id = await h.awaiting_review(prod, A)

        def summary_run() -> CheckRunRequest | None:
            runs = [world.last(i) for i in world.revision_runs(A)]
            return next(
                (
                    r
                    for r in runs
                    if r.name == "rollwright" and "prod/eu" in r.summary and ROOT in r.summary
                ),
                None,
            )

        run = await until(summary_run, "the summary lists both roots")
        assert run.conclusion == "action_required"
        assert [a.identifier for a in run.actions] == ["approve_all"]
        assert run.title == "2 of 2 roots awaiting review"
        assert "1 added, 0 removed, 2 changed" in run.summary
        assert "an approver: @bob" in run.summary

        await approve_all(h, "alice")
        staging = await h.outcome(staging_id)
        assert staging.state == "published" and staging.approved_by == "@alice"

        def prod_still_waiting() -> CheckRunRequest | None:
            current = summary_run()
            shown = current is not None and current.title == "1 of 2 roots awaiting review"
            return current if shown else None

        run = await until(prod_still_waiting, "the summary: prod still needs bob")
        assert (
            f"| `{prod}` | 1 added, 0 removed, 2 changed | awaiting review | an approver: @bob |"
            in (run.summary)
        )
        refused = [a for a in world.audits if not a.counted]
        assert [(a.root, a.actor) for a in refused] == [(prod, "alice")]
        await still_waiting_on(h, prod, prod_id)

        await approve_all(h, "bob")
        assert (await h.outcome(prod_id)).approved_by == "@bob"
        done = await until(
            lambda: (r := summary_run()) is not None and r.conclusion == "success" and r,
            "the summary done",
        )
        assert done.actions == []


async def approve_all(h: Harness, by: str) -> None:
    """What the gateway sends for a click on the revision's `rollwright` check run."""
    handle = h.client.get_workflow_handle(revision_review_workflow_id(REPO.full_name, A))
    click = ReviewSignal(
        decision="approve", by=by, repo=REPO.full_name, check_run_name="rollwright", head_sha=A
    )
    await handle.signal(SIGNAL_REVIEW, click)


async def still_waiting_on(h: Harness, root: str, deployment_id: str) -> None:
    state = await h.until_state(root, "still waiting", lambda s: s.current is not None)
    assert state.current is not None and state.current.deployment_id == deployment_id
    assert state.current.state == "awaiting_review"


# --- approvals carried over from the merged pull request --------------------------------------


@scenario
async def test_a_pull_request_approval_that_covers_everything_publishes_at_once() -> None:
    world = World(
        latest={ROOT: latest(L)},
        carried={A: CarryOver(pr=12, approvers=["alice"], satisfies=["policy"])},
    )
    async with harness(world) as h:
        await h.push(ROOT, A, by="carol")
        await until(lambda: world.outcomes, "published without a click")
        (outcome,) = world.outcomes
        assert (outcome.state, outcome.approved_by) == ("published", "approved in #12 by @alice")
        assert [(a.actor, a.source, a.counted) for a in world.audits] == [
            ("alice", "pr_review", True)
        ]
        (run_id,) = world.runs_for(A)
        assert "action_required" not in world.conclusions(run_id)


@scenario
async def test_a_pull_request_approval_that_does_not_cover_everything_asks_and_says_why() -> None:
    world = World(
        latest={ROOT: latest(L)},
        owners=OWNERS,
        carried={
            A: CarryOver(
                pr=12,
                approvers=["alice"],
                satisfies=["policy"],
                reason="the approvals of #12 do not cover: an owner of `web`",
            )
        },
    )
    async with harness(world) as h:
        await h.push(ROOT, A, by="carol")
        deployment_id = await h.awaiting_review(ROOT, A)
        summary = summary_of(world, deployment_id)
        assert "Approved so far by @alice." in summary
        assert "does not carry over: the approvals of #12 do not cover" in summary
        result = await h.review(deployment_id, "approve", "olga")
        assert result.state == "published" and result.approved_by == "@alice, @olga"


OWNERS = [
    OwnersRequirement(
        name="owners:web", application="web", path="deployments/apps/web/OWNERS", owners=["olga"]
    )
]


@scenario
async def test_the_revision_summary_continues_as_new_and_keeps_its_roots() -> None:
    roots = [f"g/c{i}" for i in range(6)]
    world = World(latest={r: latest(L) for r in roots})
    async with harness(world) as h:
        # A low history limit: the summary continues as new while the roots report.
        handle = await h.client.start_workflow(
            REVISION_REVIEW_WORKFLOW,
            RevisionReviewInput(repo=REPO, revision=A, max_history_events=25),
            id=revision_review_workflow_id(REPO.full_name, A),
            task_queue=TASK_QUEUE,
        )
        for root in roots:
            await h.push(root, A, by="carol")

        # Six roots' deployments and a summary continuing as new: on a loaded machine (two
        # shared cores) this takes longer than the harness's usual 15 s.
        await until(lambda: titled(world, "6 of 6 roots awaiting review"), "all six listed", 90)
        await approve_all(h, "alice")
        done = await until(
            lambda: titled(world, "6 roots: none awaiting review"), "all published", 90
        )
        assert done.conclusion == "success"
        # each deployment records its end after the check run that says it: wait for the last
        await until(lambda: len(world.outcomes) == 6, "six outcomes recorded", 90)
        assert len(world.revision_runs(A)) == 1, "one summary check run across the runs"
        chain = await h.run_chain(handle.id, handle.result_run_id or "")
        assert len(chain) >= 2, "the summary continued as new"
        keep("approve-all", chain)


@scenario
async def test_the_revision_summary_is_written_at_most_every_few_seconds_while_roots_report() -> (
    None
):
    roots = [f"g/c{i}" for i in range(8)]
    world = World(latest={r: latest(L) for r in roots})
    async with harness(world) as h:
        for root in roots:
            await h.push(root, A, by="carol")

        await until(lambda: titled(world, "8 of 8 roots awaiting review"), "all eight listed", 90)
        handle = h.client.get_workflow_handle(revision_review_workflow_id(REPO.full_name, A))
        reports, writes = 0, []
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                reports += event.workflow_execution_signaled_event_attributes.signal_name == (
                    SIGNAL_ROOT_REVIEW
                )
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                scheduled = event.activity_task_scheduled_event_attributes
                if scheduled.activity_type.name == ACT_CHECK_RUN.name:
                    writes.append(event.event_time.ToDatetime())
        # Sixteen reports (each root's review asked, then its check run) and fewer writes, a
        # pace apart: the reports that came meanwhile went out together.
        assert reports >= 8 and 1 < len(writes) < reports
        gaps = [later - earlier for earlier, later in itertools.pairwise(writes)]
        assert all(gap >= PACE for gap in gaps), gaps
        desc = await handle.describe()
        keep("paced-summary", await h.run_chain(handle.id, desc.run_id or ""))
