"""What the gateway checks with a MAC or a token cannot be half-matched: a webhook's
`X-Hub-Signature-256`, the session cookie, the OAuth `state` and its nonce cookie, and the
bearer tokens of the pages, `/metrics` and `POST /api/deploy`. Every proper prefix of a valid
value (the empty one included) is refused, and the cookie signer refuses an empty key.

The app runs in-process over SQLite with the GitHub emulator for the OAuth code exchange;
signatures are computed here, independently of the code under test."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from gateway.access.session import Signer
from gateway.access.viewer import SESSION_COOKIE, SESSION_PURPOSE
from gateway.app import create_app
from gateway.dispatcher import Dispatcher
from gateway.signin import STATE_COOKIE
from shared.devstack.credentials import new_app_key
from shared.devstack.emulator.server import GitHubEmulator
from shared.settings import Settings
from shared.stores.sql.engine import Database
from tests.support.machine import MACHINE_SECRET, MACHINE_TOKEN
from tests.support.pages import QueueRecorder
from tests.support.signin import PUBLIC, signin_settings
from tests.support.webhooks import post

APP_ID = 51
WEBHOOK_SECRET = "hook-secret-for-signatures"
READ_TOKEN = "read-token-for-signatures"
METRICS_TOKEN = "metrics-token-for-signatures"
# what the gateway checks besides the session: the webhook's signature and three tokens
CHECKED = {
    "webhook_secret": SecretStr(WEBHOOK_SECRET),
    "api_token": MACHINE_SECRET,
    "read_token": SecretStr(READ_TOKEN),
    "metrics_token": SecretStr(METRICS_TOKEN),
}
DEPLOY = {"repo": "acme/fleet", "root": "prod/eu", "revision": "a1" * 20}


@dataclass
class Gate:
    client: TestClient
    settings: Settings
    emulator: GitHubEmulator


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    pem = new_app_key()
    with GitHubEmulator(app_id=APP_ID, app_key=pem) as emulator:
        settings = signin_settings(tmp_path, emulator, pem, **CHECKED)
        database = Database(settings.database)
        dispatcher = cast(Dispatcher, QueueRecorder())
        app = create_app(settings, dispatcher=dispatcher, database=database)
        try:
            with TestClient(app, base_url=PUBLIC) as client:
                yield Gate(client, settings, emulator)
        finally:
            database.close()


# --- webhooks --------------------------------------------------------------------------------


def test_events_refuse_every_proper_prefix_of_the_signature(gate: Gate) -> None:
    body = json.dumps({"zen": "Design for failure.", "hook_id": 1}).encode()
    digest = hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    signature = f"sha256={digest}"
    for end in range(len(signature)):  # "", …, "sha256=" (the empty digest), … one short
        answer = post(gate.client, "ping", body, signature=signature[:end])
        assert answer.status_code == 401, signature[:end]
        assert answer.content == b""
    assert post(gate.client, "ping", body, signature=signature).status_code == 200


# --- the session cookie ----------------------------------------------------------------------


@given(
    key=st.binary(min_size=1, max_size=64),
    purpose=st.sampled_from([SESSION_PURPOSE, "oauth-state"]),
    login=st.text(min_size=1, max_size=39),
)
def test_no_proper_prefix_of_a_signed_value_verifies(key: bytes, purpose: str, login: str) -> None:
    signer = Signer(key)
    value = signer.sign(purpose, {"login": login, "id": 1}, 60)
    claims = signer.verify(purpose, value)
    assert claims is not None and claims["login"] == login
    body, mac = value.split(".")
    for end in range(len(mac)):  # the empty MAC first
        assert signer.verify(purpose, f"{body}.{mac[:end]}") is None, end
    for end in range(len(value)):
        assert signer.verify(purpose, value[:end]) is None, end


def test_the_signer_refuses_an_empty_key() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        Signer(b"")


def test_a_session_cookie_with_a_cut_mac_is_no_session(gate: Gate) -> None:
    key = gate.settings.session_key()
    assert key is not None
    value = Signer(key).sign(SESSION_PURPOSE, {"login": "reader", "id": 7}, 60)
    body, mac = value.split(".")

    def audit(cookie: str) -> int:
        gate.client.cookies.clear()
        headers = {"Cookie": f"{SESSION_COOKIE}={cookie}"}
        return gate.client.get("/api/audit", headers=headers).status_code

    assert audit(value) == 200  # signed in (no deployments yet: nothing to ask GitHub)
    for end in range(len(mac)):
        assert audit(f"{body}.{mac[:end]}") == 401, end


# --- the OAuth state and its nonce cookie ----------------------------------------------------


def test_the_oauth_state_and_its_nonce_cannot_be_cut(gate: Gate) -> None:
    client = gate.client
    start = client.get("/auth/signin", params={"next": "/api/audit"}, follow_redirects=False)
    state = parse_qs(urlsplit(start.headers["location"]).query)["state"][0]
    nonce = client.cookies[STATE_COOKIE]
    body, mac = state.split(".")

    def back(state: str, nonce: str, code: str = "never-exchanged") -> tuple[int, str]:
        client.cookies.clear()
        answer = client.get(
            "/auth/callback",
            params={"code": code, "state": state},
            headers={"Cookie": f"{STATE_COOKIE}={nonce}"},
            follow_redirects=False,
        )
        return answer.status_code, answer.headers.get("set-cookie", "")

    for end in range(len(mac)):
        assert back(f"{body}.{mac[:end]}", nonce)[0] == 400, end
    for end in range(len(nonce)):  # the empty cookie first
        assert back(state, nonce[:end])[0] == 400, end
    code = gate.emulator.issue_oauth_code("reader", f"{PUBLIC}/auth/callback")
    status, cookies = back(state, nonce, code)
    assert status == 303 and f"{SESSION_COOKIE}=" in cookies


# --- bearer tokens ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "token"),
    [
        ("GET", "/api/audit", MACHINE_TOKEN),
        ("GET", "/api/audit", READ_TOKEN),
        ("GET", "/metrics", METRICS_TOKEN),
        ("POST", "/api/deploy", MACHINE_TOKEN),
    ],
)
def test_no_proper_prefix_of_a_bearer_token_is_let_in(
    gate: Gate, method: str, path: str, token: str
) -> None:
    def ask(given: str) -> int:
        headers = {"Authorization": f"Bearer {given}"}
        body = DEPLOY if method == "POST" else None
        return gate.client.request(method, path, headers=headers, json=body).status_code

    for end in range(len(token)):
        assert ask(token[:end]) == 401, end
    assert ask(token) in (200, 202)
