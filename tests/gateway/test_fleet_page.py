"""The fleet page `/`: every root of a repository with its newest
deployment, what the cluster runs and how that delivery was verified, the queue and the lock;
filters by state; server-rendered (read here without a browser, and in headless Debian
chromium with a screenshot)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

from gateway.app import create_app
from gateway.dispatcher import Dispatcher
from shared.contracts.deploy import DeploymentRecord, FleetRoots, LatestDeployment
from shared.devstack.ports import free_port
from shared.settings import Settings
from shared.stores.blob import FileBlobStore, fleet_roots_key, latest_key
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from tests.support.machine import MACHINE_HEADERS, MACHINE_SECRET
from tests.support.paths import TESTS
from tests.support.serving import serving

REPO, OTHER = "acme/fleet", "acme/other"
PUBLIC = "http://rollwright.test"
UI = "http://temporal.test:8233"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHROMIUM = Path("/usr/bin/chromium")


class World:
    def __init__(self, tmp: Path, public: str = PUBLIC) -> None:
        self.settings = Settings(
            data_dir=tmp / "state", public_url=public, temporal_ui_url=UI, api_token=MACHINE_SECRET
        )
        self.settings.data_dir.mkdir(parents=True)
        self.database = Database(self.settings.database)
        self.deployments = DeploymentStore(self.database)
        self.blobs = FileBlobStore(tmp / "state" / "blobs")
        self.app = create_app(
            self.settings, dispatcher=cast(Dispatcher, None), database=self.database
        )
        self.n = 0

    def record(self, root: str, revision: str, *states: str, repo: str = REPO, **extra: Any) -> str:
        """One deployment through `states` (each a row update, as the workflow records)."""
        self.n += 1
        deployment_id = f"dep-{self.n:04d}"
        for i, state in enumerate(states):
            self.deployments.record(
                DeploymentRecord.model_validate(
                    {
                        "deployment_id": deployment_id,
                        "repo": repo,
                        "root": root,
                        "revision": revision * 20,
                        "trigger": extra.get("trigger", "merge"),
                        "state": state,
                        "at": T0 + timedelta(minutes=self.n, seconds=i),
                    }
                )
            )
        return deployment_id

    def seed(self) -> dict[str, str]:
        ids = {}
        self.record("prod/eu", "a1", "rendering", "publishing", "published")
        ids["prod/eu"] = self.record("prod/eu", "b2", "publishing", "verifying", "verified")
        self.record("prod/us", "a1", "publishing", "verified")
        self.record("prod/us", "b2", "publishing", "verifying", "unhealthy")
        ids["prod/us"] = self.record("prod/us", "c3", "queued")
        ids["stage/a"] = self.record("stage/a", "d4", "publishing", "verified", trigger="manual")
        latest = LatestDeployment(
            deployment_id=ids["stage/a"],
            revision="d4" * 20,
            trigger="manual",
            state="verified",
            locks_queue=True,
        )
        self.blobs.put(latest_key(REPO, "stage/a"), latest.model_dump_json().encode())
        ids["dev/x"] = self.record("dev/x", "e5", "rendering", "failed")
        self.record("elsewhere/1", "f6", "published", repo=OTHER)
        return ids


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.database.close()


def rows(html: str) -> dict[str, str]:
    """Root → the text of its row."""
    found = re.findall(r"<tr>\s*<td><a href=\"[^\"]+\">([^<]+)</a></td>(.*?)</tr>", html, re.S)
    return {root: " ".join(re.sub(r"<[^>]+>", " ", rest).split()) for root, rest in found}


def test_the_fleet_page_shows_every_root_with_health_queue_and_lock(world: World) -> None:
    ids = world.seed()
    with TestClient(world.app, headers=MACHINE_HEADERS) as client:
        index = client.get("/")
        assert index.status_code == 200
        # the front page links every repository's fleet page
        fleets = index.text.split('id="fleets"', 1)[1].split("</p>", 1)[0]
        assert f'href="{PUBLIC}/?repo=acme%2Ffleet"' in fleets
        assert f'href="{PUBLIC}/?repo=acme%2Fother"' in fleets
        page = client.get("/", params={"repo": REPO})
    assert page.status_code == 200
    shown = rows(page.text)
    assert list(shown) == ["dev/x", "prod/eu", "prod/us", "stage/a"]
    assert shown["prod/eu"].split()[:4] == ["b2b2b2b2b2b2", "verified", "b2b2b2b2b2b2", "healthy"]
    # the newest is queued behind an unhealthy delivery: the cluster runs b2, unhealthy
    us = shown["prod/us"].split()
    assert us[:5] == ["c3c3c3c3c3c3", "queued", "b2b2b2b2b2b2", "unhealthy", "1"]
    assert "locked by" in shown["stage/a"] and ids["stage/a"][:8] in shown["stage/a"]
    assert "open" in shown["prod/eu"]
    assert shown["dev/x"].split()[:4] == ["e5e5e5e5e5e5", "failed", "nothing", "yet"]
    assert f'href="{PUBLIC}/jobs/{ids["prod/us"]}"' in page.text
    assert f'href="{PUBLIC}/roots/prod/us?repo=acme%2Ffleet"' in page.text
    assert (
        f'href="{UI}/namespaces/default/workflows/deploy%3Aacme%2Ffleet%3Aprod%2Fus"' in page.text
    )
    assert "elsewhere/1" not in page.text


def test_the_front_page_says_each_roots_state_and_what_awaits_review(world: World) -> None:
    world.seed()
    waiting = world.record("prod/eu", "c3", "rendering", "awaiting_review")
    world.record("stage/a", "c3", "rendering", "awaiting_review")
    with TestClient(world.app, headers=MACHINE_HEADERS) as client:
        index = client.get("/").text
    table = index.split('id="roots"', 1)[1]
    found = re.findall(
        r'<td><a href="[^"]+">([^<]+)</a></td>\s*<td>[^<]+</td>\s*'
        r'<td><a href="([^"]+)"><span class="state (\w+)">.*?'
        r'<td class="awaiting-review">(.*?)</td>',
        table,
        re.S,
    )
    by_root = {root: (link, state, re.sub(r"<[^>]+>", "", n)) for root, link, state, n in found}
    assert by_root["prod/eu"] == (f"{PUBLIC}/jobs/{waiting}", "awaiting_review", "1")
    assert by_root["prod/us"][1:] == ("queued", "0")
    assert by_root["dev/x"][1:] == ("failed", "0")
    assert '<strong id="awaiting-total">2 deployment(s) await review</strong>' in index


def test_the_fleet_page_lists_every_root_and_links_revisions(world: World) -> None:
    world.seed()
    noted = FleetRoots(revision="f0" * 20, roots=["dev/x", "new/one", "prod/eu", "prod/us"])
    world.blobs.put(fleet_roots_key(REPO), noted.model_dump_json().encode())
    with TestClient(world.app, headers=MACHINE_HEADERS) as client:
        page = client.get("/", params={"repo": REPO}).text
        api = client.get("/api/fleet", params={"repo": REPO}).json()
    assert list(rows(page)) == ["dev/x", "prod/eu", "prod/us", "stage/a"]  # deployed
    undeployed = re.findall(r'<tr class="undeployed">\s*<td>([^<]+)</td>', page)
    assert undeployed == ["new/one"]
    assert [r["root"] for r in api["roots"]] == [
        "dev/x",
        "new/one",
        "prod/eu",
        "prod/us",
        "stage/a",
    ]
    assert api["states"]["undeployed"] == 1
    # each revision links its revision page: the newest deployment's and what the cluster runs
    assert f'href="{PUBLIC}/revisions/{REPO}/{"c3" * 20}"' in page
    assert f'href="{PUBLIC}/revisions/{REPO}/{"b2" * 20}"><code>b2b2b2b2b2b2</code></a>' in page


def test_filters_by_state_and_the_json(world: World) -> None:
    world.seed()
    with TestClient(world.app, headers=MACHINE_HEADERS) as client:
        verified = client.get("/", params={"repo": REPO, "state": "verified"}).text
        running = client.get("/", params={"repo": REPO, "state": "running"}).text
        none = client.get("/", params={"repo": REPO, "state": "rejected"}).text
        api = client.get("/api/fleet", params={"repo": REPO, "state": "running"}).json()
        only = client.get("/api/fleet", params={"repo": OTHER}).json()
    assert list(rows(verified)) == ["prod/eu", "stage/a"]
    assert 'aria-current="page"><span class="state verified">' in verified
    assert list(rows(running)) == ["prod/us"]  # queued: not finished
    assert rows(none) == {} and "No root is rejected" in none
    assert [r["root"] for r in api["roots"]] == ["prod/us"]
    assert api["states"] == {"failed": 1, "verified": 2, "queued": 1}
    assert api["roots"][0]["health"] == "unhealthy" and api["roots"][0]["queued"] == 1
    assert [r["root"] for r in only["roots"]] == ["elsewhere/1"]
    assert only["roots"][0]["health"] == "published (not verified)"


def test_text_is_escaped(world: World) -> None:
    world.record("<b>x</b>", "a1", "published")
    with TestClient(world.app, headers=MACHINE_HEADERS) as client:
        page = client.get("/", params={"repo": REPO}).text
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert list(rows(page)) == ["&lt;b&gt;x&lt;/b&gt;"]


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed (Debian chromium)")
def test_the_fleet_page_in_a_browser(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="Python playwright is missing")
    port = free_port("127.0.0.1")
    base = f"http://127.0.0.1:{port}"
    world = World(tmp_path, public=base)
    world.seed()
    world.record("prod/eu", "c3", "rendering", "awaiting_review")
    noted = FleetRoots(revision="c3" * 20, roots=["dev/x", "new/one", "prod/eu", "prod/us"])
    world.blobs.put(fleet_roots_key(REPO), noted.model_dump_json().encode())
    shots = Path(os.environ.get("ROLLWRIGHT_TEST_ARTIFACTS") or TESTS / "artifacts")
    shots = shots / "fleet-page"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        with serving(world.app, port), sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=["--headless=new", "--no-sandbox"]
            )
            try:
                page = browser.new_page(
                    viewport={"width": 1300, "height": 700},
                    java_script_enabled=False,
                    extra_http_headers=MACHINE_HEADERS,
                )
                page.goto(f"{base}/")
                sync_api.expect(page.locator("#awaiting-total")).to_contain_text("1 deployment")
                page.screenshot(path=str(shots / "0-front.png"), full_page=True)
                page.locator("#fleets").get_by_role("link", name=REPO).click()
                table = page.locator("#fleet")
                sync_api.expect(table.locator("tbody tr")).to_have_count(5)
                sync_api.expect(table).to_contain_text("unhealthy")
                sync_api.expect(table.locator("tr.undeployed")).to_contain_text("new/one")
                page.screenshot(path=str(shots / "1-fleet.png"), full_page=True)
                table.locator("tr", has_text="prod/eu").get_by_role("link", name="revision").click()
                sync_api.expect(page.locator("#roots")).to_contain_text("prod/eu")
                page.screenshot(path=str(shots / "3-revision.png"), full_page=True)
                page.go_back()
                page.get_by_role("link", name="running").click()
                sync_api.expect(table.locator("tbody tr")).to_have_count(2)
                sync_api.expect(table).to_contain_text("prod/us")
                page.screenshot(path=str(shots / "2-running.png"), full_page=True)
                table.locator("tr", has_text="prod/us").get_by_role("link", name="history").click()
                sync_api.expect(page.locator("h1")).to_contain_text("prod/us")
            finally:
                browser.close()
    finally:
        world.database.close()
    assert (shots / "1-fleet.png").stat().st_size > 0


def test_the_fleet_query_on_sqlite_and_postgresql(sql_url: str) -> None:
    """`DeploymentStore.fleet`: the newest deployment per root, the newest that reached the cluster
    and the queued count, with a window function both databases run."""
    database = Database(sql_url)
    store = DeploymentStore(database)
    try:
        for n, (root, state) in enumerate(
            [
                ("a", "verified"),
                ("a", "unhealthy"),
                ("a", "queued"),
                ("a", "queued"),
                ("b", "failed"),
            ]
        ):
            store.record(
                DeploymentRecord.model_validate(
                    {
                        "deployment_id": f"d{n}",
                        "repo": REPO,
                        "root": root,
                        "revision": f"{n}" * 40,
                        "trigger": "merge",
                        "state": state,
                        "at": T0 + timedelta(minutes=n),
                    }
                )
            )
        fleet = {f.root: f for f in store.fleet(REPO)}
        assert store.repositories() == [REPO]
    finally:
        database.close()
    assert (fleet["a"].latest.deployment_id, fleet["a"].queued) == ("d3", 2)
    assert fleet["a"].delivered is not None and fleet["a"].delivered.state == "unhealthy"
    assert fleet["b"].delivered is None and fleet["b"].queued == 0
