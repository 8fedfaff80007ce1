"""The pages under their Content-Security-Policy in a real browser (headless Debian
`chromium` driven by Python playwright; no browser download): the job page's stylesheet and
script load and run — its log follows new lines and its state changes without a reload —
the preview's aligned columns keep their alignment, and the browser reports no violation;
and a page on another port of the same host cannot frame the gateway (the same *site*, so a
`SameSite=Lax` cookie would go with the frame's requests).

The gateway is served by uvicorn over real SQLite and a real file blob store filled as the
worker fills them (tests/support/pages.py); the browser reads as the machine (bearer token)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from shared.contracts.preview import preview_prefix
from shared.devstack.ports import free_port
from tests.support.loopback import LoopbackServer
from tests.support.machine import MACHINE_HEADERS
from tests.support.pages import DEP, T0, World
from tests.support.serving import serving

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"]
HEAD = "c" * 40
REPORT = "### rollwright preview\n\n| root | changed |\n|:--|--:|\n| `g/c1` | 3 |\n"

sync_api = pytest.importorskip("playwright.sync_api", reason="Python playwright is not installed")
expect = sync_api.expect
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed (Debian chromium)"
    ),
]


class Framing(BaseHTTPRequestHandler):
    """Another site's page (another port of 127.0.0.1) that frames the gateway's job page."""

    target: ClassVar[str] = ""

    def do_GET(self) -> None:
        body = f'<!doctype html><iframe id="lure" src="{self.target}"></iframe>'.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[World, str]]:
    port = free_port("127.0.0.1")
    url = f"http://127.0.0.1:{port}"
    world = World(tmp_path, public_url=url)
    world.record("rendering", T0)
    world.store_diff()
    prefix = preview_prefix("acme/fleet", 9, HEAD)
    world.blobs.put(f"{prefix}report.md", REPORT.encode())
    world.blobs.put(f"{prefix}report.json", json.dumps({"base": "b" * 40}).encode())
    try:
        with serving(world.client.app, port):
            yield world, url
    finally:
        world.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield launched.new_context(extra_http_headers=MACHINE_HEADERS)
        finally:
            launched.close()


def test_the_pages_satisfy_their_policy(gateway: tuple[World, str], browser: Any) -> None:
    world, url = gateway
    page = browser.new_page()
    said: list[str] = []
    page.on("console", lambda message: said.append(message.text))
    page.add_init_script(
        "window.violations = []; document.addEventListener('securitypolicyviolation',"
        " e => window.violations.push(e.violatedDirective + ' ' + e.blockedURI));"
    )
    assert page.goto(f"{url}/jobs/{DEP}").status == 200
    # the stylesheet applies, and the script runs: its buttons show and work
    header = page.locator("header.top")
    assert header.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(36, 41, 47)"
    expect(page.locator("#expand-all")).to_be_visible()
    page.click("#expand-all")
    expect(page.locator("details.resource[open]")).to_have_count(3)
    # it fetches the log and the live page from the gateway ('self')
    world.jobs.write(DEP, "rendered 1 release")
    expect(page.locator("#log .line").last).to_contain_text("rendered 1 release")
    world.record("awaiting_review", T0)
    expect(page.locator("#state")).to_have_text("awaiting_review")
    expect(page.locator("#timeline li")).to_have_count(2)
    assert page.evaluate("window.violations") == []

    assert page.goto(f"{url}/previews/acme/fleet/9/{HEAD}").status == 200
    cell = page.locator("td", has_text="3")
    assert cell.evaluate("e => getComputedStyle(e).textAlign") == "right"
    assert page.evaluate("window.violations") == []
    assert [text for text in said if "Content Security Policy" in text] == []
    # and the policy is enforced: markup that slipped into a page could run no script
    injected = page.evaluate(
        "() => { const s = document.createElement('script');"
        " s.textContent = 'window.injectedRan = true'; document.body.append(s);"
        " return window.injectedRan === true; }"
    )
    assert injected is False
    page.wait_for_function("window.violations.length > 0")
    assert page.evaluate("window.violations")[0].startswith("script-src")


def test_another_port_of_the_host_cannot_frame_a_page(
    gateway: tuple[World, str], browser: Any
) -> None:
    _, url = gateway
    Framing.target = f"{url}/jobs/{DEP}"
    with LoopbackServer(ThreadingHTTPServer(("127.0.0.1", 0), Framing)) as lure:
        page = browser.new_page()
        said: list[str] = []
        page.on("console", lambda message: said.append(message.text))
        assert page.goto(f"http://{lure.address}/").status == 200
        frame = page.locator("#lure").element_handle().content_frame()
        assert frame is not None
        frame.wait_for_load_state()
        assert frame.query_selector("#log") is None  # the job page never shows in the frame
        page.wait_for_timeout(200)  # the refusal is logged once the frame's answer is in
        assert any("frame-ancestors" in text or "X-Frame-Options" in text for text in said)
