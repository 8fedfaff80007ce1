"""How the rest of the service reaches PromotionWorkflows: webhook routing of the rollout's
buttons, the dispatcher's signals (on a real test server), DispatchWorkflow starting rollouts
for touched patches, and DeployWorkflow reporting finished deployments."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gateway.actions import ACTION, PromotionClick
from gateway.dispatcher import TemporalDispatcher
from gateway.webhooks import Ignore, route_event
from shared.contracts.checkrun import root_from_check_run_name
from shared.contracts.deploy import (
    DISPATCH_WORKFLOW,
    TASK_QUEUE,
    AffectedResult,
    DispatchInput,
    dispatch_workflow_id,
)
from shared.contracts.promotion import (
    NodeInfo,
    RootDeployment,
    patch_from_check_run_name,
    promotion_check_run_name,
)
from tests.support.deploy_world import REPO, World, harness, sha, until
from tests.support.promotion_world import PATCH, Fleet, rollout
from tests.support.vendored import GITHUB_WEBHOOKS

APP_ID = "4242"


def click(
    name: str, identifier: str, *, app_id: int = 4242, action: str = "requested_action"
) -> dict[str, Any]:
    path = GITHUB_WEBHOOKS / "check_run.requested_action.6.json"
    payload: dict[str, Any] = copy.deepcopy(json.loads(path.read_text()))
    payload["action"] = action
    payload["check_run"]["name"] = name
    payload["check_run"]["app"]["id"] = app_id
    # A rollout's check run sits on the default branch's tip: no pull requests.
    payload["check_run"]["pull_requests"] = []
    payload["requested_action"] = {"identifier": identifier}
    return payload


@pytest.mark.parametrize("identifier", ["promote", "halt", "resume", "rollback"])
def test_rollout_buttons_route_to_the_promotion_workflow(identifier: str) -> None:
    payload = click(promotion_check_run_name(PATCH), identifier)
    route = route_event("check_run", payload, app_id=APP_ID, delivery_id="d1")
    assert isinstance(route, PromotionClick)
    full_name = payload["repository"]["full_name"]
    assert (route.repo, route.patch_id, route.action) == (full_name, PATCH, identifier)
    assert route.by == payload["sender"]["login"]
    assert route.head_sha == payload["check_run"]["head_sha"]  # a stale click is told apart
    assert route.target == f"promote:{full_name}:{PATCH}"
    # stored in the outbox as JSON and read back
    assert ACTION.validate_json(route.model_dump_json()) == route
    # and in the audit trail with it, under the rollout's name
    audit = route.audit(datetime(2026, 1, 1, tzinfo=UTC))
    assert audit is not None
    assert (audit.root, audit.action, audit.actor) == (
        f"rollout:{PATCH}",
        identifier,
        payload["sender"]["login"],
    )


def test_rollout_check_run_is_never_a_root() -> None:
    name = promotion_check_run_name(PATCH)
    assert name == f"rollwright/promote: {PATCH}"
    assert root_from_check_run_name(name) is None
    assert patch_from_check_run_name(name) == PATCH
    assert patch_from_check_run_name("rollwright/promote: ") is None
    assert patch_from_check_run_name("rollwright/prod/eu") is None
    # Approve on a rollout's check run is not a deployment review
    route = route_event("check_run", click(name, "approve"), app_id=APP_ID, delivery_id="d")
    assert isinstance(route, Ignore)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"app_id": 1}, "another app"),
        ({"action": "rerequested"}, "not handled"),
        ({"action": "created"}, "not handled"),
    ],
)
def test_rollout_clicks_that_are_ignored(change: dict[str, Any], why: str) -> None:
    payload = click(promotion_check_run_name(PATCH), "promote", **change)
    route = route_event("check_run", payload, app_id=APP_ID, delivery_id="d")
    assert isinstance(route, Ignore) and why in route.reason


def test_dispatcher_promote_reaches_the_manual_gate() -> None:
    async def scenario() -> None:
        fleet = Fleet(
            plan=[NodeInfo(path="a"), NodeInfo(path="b", gate="manual")],
            roots={"a": ["t/a/1"], "b": ["t/b/1"]},
        )
        fleet.start_at(1)
        fleet.latest["t/a/1"] = RootDeployment(
            root="t/a/1", revision=fleet.tip, deployment_id="d", state="published"
        )
        fleet.latest["t/a/1"].contains_patch = True
        async with rollout(fleet) as r:
            await r.start()
            await until(
                lambda: (
                    fleet.check_runs
                    and any(a.identifier == "promote" for a in fleet.last_run().actions)
                ),
                "the gate",
            )
            dispatcher = TemporalDispatcher(r.client, TASK_QUEUE)
            gate_sha = fleet.last_run().head_sha
            done = await dispatcher.promotion_click(
                REPO.full_name, PATCH, "promote", "alice", gate_sha
            )
            assert done.outcome == "signaled"
            view = await r.handle.result()  # type: ignore[union-attr]
            assert view.phase == "graduated"
            missing = await dispatcher.promotion_click(REPO.full_name, "other", "halt", "bob")
            assert missing.outcome == "not_running"
        assert [(c.to_node, c.actor) for c in fleet.commits] == [("b", "alice")]

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_dispatcher_resume_counts_only_from_the_run_that_showed_the_halt() -> None:
    async def scenario() -> None:
        fleet = Fleet(
            plan=[NodeInfo(path="a"), NodeInfo(path="b", gate="manual")],
            roots={"a": ["t/a/1"], "b": ["t/b/1"]},
        )
        fleet.start_at(1)
        fleet.latest["t/a/1"] = RootDeployment(
            root="t/a/1", revision=fleet.tip, deployment_id="d", state="published"
        )
        fleet.latest["t/a/1"].contains_patch = True

        def asking(identifier: str) -> bool:
            return bool(fleet.check_runs) and any(
                a.identifier == identifier for a in fleet.last_run().actions
            )

        async with rollout(fleet) as r:
            await r.start()
            await until(lambda: asking("promote"), "the gate")
            dispatcher = TemporalDispatcher(r.client, TASK_QUEUE)
            # Halt from a run of another commit (any of the rollout's runs): honoured
            await dispatcher.promotion_click(REPO.full_name, PATCH, "halt", "bob", sha("e"))
            await until(lambda: asking("resume"), "halted")
            halted = fleet.last_run()
            assert "Halt clicked by @bob" in halted.summary
            # Resume from a run that never showed this halt: ignored
            stale = await dispatcher.promotion_click(
                REPO.full_name, PATCH, "resume", "mallory", sha("e")
            )
            assert stale.outcome == "signaled"
            await r.env.sleep(timedelta(hours=1))
            assert (await r.view()).phase == "halted"
            await dispatcher.promotion_click(
                REPO.full_name, PATCH, "resume", "bob", halted.head_sha
            )
            await until(lambda: asking("promote"), "resumed: the gate again")
            await dispatcher.promotion_click(
                REPO.full_name, PATCH, "promote", "alice", fleet.last_run().head_sha
            )
            view = await r.handle.result()  # type: ignore[union-attr]
            assert view.phase == "graduated"
        assert [(c.to_node, c.actor) for c in fleet.commits] == [("b", "alice")]

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_dispatch_starts_rollouts_of_touched_patches() -> None:
    before, after = sha("1"), sha("d")

    async def scenario() -> World:
        world = World()
        world.affected[(before, after)] = AffectedResult(roots=[])
        world.touched[(before, after)] = [PATCH]
        async with harness(world) as h:
            handle = await h.client.start_workflow(
                DISPATCH_WORKFLOW,
                DispatchInput(repo=REPO, before=before, after=after),
                id=dispatch_workflow_id(REPO.full_name, after),
                task_queue=TASK_QUEUE,
            )
            await handle.result()
            # a re-run of named roots is no push: it starts no rollout
            rerun = await h.client.start_workflow(
                DISPATCH_WORKFLOW,
                DispatchInput(repo=REPO, before=before, after=after, roots=["x"]),
                id="rerun",
                task_queue=TASK_QUEUE,
            )
            await rerun.result()
        return world

    world = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert [(s.revision, s.start) for s in world.promotion_signals] == [(after, [PATCH])]


def test_finished_deployments_are_reported_to_rollouts() -> None:
    root, good, bad = "prod/eu", sha("a"), sha("b")

    async def scenario() -> World:
        world = World()
        world.publish_modes[bad] = "fatal"
        async with harness(world) as h:
            await h.push(root, good)
            deployment = await h.awaiting_review(root, good)
            await h.review(deployment, "approve")
            await until(lambda: world.notified, "the first report")
            await h.push(root, bad)
            failing = await h.awaiting_review(root, bad)
            await h.review(failing, "approve")
            await until(lambda: len(world.notified) == 2, "the second report")
        return world

    world = asyncio.run(asyncio.wait_for(scenario(), 60))
    reports = [(n.finished.root, n.finished.revision, n.finished.state) for n in world.notified]
    assert reports == [(root, good, "published"), (root, bad, "failed")]
    assert all(n.repo == REPO for n in world.notified)
