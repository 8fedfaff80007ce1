"""Case 1: a worker killed mid-render, and one killed mid-publish."""

from __future__ import annotations

import time

from shared.contracts.activityrefs import (
    ACT_PUBLISH,
    ACT_RENDER_ROOT,
)
from shared.devstack import fleetrepo
from shared.devstack.emulator.model import CheckRunRecord
from shared.stores.sql.deployments import DeploymentStore
from tests.chaos import gitrepo
from tests.chaos.report import CaseResult
from tests.support.cluster import ActivityRun, Cluster

NUMBER = 1
KEY = "workers"
TITLE = "SIGKILL of a worker mid-render and mid-publish"
RELEASES = 600
SETUP = f"""
One root of {RELEASES} releases (a render of a few seconds), published to the git branch
`rendered` of the fleet repository. A push; as soon as Temporal reports the root's
`render_root` activity started on a worker, that worker's process group is killed. The
deployment must be rendered again on the other worker and reach review, and its check run must
say that a worker was lost (docs/operations.md: noticed by the missed heartbeat, 1 minute, or
by the 30 s schedule-to-start timeout of the retry on the dead worker's queue; the requirement
is about two minutes). A new worker (`w3`) then replaces the dead one. Approve; the fleet
repository's `post-receive` hook holds the first push it accepts — the commit is on the branch
by then — and the worker running `publish` is killed while its push waits on that hook. The
publish is retried on another worker (heartbeat timeout, then Temporal's retry), which must
find the commit already there: one commit for the deployment, and the deployment published.
"""
# The first push the repository accepts waits here (after its ref update) for the kill.
HOLD_AFTER_LANDING = """held="$(git rev-parse --git-dir)/chaos-held"
if mkdir "$held" 2>/dev/null; then sleep 120; fi
"""
RECOVERY_LIMIT = 150.0  # s, "within about two minutes" plus rendering on a loaded machine


def run(chaos: Cluster, result: CaseResult) -> None:
    fleet = chaos.fleet(
        "workers",
        groups=1,
        clusters_per_group=1,
        releases=RELEASES,
        settings={"publish": {"target": "git"}},
        timeout=240.0,
    )
    gitrepo.install_hook(fleet.repo, "post-receive", HOLD_AFTER_LANDING)
    (root,) = fleet.roots
    base = fleetrepo.head(fleet.repo)
    head = fleet.commit_change(root)
    fleet.push(base, head)

    def current() -> str | None:
        state = fleet.deploy_state(root)
        return state.current.deployment_id if state and state.current else None

    deployment = fleet.wait("the deployment to start", current, poll=0.05)
    identity = fleet.wait(
        "its render to start",
        lambda: chaos.temporal.running_activity(deployment, ACT_RENDER_ROOT.name),
        poll=0.05,
    )
    victim = chaos.worker_of(identity)
    result.require("the worker rendering the deployment", victim, "w1 or w2", victim is not None)
    assert victim is not None
    chaos.kill_worker(victim)
    killed = time.monotonic()
    review = fleet.review(root, head, timeout=RECOVERY_LIMIT + 60)
    recovered = time.monotonic() - killed
    result.check(
        f"SIGKILL of {victim} mid-render → the deployment asks for review again",
        f"after {recovered:.0f} s: {review.output.get('title')}",
        f"≤ {RECOVERY_LIMIT:.0f} s, every resource in the diff ({2 * RELEASES} added)",
        recovered <= RECOVERY_LIMIT and f"{2 * RELEASES} added" in str(review.output.get("title")),
    )
    renders = chaos.temporal.activity_runs(deployment, ACT_RENDER_ROOT.name)
    result.check(
        "  the render's schedulings (task queue: outcome, last attempt)",
        "; ".join(_described(chaos, r) for r in renders),
        f"rollwright/{victim}: timed out; then another worker's queue: completed",
        len(renders) >= 2
        and renders[0].task_queue == f"rollwright/{victim}"
        and renders[0].outcome.startswith("timed out")
        and renders[-1].outcome == "completed"
        and chaos.worker_of(renders[-1].identity) not in (victim, None),
    )
    said = _lost_notes(fleet.deployment_runs(deployment))
    result.check(
        "  the check run said so (while rendering again)",
        said[0] if said else "nothing",
        "a worker was lost",
        bool(said),
    )
    chaos.start_worker(chaos.fresh_worker_id())

    fleet.click(review, "approve", "alice")
    held = fleet.repo / ".git" / "chaos-held"
    fleet.wait("the publish's push to land", lambda: held.exists() or None, poll=0.05)
    identity = fleet.wait(
        "the publishing worker",
        lambda: chaos.temporal.running_activity(deployment, ACT_PUBLISH.name),
        poll=0.05,
    )
    landed = gitrepo.published_deployments(fleet.repo)
    publisher = chaos.worker_of(identity)
    result.require("the worker publishing", publisher, "a live worker", publisher is not None)
    assert publisher is not None
    chaos.kill_worker(publisher)
    killed = time.monotonic()
    done = fleet.finished(deployment, {"success"}, timeout=RECOVERY_LIMIT + 60)
    recovered = time.monotonic() - killed
    result.note(
        f"SIGKILL of {publisher} mid-publish, its commit already on the branch",
        f"commits of the deployment on `rendered` at the kill: {landed.count(deployment)}",
    )
    result.check(
        "  the deployment's check run afterwards",
        f"{done.conclusion} after {recovered:.0f} s ({done.output.get('title')})",
        f"success, ≤ {RECOVERY_LIMIT:.0f} s",
        done.conclusion == "success" and recovered <= RECOVERY_LIMIT,
    )
    publishes = chaos.temporal.activity_runs(deployment, ACT_PUBLISH.name)
    result.check(
        "  the publish's schedulings (outcome, last attempt, why the one before it ended)",
        "; ".join(_described(chaos, r) for r in publishes),
        f"completed by another worker than {publisher}, on a later attempt",
        len(publishes) == 1
        and publishes[0].outcome == "completed"
        and publishes[0].attempt >= 2
        and chaos.worker_of(publishes[0].identity) not in (publisher, None),
    )
    trailers = gitrepo.published_deployments(fleet.repo)
    result.check(
        "  commits on `rendered` for the deployment (published exactly once)",
        f"{trailers.count(deployment)} (of {len(trailers)} commits on the branch)",
        "1",
        trailers.count(deployment) == 1 and len(trailers) == 1,
    )

    def recorded() -> str | None:  # written right after the check run: give it a moment
        row = DeploymentStore(chaos.database).get(deployment)
        return row.state if row is not None and row.state == "published" else None

    try:
        state = fleet.wait("the SQL row", recorded, poll=0.2, timeout=30)
    except AssertionError:
        row = DeploymentStore(chaos.database).get(deployment)
        state = row.state if row else "no row"
    result.check("  the deployment's SQL row", state, "published", state == "published")
    chaos.start_worker(chaos.fresh_worker_id())


def _described(chaos: Cluster, run: ActivityRun) -> str:
    worker = chaos.worker_of(run.identity) or run.identity or "no worker"
    earlier = f", the attempt before it: {run.earlier}" if run.earlier else ""
    return f"{run.task_queue}: {run.outcome}, attempt {run.attempt} on {worker}{earlier}"


def _lost_notes(runs: list[CheckRunRecord]) -> list[str]:
    """What the check runs ever said about a lost worker (title: text), from their history."""
    notes = []
    for run in runs:
        for update in run.history:
            output = update.state.get("output") or {}
            text = " ".join(str(output.get(k) or "") for k in ("title", "summary", "text"))
            if "was lost" in text:
                notes.append(f"{output.get('title')}: " + _sentence(text, "was lost"))
    return notes


def _sentence(text: str, containing: str) -> str:
    for sentence in text.replace("\n", " ").split(". "):
        if containing in sentence:
            return sentence.strip()
    return ""
