"""Unlock and the rollout buttons under the review policy (docs/governance.md, "Unlock and the
rollout buttons"): the root's queue and the PromotionWorkflow judge each click with the
`judge_action` activity, change nothing for one that does not count, list it on their check
runs and record every click in the audit trail with whether it counted and why not.

The time-skipping server with the doubles of tests/support/deploy_world.py and
promotion_world.py, whose `judge_action` applies the real decision table (`decide_action`) to
the fleet's `review:` section and GitHub's answers as the test gives them; the real activity
is tested in tests/activities/test_governance_actions.py.
"""

from __future__ import annotations

from collections.abc import Callable

from shared.contracts.deploy import SIGNAL_UNLOCK, TASK_QUEUE, UnlockSignal
from shared.contracts.promotion import (
    SIGNAL_HALT,
    SIGNAL_PROMOTE,
    HaltSignal,
    NodeInfo,
    PromoteSignal,
    RootDeployment,
)
from shared.contracts.queueing import signal_queue
from tests.support.deploy_world import REPO, Harness, World, harness, latest, sha, until
from tests.support.histories import keep, run_chain
from tests.support.promotion_world import PATCH, WORKFLOW_ID, Fleet, rollout
from tests.support.scenarios import scenario

ROOT = "prod/eu-west"
A, L = sha("a"), sha("1")
READER = {"rita": "read"}
PROD_APPROVERS = {"rules": [{"roots": ["prod/*"], "approvers": ["alice", "@acme/sre"]}]}


async def waiting_run(h: Harness, revision: str) -> int:
    """The check run of a merge that waits behind the lock, once it says so."""
    world = h.world
    await until(lambda: world.runs_for(revision), f"{revision[:6]}'s check run")
    (run_id,) = world.runs_for(revision)
    await until(lambda: world.last(run_id).conclusion == "action_required", "waiting for Unlock")
    return run_id


# --- Unlock on a root's queue --------------------------------------------------------------


@scenario()
async def test_unlock_counts_only_for_the_roots_approvers_with_write_access() -> None:
    manual = latest(L, trigger="manual")
    world = World(latest={ROOT: manual}, permissions=READER, review=PROD_APPROVERS)
    async with harness(world) as h:
        deploy = await h.push(ROOT, A)  # locked: A waits
        run_id = await waiting_run(h, A)

        await h.unlock(ROOT, by="rita")  # read access
        await until(lambda: len(world.audits) == 1, "the reader's click recorded")
        await h.unlock(ROOT, by="bob")  # write access, not an approver of prod/*
        await until(lambda: len(world.audits) == 2, "the writer's click recorded")
        rita, bob = world.audits
        assert (rita.action, rita.actor, rita.counted, rita.root) == ("unlock", "rita", False, ROOT)
        assert "@rita has read access to acme/fleet" in rita.reason
        assert rita.deployment_id == manual.deployment_id  # the locking deployment's trail
        assert not bob.counted
        assert bob.reason.startswith(f"@bob may not unlock `{ROOT}` (review.rules[0])")
        # nothing changed: still locked, A still waits, latest.json untouched
        state = await h.state(ROOT)
        assert state.lock.locked and [i.revision for i in state.queue] == [A]
        assert world.persisted == [] and world.latest[ROOT].unlocked_by is None
        # the waiting check run lists both clicks, and still offers Unlock
        listed = await until(
            lambda: (s := world.last(run_id).summary).count("clicked Unlock") == 2 and s,
            "the refusals on A's check run",
        )
        assert "**Clicks that did not count** (nothing changed)" in listed
        assert "- @rita clicked Unlock: @rita has read access" in listed
        assert [a.identifier for a in world.last(run_id).actions] == ["unlock"]
        assert [(j.action, j.root, j.revision) for j in world.judged] == [
            ("unlock", ROOT, None),  # the policy at the default branch's tip
            ("unlock", ROOT, None),
        ]

        await h.unlock(ROOT, by="alice")  # an approver: counts
        a_id = await h.awaiting_review(ROOT, A)
        alice = world.audits[-1]
        assert (alice.actor, alice.counted, alice.reason) == ("alice", True, "")
        assert world.latest[ROOT].unlocked_by == "alice", "the Unlock is persisted"
        assert not (await h.state(ROOT)).lock.locked
        assert (await h.review(a_id, "approve", "alice")).published
        await deploy.result()  # the idle shutdown
        keep("governed-unlock", await h.run_chain(deploy.id, deploy.result_run_id or ""))


@scenario()
async def test_an_unlock_with_nothing_locked_is_recorded_as_not_counted() -> None:
    world = World(latest={ROOT: latest(L)})  # a merge: not locked
    async with harness(world) as h:
        await h.push(ROOT, A)
        await h.awaiting_review(ROOT, A)
        await h.unlock(ROOT, by="alice")
        (event,) = await until(lambda: world.audits, "the click recorded")
        assert (event.counted, event.reason) == (
            False,
            f"the queue of `{ROOT}` is not locked: there is nothing to unlock",
        )
        assert world.judged == []  # nobody asked GitHub about a click with nothing to do


@scenario()
async def test_an_unlock_of_a_finished_queue_starts_it_and_is_judged() -> None:
    """No queue runs for the root (it went idle): the gateway's signal-with-start begins a
    run that rebuilds the lock from latest.json, then judges the click against it."""
    other = "prod/us-east"
    world = World(
        latest={ROOT: latest(L, trigger="manual"), other: latest(L, trigger="manual")},
        permissions=READER,
    )
    async with harness(world) as h:
        await signal_queue(h.client, TASK_QUEUE, REPO, ROOT, SIGNAL_UNLOCK, UnlockSignal(by="rita"))
        (refused,) = await until(lambda: world.audits, "the reader's click recorded")
        assert not refused.counted and "@rita has read access" in refused.reason
        assert (await h.state(ROOT)).lock.locked and world.persisted == []

        await signal_queue(h.client, TASK_QUEUE, REPO, other, SIGNAL_UNLOCK, UnlockSignal(by="bob"))
        await until(lambda: world.persisted, "the Unlock written to latest.json")
        assert world.latest[other].unlocked_by == "bob"
        assert world.audits[-1].counted and world.audits[-1].root == other
        assert not (await h.state(other)).lock.locked
        assert world.latest[ROOT].unlocked_by is None
        assert [(j.root, j.actor) for j in world.judged] == [(ROOT, "rita"), (other, "bob")]


# --- the rollout's buttons -----------------------------------------------------------------

STAGE_ROOT = "prod/stage-1"


def gated_rollout() -> Fleet:
    """Two nodes: `int` done, `stage` behind a manual gate holding a prod/* root."""
    fleet = Fleet(
        plan=[NodeInfo(path="int"), NodeInfo(path="stage", gate="manual")],
        roots={"int": ["int/a"], "stage": [STAGE_ROOT]},
        review=PROD_APPROVERS,
        permissions=READER,
    )
    fleet.start_at(1)
    fleet.latest["int/a"] = RootDeployment(
        root="int/a", revision=fleet.tip, deployment_id="d", state="published"
    )
    fleet.latest["int/a"].contains_patch = True
    return fleet


def asking(fleet: Fleet, identifier: str) -> Callable[[], bool]:
    return lambda: (
        bool(fleet.check_runs) and any(a.identifier == identifier for a in fleet.last_run().actions)
    )


@scenario()
async def test_promote_counts_only_for_the_approvers_of_the_node_promoted_to() -> None:
    fleet = gated_rollout()
    async with rollout(fleet) as r:
        handle = await r.start()
        await until(asking(fleet, "promote"), "the Promote button")
        gate = fleet.last_run().head_sha
        for login in ("rita", "bob"):
            await r.signal(SIGNAL_PROMOTE, PromoteSignal(by=login, head_sha=gate))
        await until(lambda: len(fleet.audits) == 2, "two refusals recorded")
        # Each click is judged in its own handler: their audits may land in either order.
        rita, bob = sorted(fleet.audits, key=lambda audit: audit.actor != "rita")
        assert (rita.root, rita.action, rita.counted) == (f"rollout:{PATCH}", "promote", False)
        assert "@rita has read access" in rita.reason
        assert bob.reason.startswith(
            f"@bob may not promote the rollout to `{STAGE_ROOT}` (review.rules[0])"
        )
        assert [(j.action, j.node, j.revision) for j in fleet.judged] == [
            ("promote", "stage", gate),
            ("promote", "stage", gate),
        ]
        listed = await until(
            lambda: (s := fleet.last_run().summary).count("clicked Promote") == 2 and s,
            "the refusals on the rollout's check run",
        )
        assert "- @bob clicked Promote: @bob may not promote" in listed
        assert fleet.commits == [] and (await r.view()).phase == "gate"

        await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="alice", head_sha=gate))
        await until(lambda: fleet.commits, "the promotion")
        assert [(c.to_node, c.actor) for c in fleet.commits] == [("stage", "alice")]
        assert (fleet.audits[-1].actor, fleet.audits[-1].counted) == ("alice", True)
        await handle.result()
        keep(
            "governed-rollout",
            await run_chain(r.client, WORKFLOW_ID, handle.first_execution_run_id or ""),
        )


@scenario()
async def test_halt_needs_write_access_and_the_current_nodes_approvers() -> None:
    fleet = gated_rollout()
    fleet.review = {"rules": [{"roots": ["int/*"], "approvers": ["carol"]}]}
    async with rollout(fleet) as r:
        await r.start()
        await until(asking(fleet, "halt"), "the Halt button")
        await r.signal(SIGNAL_HALT, HaltSignal(by="rita", reason="looks odd"))
        await r.signal(SIGNAL_HALT, HaltSignal(by="bob", reason="looks odd"))
        await until(lambda: len(fleet.audits) == 2, "two refusals recorded")
        # Both handlers judge at once: their rows come in either order.
        audits = {a.actor: a for a in fleet.audits}
        assert sorted((a.actor, a.counted) for a in fleet.audits) == [
            ("bob", False),
            ("rita", False),
        ]
        assert audits["bob"].reason.startswith("@bob may not halt the rollout at `int/a`")
        assert [j.node for j in fleet.judged] == ["int", "int"]  # the node it stands at
        assert (await r.view()).halt is None

        await r.signal(SIGNAL_HALT, HaltSignal(by="carol", reason="incident 42"))
        await until(asking(fleet, "resume"), "halted")
        view = await r.view()
        assert view.halt is not None and view.halt.by == "carol"
        assert "incident 42" in fleet.last_run().summary
        assert fleet.audits[-1].counted
        # a second Halt has nothing to stop: recorded, not counted, not judged
        await r.signal(SIGNAL_HALT, HaltSignal(by="carol"))
        await until(lambda: len(fleet.audits) == 4, "the second halt recorded")
        assert fleet.audits[-1].reason == "the rollout is already halted"
        assert len(fleet.judged) == 3
