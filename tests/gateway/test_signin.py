"""Signed-in pages: the gateway served by uvicorn, the GitHub emulator's OAuth flow
and permission API over real HTTP, SQLite filled as the workflows fill it, and httpx clients
that keep their cookies as a browser does. The browser itself signs in in
tests/e2e/test_job_page_browser.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from activities.joblog import JobLog
from gateway.access.session import Signer
from gateway.access.viewer import SESSION_COOKIE, SESSION_PURPOSE
from gateway.app import create_app
from gateway.dispatcher import Dispatcher
from shared.contracts.deploy import AuditRecord, DeploymentRecord
from shared.devstack.credentials import new_app_key
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.ports import free_port
from shared.devstack.signin import open_signed_in
from shared.settings import Settings
from shared.stores.blob import FileBlobStore
from shared.stores.sql.audit import AuditStore
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from tests.support.machine import MACHINE_HEADERS, MACHINE_SECRET
from tests.support.serving import serving

APP_ID = 41
CLIENT_ID = "Iv1.signin-test"
FLEET = "acme/fleet"  # the reader may read it
SECRET_FLEET = "acme/secret"  # nobody but the machine reads it
ROOT = "prod/eu"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
READABLE = "0b6f4c3e-1d2a-4c55-9e1f-aaaaaaaaaaaa"
HIDDEN = "0b6f4c3e-1d2a-4c55-9e1f-bbbbbbbbbbbb"
MISSING = "0b6f4c3e-1d2a-4c55-9e1f-cccccccccccc"


@dataclass
class Served:
    url: str
    settings: Settings
    emulator: GitHubEmulator
    database: Database
    app: Any


def record(database: Database, deployment_id: str, repo: str, revision: str) -> None:
    DeploymentStore(database).record(
        DeploymentRecord(
            deployment_id=deployment_id,
            repo=repo,
            root=ROOT,
            revision=revision * 20,
            trigger="merge",
            state="published",
            requested_by="alice",
            approved_by="@alice",
            message=f"secret-marker-{repo}",
            at=T0,
        )
    )
    AuditStore(database).record(
        AuditRecord(
            repo=repo,
            root=ROOT,
            deployment_id=deployment_id,
            action="approve",
            actor=f"approver-of-{repo.split('/')[1]}",
            counted=True,
            at=T0,
        )
    )


def settings_for(tmp: Path, emulator: GitHubEmulator, pem: str, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp / "state",
        "github_api_url": emulator.url,
        "github_app_id": str(APP_ID),
        "github_private_key": SecretStr(pem),
        "github_oauth_client_id": emulator.oauth_client_id,
        "github_oauth_client_secret": SecretStr(emulator.oauth_client_secret),
        "api_token": MACHINE_SECRET,
        **extra,
    }
    return Settings(**values)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    pem = new_app_key()
    emulator = GitHubEmulator(app_id=APP_ID, app_key=pem, oauth_client_id=CLIENT_ID).start()
    emulator.seed_repository("acme", "fleet", 7)
    emulator.seed_repository("acme", "secret", 7)
    emulator.set_permission("acme", "fleet", "reader", "read")
    port = free_port("127.0.0.1")
    url = f"http://127.0.0.1:{port}"
    settings = settings_for(tmp_path, emulator, pem, public_url=url)
    settings.data_dir.mkdir(parents=True)
    database = Database(settings.database)
    record(database, READABLE, FLEET, "a1")
    record(database, HIDDEN, SECRET_FLEET, "b2")
    app = create_app(settings, dispatcher=cast(Dispatcher, None), database=database)
    try:
        with serving(app, port):
            yield Served(url, settings, emulator, database, app)
    finally:
        database.close()
        emulator.stop()


def browser() -> httpx.Client:
    return httpx.Client(timeout=10)


@contextmanager
def signed_in(served: Served, login: str) -> Iterator[httpx.Client]:
    with browser() as client:
        answer = open_signed_in(client, f"{served.url}/", login)
        assert answer.status_code == 200 and str(answer.url) == f"{served.url}/"
        yield client


def test_anonymous_requests_get_the_sign_in_redirect_never_data(served: Served) -> None:
    with browser() as anonymous:
        for path in (
            f"/jobs/{READABLE}",
            f"/roots/{ROOT}?repo={FLEET}",
            f"/?repo={FLEET}",
            "/",
            "/previews/acme/fleet/3",
            "/rollouts/acme/fleet/p1",
        ):
            answer = anonymous.get(f"{served.url}{path}")
            assert answer.status_code == 303, path
            location = answer.headers["location"]
            assert location.startswith(f"{served.url}/auth/signin?")
            assert parse_qs(urlsplit(location).query)["next"] == [path]
            assert "secret-marker" not in answer.text and ROOT not in answer.text
        for path in (f"/api/jobs/{READABLE}", f"/api/jobs/{READABLE}/log", "/api/audit"):
            answer = anonymous.get(f"{served.url}{path}")
            assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
            assert "secret-marker" not in answer.text
        # followed, the redirect ends on GitHub's (the emulator's) authorize page
        answer = anonymous.get(f"{served.url}/jobs/{READABLE}", follow_redirects=True)
        assert urlsplit(str(answer.url)).path == "/login/oauth/authorize"
        query = parse_qs(urlsplit(str(answer.url)).query)
        assert query["client_id"] == [CLIENT_ID]
        assert query["redirect_uri"] == [f"{served.url}/auth/callback"]
        # what stays open: health, the webhook receiver (its own HMAC), metrics (no token set)
        assert anonymous.get(f"{served.url}/healthz").status_code == 200
        assert anonymous.post(f"{served.url}/events", content=b"{}").status_code == 401
        assert anonymous.get(f"{served.url}/metrics").status_code == 200


def test_a_reader_sees_their_repository_and_nothing_of_another(served: Served) -> None:
    with signed_in(served, "reader") as reader:
        page = reader.get(f"{served.url}/jobs/{READABLE}")
        assert page.status_code == 200 and "secret-marker-acme/fleet" in page.text
        assert reader.get(f"{served.url}/api/jobs/{READABLE}").json()["repo"] == FLEET
        # another repository's deployment answers exactly as a missing one does
        hidden, missing = (reader.get(f"{served.url}/jobs/{d}") for d in (HIDDEN, MISSING))
        assert hidden.status_code == missing.status_code == 404
        assert hidden.text.replace(HIDDEN, "X") == missing.text.replace(MISSING, "X")
        for path in (f"/api/jobs/{HIDDEN}", f"/api/jobs/{HIDDEN}/log", f"/api/jobs/{HIDDEN}/diff"):
            assert reader.get(f"{served.url}{path}").status_code == 404, path
        # lists keep what the reader may read
        front = reader.get(f"{served.url}/").text
        assert "acme/fleet" in front and "acme/secret" not in front
        audit = reader.get(f"{served.url}/api/audit").json()["events"]
        assert [e["actor"] for e in audit] == ["approver-of-fleet"]
        hidden_audit = reader.get(f"{served.url}/api/audit", params={"repo": SECRET_FLEET})
        assert hidden_audit.json()["events"] == []
        fleet = reader.get(f"{served.url}/api/fleet").json()
        assert fleet["repositories"] == [FLEET] and fleet["repo"] == FLEET
        assert (
            reader.get(f"{served.url}/api/fleet", params={"repo": SECRET_FLEET}).json()["roots"]
            == []
        )
        # a root in both repositories, asked without one: narrowed to the readable one
        root = reader.get(f"{served.url}/api/roots/{ROOT}").json()
        assert {d["repo"] for d in root["deployments"]} == {FLEET}
        assert (
            reader.get(f"{served.url}/roots/{ROOT}", params={"repo": SECRET_FLEET}).status_code
            == 404
        )
        assert reader.get(f"{served.url}/previews/acme/secret/3").status_code == 404
    # the machine reads everything
    with httpx.Client(headers=MACHINE_HEADERS, timeout=10) as machine:
        assert machine.get(f"{served.url}/api/jobs/{HIDDEN}").status_code == 200
        assert len(machine.get(f"{served.url}/api/audit").json()["events"]) == 2


def test_a_user_without_read_access_gets_404(served: Served) -> None:
    with signed_in(served, "outsider") as outsider:
        assert outsider.get(f"{served.url}/jobs/{READABLE}").status_code == 404
        assert outsider.get(f"{served.url}/api/jobs/{READABLE}").status_code == 404
        assert "acme/fleet" not in outsider.get(f"{served.url}/").text


def test_the_session_cookie(served: Served) -> None:
    client = browser()
    signin = client.get(f"{served.url}/auth/signin", params={"next": "/jobs/x"})
    assert signin.status_code == 302
    code = served.emulator.issue_oauth_code("reader", f"{served.url}/auth/callback")
    state = parse_qs(urlsplit(signin.headers["location"]).query)["state"][0]
    back = client.get(f"{served.url}/auth/callback", params={"code": code, "state": state})
    assert back.status_code == 303 and back.headers["location"] == f"{served.url}/jobs/x"
    cookie = SimpleCookie(back.headers["set-cookie"].split(", rollwright_oauth")[0])
    session = cookie[SESSION_COOKIE]
    assert session["httponly"] and session["samesite"].lower() == "lax"
    assert not session["secure"]  # plain http here; https public URLs: next test
    assert session["path"] == "/" and int(session["max-age"]) == 8 * 3600
    # it holds the login and id, signed: no GitHub token
    assert "ghu_" not in session.value and "reader" not in session.value.split(".")[1]
    # the same code again: GitHub refuses it, and so does the gateway
    again = client.get(f"{served.url}/auth/callback", params={"code": code, "state": state})
    assert again.status_code in (400, 502)
    client.close()


def test_callbacks_that_do_not_belong_to_this_browser_are_refused(served: Served) -> None:
    with browser() as victim, browser() as attacker:
        # the attacker starts a sign-in and hands the victim the callback with its code
        started = attacker.get(f"{served.url}/auth/signin")
        state = parse_qs(urlsplit(started.headers["location"]).query)["state"][0]
        code = served.emulator.issue_oauth_code("attacker", f"{served.url}/auth/callback")
        forced = victim.get(f"{served.url}/auth/callback", params={"code": code, "state": state})
        assert forced.status_code == 400 and SESSION_COOKIE not in forced.cookies
        # a state cookie that is not even ASCII is refused like any other mismatch
        odd = httpx.get(
            f"{served.url}/auth/callback",
            params={"code": code, "state": state},
            headers={"Cookie": "rollwright_oauth=n\u00f6nce".encode()},
        )
        assert odd.status_code == 400
        # a state signed with another key, and a forged session cookie, count for nothing
        victim.cookies.set(SESSION_COOKIE, Signer(b"k" * 32).sign(SESSION_PURPOSE, {}, 60))
        assert victim.get(f"{served.url}/jobs/{READABLE}").status_code == 303
        # GitHub's "cancel": an error instead of a code
        refused = victim.get(f"{served.url}/auth/callback", params={"error": "access_denied"})
        assert refused.status_code == 403 and "did not authorize" in refused.text
        # the error is GitHub's code, shown in the gateway's words: never the query's text
        lure = "Sign in again at https://evil.test/login"
        phished = victim.get(f"{served.url}/auth/callback", params={"error": lure})
        assert phished.status_code == 403 and "evil.test" not in phished.text
    # sign-in never sends anyone to another site afterwards
    for hostile in ("//evil.test/x", "https://evil.test/", "/\\evil.test"):
        with browser() as client:
            start = client.get(f"{served.url}/auth/signin", params={"next": hostile})
            state = parse_qs(urlsplit(start.headers["location"]).query)["state"][0]
            code = served.emulator.issue_oauth_code("reader", f"{served.url}/auth/callback")
            back = client.get(f"{served.url}/auth/callback", params={"code": code, "state": state})
            assert back.headers["location"] == f"{served.url}/", hostile


def test_expired_sessions_and_signing_out(served: Served) -> None:
    key = served.settings.session_key()
    assert key is not None
    with browser() as client:
        expired = Signer(key).sign(SESSION_PURPOSE, {"login": "reader", "id": 1}, -5)
        client.cookies.set(SESSION_COOKIE, expired)
        assert client.get(f"{served.url}/jobs/{READABLE}").status_code == 303
        client.cookies.clear()
        assert open_signed_in(client, f"{served.url}/jobs/{READABLE}", "reader").status_code == 200
        out = client.post(f"{served.url}/auth/signout", headers={"Origin": served.url})
        assert out.status_code == 303 and SESSION_COOKIE in out.headers["set-cookie"]
        assert client.get(f"{served.url}/jobs/{READABLE}").status_code == 303


def test_answers_are_cached_briefly_and_github_failures_show_nothing(served: Served) -> None:
    permissions = served.app.state.access.permissions
    with signed_in(served, "reader") as reader:
        asked = permissions.asked
        for _ in range(5):
            assert reader.get(f"{served.url}/api/jobs/{READABLE}/log").status_code == 200
        assert permissions.asked == asked  # the sign-in's first page asked once; now cached
        # revoked: still readable within the cache's minute (the documented bound) ...
        served.emulator.set_permission("acme", "fleet", "reader", "none")
        assert reader.get(f"{served.url}/jobs/{READABLE}").status_code == 200
    # GitHub failing: nothing is shown, and nothing is cached
    served.emulator.fail_next("GET", r"/collaborators/other/permission$", 502)
    with browser() as other:
        down = open_signed_in(other, f"{served.url}/jobs/{READABLE}", "other")
        assert down.status_code == 503 and "GitHub did not answer" in down.text
        assert "secret-marker" not in down.text
        # the next request asks again (and "other" may not read it)
        assert other.get(f"{served.url}/jobs/{READABLE}").status_code == 404


def test_the_cache_expires(tmp_path: Path) -> None:
    pem = new_app_key()
    with GitHubEmulator(app_id=APP_ID, app_key=pem) as emulator:
        emulator.seed_repository("acme", "fleet", 7)
        emulator.set_permission("acme", "fleet", "reader", "read")
        settings = settings_for(tmp_path, emulator, pem, permission_cache_seconds=0.2)
        settings.data_dir.mkdir(parents=True)
        database = Database(settings.database)
        record(database, READABLE, FLEET, "a1")
        app = create_app(settings, dispatcher=cast(Dispatcher, None), database=database)
        key = settings.session_key()
        assert key is not None
        with TestClient(app) as client:
            client.cookies.set(
                SESSION_COOKIE, Signer(key).sign(SESSION_PURPOSE, {"login": "reader", "id": 1}, 60)
            )
            assert client.get(f"/api/jobs/{READABLE}").status_code == 200
            emulator.set_permission("acme", "fleet", "reader", "none")
            time.sleep(0.3)
            assert client.get(f"/api/jobs/{READABLE}").status_code == 404
        database.close()


def test_secure_cookies_behind_tls_and_metrics_token(tmp_path: Path) -> None:
    pem = new_app_key()
    with GitHubEmulator(app_id=APP_ID, app_key=pem) as emulator:
        settings = settings_for(
            tmp_path,
            emulator,
            pem,
            public_url="https://rollwright.example",
            metrics_token=SecretStr("scrape-me"),
        )
        app = create_app(settings, dispatcher=cast(Dispatcher, None), database=_database(settings))
        with TestClient(app, base_url="https://rollwright.example") as client:
            start = client.get("/auth/signin", follow_redirects=False)
            cookie = start.headers["set-cookie"]
            assert cookie.startswith("__Host-rollwright_oauth=") and "secure" in cookie.lower()
            assert client.get("/metrics").status_code == 401
            scraped = client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
            assert scraped.status_code == 200 and "rollwright" in scraped.text
            assert client.get("/metrics", headers=MACHINE_HEADERS).status_code == 401
            bare = client.get("/metrics", headers={"Authorization": "scrape-me"})
            assert bare.status_code == 401 and bare.headers["www-authenticate"] == "Bearer"


def _database(settings: Settings) -> Database:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return Database(settings.database)


def test_without_sign_in_configured(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "state", api_token=MACHINE_SECRET)
    database = _database(settings)
    record(database, READABLE, FLEET, "a1")
    app = create_app(settings, dispatcher=cast(Dispatcher, None), database=database)
    with TestClient(app) as client:
        page = client.get(f"/jobs/{READABLE}", follow_redirects=True)
        assert page.status_code == 503 and "Sign-in is not configured" in page.text
        assert "secret-marker" not in page.text
        assert client.get(f"/jobs/{READABLE}", headers=MACHINE_HEADERS).status_code == 200
        wrong = client.get(f"/api/jobs/{READABLE}", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
    # open pages: explicitly asked for
    opened = Settings(data_dir=tmp_path / "state", open_pages=True)
    with TestClient(
        create_app(opened, dispatcher=cast(Dispatcher, None), database=database)
    ) as client:
        assert client.get(f"/jobs/{READABLE}").status_code == 200
    # a read token reads, and deploys nothing; an empty token is no token
    reads = Settings(
        data_dir=tmp_path / "state", read_token=SecretStr("r3ad"), api_token=SecretStr("")
    )
    assert reads.api_token is None
    with TestClient(
        create_app(reads, dispatcher=cast(Dispatcher, None), database=database)
    ) as client:
        bearer = {"Authorization": "Bearer r3ad"}
        assert client.get(f"/api/jobs/{READABLE}", headers=bearer).status_code == 200
        deploy = {"repo": FLEET, "root": ROOT, "revision": "a1" * 20}
        assert client.post("/api/deploy", json=deploy, headers=bearer).status_code == 404
        assert client.post("/api/deploy", json=deploy).status_code == 404
    database.close()
    # sign-in needs the App that asks GitHub who may read what
    with pytest.raises(ValueError, match="no GitHub App"):
        create_app(
            Settings(
                data_dir=tmp_path / "state",
                github_oauth_client_id="Iv1.x",
                github_oauth_client_secret=SecretStr("s"),
            )
        )


def test_expired_state_is_refused(served: Served) -> None:
    key = served.settings.session_key()
    assert key is not None
    with browser() as client:
        client.cookies.set("rollwright_oauth", "n0nce")
        stale = Signer(key).sign("oauth-state", {"next": "/", "nonce": "n0nce"}, -1)
        code = served.emulator.issue_oauth_code("reader", f"{served.url}/auth/callback")
        answer = client.get(f"{served.url}/auth/callback", params={"code": code, "state": stale})
        assert answer.status_code == 400
        fresh = Signer(key).sign("oauth-state", {"next": "/", "nonce": "n0nce"}, 60)
        answer = client.get(f"{served.url}/auth/callback", params={"code": code, "state": fresh})
        assert answer.status_code == 303


def test_a_session_lasts_session_hours(served: Served) -> None:
    with signed_in(served, "reader") as reader:
        value = reader.cookies[SESSION_COOKIE]
    key = served.settings.session_key()
    assert key is not None
    claims = Signer(key).verify(SESSION_PURPOSE, value)
    assert claims is not None and claims["login"] == "reader"
    left = claims["exp"] - time.time()
    assert timedelta(hours=7.9).total_seconds() < left <= timedelta(hours=8).total_seconds()


def test_github_failing_names_nothing_and_lists_fail_closed(served: Served) -> None:
    served.emulator.set_permission("acme", "secret", "reader", "read")
    with browser() as reader:
        # the sign-in's own page asks of both repositories: GitHub fails for one of them
        served.emulator.fail_next("GET", r"/repos/acme/secret/collaborators/", 502, times=3)
        front = open_signed_in(reader, f"{served.url}/", "reader")
        assert front.status_code == 200
        assert "acme/fleet" in front.text and "acme/secret" not in front.text
        # a single page: 503, naming neither the person nor the repository
        served.emulator.fail_next("GET", r"/repos/acme/secret/collaborators/", 502, times=3)
        down = reader.get(f"{served.url}/api/jobs/{HIDDEN}")
        assert down.status_code == 503
        assert "acme" not in down.text and "reader" not in down.text


def test_odd_repositories_are_refused_without_asking_github(served: Served) -> None:
    permissions = served.app.state.access.permissions
    with signed_in(served, "reader") as reader:
        asked = permissions.asked
        for repo in ("foo", "a/b/c", "../x", "a.b/c", "o/.."):  # no name GitHub has
            audit = reader.get(f"{served.url}/api/audit", params={"repo": repo})
            assert audit.status_code == 422, repo
            root = reader.get(f"{served.url}/roots/{ROOT}", params={"repo": repo})
            assert root.status_code == 400 and "text/html" in root.headers["content-type"]
        for repo in ("zz1/r1", "zz2/r2"):  # names rollwright has no deployment of
            audit = reader.get(f"{served.url}/api/audit", params={"repo": repo})
            assert audit.status_code == 200 and audit.json()["events"] == [], repo
            root = reader.get(f"{served.url}/roots/{ROOT}", params={"repo": repo})
            assert root.status_code == 404, repo
        assert reader.get(f"{served.url}/rollouts/zz/yy/p1").status_code == 404
        assert permissions.asked == asked + 1  # only the rollout's real-looking zz/yy


def test_a_log_of_an_unknown_repository_is_only_a_machines(served: Served) -> None:
    orphan = "0b6f4c3e-1d2a-4c55-9e1f-dddddddddddd"
    blobs = FileBlobStore(served.settings.data_dir / "blobs")
    JobLog(blobs).write(orphan, "rendered 3 releases", root=ROOT)  # no row, no repo
    with signed_in(served, "reader") as reader:
        assert reader.get(f"{served.url}/api/jobs/{orphan}/log").status_code == 404
    with httpx.Client(headers=MACHINE_HEADERS, timeout=10) as machine:
        assert machine.get(f"{served.url}/api/jobs/{orphan}/log").status_code == 200


def test_page_buttons_click_only_from_the_gateways_own_pages(tmp_path: Path) -> None:
    pem = new_app_key()
    with GitHubEmulator(app_id=APP_ID, app_key=pem) as emulator:
        emulator.seed_repository("acme", "fleet", 7)
        settings = settings_for(
            tmp_path, emulator, pem, public_url="http://rollwright.test", dev_mode=True
        )
        emulator.set_permission("acme", "fleet", "rita", "write")
        database = _database(settings)
        record(database, READABLE, FLEET, "a1")
        key = settings.session_key()
        assert key is not None
        session = Signer(key).sign(SESSION_PURPOSE, {"login": "rita", "id": 1}, 60)
        app = create_app(settings, dispatcher=cast(Dispatcher, None), database=database)
        with TestClient(app, base_url="http://rollwright.test") as client:
            client.cookies.set(SESSION_COOKIE, session)
            click = f"/jobs/{READABLE}/actions/approve"
            form = {"check_run_id": "1"}
            for headers in (
                {},  # no Origin, no Sec-Fetch-Site: an old client or a forged request
                {"Origin": "http://127.0.0.1:9999"},  # another port: the same *site*
                {"Origin": "null"},
                {"Sec-Fetch-Site": "same-site"},
            ):
                answer = client.post(click, data=form, headers=headers, follow_redirects=False)
                assert answer.status_code == 403, headers
            # from the gateway's own page: on to the check run (which offers no such button)
            for headers in (
                {"Origin": "http://rollwright.test"},
                {"Sec-Fetch-Site": "same-origin"},
            ):
                answer = client.post(click, data=form, headers=headers, follow_redirects=False)
                assert answer.status_code == 409, headers
        database.close()


def test_open_pages_show_everything_to_everyone(tmp_path: Path) -> None:
    pem = new_app_key()
    with GitHubEmulator(app_id=APP_ID, app_key=pem) as emulator:
        settings = settings_for(tmp_path, emulator, pem, open_pages=True)
        database = _database(settings)
        record(database, HIDDEN, SECRET_FLEET, "b2")
        key = settings.session_key()
        assert key is not None
        app = create_app(settings, dispatcher=cast(Dispatcher, None), database=database)
        with TestClient(app) as client:
            assert client.get(f"/api/jobs/{HIDDEN}").status_code == 200
            client.cookies.set(
                SESSION_COOKIE, Signer(key).sign(SESSION_PURPOSE, {"login": "x", "id": 2}, 60)
            )
            assert client.get(f"/api/jobs/{HIDDEN}").status_code == 200  # signed in: no less
        database.close()
