"""The root page shows the state that matters: the live deployment marked, the queue lock as a
banner (who locked it, since when, the Unlock action), the queue with positions, and one row
per deployment with its trigger and outcome. Rendered by the real gateway app from SQL rows
and latest.json; the banner also in headless Chromium, with screenshots in
$ROLLWRIGHT_TEST_ARTIFACTS (default tests/artifacts/)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from github import Auth, Github

from gateway.app import create_app
from gateway.dispatcher import Dispatcher
from shared.contracts.deploy import LatestDeployment
from shared.devstack.emulator.server import GitHubEmulator
from shared.stores.blob import latest_key
from tests.support.machine import MACHINE_HEADERS
from tests.support.pages import REPO, ROOT, T0, World
from tests.support.paths import TESTS
from tests.support.serving import serving

CHROMIUM = Path("/usr/bin/chromium")
MANUAL = "c0ffee00-0000-4000-8000-000000000003"
OLD, ROLLBACK = "a" * 40, "b" * 40


def locked_world(world: World, *, unlocked: bool = False) -> None:
    """Two merges published, then a manual rollback to the first revision (published: it
    locks the queue), then two more merges queued behind it and a manual one ahead of them."""
    world.record("published", T0, deployment_id="dep-1", revision=OLD, message="Published v1.")
    world.record(
        "published",
        T0 + timedelta(hours=1),
        deployment_id="dep-2",
        revision=ROLLBACK,
        message="Published v2.",
    )
    world.record(
        "published",
        T0 + timedelta(hours=2),
        deployment_id=MANUAL,
        revision=OLD,
        trigger="manual",
        requested_by="carol",
        message="Rolled back to v1.",
    )
    world.record("queued", T0 + timedelta(hours=3), deployment_id="q-merge-1", revision="c" * 40)
    world.record("queued", T0 + timedelta(hours=4), deployment_id="q-merge-2", revision="d" * 40)
    world.record(
        "queued",
        T0 + timedelta(hours=5),
        deployment_id="q-manual",
        revision="e" * 40,
        trigger="manual",
        requested_by="dave",
    )
    latest = LatestDeployment(
        deployment_id=MANUAL,
        revision=OLD,
        trigger="manual",
        state="published",
        finished_at=T0 + timedelta(hours=2),
        check_run_id=99,
        locks_queue=True,
        unlocked_by="erin" if unlocked else None,
        unlocked_at=T0 + timedelta(hours=6) if unlocked else None,
    )
    world.blobs.put(latest_key(REPO, ROOT), latest.model_dump_json().encode())


def test_lock_banner_live_marker_queue_and_outcomes(world: World) -> None:
    locked_world(world)
    html = world.client.get(f"/roots/{ROOT}", params={"repo": REPO}).text
    banner = html[html.index('id="lock"') : html.index("</div>", html.index('id="lock"'))]
    assert "Queue locked" in banner and '<strong id="locked-by">carol</strong>' in banner
    assert f"<code>{OLD[:12]}</code>" in banner and "holds merged revisions back" in banner
    assert f'href="https://github.com/{REPO}/runs/99"' in banner  # where Unlock is clicked
    # the live deployment is the one published last (the rollback), marked once
    assert html.count('class="live" id="live"') == 1
    live = html[html.index('id="live"') :]
    assert MANUAL in live[: live.index("</tr>")] and "Rolled back to v1." in live
    # the queue in the order it is taken: manual first, then merges first come first served
    queue = html[html.index('id="queue"') : html.index("</table>", html.index('id="queue"'))]
    assert re.findall(r'class="position">(\d+)</td><td><a href="[^"]+"><code>(\w)', queue) == [
        ("1", "e"),
        ("2", "c"),
        ("3", "d"),
    ]
    # one row per deployment with trigger and outcome
    api = world.client.get(f"/api/roots/{ROOT}", params={"repo": REPO}).json()
    assert api["live"] == {REPO: MANUAL}
    assert api["locks"][0]["locked_by"] == "carol" and api["locks"][0]["deployment_id"] == MANUAL
    assert [q["deployment_id"] for q in api["queue"]] == ["q-manual", "q-merge-1", "q-merge-2"]
    rows = {d["deployment_id"]: d for d in api["deployments"]}
    assert len(rows) == len(api["deployments"]) == 6
    assert (rows["dep-1"]["message"], rows["dep-1"]["live"]) == ("Published v1.", False)
    assert (rows[MANUAL]["trigger"], rows[MANUAL]["live"]) == ("manual", True)


def test_no_banner_once_unlocked(world: World) -> None:
    locked_world(world, unlocked=True)
    html = world.client.get(f"/roots/{ROOT}", params={"repo": REPO}).text
    assert 'id="lock"' not in html and 'id="live"' in html


# --- in a browser --------------------------------------------------------------------------


def artifacts_dir() -> Path:
    configured = os.environ.get("ROLLWRIGHT_TEST_ARTIFACTS")
    path = Path(configured) if configured else TESTS / "artifacts"
    path = path / "root-page"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[World, str]]:
    world = World(tmp_path)
    app = create_app(
        world.settings, dispatcher=cast(Dispatcher, world.dispatcher), database=world.database
    )
    try:
        with serving(app) as url:
            yield world, url
    finally:
        world.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed (Debian chromium)")
def test_lock_banner_in_a_browser(served: tuple[World, str]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    world, base = served
    locked_world(world)
    shots = artifacts_dir()
    with sync_api.sync_playwright() as playwright:
        browser: Any = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless=new", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(
                viewport={"width": 1300, "height": 900}, extra_http_headers=MACHINE_HEADERS
            )
            page.goto(f"{base}/roots/{ROOT}?repo={REPO}")
            banner = page.locator("#lock")
            sync_api.expect(banner).to_be_visible()
            sync_api.expect(banner).to_contain_text("Queue locked")
            sync_api.expect(page.locator("#locked-by")).to_have_text("carol")
            unlock = banner.locator("a.unlock")
            sync_api.expect(unlock).to_have_attribute("href", f"https://github.com/{REPO}/runs/99")
            # the banner is at the top: above the queue and the deployments
            top = page.evaluate(
                "() => ['lock', 'queue', 'deployments'].map("
                "id => document.getElementById(id).getBoundingClientRect().top)"
            )
            assert top == sorted(top), top
            sync_api.expect(page.locator("tr.live .badge.live")).to_have_text("live")
            sync_api.expect(page.locator("#queue .position")).to_have_text(["1", "2", "3"])
            page.screenshot(path=str(shots / "1-locked.png"), full_page=True)

            # Unlocked (latest.json records it): the banner is gone on the next load.
            locked_world(world, unlocked=True)
            page.reload()
            sync_api.expect(page.locator("#lock")).to_have_count(0)
            page.screenshot(path=str(shots / "2-unlocked.png"), full_page=True)
        finally:
            browser.close()


def test_dev_mode_banner_unlocks_through_the_emulator(
    tmp_path: Path,
    emulator: tuple[GitHubEmulator, list[tuple[str, dict[str, Any]]]],
) -> None:
    """In the dev stack the banner's Unlock clicks the check run that offers it (the same
    webhook GitHub sends) and comes back to the root page."""
    emu, received = emulator
    github = Github(base_url=emu.url, auth=Auth.Token(emu.issue_token(1)))
    waiting = github.get_repo(REPO).create_check_run(
        name=f"rollwright/{ROOT}",
        head_sha="c" * 40,
        external_id="q-merge-1",
        status="completed",
        conclusion="action_required",
        output={"title": "Waiting: the queue is locked", "summary": "s"},
        actions=[{"label": "Unlock", "description": "Let merges deploy", "identifier": "unlock"}],
    )
    w = World(tmp_path, dev_mode=True, github_api_url=emu.url)
    with w.client:
        locked_world(w)
        html = w.client.get(f"/roots/{ROOT}", params={"repo": REPO}).text
        banner = html[html.index('id="lock"') : html.index("</div>", html.index('id="lock"'))]
        assert f'action="http://rollwright.test/jobs/{MANUAL}/actions/unlock"' in banner
        assert f'name="check_run_id" value="{waiting.id}"' in banner
        answer = w.client.post(
            f"/jobs/{MANUAL}/actions/unlock",
            data={"check_run_id": str(waiting.id), "back": "root"},
            follow_redirects=False,
        )
        assert answer.status_code == 303
        assert answer.headers["location"] == (
            f"http://rollwright.test/roots/{ROOT}?repo=acme%2Ffleet"
        )
        ((event, payload),) = received
        assert (event, payload["requested_action"]) == ("check_run", {"identifier": "unlock"})
    w.close()
