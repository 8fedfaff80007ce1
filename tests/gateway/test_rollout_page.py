"""The rollout page `/rollouts/<owner>/<repo>/<patch-id>`: a running
PromotionWorkflow on Temporal's time-skipping server (the fleet doubles of
tests/support/promotion_world.py), asked by the gateway's real dispatcher through its `rollout`
query, rendered server-side; read as HTML and in headless chromium with a screenshot."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
import uvicorn

from gateway.app import create_app
from gateway.context import Gateway
from gateway.dispatcher import TemporalDispatcher
from gateway.jobviews import JobReader
from gateway.rolloutview import pipeline
from shared.contracts.deploy import TASK_QUEUE, DeploymentRecord
from shared.contracts.promotion import (
    NodeInfo,
    RolloutRow,
    RolloutView,
    RootDeployment,
    WindowInfo,
)
from shared.devstack.ports import free_port
from shared.settings import Settings
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from tests.support.deploy_world import until
from tests.support.machine import MACHINE_HEADERS, MACHINE_SECRET
from tests.support.paths import TESTS
from tests.support.promotion_world import PATCH, REPO, Fleet, Rollout, rollout

INT, STAGE, PROD = "integration", "stage", "prod/prod-canary"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
CHROMIUM = Path("/usr/bin/chromium")


def scenario(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def test(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 90))

    return test


def past_integration(stage_soak: int = 0) -> Fleet:
    """The patch active at integration, whose root runs it verified (dep-int): the rollout
    promotes to stage, soaking there `stage_soak` seconds."""
    fleet = Fleet(
        plan=[
            NodeInfo(path=INT),
            NodeInfo(path=STAGE, soak_seconds=stage_soak),
            NodeInfo(path=PROD),
        ],
        roots={INT: ["mc/int/us"], STAGE: ["mc/stage/us"], PROD: ["mc/prod/us"]},
    )
    fleet.start_at(1)
    fleet.latest["mc/int/us"] = RootDeployment(
        root="mc/int/us",
        revision=fleet.tip,
        deployment_id="dep-int",
        state="verified",
        contains_patch=True,
    )
    return fleet


def halted_at_stage() -> Fleet:
    fleet = past_integration()
    fleet.outcomes["mc/stage/us"] = "unhealthy"
    return fleet


@contextlib.asynccontextmanager
async def gateway(
    tmp: Path, r: Rollout, public: str, deployed: Sequence[tuple[str, str, str]] = ()
) -> AsyncIterator[Any]:
    """The gateway over the rollout's Temporal; `deployed`: (root, deployment, state) rows
    the record activity would have written, an hour apart from T0 on."""
    settings = Settings(data_dir=tmp / "state", public_url=public, api_token=MACHINE_SECRET)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    database = Database(settings.database)
    for hours, (root, deployment_id, state) in enumerate(deployed):
        record = DeploymentRecord(
            deployment_id=deployment_id,
            repo=REPO.full_name,
            root=root,
            revision="f" * 40,
            trigger="merge",
            state=state,  # type: ignore[arg-type]
            at=T0 + timedelta(hours=hours),
        )
        DeploymentStore(database).record(record)
    app = create_app(
        settings, dispatcher=TemporalDispatcher(r.client, TASK_QUEUE), database=database
    )
    try:
        async with app.router.lifespan_context(app):
            yield app
    finally:
        database.close()


def halted(fleet: Fleet) -> bool:
    return bool(fleet.check_runs) and "Halted" in fleet.last_run().title


@scenario
async def test_the_rollout_page_shows_the_pipeline_the_halt_and_what_can_be_done(
    tmp_path: Path,
) -> None:
    fleet = halted_at_stage()
    async with rollout(fleet) as r:
        await r.start()
        await until(lambda: halted(fleet), "the halt")
        deployed = [("mc/int/us", "dep-int", "verified"), ("mc/stage/us", "dep-st", "unhealthy")]
        async with gateway(tmp_path, r, "http://rollwright.test", deployed) as app:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://t", headers=MACHINE_HEADERS
            ) as http:
                page = await http.get(f"/rollouts/{REPO.full_name}/{PATCH}")
                missing = await http.get(f"/rollouts/{REPO.full_name}/no-such-patch")
    assert page.status_code == 200, page.text
    html = page.text
    pipeline = re.findall(
        r'<li class="node (\w+)" data-node="[^"]+"><strong>([^<]+)</strong>', html
    )
    assert pipeline == [("passed", INT), ("halted", STAGE), ("pending", PROD)]
    assert html.count('<li class="arrow" aria-hidden="true">→</li>') == 2  # between the nodes
    # each node's evidence: its roots' deployments, linked
    assert '<a href="http://rollwright.test/jobs/dep-int"><span class="state verified">' in html
    # the revision the workflow judged it at, with the patch
    judged_at = fleet.latest["mc/int/us"].revision
    assert f'href="http://rollwright.test/revisions/{REPO.full_name}/{judged_at}"' in html
    assert f'since <time datetime="{T0.isoformat()}">' in html  # passed when dep-int ended
    assert f"Halted at {STAGE}" in html and "unhealthy at mc/stage/us" in html
    # the reason's Markdown code spans become <code>, the rest stays escaped text
    assert "<code>mc/stage/us</code>: deployment of <code>" in html and "`" not in html
    actions = re.findall(r"<li><strong>([^<]+)</strong> on the check run", html)
    assert actions == ["Resume", "Roll back"]
    assert f"rollwright/promote: {PATCH}" in html
    assert 'href="http://rollwright.test/jobs/' in html  # the stage deployment's job page
    assert missing.status_code == 404 and "No such rollout" in missing.text


@scenario
async def test_a_node_is_passed_only_with_every_root_deployed_and_verified(
    tmp_path: Path,
) -> None:
    """The workflow's table calls integration passed (the patch is active there); without a
    verified (or published) deployment of its root the page says it is unconfirmed, and
    why."""
    fleet = halted_at_stage()
    async with rollout(fleet) as r:
        await r.start()
        await until(lambda: halted(fleet), "the halt")
        deployed = [("mc/int/us", "dep-int", "failed")]
        async with gateway(tmp_path, r, "http://rollwright.test", deployed) as app:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://t", headers=MACHINE_HEADERS
            ) as http:
                html = (await http.get(f"/rollouts/{REPO.full_name}/{PATCH}")).text
    assert '<li class="node unconfirmed" data-node="integration">' in html
    assert "0/1 roots deployed and verified; not yet: mc/int/us (failed)" in html


@scenario
async def test_a_passed_node_shows_the_deployments_it_passed_on_not_the_roots_newest(
    tmp_path: Path,
) -> None:
    """The workflow records which deployment of each root, with the patch, let a node pass;
    a later deployment of the root (another revision, gone unhealthy) does not undo that
    evidence and is not shown as it."""
    fleet = halted_at_stage()
    async with rollout(fleet) as r:
        await r.start()
        await until(lambda: halted(fleet), "the halt")
        view = await r.view()
        deployed = [
            ("mc/int/us", "dep-int", "verified"),
            ("mc/int/us", "dep-int-later", "unhealthy"),
        ]
        async with gateway(tmp_path, r, "http://rollwright.test", deployed) as app:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://t", headers=MACHINE_HEADERS
            ) as http:
                html = (await http.get(f"/rollouts/{REPO.full_name}/{PATCH}")).text
    assert [(d.root, d.deployment_id, d.contains_patch) for d in view.evidence[INT]] == [
        ("mc/int/us", "dep-int", True)
    ]
    assert '<li class="node passed" data-node="integration">' in html
    assert 'href="http://rollwright.test/jobs/dep-int"' in html
    assert "dep-int-later" not in html
    assert f'since <time datetime="{T0.isoformat()}">' in html  # when dep-int ended


def reader_over(tmp_path: Path, database: Database) -> JobReader:
    settings = Settings(data_dir=tmp_path, public_url="http://rollwright.test")
    gateway = SimpleNamespace(
        settings=settings,
        deployments=DeploymentStore(database),
        audit_trail=None,
        notifications=None,
        blobs=None,
    )
    return JobReader(cast(Gateway, gateway))


def test_a_node_passed_before_evidence_was_recorded_shows_what_its_roots_run_now(
    tmp_path: Path,
) -> None:
    """A rollout that passed a node before the workflow kept its evidence: the roots' newest
    delivered deployments stand in, and the node says so."""
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        DeploymentStore(database).record(
            DeploymentRecord(
                deployment_id="dep-now",
                repo=REPO.full_name,
                root="mc/int/us",
                revision="e" * 40,
                trigger="merge",
                state="verified",
                at=T0,
            )
        )
        view = RolloutView(
            repo=REPO.full_name,
            patch_id=PATCH,
            revision="f" * 40,
            phase="deploying",
            current_node=STAGE,
            next_node=None,
            gate=None,
            waiting_for="",
            rows=[
                RolloutRow(node=INT, state="passed", since=T0),
                RolloutRow(node=STAGE, state="deploying", since=T0),
            ],
            deployments=[RootDeployment(root="mc/stage/us")],
            halt=None,
            node_roots={INT: ["mc/int/us"], STAGE: ["mc/stage/us"]},
        )
        nodes = {n.node: n for n in pipeline(view, reader_over(tmp_path, database), T0)}
    finally:
        database.close()
    assert nodes[INT].judged is False and nodes[INT].state == "passed"
    assert [(e.deployment_id, e.contains_patch) for e in nodes[INT].roots] == [("dep-now", None)]
    assert nodes[STAGE].judged is True
    assert [(e.root, e.deployment_id) for e in nodes[STAGE].roots] == [("mc/stage/us", None)]


def artifacts() -> Path:
    shots = Path(os.environ.get("ROLLWRIGHT_TEST_ARTIFACTS") or TESTS / "artifacts")
    shots = shots / "rollout-page"
    shots.mkdir(parents=True, exist_ok=True)
    return shots


@contextlib.asynccontextmanager
async def browsing(
    tmp_path: Path, r: Rollout, deployed: Sequence[tuple[str, str, str]], *, script: bool
) -> AsyncIterator[Any]:
    """The gateway served over HTTP and a headless chromium tab on the rollout page."""
    async_api = pytest.importorskip("playwright.async_api", reason="Python playwright is missing")
    port = free_port("127.0.0.1")
    base = f"http://127.0.0.1:{port}"
    async with gateway(tmp_path, r, base, deployed) as app:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error")
        server = uvicorn.Server(config)
        served = asyncio.create_task(server.serve())  # this loop: the Temporal client's
        try:
            await until(lambda: server.started, "uvicorn")
            async with async_api.async_playwright() as playwright:
                browser = await playwright.chromium.launch(
                    executable_path=str(CHROMIUM), args=["--headless=new", "--no-sandbox"]
                )
                try:
                    page = await browser.new_page(
                        viewport={"width": 1200, "height": 700},
                        java_script_enabled=script,
                        extra_http_headers=MACHINE_HEADERS,
                    )
                    await page.goto(f"{base}/rollouts/{REPO.full_name}/{PATCH}")
                    yield page
                finally:
                    await browser.close()
        finally:
            server.should_exit = True
            await served


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed (Debian chromium)")
@scenario
async def test_the_rollout_page_in_a_browser(tmp_path: Path) -> None:
    expect = pytest.importorskip("playwright.async_api").expect

    shots = artifacts()
    fleet = halted_at_stage()
    async with rollout(fleet) as r:
        await r.start()
        await until(lambda: halted(fleet), "the halt")
        deployed = [("mc/int/us", "dep-int", "verified"), ("mc/stage/us", "dep-st", "unhealthy")]
        async with browsing(tmp_path, r, deployed, script=False) as page:
            nodes = page.locator("#pipeline > li.node")
            await expect(nodes).to_have_count(3)
            await expect(nodes.nth(1)).to_contain_text("halted")
            await expect(page.locator("#actions")).to_contain_text("Roll back")
            await page.screenshot(path=str(shots / "1-halted.png"), full_page=True)
    assert (shots / "1-halted.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed (Debian chromium)")
@scenario
async def test_the_soak_counts_down_in_a_browser(tmp_path: Path) -> None:
    """The page's script counts the soak down each second, worded as the server words it."""
    expect = pytest.importorskip("playwright.async_api").expect

    fleet = past_integration(stage_soak=600)
    async with rollout(fleet) as r:
        await r.start()

        async def soaking() -> bool:
            return (await r.view()).phase == "soaking"

        await until(soaking, "the soak at stage")
        deployed = [("mc/int/us", "dep-int", "verified")]
        async with browsing(tmp_path, r, deployed, script=True) as page:
            left = page.locator('#pipeline li[data-node="stage"] .wait .left')
            await expect(left).to_have_text(re.compile(r"^\d+m \d\d?s$"))
            first = await left.text_content()
            await expect(left).not_to_have_text(first or "", timeout=5000)
            then = await left.text_content()
            await page.screenshot(path=str(artifacts() / "2-soaking.png"), full_page=True)
    assert first and then and first != then, (first, then)


def test_each_node_says_the_soak_or_gate_still_to_wait(tmp_path: Path) -> None:
    """The current node's soak counts down from when it started; the next node's closed
    window from when it opens; a manual gate says what it waits for."""
    now = T0 + timedelta(hours=5)
    view = RolloutView(
        repo=REPO.full_name,
        patch_id=PATCH,
        revision="f" * 40,
        phase="soaking",
        current_node=STAGE,
        next_node=PROD,
        gate="manual",
        waiting_for="the soak",
        rows=[
            RolloutRow(node=INT, state="passed", since=T0),
            RolloutRow(node=STAGE, state="soaking", since=T0),
            RolloutRow(node=PROD, state="window_closed", since=T0),
        ],
        deployments=[],
        halt=None,
        nodes=[
            NodeInfo(path=INT),
            NodeInfo(path=STAGE, soak_seconds=7200),
            NodeInfo(path=PROD, gate="manual"),
        ],
        soak_started=now - timedelta(minutes=30),
        window=WindowInfo(open=False, next_open=now + timedelta(hours=3)),
    )
    settings = Settings(data_dir=tmp_path, public_url="http://rollwright.test")
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        reader = JobReader(
            cast(
                Gateway,
                SimpleNamespace(
                    settings=settings,
                    deployments=DeploymentStore(database),
                    audit_trail=None,
                    notifications=None,
                    blobs=None,
                ),
            )
        )
        nodes = {n.node: n for n in pipeline(view, reader, now)}
    finally:
        database.close()
    assert nodes[STAGE].wait == "soak: 1h 30m left (of 2h 00m)"
    assert nodes[STAGE].until == now + timedelta(hours=1, minutes=30)
    assert nodes[PROD].wait == "promotion window opens in 3h 00m"
    assert nodes[INT].wait == "" and nodes[INT].state == "passed"  # no roots known: as told
