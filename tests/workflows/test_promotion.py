"""PromotionWorkflow on the time-skipping server: the rollout scenarios of docs/promotion.md.

Each test starts its own test server with a fake fleet behind the activities
(tests/support/promotion_world.py): days at a manual gate, soak times and closed windows pass
instantly. The real activities (git, GitHub, visibility) are tested in
tests/activities/test_promotion.py and end to end in tests/e2e/test_promotion.py.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from shared.contracts.activityrefs import (
    ACT_PROMOTION_DEPLOYMENTS,
)
from shared.contracts.promotion import (
    PROMOTION_WORKFLOW,
    SIGNAL_HALT,
    SIGNAL_PROMOTE,
    SIGNAL_PROMOTION_REVISION,
    SIGNAL_RESUME,
    SIGNAL_ROLLBACK,
    DeploymentsRequest,
    DeploymentsResult,
    HaltSignal,
    HaltState,
    NodeInfo,
    PromoteSignal,
    PromotionInput,
    PromotionRevision,
    ResumeSignal,
    RollbackSignal,
    RolloutView,
    RootDeployment,
    WindowInfo,
)
from tests.support.deploy_world import until
from tests.support.histories import keep, run_chain
from tests.support.promotion_world import (
    PATCH,
    REPO,
    TASK_QUEUE,
    WORKFLOW_ID,
    Fleet,
    Rollout,
    rev,
    rollout,
)
from workflows.promotion import PromotionWorkflow
from workflows.rollout import rollout_table

INT, STAGE, PROD = "integration", "stage", "prod/prod-canary"


def scenario(fn: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    @functools.wraps(fn)
    def test() -> None:
        asyncio.run(asyncio.wait_for(fn(), 60))

    return test


def three_nodes(stage_gate: str = "automated", **soak: int) -> Fleet:
    return Fleet(
        plan=[
            NodeInfo(path=INT, gate="automated", soak_seconds=soak.get("integration", 0)),
            NodeInfo.model_validate(
                {"path": STAGE, "gate": stage_gate, "soak_seconds": soak.get("stage", 0)}
            ),
            NodeInfo(path=PROD, gate="automated"),
        ],
        roots={
            INT: ["mc/integration/s1/us", "mc/integration/s1/eu"],
            STAGE: ["mc/stage/s1/us"],
            PROD: ["mc/prod/canary/us"],
        },
    )


def deployed_at_first_node(fleet: Fleet) -> None:
    """latest.json of the first node's roots: published revisions that contain the patch."""
    for root in fleet.roots[INT]:
        fleet.latest[root] = RootDeployment(
            root=root,
            revision=fleet.tip,
            deployment_id=f"dep-{root}",
            state="published",
            contains_patch=True,
        )


async def result(r: Rollout) -> RolloutView:
    assert r.handle is not None
    view: RolloutView = await r.handle.result()
    return view


def evaluated(fleet: Fleet, revision: str) -> bool:
    return any(e.revision == revision for e in fleet.evaluations)


def asking(fleet: Fleet, identifier: str) -> Callable[[], bool]:
    def probe() -> bool:
        return bool(fleet.check_runs) and any(
            a.identifier == identifier for a in fleet.last_run().actions
        )

    return probe


@scenario
async def test_automated_chain_through_the_whole_sequence() -> None:
    fleet = three_nodes()
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        await r.start()
        view = await result(r)
    assert [c.to_node for c in fleet.commits] == [STAGE, PROD]
    assert all(c.actor is None for c in fleet.commits)  # automated: committed as the app
    # every root under each new node reported its deployment before the next commit
    assert [d.root for d in fleet.deployed] == ["mc/stage/s1/us", "mc/prod/canary/us"]
    assert view.phase == "graduated" and view.pull_request_url
    assert [(row.node, row.state) for row in view.rows] == [
        (INT, "passed"),
        (STAGE, "passed"),
        (PROD, "graduated"),
    ]
    # the check run walked along the tip and ended green
    final = fleet.last_run()
    assert final.name == f"rollwright/promote: {PATCH}"
    assert (final.status, final.conclusion) == ("completed", "success")
    assert final.head_sha == fleet.tip
    assert "| node | state | since |" in final.summary


@scenario
async def test_manual_gate_waits_days_and_proceeds_on_promote() -> None:
    fleet = three_nodes(stage_gate="manual")
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "promote"), "the Promote button")
        gate = fleet.last_run()
        assert (gate.status, gate.conclusion) == ("completed", "action_required")
        assert [a.identifier for a in gate.actions] == ["promote", "halt"]
        assert STAGE in gate.title
        await r.env.sleep(timedelta(days=4))
        assert fleet.commits == []  # four days later, still waiting
        view = await r.view()
        assert view.phase == "gate" and view.gate == "manual" and view.next_node == STAGE
        stage_row = next(row for row in view.rows if row.node == STAGE)
        assert stage_row.state == "awaiting_promote"
        # `since` is workflow time: the row has said so for the four days
        assert await r.env.get_current_time() - stage_row.since >= timedelta(days=4)

        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="alice"))
        view = await result(r)
    assert [(c.to_node, c.actor) for c in fleet.commits] == [(STAGE, "alice"), (PROD, None)]
    assert view.phase == "graduated"


@scenario
async def test_soak_time_delays_the_next_gate() -> None:
    fleet = three_nodes(integration=2 * 3600, stage=30 * 60)
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        await r.start()
        await until(lambda: fleet.check_runs and "Soaking" in fleet.last_run().title, "soak")
        assert fleet.commits == []
        assert "soaking" in rollout_table((await r.view()).rows)
        await result(r)
    first, second = fleet.commit_times
    started = fleet.evaluations[0].now
    assert first - started >= timedelta(hours=2)
    assert second - first >= timedelta(minutes=30)


@scenario
async def test_failed_deployment_halts_and_resume_continues() -> None:
    fleet = three_nodes()
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    fleet.outcomes["mc/stage/s1/us"] = "failed"
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "resume"), "the halted check run")
        halted = fleet.last_run()
        assert (halted.status, halted.conclusion) == ("completed", "failure")
        assert halted.title == f"Halted at {STAGE}"
        assert "mc/stage/s1/us" in halted.summary and "failed" in halted.summary
        view = await r.view()
        assert view.phase == "halted" and view.halt and view.halt.roots == ["mc/stage/s1/us"]
        assert [c.to_node for c in fleet.commits] == [STAGE]

        # Resume alone does not move on: the root still needs a good deployment (the fix).
        await r.signal(SIGNAL_RESUME, ResumeSignal(by="bob"))
        await until(lambda: "Deploying" in fleet.last_run().title, "waiting for a good deployment")
        assert [c.to_node for c in fleet.commits] == [STAGE]
        await fleet.report("mc/stage/s1/us", fleet.tip, "published")
        view = await result(r)
    assert [c.to_node for c in fleet.commits] == [STAGE, PROD]
    assert view.phase == "graduated"


@scenario
async def test_halt_button_stops_until_resume() -> None:
    fleet = three_nodes(stage_gate="manual")
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "halt"), "the Halt button")
        await r.signal(SIGNAL_HALT, HaltSignal(by="carol", reason="incident 42"))
        await until(asking(fleet, "resume"), "halted")
        assert "incident 42" in fleet.last_run().summary
        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="alice"))  # ignored while halted
        await r.env.sleep(timedelta(hours=1))
        assert fleet.commits == []
        await r.signal(SIGNAL_RESUME, ResumeSignal(by="carol"))
        await until(asking(fleet, "promote"), "the gate again")
        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="alice"))
        await result(r)
    assert [(c.to_node, c.actor) for c in fleet.commits] == [(STAGE, "alice"), (PROD, None)]


@scenario
async def test_closed_window_defers_to_the_next_opening() -> None:
    opens: list[datetime] = []

    def window(node: str, now: datetime) -> WindowInfo:
        if not opens:
            opens.append(now + timedelta(hours=10))
        if node == STAGE and now < opens[0]:
            return WindowInfo(open=False, reason="freeze", next_open=opens[0])
        return WindowInfo(open=True)

    fleet = three_nodes()
    fleet.window = window
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        await r.start()
        await until(lambda: fleet.check_runs and "window" in fleet.last_run().title, "closed")
        shown = fleet.last_run()
        assert "opens " + opens[0].strftime("%Y-%m-%d %H:%M UTC") in shown.summary
        assert "freeze" in shown.summary
        assert (await r.view()).rows[1].state == "window_closed"
        await result(r)
    assert fleet.commit_times[0] >= opens[0]
    assert [c.to_node for c in fleet.commits] == [STAGE, PROD]


@scenario
async def test_unmet_dependency_waits_for_a_revision_that_meets_it() -> None:
    fleet = three_nodes()
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    fleet.unmet[fleet.tip] = ["/cert-manager/source/targetRevision >=v1.13.0: found 'v1.12.0'"]
    async with rollout(fleet) as r:
        await r.start()
        await until(lambda: fleet.check_runs and "dependencies" in fleet.last_run().title, "unmet")
        assert "found 'v1.12.0'" in fleet.last_run().summary
        await r.env.sleep(timedelta(days=2))  # re-checks on its timer, still unmet
        assert fleet.commits == []
        assert (await r.view()).rows[1].state == "dependencies_unmet"
        # cert-manager is upgraded on the default branch: the push delivers the revision
        fixed = fleet.new_revision()
        await r.signal(SIGNAL_PROMOTION_REVISION, PromotionRevision(revision=fixed))
        await result(r)
    assert [c.to_node for c in fleet.commits] == [STAGE, PROD]


@scenario
async def test_graduation_pull_request_when_active_everywhere() -> None:
    fleet = three_nodes()
    fleet.start_at(3)
    fleet.latest["mc/prod/canary/us"] = RootDeployment(
        root="mc/prod/canary/us",
        revision=fleet.tip,
        deployment_id="d1",
        state="published",
        contains_patch=True,
    )
    async with rollout(fleet) as r:
        await r.start()
        view = await result(r)
    assert fleet.commits == []
    assert len(fleet.graduations) == 1 and fleet.graduations[0].patch_id == PATCH
    assert view.pull_request_url == "https://gh/acme/fleet/pull/42"
    final = fleet.last_run()
    assert final.conclusion == "success" and "#42" in final.title


@scenario
async def test_conflicting_patches_block_until_fixed() -> None:
    fleet = three_nodes()
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    conflict = (
        "config/mc/hypershift/integration/patches/a.yaml and "
        "config/mc/hypershift/integration/patches/b.yaml both set /hypershift/image/tag"
    )
    fleet.conflicts[fleet.tip] = [conflict]
    async with rollout(fleet) as r:
        await r.start()
        await until(lambda: fleet.check_runs, "a check run")
        blocked = fleet.last_run()
        assert (blocked.status, blocked.conclusion) == ("completed", "failure")
        assert "a.yaml" in blocked.summary and "b.yaml" in blocked.summary
        assert (await r.view()).phase == "blocked"
        await r.env.sleep(timedelta(days=1))
        assert fleet.commits == []
        fixed = fleet.new_revision()
        await r.signal(SIGNAL_PROMOTION_REVISION, PromotionRevision(revision=fixed))
        await result(r)
    assert [c.to_node for c in fleet.commits] == [STAGE, PROD]


@scenario
async def test_patch_removed_ends_the_rollout() -> None:
    fleet = three_nodes(stage_gate="manual")
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "promote"), "the gate")
        gone = fleet.new_revision(-1)
        await r.signal(SIGNAL_PROMOTION_REVISION, PromotionRevision(revision=gone))
        view = await result(r)
    assert view.phase == "gone" and fleet.commits == []
    assert fleet.last_run().conclusion == "neutral"


@scenario
async def test_continue_as_new_keeps_the_rollout_and_replays() -> None:
    fleet = three_nodes(stage_gate="manual")
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        handle = await r.start(max_history_events=30)
        await until(asking(fleet, "promote"), "the gate")
        for i in range(6):  # unrelated pushes: each re-reads the fleet
            other = fleet.new_revision()
            await r.signal(SIGNAL_PROMOTION_REVISION, PromotionRevision(revision=other))
            await until(functools.partial(evaluated, fleet, other), f"push {i} read")
        await until(asking(fleet, "promote"), "the gate after the pushes")
        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="alice"))
        view = await result(r)
        histories = await run_chain(r.client, handle.id, handle.first_execution_run_id or "")
    assert len(histories) >= 2, "the rollout should have continued as new"
    keep("promotion-graduated", histories)
    assert view.phase == "graduated"
    assert [(c.to_node, c.actor) for c in fleet.commits] == [(STAGE, "alice"), (PROD, None)]
    replayer = Replayer(workflows=[PromotionWorkflow], data_converter=pydantic_data_converter)
    for history in histories:
        replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None, replayed.replay_failure


@scenario
async def test_a_promote_click_that_reaches_a_continued_run_at_its_start_counts() -> None:
    # The click lands on the run a continue-as-new has just begun: Temporal hands it over with
    # the start, before run() reads the carried state, so the gate must come from the input.
    fleet = three_nodes(stage_gate="manual")
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        r.handle = await r.client.start_workflow(
            PROMOTION_WORKFLOW,
            PromotionInput(
                repo=REPO,
                patch_id=PATCH,
                revision=fleet.tip,
                node=INT,
                deployments=list(fleet.latest.values()),
                awaiting_node=STAGE,
                offers={fleet.tip: STAGE},
            ),
            id=WORKFLOW_ID,
            task_queue=TASK_QUEUE,
            result_type=RolloutView,
            start_signal=SIGNAL_PROMOTE,
            start_signal_args=[PromoteSignal(by="alice", head_sha=fleet.tip)],
        )
        await until(lambda: fleet.commits, "the promotion commit")
        assert [(c.to_node, c.actor) for c in fleet.commits][:1] == [(STAGE, "alice")]


@scenario
async def test_window_closing_at_a_manual_gate_takes_the_button_away() -> None:
    times: list[datetime] = []

    def window(node: str, now: datetime) -> WindowInfo:
        if not times:
            times.append(now + timedelta(hours=2))  # closes
            times.append(now + timedelta(hours=20))  # opens again
        closes, opens = times
        if node != STAGE:
            return WindowInfo(open=True)
        if now < closes:
            return WindowInfo(open=True, closes_at=closes)
        if now < opens:
            return WindowInfo(open=False, reason="night", next_open=opens)
        return WindowInfo(open=True)

    fleet = three_nodes(stage_gate="manual")
    fleet.window = window
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "promote"), "the Promote button")
        await r.env.sleep(timedelta(hours=3))
        await until(lambda: "window" in fleet.last_run().title, "the window closed")
        assert not asking(fleet, "promote")()
        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="alice"))  # a stale click: ignored
        await r.env.sleep(timedelta(hours=18))
        await until(asking(fleet, "promote"), "the button back once it opens")
        assert fleet.commits == []
        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="bob"))
        await result(r)
    assert [(c.to_node, c.actor) for c in fleet.commits] == [(STAGE, "bob"), (PROD, None)]
    assert fleet.commit_times[0] >= times[1]


class _ReportsDuringRead(Fleet):
    """The second stage root reports while the workflow's read of the first one runs."""

    @activity.defn(name=ACT_PROMOTION_DEPLOYMENTS.name)
    async def deployments(self, req: DeploymentsRequest) -> DeploymentsResult:
        if any(r.root == STAGE_ROOTS[0] for r in req.reported):
            await self.report(STAGE_ROOTS[1], self.tip, "published")
        return await super().deployments(req)


STAGE_ROOTS = ["mc/stage/s1/us", "mc/stage/s1/eu"]


@scenario
async def test_a_report_arriving_while_an_activity_runs_is_not_waited_past() -> None:
    base = three_nodes()
    fleet = _ReportsDuringRead(plan=base.plan, roots={**base.roots, STAGE: STAGE_ROOTS})
    fleet.outcomes[STAGE_ROOTS[1]] = None  # reports only from inside the read above
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        await r.start()
        view = await asyncio.wait_for(result(r), 20)
    assert [c.to_node for c in fleet.commits] == [STAGE, PROD]
    assert view.phase == "graduated"


@scenario
async def test_a_promote_click_on_an_old_gates_check_run_is_ignored() -> None:
    fleet = three_nodes(stage_gate="manual")
    fleet.plan[2] = NodeInfo(path=PROD, gate="manual")
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "promote"), "the stage gate")
        stage_gate = fleet.last_run()
        assert STAGE in stage_gate.title
        # the same node's gate survives an unrelated push: a click on the old tip's run counts
        other = fleet.new_revision()
        await r.signal(SIGNAL_PROMOTION_REVISION, PromotionRevision(revision=other))
        await until(
            lambda: fleet.last_run().head_sha == other and asking(fleet, "promote")(), "moved"
        )
        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="alice", head_sha=stage_gate.head_sha))
        await until(lambda: PROD in fleet.last_run().title and asking(fleet, "promote")(), "prod")
        prod_gate = fleet.last_run()
        # Someone still looking at the stage gate clicks Promote again: not an approval of prod.
        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="mallory", head_sha=stage_gate.head_sha))
        await r.env.sleep(timedelta(hours=1))
        assert [c.to_node for c in fleet.commits] == [STAGE]
        assert (await r.view()).next_node == PROD
        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="bob", head_sha=prod_gate.head_sha))
        view = await result(r)
    assert [(c.to_node, c.actor) for c in fleet.commits] == [(STAGE, "alice"), (PROD, "bob")]
    assert view.phase == "graduated"


@scenario
async def test_a_resume_click_on_an_older_halts_check_run_is_ignored() -> None:
    fleet = three_nodes(stage_gate="manual")
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "halt"), "the Halt button")
        await r.signal(SIGNAL_HALT, HaltSignal(by="carol", reason="incident 41"))
        await until(asking(fleet, "resume"), "the first halt")
        first = fleet.last_run()
        await r.signal(SIGNAL_RESUME, ResumeSignal(by="carol", head_sha=first.head_sha))
        await until(asking(fleet, "promote"), "resumed: the gate again")
        # the tip moves, and the rollout is halted again (from the old tip's run: honoured)
        moved = fleet.new_revision()
        await r.signal(SIGNAL_PROMOTION_REVISION, PromotionRevision(revision=moved))
        await until(lambda: fleet.last_run().head_sha == moved, "the run on the new tip")
        await r.signal(
            SIGNAL_HALT, HaltSignal(by="dave", reason="incident 42", head_sha=first.head_sha)
        )
        await until(lambda: "incident 42" in fleet.last_run().summary, "the second halt")
        second = fleet.last_run()
        assert second.head_sha == moved and asking(fleet, "resume")()
        # A Resume button of the first halt, still open in a browser: not a resume of this one.
        await r.signal(SIGNAL_RESUME, ResumeSignal(by="mallory", head_sha=first.head_sha))
        await r.env.sleep(timedelta(hours=1))
        view = await r.view()
        assert view.phase == "halted" and view.halt and view.halt.by == "dave"
        # the same halt's run on an older tip (the branch moved while halted) still counts
        later = fleet.new_revision()
        await r.signal(SIGNAL_PROMOTION_REVISION, PromotionRevision(revision=later))
        await until(lambda: fleet.last_run().head_sha == later, "the halt moved along")
        await r.signal(SIGNAL_RESUME, ResumeSignal(by="dave", head_sha=second.head_sha))
        await until(asking(fleet, "promote"), "resumed by the second halt's button")
        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="alice", head_sha=later))
        await result(r)
    assert [(c.to_node, c.actor) for c in fleet.commits] == [(STAGE, "alice"), (PROD, None)]


@scenario
async def test_a_resume_click_that_reaches_a_continued_run_at_its_start() -> None:
    # Halts and the runs that showed them are carried across continue-as-new, read in init.
    fleet = three_nodes(stage_gate="manual")
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    since = datetime(2030, 1, 2, 3, 4, tzinfo=UTC)
    halt = HaltState(node=INT, reason="incident 7", by="carol", since=since)
    old = rev(100)

    def carried(**extra: Any) -> PromotionInput:
        return PromotionInput(
            repo=REPO,
            patch_id=PATCH,
            revision=fleet.tip,
            node=INT,
            deployments=list(fleet.latest.values()),
            halt=halt,
            **extra,
        )

    async with rollout(fleet) as r:
        # the clicked run showed an earlier halt: ignored, still halted
        r.handle = await r.client.start_workflow(
            PROMOTION_WORKFLOW,
            carried(resume_offers={old: since - timedelta(days=1), fleet.tip: since}),
            id=WORKFLOW_ID,
            task_queue=TASK_QUEUE,
            result_type=RolloutView,
            start_signal=SIGNAL_RESUME,
            start_signal_args=[ResumeSignal(by="mallory", head_sha=old)],
        )
        await until(asking(fleet, "resume"), "still halted")
        assert (await r.view()).phase == "halted"
        await r.handle.terminate()
        # the clicked run showed this halt: resumed
        fleet.check_runs.clear()
        r.handle = await r.client.start_workflow(
            PROMOTION_WORKFLOW,
            carried(resume_offers={fleet.tip: since}),
            id=WORKFLOW_ID,
            task_queue=TASK_QUEUE,
            result_type=RolloutView,
            start_signal=SIGNAL_RESUME,
            start_signal_args=[ResumeSignal(by="carol", head_sha=fleet.tip)],
        )
        await until(asking(fleet, "promote"), "resumed: the gate")
        assert (await r.view()).halt is None


@scenario
async def test_a_node_counts_only_once_its_roots_are_verified() -> None:
    """A root with a verify rule is `verifying` in latest.json after publish; the
    node is not done until its deployment ends `verified`, then promotion goes on."""
    fleet = three_nodes()
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    for root in fleet.roots[INT]:
        fleet.latest[root] = fleet.latest[root].model_copy(update={"state": "verifying"})
    fleet.outcomes["mc/stage/s1/us"] = "verified"
    fleet.outcomes["mc/prod/canary/us"] = "verified"
    async with rollout(fleet) as r:
        await r.start()
        await until(lambda: fleet.check_runs and "Deploying" in fleet.last_run().title, "deploying")
        await r.env.sleep(timedelta(hours=2))
        assert fleet.commits == []  # two hours of verifying: still not done
        for root in fleet.roots[INT]:
            await fleet.report(root, fleet.tip, "verified")
        view = await result(r)
    assert [c.to_node for c in fleet.commits] == [STAGE, PROD]
    assert view.phase == "graduated"


@scenario
async def test_an_unhealthy_node_halts_the_rollout_with_the_reason() -> None:
    fleet = three_nodes()
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    fleet.outcomes["mc/stage/s1/us"] = "unhealthy"
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "resume"), "the halted check run")
        halted = fleet.last_run()
        assert (halted.conclusion, halted.title) == ("failure", f"Halted at {STAGE}")
        assert "`mc/stage/s1/us`: deployment of" in halted.summary
        assert "unhealthy at mc/stage/s1/us" in halted.summary  # the deployment's reason
        view = await r.view()
        assert view.phase == "halted" and view.halt and view.halt.roots == ["mc/stage/s1/us"]
        assert [c.to_node for c in fleet.commits] == [STAGE]  # prod never promoted


@scenario
async def test_rollback_auto_reverts_the_promotion_and_the_node_verifies_again() -> None:
    fleet = three_nodes()
    fleet.rollback = "auto"
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    fleet.outcomes["mc/stage/s1/us"] = "unhealthy"
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "resume"), "the halted check run")
        assert [(b.node, b.patch_id) for b in fleet.rollbacks] == [(STAGE, PATCH)]
        promoted_tip = rev(2)  # start rev(1), the promotion to stage rev(2), the revert rev(3)
        assert fleet.active[fleet.tip] == 1  # the revert: the patch is back at integration
        halted = fleet.last_run()
        assert halted.title == f"Halted at {STAGE}"
        assert "unhealthy at mc/stage/s1/us" in halted.summary
        assert f"Rolled back: `{fleet.tip[:12]}` reverts the promotion `{promoted_tip[:12]}`" in (
            halted.summary
        )
        # the stage root deployed the reverted revision and verified it again
        assert [(d.root, d.revision, d.state) for d in fleet.deployed][-1] == (
            "mc/stage/s1/us",
            fleet.tip,
            "verified",
        )
        view = await r.view()
        assert view.phase == "halted" and view.revision == fleet.tip
        assert [c.to_node for c in fleet.commits] == [STAGE]  # prod never promoted
        assert r.handle is not None
        history = await r.handle.fetch_history()
    keep("promotion-rolled-back", [history])
    # The history with its rollback replays.
    replayer = Replayer(workflows=[PromotionWorkflow], data_converter=pydantic_data_converter)
    assert (
        await replayer.replay_workflow(history, raise_on_replay_failure=False)
    ).replay_failure is None


@scenario
async def test_rollback_manual_only_halts() -> None:
    fleet = three_nodes()
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    fleet.outcomes["mc/stage/s1/us"] = "unhealthy"
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "resume"), "the halted check run")
        assert fleet.rollbacks == [] and fleet.active[fleet.tip] == 2
        assert "Rolled back" not in fleet.last_run().summary


@scenario
async def test_rollback_manual_offers_a_roll_back_button_that_reverts_once() -> None:
    fleet = three_nodes()
    fleet.start_at(1)
    deployed_at_first_node(fleet)
    fleet.outcomes["mc/stage/s1/us"] = "unhealthy"
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "rollback"), "the Roll back button")
        halted = fleet.last_run()
        assert [a.identifier for a in halted.actions] == ["resume", "rollback"]
        assert fleet.rollbacks == []  # manual: nothing until someone clicks
        # a click on a check run that showed another halt does not count
        await r.signal(SIGNAL_ROLLBACK, RollbackSignal(by="mallory", head_sha=rev(9)))
        await r.signal(SIGNAL_ROLLBACK, RollbackSignal(by="alice", head_sha=halted.head_sha))
        await until(lambda: fleet.rollbacks, "the revert")
        await until(lambda: "Rolled back" in fleet.last_run().summary, "the halt updated")
        assert [b.node for b in fleet.rollbacks] == [STAGE]
        again = fleet.last_run()
        reason, _, refused = again.summary.partition("**Clicks that did not count**")
        assert "Roll back clicked by @alice" in reason and "mallory" not in reason
        assert "@mallory clicked Roll back: the check run clicked showed another halt" in refused
        assert [a.identifier for a in again.actions] == ["resume"]  # offered once
        await r.signal(SIGNAL_ROLLBACK, RollbackSignal(by="alice"))  # nothing left to revert
        view = await r.view()
        assert view.phase == "halted" and len(fleet.rollbacks) == 1
        assert fleet.active[fleet.tip] == 1
