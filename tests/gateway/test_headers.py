"""The headers every answer of the gateway carries (gateway/headers.py), pages that satisfy
their Content-Security-Policy (no inline script, style or handler: the pages link the
gateway's own files), and signing out only from the gateway's own pages.

The pages over real SQLite and a real file blob store, filled as the worker fills them
(tests/support/pages.py); a browser enforcing the policy is in test_headers_browser.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pydantic import SecretStr

from gateway.access.viewer import SESSION_COOKIE
from shared.contracts.preview import preview_prefix
from shared.devstack.credentials import new_app_key
from tests.support.pages import DEP, PUBLIC, ROOT, T0, World

TEMPLATES = Path(__file__).parents[2] / "gateway" / "templates"
PREVIEW_HEAD = "c" * 40
REPORT = "### rollwright preview\n\n| root | + | - |\n|:--|--:|--:|\n| `g/c1` | 3 | 1 |\n"


def policy(answer_headers: dict[str, str]) -> dict[str, list[str]]:
    """The Content-Security-Policy's directives, each with its sources."""
    directives = {}
    for part in answer_headers["content-security-policy"].split(";"):
        name, *sources = part.split()
        directives[name] = sources
    return directives


class InlineCode(HTMLParser):
    """What a page's policy would refuse: inline scripts and styles, `style` and `on…`
    attributes, `javascript:` URLs; and where its files and forms point."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[str] = []
        self.urls: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "style":
            self.refused.append("<style>")
        if tag == "script":
            self._in_script = True
            if not found.get("src"):
                self.refused.append("<script> without src")
        for name, value in attrs:
            if name == "style" or name.startswith("on"):
                self.refused.append(f"{tag} {name}=")
            if name in ("href", "src", "action") and value is not None:
                if value.strip().lower().startswith("javascript:"):
                    self.refused.append(f"{tag} {name}=javascript:")
                if tag in ("script", "link", "form"):
                    self.urls.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.refused.append("inline script text")


def inline_code(html: str) -> InlineCode:
    parser = InlineCode()
    parser.feed(html)
    return parser


@pytest.fixture
def filled(world: World) -> Iterator[World]:
    """A published deployment with a log and a diff, and a pull request's preview."""
    world.record("rendering", T0)
    world.record("published", T0, approved_by="@bob")
    world.store_diff()
    prefix = preview_prefix("acme/fleet", 9, PREVIEW_HEAD)
    world.blobs.put(f"{prefix}report.md", REPORT.encode())
    world.blobs.put(f"{prefix}report.json", json.dumps({"base": "b" * 40}).encode())
    yield world


PAGES = [
    f"/jobs/{DEP}",
    f"/jobs/{DEP}?live=1",
    f"/jobs/{DEP}?view=split",
    f"/roots/{ROOT}?repo=acme/fleet",
    "/?repo=acme/fleet",
    "/",
    "/jobs/no-such-deployment",
    "/roots/..%2f..%2fetc",
    f"/previews/acme/fleet/9/{PREVIEW_HEAD}",
]


def test_every_answer_carries_the_security_headers(filled: World) -> None:
    client = filled.client
    answers = {path: client.get(path) for path in PAGES}
    answers["/api/jobs"] = client.get(f"/api/jobs/{DEP}")
    answers["/api/roots"] = client.get(f"/api/roots/{ROOT}")
    answers["/events"] = client.post("/events", content=b"{}")
    answers["/healthz"] = client.get("/healthz")
    answers["/metrics"] = client.get("/metrics")
    answers["unrouted"] = client.get("/no/such/page")
    assert answers["/events"].status_code == 401 and answers["unrouted"].status_code == 404
    for name, answer in answers.items():
        headers = dict(answer.headers)
        directives = policy(headers)
        assert directives["default-src"] == ["'none'"], name
        assert directives["frame-ancestors"] == ["'none'"], name
        assert directives["base-uri"] == ["'none'"], name
        for kind in ("script-src", "style-src", "form-action"):
            assert directives[kind] == ["'self'", PUBLIC], (name, kind)
        assert headers["x-frame-options"] == "DENY", name
        assert headers["x-content-type-options"] == "nosniff", name
        assert headers["referrer-policy"] == "same-origin", name
        assert headers["cache-control"] == "no-store", name  # never kept for the next person


def test_static_files_are_cached_by_validation_and_the_api_docs_only_refuse_framing(
    world: World,
) -> None:
    for name, kind in (("rollwright.css", "text/css"), ("job.js", "text/javascript")):
        answer = world.client.get(f"/static/{name}")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(kind)
        assert answer.headers["cache-control"] == "no-cache"
        assert policy(dict(answer.headers))["frame-ancestors"] == ["'none'"]
        etag = answer.headers["etag"]
        again = world.client.get(f"/static/{name}", headers={"If-None-Match": etag})
        assert again.status_code == 304 and again.content == b""
    for name in ("..%2fbase.html", "base.html", "missing.css", "..%2f..%2fpyproject.toml"):
        assert world.client.get(f"/static/{name}").status_code == 404, name
    docs = world.client.get("/docs")  # Swagger UI: a CDN and inline code, and no data
    assert docs.status_code == 200
    assert docs.headers["content-security-policy"] == "frame-ancestors 'none'"
    assert docs.headers["x-frame-options"] == "DENY"


def test_the_pages_hold_no_inline_code(filled: World) -> None:
    for path in PAGES:
        answer = filled.client.get(path)
        assert answer.headers["content-type"].startswith("text/html"), path
        found = inline_code(answer.text)
        assert found.refused == [], path
        # their files and forms are the gateway's own ('self' or the public URL)
        for url in found.urls:
            parts = urlsplit(url)
            assert not parts.netloc or f"{parts.scheme}://{parts.netloc}" == PUBLIC, (path, url)
    full = inline_code(filled.client.get(f"/jobs/{DEP}").text)
    assert f"{PUBLIC}/static/job.js" in full.urls and f"{PUBLIC}/static/rollwright.css" in full.urls
    preview = filled.client.get(f"/previews/acme/fleet/9/{PREVIEW_HEAD}").text
    assert '<td class="align-right">3</td>' in preview  # the report's aligned columns


def test_the_templates_hold_no_inline_code() -> None:
    """Every template, also of pages the tests above do not render (the rollout page)."""
    for template in sorted(TEMPLATES.glob("*.html")):
        found = inline_code(template.read_text())
        assert found.refused == [], template.name
    assert sorted(p.name for p in TEMPLATES.iterdir() if p.suffix != ".html") == []


def test_signing_out_only_from_the_gateways_own_pages(tmp_path: Path) -> None:
    signin = World(
        tmp_path,
        github_app_id="51",
        github_private_key=SecretStr(new_app_key()),
        github_oauth_client_id="Iv1.headers",
        github_oauth_client_secret=SecretStr("oauth-secret"),
    )
    with signin.client as client:
        for headers in (
            {"Origin": "http://127.0.0.1:9999"},  # another port of the same host: same site
            {"Origin": "http://rollwright.test.evil.example"},
            {"Origin": "null"},
            {"Sec-Fetch-Site": "same-site"},
            {"Sec-Fetch-Site": "cross-site"},
            {},  # neither: an old client or a forged request
        ):
            answer = client.post("/auth/signout", headers=headers, follow_redirects=False)
            assert answer.status_code == 403, headers
            assert SESSION_COOKIE not in answer.headers.get("set-cookie", ""), headers
        for headers in ({"Origin": PUBLIC}, {"Sec-Fetch-Site": "same-origin"}):
            answer = client.post("/auth/signout", headers=headers, follow_redirects=False)
            assert answer.status_code == 303, headers
            assert answer.headers["set-cookie"].startswith(f'{SESSION_COOKIE}=""'), headers
    signin.close()
