"""The job page in a real browser (headless Debian `chromium` driven by Python playwright; no
browser download) against the embedded stack: the Temporal dev server, the worker and gateway
processes, and the GitHub emulator.

One deployment's story, as a person watching it: the page opened while the render runs shows
log lines arriving without a reload, the state moves to awaiting review, a resource's diff
expands, side by side shows removed and added lines next to each other, and Approve (dev mode:
through the emulator's check run and the gateway's webhook) takes it to published, while a
second page left open on the job follows every field without a reload. Before all that the
browser signs in with GitHub (the emulator's OAuth flow); a second test shows the sign-in
redirect, a reader's view and a 404 for someone without read access. The render
is slow for an honest reason: the root has 1,000 releases. Screenshots go to
$ROLLWRIGHT_TEST_ARTIFACTS (default tests/artifacts/).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from shared.devstack import fleetrepo
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.stack import DevStack
from tests.bench import fleetgen
from tests.support.paths import TESTS
from tests.support.stack import serving_fleet, wait_on

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
OWNER, NAME = "acme", "big-fleet"
ROOT = "g000/c000-000"
RELEASES = 1000
STEP_TIMEOUT = 60.0
T = TypeVar("T")

sync_api = pytest.importorskip("playwright.sync_api", reason="Python playwright is not installed")
# Auto-waiting assertions: the page's own script updates it after load.
expect = sync_api.expect
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed (Debian chromium)"
    ),
]


def artifacts_dir() -> Path:
    configured = os.environ.get("ROLLWRIGHT_TEST_ARTIFACTS")
    path = Path(configured) if configured else TESTS / "artifacts"
    path = path / "job-page"
    path.mkdir(parents=True, exist_ok=True)
    return path


def wait_for(what: str, probe: Callable[[], T | None], stack: DevStack) -> T:
    return wait_on(stack, what, probe, timeout=STEP_TIMEOUT)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevStack, Path]]:
    base = tmp_path_factory.mktemp("browser")
    source = base / "source"
    fleetgen.generate(source, groups=1, clusters_per_group=1, releases=RELEASES)
    with serving_fleet(base, source, OWNER, NAME, headless_ui=True) as (stack, repo_dir):
        shutil.rmtree(source)
        yield stack, repo_dir


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


def test_watch_review_and_approve_a_deployment(stack: tuple[DevStack, Path], browser: Any) -> None:
    devstack, repo_dir = stack
    emulator = devstack.emulator
    assert emulator is not None
    shots = artifacts_dir()
    # One browser profile: the job page and the second page left open share its sign-in.
    profile = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = profile.new_page()
    sign_in(page, devstack.urls.gateway, "dev-reviewer")

    before = fleetrepo.head(repo_dir)
    after = fleetrepo.set_value(
        repo_dir, f"deployments/{ROOT}/cluster.values.yaml", "env.TIER", "gold", "tier gold"
    )
    assert emulator.send_push(OWNER, NAME, before, after).status == 202

    deployment_id = wait_for(
        "check run with a deployment id", lambda: deployment_of(emulator), devstack
    )
    job_url = f"{devstack.urls.gateway}/jobs/{deployment_id}"

    # --- the page opened while the render runs: log lines arrive without a reload
    def opened() -> bool | None:
        response = page.goto(job_url)
        return True if response is not None and response.status == 200 else None

    wait_for("the job page", opened, devstack)
    first_lines = page.locator("#log .line").all_inner_texts()
    assert not any(" rendered " in f" {line} " for line in first_lines), (
        "the render had already finished when the page opened; the live part went untested",
        first_lines,
    )
    page.screenshot(path=str(shots / "1-rendering.png"), full_page=True)
    page.locator("#log .line", has_text="diffed").wait_for(timeout=STEP_TIMEOUT * 1000)
    later_lines = page.locator("#log .line").all_inner_texts()
    assert len(later_lines) > len(first_lines)
    assert any(line.split(" ")[1:2] == ["rendered"] for line in later_lines), later_lines
    expect(page.locator("#state")).to_have_text("awaiting_review", timeout=STEP_TIMEOUT * 1000)
    page.screenshot(path=str(shots / "2-awaiting-review.png"), full_page=False)

    # --- the diff: reload (it was written after the page loaded), expand one resource
    page.reload()
    resources = page.locator("details.resource")
    expect(resources).to_have_count(2 * RELEASES)  # first deployment: every resource added
    first = resources.first
    expect(first).not_to_have_attribute("open", "")
    first.locator("summary").click()
    expect(first).to_have_attribute("open", "")
    expect(first.locator("table.diff.unified tr.add").first).to_be_visible()
    expect(first.locator("table.diff")).to_contain_text("+apiVersion: apps/v1")
    first.screenshot(path=str(shots / "3-resource-unified.png"))

    # --- side by side
    page.locator("#view-split").click()
    page.wait_for_url("**view=split**")
    first = page.locator("details.resource").first
    first.locator("summary").click()
    split = first.locator("table.diff.split")
    expect(split).to_be_visible()
    cells = split.locator("tr").nth(1).locator("td")
    expect(cells).to_have_count(4)  # old number, old text, new number, new text
    expect(cells.nth(3)).to_contain_text("apps/v1")
    expect(cells.nth(1)).to_have_text("")
    first.screenshot(path=str(shots / "4-resource-side-by-side.png"))

    # --- the page puts the diff before the log, and offers no rollback to a revision that
    # was never deployed
    order = page.evaluate(
        "() => [document.getElementById('diff'), document.getElementById('log')]"
        ".map(e => e.getBoundingClientRect().top + window.scrollY)"
    )
    assert order[0] < order[1], order
    expect(page.locator("#rollback")).to_have_count(0)

    # --- a second page, open on the job while someone approves: it is never reloaded, and
    # every field follows (state, approver, buttons, timeline, check runs)
    watcher = profile.new_page()
    watcher.goto(job_url)
    expect(watcher.locator("#state")).to_have_text("awaiting_review")
    expect(watcher.locator("#approved-by")).to_have_text("—")
    runs_before = watcher.locator("#facts a[href*='/runs/']").count()

    # --- Approve (dev mode): the emulator's check run sends the webhook; the state follows
    approve = page.locator("button.approve")
    expect(approve).to_be_visible()
    page.screenshot(path=str(shots / "5-before-approve.png"), full_page=False)
    approve.click()
    page.wait_for_url(f"**/jobs/{deployment_id}")
    expect(page.locator("#state")).to_have_text("published", timeout=STEP_TIMEOUT * 1000)

    expect(watcher.locator("#state")).to_have_text("published", timeout=STEP_TIMEOUT * 1000)
    expect(watcher.locator("#approved-by")).to_contain_text("dev-reviewer")
    expect(watcher.locator("#timeline .state")).to_have_text(
        ["queued", "rendering", "awaiting_review", "publishing", "published"]
    )
    expect(watcher.locator("button.approve")).to_have_count(0)
    # after a review the deployment goes on in a new check run: its link appears too
    expect(watcher.locator("#facts a[href*='/runs/']")).not_to_have_count(runs_before)
    watcher.screenshot(
        path=str(shots / "6-published-live.png"), full_page=False, mask=[local_paths(watcher)]
    )
    assert watcher.evaluate("() => performance.getEntriesByType('navigation').length") == 1
    watcher.close()

    # --- reloaded, the published revision now offers the rollback
    page.reload()
    expect(page.locator("#rollback")).to_contain_text(after[:12])
    page.screenshot(path=str(shots / "7-published.png"), full_page=False, mask=[local_paths(page)])

    see_the_next_change_marked(page, devstack, repo_dir, after, shots)
    profile.close()


def see_the_next_change_marked(
    page: Any, devstack: DevStack, repo_dir: Path, after: str, shots: Path
) -> None:
    """A second change: side by side marks what changed within each changed line."""
    emulator = devstack.emulator
    assert emulator is not None
    silver = fleetrepo.set_value(
        repo_dir, f"deployments/{ROOT}/cluster.values.yaml", "env.TIER", "silver", "tier silver"
    )
    assert emulator.send_push(OWNER, NAME, after, silver).status == 202
    second = wait_for(
        "the second deployment", lambda: deployment_of(emulator, head=silver), devstack
    )
    split_url = f"{devstack.urls.gateway}/jobs/{second}?view=split"

    def diffed() -> bool | None:
        page.goto(split_url)
        return True if page.locator("details.resource").count() else None

    wait_for("the second diff", diffed, devstack)
    first = page.locator("details.resource").first
    first.locator("summary").click()
    expect(first.locator("td.del .chg")).to_have_text("gold")
    expect(first.locator("td.add .chg")).to_have_text("silver")
    first.screenshot(path=str(shots / "8-change-marked.png"))


def local_paths(page: Any) -> Any:
    """What names this machine's directories (the blob store a render was published to):
    masked in the screenshots, which are committed."""
    return page.locator("#outcome, #timeline .markdown", has_text="file://")


def deployment_of(emulator: GitHubEmulator, head: str | None = None) -> str | None:
    """The deployment id on the root's check run (on commit `head`), once there is one."""
    for run in emulator.check_runs(OWNER, NAME):
        if run.name != f"rollwright/{ROOT}" or not run.state.get("external_id"):
            continue
        if head is None or run.state["head_sha"] == head:
            return str(run.state["external_id"])
    return None


def sign_in(page: Any, gateway: str, login: str, path: str = "/") -> None:
    """Open `path` anonymously: the gateway sends the browser to GitHub's (the emulator's)
    authorize page; authorize as `login` and come back to `path`, signed in."""
    page.goto(f"{gateway}{path}")
    page.wait_for_url("**/login/oauth/authorize?**")
    page.locator("#login").fill(login)
    page.locator("#authorize").click()
    page.wait_for_url(f"{gateway}{path}")


def test_the_pages_ask_to_sign_in_and_show_only_readers(
    stack: tuple[DevStack, Path], browser: Any
) -> None:
    """Anonymous: the sign-in redirect, never data; signed in as a reader: the page; signed
    in as someone GitHub says cannot read the repository: 404."""
    devstack, _ = stack
    emulator = devstack.emulator
    assert emulator is not None
    shots = artifacts_dir()
    gateway = devstack.urls.gateway

    deployment_id = wait_for("a deployment of the root", lambda: deployment_of(emulator), devstack)
    job_path = f"/jobs/{deployment_id}"
    emulator.set_permission(OWNER, NAME, "rita-reader", "read")
    emulator.set_permission(OWNER, NAME, "olaf-outsider", "none")

    anonymous = browser.new_context(viewport={"width": 1200, "height": 800})
    page = anonymous.new_page()
    response = page.goto(f"{gateway}{job_path}")
    assert response is not None
    page.wait_for_url("**/login/oauth/authorize?**")
    assert page.url.startswith(emulator.url)
    expect(page.locator("#authorize")).to_be_visible()
    assert deployment_id not in page.content() and ROOT not in page.content()
    page.screenshot(path=str(shots / "sign-in-1-authorize.png"))
    # the reader authorizes and lands on the page asked for
    page.locator("#login").fill("rita-reader")
    page.locator("#authorize").click()
    page.wait_for_url(f"{gateway}{job_path}")
    expect(page.locator("h1")).to_contain_text(ROOT)
    expect(page.locator("#state")).not_to_be_empty()
    expect(page.locator("#signed-in-as")).to_have_text("rita-reader")
    page.screenshot(path=str(shots / "sign-in-2-reader.png"))
    anonymous.close()

    outsider = browser.new_context(viewport={"width": 1200, "height": 800})
    page = outsider.new_page()
    sign_in(page, gateway, "olaf-outsider")
    response = page.goto(f"{gateway}{job_path}")
    assert response is not None and response.status == 404
    assert ROOT not in page.content()
    page.screenshot(path=str(shots / "sign-in-3-no-access.png"))
    # signing out (from the front page, which they may see, empty): the next page asks again
    page.goto(f"{gateway}/")
    expect(page.locator("#signed-in-as")).to_have_text("olaf-outsider")
    page.get_by_role("button", name="Sign out").click()
    page.goto(f"{gateway}{job_path}")
    page.wait_for_url("**/login/oauth/authorize?**")
    outsider.close()
