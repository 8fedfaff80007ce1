"""Delivery verification on the time-skipping server: a deployment published to a
root with a `verify` rule waits for the fake Argo CD (over HTTP) and an HTTP check, run by the
real `verify_delivery` activity, and ends `verified` or `unhealthy` with the reason and every
Application's sync, health and conditions on its check run."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities.verify import DeliveryVerifier
from shared.contracts.deploy import TASK_QUEUE
from shared.contracts.verify import VerifyPlan
from shared.devstack.argocd import Behaviour, FakeArgoCD
from shared.engine.config.fleet import FleetConfig
from tests.support.deploy_world import WORKFLOWS, World, harness, published_commit, sha, until

ROOT = "staging/cluster-a"
A, B = sha("a"), sha("b")
TOKEN = "s3cr3t-argocd-token-value"
TOKEN_ENV = "ROLLWRIGHT_TEST_ARGOCD_TOKEN"


def scenario(fn: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    @functools.wraps(fn)
    def test() -> None:
        asyncio.run(asyncio.wait_for(fn(), 90))

    return test


def fleet(server: str, *, timeout: str = "30s", http: str | None = None) -> FleetConfig:
    rule: dict[str, Any] = {
        "roots": ["staging/*"],
        "timeout": timeout,
        "interval": "1s",
        "argocd": {
            "server": server,
            "tokenEnv": TOKEN_ENV,
            "selector": "rollwright.dev/root={root}",
        },
    }
    if http is not None:
        rule["http"] = {"url": http, "retries": 2, "interval": "1s"}
    return FleetConfig.model_validate({"publish": {"target": "git"}, "verify": [rule]})


@contextmanager
def argocd(*behaviours: Behaviour) -> Iterator[FakeArgoCD]:
    """The fake Argo CD with one Application per behaviour, all of ROOT, running an older
    commit; each publish of ROOT moves their source to the published commit."""
    with FakeArgoCD(token=TOKEN) as fake:
        for i, behaviour in enumerate(behaviours):
            fake.add_application(
                f"staging-cluster-a-app{i}",
                path="staging/cluster-a",
                repo_url="https://git.example/acme/fleet.git",
                target_revision="rendered",
                labels={"rollwright.dev/root": "staging-cluster-a"},
                behaviour=behaviour,
                revision="0" * 40,
            )
        # An Application of another root, never healthy: the selector must leave it out.
        fake.add_application(
            "prod-eu-app0",
            path="prod/eu",
            repo_url="https://git.example/acme/fleet.git",
            labels={"rollwright.dev/root": "prod-eu"},
            behaviour="degraded",
        )
        yield fake


def moving(fake: FakeArgoCD) -> Callable[[str, str], None]:
    def publish(root: str, commit: str) -> None:
        for name in fake.names():
            if name.startswith(root.replace("/", "-")):
                fake.set_revision(name, commit)

    return publish


def verifier() -> Any:
    return DeliveryVerifier(environ={TOKEN_ENV: TOKEN}).verify_delivery


async def deploy_and_approve(world: World, *extra: Any) -> Any:
    async with harness(world, activities=[verifier(), *extra]) as h:
        await h.push(ROOT, A, by="carol")
        deployment_id = await h.awaiting_review(ROOT, A)
        result = await h.review(deployment_id, "approve", "alice")
        await h.until_state(ROOT, "idle", lambda s: s.current is None)
        return result


@scenario
async def test_healthy_applications_make_the_deployment_verified() -> None:
    with argocd("healthy", "healthy") as fake:
        world = World(config=fleet(fake.url))
        world.on_publish = moving(fake)
        result = await deploy_and_approve(world)
        assert result.state == "verified" and result.published
        commit = published_commit(A)
        for name in ("staging-cluster-a-app0", "staging-cluster-a-app1"):
            status = fake.application(name)["status"]
            assert (status["sync"]["revision"], status["health"]["status"]) == (commit, "Healthy")
        run = world.check_run_of(result.deployment_id)
        assert world.conclusions(run) == [
            "queued",
            "in_progress",
            "action_required",
            "in_progress",  # publishing
            "in_progress",  # verifying
            "success",
        ]
        titles = [r.title for r in world.check_runs[run]]
        assert "Verifying delivery" in titles and titles[-1] == "Verified"
        done = world.last(run)
        assert "staging-cluster-a-app0" in done.summary and "prod-eu" not in done.summary
        assert [r.state for r in world.records][-3:] == ["publishing", "verifying", "verified"]
        assert [p.state for p in world.persisted] == ["verifying", "verified"]
        assert world.latest[ROOT].published_revision == A
        assert world.plans[0].commit == commit
        assert TOKEN not in repr(world.check_runs) + repr(world.records)


@scenario
async def test_a_degraded_application_makes_the_deployment_unhealthy() -> None:
    with argocd("healthy", "degraded") as fake:
        world = World(config=fleet(fake.url))
        world.on_publish = moving(fake)
        result = await deploy_and_approve(world)
        assert result.state == "unhealthy" and result.published
        done = world.last(world.check_run_of(result.deployment_id))
        assert (done.conclusion, done.title) == ("failure", "Unhealthy")
        assert "`staging-cluster-a-app1` is Degraded" in done.summary
        assert "progress deadline" in done.summary  # the health message, in the table
        assert world.latest[ROOT].state == "unhealthy"
        # Still the root's published render: the next diff is against it.
        assert world.latest[ROOT].published_revision == A


@scenario
async def test_a_failed_sync_makes_the_deployment_unhealthy() -> None:
    with argocd("sync_fails") as fake:
        world = World(config=fleet(fake.url))
        world.on_publish = moving(fake)
        result = await deploy_and_approve(world)
        assert result.state == "unhealthy"
        summary = world.last(world.check_run_of(result.deployment_id)).summary
        assert "sync of `staging-cluster-a-app0`" in summary and "failed" in summary
        assert "SyncError" in summary  # the Application's conditions


@pytest.mark.slow
@scenario
async def test_an_application_that_never_syncs_times_out_as_unhealthy() -> None:
    with argocd("healthy", "never_sync") as fake:
        world = World(config=fleet(fake.url, timeout="3s"))
        world.on_publish = moving(fake)
        result = await deploy_and_approve(world)
        assert result.state == "unhealthy"
        summary = world.last(world.check_run_of(result.deployment_id)).summary
        assert "Not verified within 3 s" in summary
        assert "staging-cluster-a-app1" in summary and "OutOfSync" in summary


@scenario
async def test_a_refused_token_is_unhealthy_and_never_shown() -> None:
    with argocd("healthy") as fake:
        world = World(config=fleet(fake.url))
        world.on_publish = moving(fake)
        wrong = DeliveryVerifier(environ={TOKEN_ENV: "not-the-token"}).verify_delivery
        async with harness(world, activities=[wrong]) as h:
            await h.push(ROOT, A)
            result = await h.review(await h.awaiting_review(ROOT, A), "approve")
        assert result.state == "unhealthy"
        summary = world.last(world.check_run_of(result.deployment_id)).summary
        assert f"refused the token in {TOKEN_ENV} (401)" in summary
        assert "not-the-token" not in repr(world.check_runs) + repr(world.records)


@contextmanager
def http_check(statuses: list[int]) -> Iterator[tuple[str, list[str]]]:
    """An external validation endpoint answering `statuses` in turn (then the last one)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            seen.append(self.path)
            status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
@scenario
async def test_the_http_check_runs_after_argo_cd_with_retries() -> None:
    with argocd("healthy") as fake, http_check([503, 200]) as (url, seen):
        world = World(config=fleet(fake.url, http=url + "/check/{root}?rev={revision}"))
        world.on_publish = moving(fake)
        result = await deploy_and_approve(world)
        assert result.state == "verified"
        assert seen == [f"/check/{ROOT}?rev={A}"] * 2
        assert "answered 200" in world.last(world.check_run_of(result.deployment_id)).summary


@scenario
async def test_a_failing_http_check_alone_is_unhealthy() -> None:
    with http_check([500]) as (url, seen):
        rule = {"roots": ["*"], "http": {"url": url + "/{root}", "retries": 1, "interval": "1s"}}
        world = World(config=FleetConfig.model_validate({"verify": [rule]}))
        result = await deploy_and_approve(world)
        assert result.state == "unhealthy" and len(seen) == 2
        summary = world.last(world.check_run_of(result.deployment_id)).summary
        assert "failed after 2 attempts: answered 500, expected 200" in summary


@scenario
async def test_a_root_without_a_rule_ends_published() -> None:
    with argocd("degraded") as fake:
        config = fleet(fake.url)
        world = World(
            config=config.model_copy(
                update={"verify": [config.verify[0].model_copy(update={"roots": ["prod/*"]})]}
            )
        )
        result = await deploy_and_approve(world)
        assert result.state == "published"
        assert [p.state for p in world.persisted] == ["published"]
        assert len(world.plans) == 1  # asked, and no rule applied


async def other_client(client: Client) -> Client:
    """Another connection to the same server: the SDK allows one worker per queue and
    client, and these stand for other worker processes."""
    return await Client.connect(
        client.service_client.config.target_host, data_converter=pydantic_data_converter
    )


class RecordingVerifier(DeliveryVerifier):
    """The real activity, noting each attempt's deadline (where a retry picks up)."""

    def __init__(self, deadlines: list[float]) -> None:
        super().__init__(environ={TOKEN_ENV: TOKEN})
        self.deadlines = deadlines

    def _deadline(self, plan: VerifyPlan) -> float:
        deadline = super()._deadline(plan)
        self.deadlines.append(deadline)
        return deadline


@pytest.mark.slow
@scenario
async def test_a_worker_lost_during_verification_is_replaced_and_the_deadline_kept() -> None:
    with argocd("never_sync") as fake:
        world = World(config=fleet(fake.url, timeout="10m"))
        world.on_publish = moving(fake)
        deadlines: list[float] = []
        first = RecordingVerifier(deadlines).verify_delivery
        # The dev server: the test server does not move a workflow off a dead worker's sticky
        # queue.
        async with harness(world, activities=[first], dev_server=True) as h:
            await h.push(ROOT, A)
            deployment_id = await h.awaiting_review(ROOT, A)
            await h.click(deployment_id, "approve")
            polled = lambda: sum(1 for _, p, _ in fake.requests if p.startswith("/api/"))  # noqa: E731
            await until(lambda: polled() >= 2, "the first attempt polling Argo CD")
            # The worker process dies mid-verification (its workflows and activities); another
            # one, on its own connection, takes over the shared queue.
            assert h.shared is not None
            await h.shared.shutdown()
            seen = polled()
            fake.set_behaviour("staging-cluster-a-app0", "healthy")
            second = Worker(
                await other_client(h.client),
                task_queue=TASK_QUEUE,
                workflows=WORKFLOWS,
                activities=[
                    *world.shared_activities(),
                    RecordingVerifier(deadlines).verify_delivery,
                ],
            )
            async with second:
                # In real time: the retry comes when the dead worker's attempt is reported.
                done = await until(lambda: world.outcomes, "the verdict", timeout=75)
        assert [d.state for d in done] == ["verified"]
        assert polled() > seen  # the second worker asked Argo CD again
        assert len(deadlines) == 2 and deadlines[1] == deadlines[0]  # not 10 more minutes
