"""End to end on the embedded stack: the real Temporal dev server, the worker and gateway
processes (`python -m worker`, `python -m gateway`), a real git fleet repository, and the GitHub
emulator over HTTP (the worker writes check runs with PyGithub; this test reads them back with
PyGithub too). Every webhook is signed and goes through the gateway's `/events`.

Three stories, one root each, on one stack:
- merge → check run asks for review with the diff → Approve → published (blob store + SQL);
- merge → Reject → cancelled, nothing persisted as latest;
- manual deploy (POST /api/deploy) → published, queue locked → a merge waits with
  `action_required` and an Unlock button → a reader's Unlock is refused, audited and listed →
  a writer's Unlock → it renders, is approved and published;
- a group-wide change → the revision's `rollwright` summary with Approve all → a reader's click
  is refused by both roots (the emulator's permission API) and audited → a writer's approves.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from github import Auth, Github
from prometheus_client.parser import text_string_to_metric_families

from shared.contracts.deploy import QUERY_STATE, RootQueueState, deploy_workflow_id
from shared.devstack import fleetrepo
from shared.devstack.emulator.model import CheckRunRecord
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.stack import DevStack
from shared.notify.events import deployment_kind
from shared.stores.blob import FileBlobStore, latest_key
from shared.stores.sql.deployments import DeploymentStore, StateChange
from shared.stores.sql.engine import Database
from tests.support.paths import EXAMPLES
from tests.support.stack import serving_fleet, wait_on

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

OWNER, NAME = "acme", "atlas-fleet"
REPO = f"{OWNER}/{NAME}"
STEP_TIMEOUT = 60.0
T = TypeVar("T")


class World:
    """The running stack, the fleet repository and helpers to drive and observe them."""

    def __init__(self, stack: DevStack, repo_dir: Path) -> None:
        self.stack = stack
        self.repo_dir = repo_dir
        assert stack.emulator is not None
        self.emulator: GitHubEmulator = stack.emulator
        self.github = Github(
            base_url=self.emulator.url, auth=Auth.Token(self.emulator.issue_token(1))
        )
        self.gh_repo = self.github.get_repo(REPO)
        self.blobs = FileBlobStore(stack.data_dir / "blobs")

    # --- driving

    def merge(self, root_dir: str, key: str, value: str) -> tuple[str, str]:
        """Commit a values change in one cluster and send the signed push; (before, after)."""
        before = fleetrepo.head(self.repo_dir)
        after = fleetrepo.set_value(
            self.repo_dir,
            f"deployments/{root_dir}/cluster.values.yaml",
            key,
            value,
            f"{root_dir}: {key}={value}",
        )
        delivery = self.emulator.send_push(OWNER, NAME, before, after)
        assert delivery.status == 202, delivery.response
        return before, after

    def click(self, run: CheckRunRecord, identifier: str, who: str) -> None:
        delivery = self.emulator.click_action(run.id, identifier, who)
        assert 200 <= delivery.status < 300, delivery.response

    def api_deploy(self, root: str, revision: str, as_user: str | None = None) -> dict[str, Any]:
        """POST /api/deploy with the API token, or as `as_user` with a GitHub token the
        emulator issued them (the gateway asks the emulator's `GET /user` who that is)."""
        body = json.dumps({"repo": REPO, "root": root, "revision": revision}).encode()
        token = self.emulator.issue_user_token(as_user) if as_user else self.stack.api_token
        request = urllib.request.Request(
            f"{self.stack.urls.gateway}/api/deploy",
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 202
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    # --- observing

    def gateway_get(self, path: str) -> str:
        """A page or its JSON, read as a machine (the bearer token): signing in is the
        browser tests' part."""
        request = urllib.request.Request(
            f"{self.stack.urls.gateway}{path}",
            headers={"Authorization": f"Bearer {self.stack.api_token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return str(answer.read().decode())

    def metrics(self, url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
        """A Prometheus exposition, parsed: sample name → (labels, value) pairs."""
        with urllib.request.urlopen(url, timeout=30) as answer:
            text = answer.read().decode()
        samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append((sample.labels, sample.value))
        return samples

    def gateway_metrics(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        return self.metrics(f"{self.stack.urls.gateway}/metrics")

    def worker_metrics(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        return self.metrics(self.stack.worker_metrics["worker"][0])

    def wait_for(self, what: str, probe: Callable[[], T | None]) -> T:
        return wait_on(self.stack, what, probe, timeout=STEP_TIMEOUT, poll=0.2)

    def runs(self, root: str) -> list[CheckRunRecord]:
        return [r for r in self.emulator.check_runs(OWNER, NAME) if r.name == f"rollwright/{root}"]

    def run_for(self, root: str, head: str, conclusion: str) -> CheckRunRecord:
        def probe() -> CheckRunRecord | None:
            found = [
                r
                for r in self.runs(root)
                if r.state["head_sha"] == head and r.conclusion == conclusion
            ]
            return found[-1] if found else None

        return self.wait_for(f"{conclusion} check run for {root}@{head[:12]}", probe)

    def deployment_run(self, deployment_id: str, conclusions: set[str]) -> CheckRunRecord:
        """The newest check run of a deployment once it has one of `conclusions`."""

        def probe() -> CheckRunRecord | None:
            runs = [
                r
                for r in self.emulator.check_runs(OWNER, NAME)
                if r.state.get("external_id") == deployment_id
            ]
            return runs[-1] if runs and runs[-1].conclusion in conclusions else None

        return self.wait_for(f"deployment {deployment_id} {conclusions}", probe)

    def latest(self, root: str) -> dict[str, Any] | None:
        data = self.blobs.get(latest_key(REPO, root))
        return None if data is None else dict(json.loads(data))

    def sql_state(self, deployment_id: str) -> str | None:
        database = Database(f"sqlite:///{self.stack.data_dir / 'rollwright.db'}")
        try:
            row = DeploymentStore(database).get(deployment_id)
            return None if row is None else row.state
        finally:
            database.close()

    def deploy_state(self, root: str) -> RootQueueState:
        async def query() -> RootQueueState:
            client = await self.stack.async_client()
            handle = client.get_workflow_handle(deploy_workflow_id(REPO, root))
            state: RootQueueState = await handle.query(QUERY_STATE, result_type=RootQueueState)
            return state

        return asyncio.run(query())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("e2e")
    with serving_fleet(base, EXAMPLES / "atlas-fleet", OWNER, NAME) as (stack, repo_dir):
        world = World(stack, repo_dir)
        yield world
        world.github.close()


def test_signed_push_to_published_deployment(world: World) -> None:
    root = "staging/cluster-a"
    _, head = world.merge(root, "env.REGION", "eu-central-1")

    review = world.run_for(root, head, "action_required")
    # read back over HTTP with PyGithub, as GitHub's UI would show it
    shown = world.gh_repo.get_check_run(review.id)
    assert shown.status == "completed" and shown.conclusion == "action_required"
    assert shown.head_sha == head
    text = shown.output.text or ""
    assert "REGION: eu-central-1" in text, text[:2000]
    assert "added" in (shown.output.title or "")
    assert [a["identifier"] for a in review.actions] == ["approve", "reject"]
    deployment_id = shown.external_id
    assert deployment_id

    world.click(review, "approve", "alice")
    final = world.deployment_run(deployment_id, {"success", "failure", "cancelled", "neutral"})
    assert final.conclusion == "success", final.output
    assert world.gh_repo.get_check_run(final.id).conclusion == "success"

    latest = world.wait_for("latest.json", lambda: world.latest(root))
    assert latest["revision"] == head and latest["state"] == "published"
    assert latest["deployment_id"] == deployment_id
    assert "alice" in str(latest["approved_by"])
    # every state change is recorded: wait for the final one
    assert world.wait_for("SQL row", lambda: _in_state(world, deployment_id, "published"))
    # only the affected root was deployed
    assert world.runs("staging/cluster-b") == [] and world.runs("prod/eu-1") == []


def test_rejected_deployment_is_not_persisted(world: World) -> None:
    root = "staging/cluster-b"
    _, head = world.merge(root, "env.REGION", "us-east-2")
    review = world.run_for(root, head, "action_required")
    deployment_id = str(review.state["external_id"])

    world.click(review, "reject", "bob")
    final = world.deployment_run(deployment_id, {"success", "failure", "cancelled", "neutral"})
    assert final.conclusion == "cancelled"
    assert "bob" in (final.output.get("title") or "") + (final.output.get("summary") or "")
    assert world.wait_for("SQL row", lambda: _in_state(world, deployment_id, "rejected"))
    assert world.latest(root) is None  # a rejected first deployment leaves no latest.json


def _in_state(world: World, deployment_id: str, wanted: str) -> bool | None:
    return True if world.sql_state(deployment_id) == wanted else None


def test_manual_deploy_locks_until_unlock(world: World) -> None:
    root = "prod/eu-1"
    base = fleetrepo.head(world.repo_dir)

    # a manual deploy (the rollback path) always asks for confirmation, then locks the queue
    accepted = world.api_deploy(root, base)
    assert accepted["workflow_id"] == deploy_workflow_id(REPO, root)
    manual = world.run_for(root, base, "action_required")
    world.click(manual, "approve", "carol")
    manual_id = str(manual.state["external_id"])
    assert world.deployment_run(manual_id, {"success", "failure"}).conclusion == "success"
    world.wait_for("manual latest.json", lambda: world.latest(root))
    locked = world.wait_for(
        "the lock", lambda: s if (s := world.deploy_state(root)).lock.locked else None
    )
    assert locked.lock.by_deployment == manual_id
    # the gateway's metrics show the lock from SQL, since the manual deployment published
    held = world.wait_for("the lock in the gateway's metrics", lambda: _locked_series(world, root))
    assert held[0]["repo"] == REPO and held[1] > time.time() - 600

    # a merge to that root now waits, saying why, with an Unlock button and nothing else
    _, head = world.merge(root, "env.REGION", "eu-north-1")
    waiting = world.run_for(root, head, "action_required")
    assert [a["identifier"] for a in waiting.actions] == ["unlock"]
    assert "locked" in (waiting.output.get("title") or "").lower()
    assert world.latest(root)["revision"] == base  # type: ignore[index]
    merge_id = str(waiting.state["external_id"])

    # a reader's Unlock changes nothing: judged by the root's queue (the emulator's permission
    # API), recorded as received and as not counted, listed on the waiting check run
    world.emulator.set_permission(OWNER, NAME, "reed", "read")
    world.click(waiting, "unlock", "reed")
    refused = world.wait_for("the reader's Unlock judged", lambda: _unlock_rows(world, "reed", 2))
    assert [e["counted"] for e in refused] == [False, None]  # newest first
    assert "@reed has read access" in refused[0]["reason"]
    assert refused[0]["deployment_id"] == manual_id  # on the locking deployment's trail

    def listing() -> CheckRunRecord | None:
        run = next(r for r in world.runs(root) if r.id == waiting.id)
        return run if "@reed clicked Unlock" in (run.output.get("summary") or "") else None

    listed = world.wait_for("the refusal on the waiting check run", listing)
    assert [a["identifier"] for a in listed.actions] == ["unlock"]
    assert world.deploy_state(root).lock.locked

    # the waiting merge is a queued deployment of the root in the gateway's metrics
    depth = [
        value
        for labels, value in world.gateway_metrics().get("rollwright_root_queue_depth", [])
        if labels["root"] == root
    ]
    assert depth == [1.0]

    world.click(waiting, "unlock", "dave")
    review = world.wait_for(
        "the merge's review after Unlock",
        lambda: _with_button(world, merge_id, "approve"),
    )
    assert "REGION: eu-north-1" in (review.output.get("text") or "")
    assert world.deploy_state(root).lock.locked is False
    assert [e["counted"] for e in _unlock_rows(world, "dave", 2) or []] == [True, None]
    world.click(review, "approve", "dave")
    final = world.deployment_run(merge_id, {"success", "failure", "cancelled"})
    assert final.conclusion == "success", final.output
    latest = world.wait_for(
        "merged latest.json",
        lambda: lt if (lt := world.latest(root)) and lt["revision"] == head else None,
    )
    assert latest["state"] == "published" and latest["trigger"] == "merge"
    assert _locked_series(world, root) is None  # unlocked: the series is gone

    # the worker's own metrics: outcomes, review waits, activity durations; and the SDK's
    def both_published() -> dict[str, list[tuple[dict[str, str], float]]] | None:
        worker = world.worker_metrics()
        finished = {
            (labels["outcome"], labels["phase"]): value
            for labels, value in worker["rollwright_deployments_finished_total"]
        }
        return worker if finished.get(("published", "publishing"), 0) >= 2 else None

    worker = world.wait_for("manual and merge published, in the metrics", both_published)
    reviews = {
        labels["outcome"]: value for labels, value in worker["rollwright_review_wait_seconds_count"]
    }
    assert reviews.get("approved", 0) >= 2, reviews
    renders = [
        value
        for labels, value in worker["rollwright_worker_activity_duration_seconds_count"]
        if labels["activity"] == "render_root" and labels["outcome"] == "completed"
    ]
    assert renders and renders[0] >= 2, renders
    # GitHub's quota as the emulator's last answers said (it counts like GitHub)
    quota = worker["rollwright_github_rate_limit_remaining"]
    assert quota and all(0 < value < 5000 for _, value in quota), quota
    sdk = world.metrics(world.stack.worker_metrics["worker"][1])
    assert any(name.startswith("temporal_") for name in sdk), sorted(sdk)[:10]

    # notifications: the stack's sink got one signed event per state change an operator
    # follows, in order, each once; the job page lists them as sent to both sinks
    for deployment_id in (manual_id, merge_id):
        # its end is recorded a moment after its check run says so
        world.wait_for(
            f"{deployment_id} published in SQL",
            lambda d=deployment_id: True if world.sql_state(d) == "published" else None,
        )
        expected = _expected_kinds(world, deployment_id)
        assert expected[-1] == "deployment.published", expected
        got = world.wait_for(
            f"the notifications of {deployment_id}",
            lambda d=deployment_id, e=expected: k if (k := _sink_kinds(world, d)) == e else None,
        )
        assert got == expected
        wanted = {(k, sink) for k in expected for sink in ("slack", "webhook")}

        def listed(d: str = deployment_id) -> set[tuple[str, str]]:
            job = json.loads(world.gateway_get(f"/api/jobs/{d}"))
            return {(n["kind"], n["sink"]) for n in job["notifications"] if n["state"] == "sent"}

        assert world.wait_for(
            "the job page's notifications", lambda w=wanted: True if listed() == w else None
        )
    snapshot = world.stack.sink.snapshot()  # type: ignore[union-attr]
    assert snapshot["repeats"] == {} and snapshot["refused"] == 0
    assert any("approved by @dave" in text for text in snapshot["slack"]), snapshot["slack"]


def _expected_kinds(world: World, deployment_id: str) -> list[str]:
    """The events the deployment's recorded state changes make (shared.notify.events)."""
    database = Database(f"sqlite:///{world.stack.data_dir / 'rollwright.db'}")
    try:
        states = [e.state for e in DeploymentStore(database).events(deployment_id)]
    finally:
        database.close()
    kinds = []
    for previous, state in zip([None, *states], states, strict=False):
        kind = deployment_kind(StateChange(previous, state))
        if kind is not None:
            kinds.append(kind)
    return kinds


def _sink_kinds(world: World, deployment_id: str) -> list[str]:
    assert world.stack.sink is not None
    return [e["type"] for e in world.stack.sink.events() if e.get("deployment_id") == deployment_id]


def _locked_series(world: World, root: str) -> tuple[dict[str, str], float] | None:
    series = world.gateway_metrics().get("rollwright_root_locked_since_timestamp_seconds", [])
    return next(((labels, v) for labels, v in series if labels["root"] == root), None)


def test_a_queued_manual_deployment_shows_as_manual(world: World) -> None:
    """A rollback (`rollwright deploy`, POST /api/deploy) waiting behind a running merge:
    its job page and /api/jobs say manual and who asked, from the row the queue recorded."""
    root = "staging/cluster-b"
    base = fleetrepo.head(world.repo_dir)
    _, head = world.merge(root, "env.REGION", "eu-south-1")
    running = world.run_for(root, head, "action_required")

    accepted = world.api_deploy(root, base, as_user="erin")
    queued_id = str(accepted["deployment_id"])

    def queued_job() -> dict[str, Any] | None:
        try:
            job: dict[str, Any] = json.loads(world.gateway_get(f"/api/jobs/{queued_id}"))
        except urllib.error.HTTPError:
            return None
        return job if job.get("requested_by") else None

    job = world.wait_for("the queued deployment's row", queued_job)
    assert (job["state"], job["trigger"], job["requested_by"]) == ("queued", "manual", "erin")
    assert (job["root"], job["revision"]) == (root, base)
    assert [e["state"] for e in job["timeline"]] == ["queued"]
    assert job["check_run_id"] is not None, "the queued check run is linked"
    page = world.gateway_get(f"/jobs/{queued_id}")
    assert "<dt>Trigger</dt><dd>manual</dd>" in page
    assert "<dt>Requested by</dt><dd>erin</dd>" in page
    listed = json.loads(world.gateway_get(f"/api/roots/{root}"))["deployments"]
    assert {(d["deployment_id"], d["state"], d["trigger"]) for d in listed} >= {
        (queued_id, "queued", "manual")
    }

    # the merge gives way; the manual deployment then runs, its history starting in the queue
    world.click(running, "reject", "erin")
    review = world.wait_for(
        "the manual deployment's review", lambda: _with_button(world, queued_id, "approve")
    )
    world.click(review, "reject", "erin")
    assert world.wait_for("the rejection", lambda: _in_state(world, queued_id, "rejected"))
    job = json.loads(world.gateway_get(f"/api/jobs/{queued_id}"))
    assert [e["state"] for e in job["timeline"]][:2] == ["queued", "rendering"]
    assert job["timeline"][-1]["state"] == "rejected"


def _with_button(world: World, deployment_id: str, identifier: str) -> CheckRunRecord | None:
    runs = [
        r
        for r in world.emulator.check_runs(OWNER, NAME)
        if r.state.get("external_id") == deployment_id
    ]
    if runs and identifier in [a["identifier"] for a in runs[-1].actions]:
        return runs[-1]
    return None


def test_a_reader_and_a_non_admin_deploying_several_roots_are_refused(world: World) -> None:
    """The stack's gateway asks the emulator who a GitHub token is and what they may do: a
    reader's deploy and a writer's deploy of several roots (no admin team is configured) are
    403, audited as not counted, and queue nothing."""
    base = fleetrepo.head(world.repo_dir)
    world.emulator.set_permission(OWNER, NAME, "rhoda", "read")

    def refused(login: str, body: dict[str, Any]) -> str:
        token = world.emulator.issue_user_token(login)
        request = urllib.request.Request(
            f"{world.stack.urls.gateway}/api/deploy",
            data=json.dumps({"repo": REPO, "revision": base, **body}).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=30)
        assert err.value.code == 403
        return str(json.loads(err.value.read())["detail"])

    assert "@rhoda has read access" in refused("rhoda", {"root": "prod/us-1"})
    several = refused("walt", {"roots": ["prod/us-1", "staging/cluster-a"]})
    assert "several roots at once needs ROLLWRIGHT_DEPLOY_ADMIN_TEAM" in several
    audit = json.loads(world.gateway_get(f"/api/audit?repo={REPO}"))
    mine = [
        (e["actor"], e["root"], e["counted"])
        for e in audit["events"]
        if e["action"] == "deploy" and e["actor"] in ("rhoda", "walt")
    ]
    assert sorted(mine) == [
        ("rhoda", "prod/us-1", False),
        ("walt", "prod/us-1", False),
        ("walt", "staging/cluster-a", False),
    ]


def test_bad_signature_is_refused_and_starts_nothing(world: World) -> None:
    before = fleetrepo.head(world.repo_dir)
    after = fleetrepo.set_value(
        world.repo_dir, "deployments/standalone/cluster.values.yaml", "env.X", "1", "unsigned"
    )
    payload = world.emulator.push_payload(OWNER, NAME, before, after)
    delivery = world.emulator.send_webhook("push", payload, secret="not-the-secret")
    assert delivery.status == 401
    time.sleep(1.0)
    assert world.runs("standalone") == []
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(
            urllib.request.Request(
                f"{world.stack.urls.gateway}/api/deploy",
                data=b"{}",
                headers={"Authorization": "Bearer wrong", "Content-Type": "application/json"},
                method="POST",
            ),
            timeout=10,
        )
    assert err.value.code == 401


def test_approve_all_approves_what_the_clicker_may_and_audits_the_rest(world: World) -> None:
    """A group-wide change puts both staging clusters at the review gate: the revision's
    `rollwright` check run lists them with Approve all. A reader's click changes nothing (each
    deployment asks the emulator's permission API, refuses and records it); a writer's click
    approves both."""
    world.emulator.set_permission(OWNER, NAME, "rita", "read")
    before = fleetrepo.head(world.repo_dir)
    head = fleetrepo.set_value(
        world.repo_dir, "deployments/staging/group.values.yaml", "env.LOG_LEVEL", "info", "quiet"
    )
    assert world.emulator.send_push(OWNER, NAME, before, head).status == 202
    roots = ("staging/cluster-a", "staging/cluster-b")

    def summary(title: str) -> CheckRunRecord | None:
        runs = [
            r
            for r in world.emulator.check_runs(OWNER, NAME)
            if r.name == "rollwright" and r.state["head_sha"] == head
        ]
        return runs[-1] if runs and runs[-1].output.get("title") == title else None

    waiting = world.wait_for("the summary of two", lambda: summary("2 of 2 roots awaiting review"))
    assert [a["identifier"] for a in waiting.actions] == ["approve_all"]
    assert all(f"| `{root}` |" in waiting.output["summary"] for root in roots)

    world.click(waiting, "approve_all", "rita")

    def refusals() -> list[dict[str, Any]] | None:
        page = json.loads(world.gateway_get("/api/audit?actor=rita&counted=false"))
        events: list[dict[str, Any]] = page["events"]
        return events if len(events) == 2 else None

    refused = world.wait_for("two refusals", refusals)
    assert {e["root"] for e in refused} == set(roots)
    assert all("@rita has read access" in e["reason"] for e in refused)
    assert summary("2 of 2 roots awaiting review") is not None

    world.click(waiting, "approve_all", "alice")
    done = world.wait_for("the summary done", lambda: summary("2 roots: none awaiting review"))
    assert done.conclusion == "success" and done.actions == []
    for root in roots:
        latest = world.wait_for(
            f"{root} published", functools.partial(_published, world, root, head)
        )
        assert latest["approved_by"] == "@alice"


def _unlock_rows(world: World, actor: str, count: int) -> list[dict[str, Any]] | None:
    """`actor`'s Unlock clicks in the audit trail (newest first), once there are `count`."""
    page = json.loads(world.gateway_get(f"/api/audit?actor={actor}&action=unlock"))
    events: list[dict[str, Any]] = page["events"]
    return events if len(events) == count else None


def _published(world: World, root: str, revision: str) -> dict[str, Any] | None:
    latest = world.latest(root)
    return latest if latest and latest["revision"] == revision else None
