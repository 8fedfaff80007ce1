"""The gateway's secrets never reach an answer or a log line, also when things go wrong: the
GitHub App's private key (here one GitHub does not accept), the OAuth client secret (a code
GitHub refuses), the session key, the webhook secret and the bearer tokens (wrong ones sent),
and GitHub failing while it is asked who may read a page.

The app runs in-process over SQLite with the GitHub emulator (which knows another App key);
every answer's headers and body and every log record at DEBUG are searched for every secret
and for each line of the App key."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import cast
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from gateway.app import create_app
from gateway.dispatcher import Dispatcher
from shared.contracts.deploy import DeploymentRecord
from shared.devstack.credentials import new_app_key
from shared.devstack.emulator.server import GitHubEmulator
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from tests.support.pages import DEP, REPO, ROOT, T0, QueueRecorder
from tests.support.signin import PUBLIC, signin_settings
from tests.support.webhooks import post

APP_ID = 53
SECRETS = {
    "webhook_secret": "hook-secret-kept-3f9a",
    "api_token": "api-token-kept-71c2",
    "read_token": "read-token-kept-0d5e",
    "metrics_token": "metrics-token-kept-9b14",
    "session_secret": "session-secret-kept-6a77",
    "redaction_key": "redaction-key-kept-2e08",
}


def exchanged(client: TestClient, code: str) -> httpx.Response:
    """A sign-in from its start to GitHub's redirect back with `code`."""
    start = client.get("/auth/signin", params={"next": f"/jobs/{DEP}"}, follow_redirects=False)
    state = parse_qs(urlsplit(start.headers["location"]).query)["state"][0]
    return client.get(
        "/auth/callback", params={"code": code, "state": state}, follow_redirects=False
    )


def test_no_secret_reaches_an_answer_or_a_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    pem = new_app_key()  # the gateway's; GitHub (the emulator) knows another
    answers: list[httpx.Response] = []
    with GitHubEmulator(app_id=APP_ID, app_key=new_app_key()) as emulator:
        emulator.seed_repository("acme", "fleet", 7)
        client_secret = emulator.oauth_client_secret
        settings = signin_settings(
            tmp_path, emulator, pem, **{name: SecretStr(v) for name, v in SECRETS.items()}
        )
        database = Database(settings.database)
        DeploymentStore(database).record(
            DeploymentRecord(
                deployment_id=DEP, repo=REPO, root=ROOT, revision="a1" * 20,
                trigger="merge", state="published", at=T0,
            )
        )  # fmt: skip
        app = create_app(settings, dispatcher=cast(Dispatcher, QueueRecorder()), database=database)
        with TestClient(app, base_url=PUBLIC) as client:
            # GitHub refuses the code: the page says so in its words
            refused = exchanged(client, "a-code-github-never-issued")
            assert refused.status_code == 502
            answers.append(refused)
            # signed in; GitHub refuses the App's key when asked who may read the page
            code = emulator.issue_oauth_code("reader", f"{PUBLIC}/auth/callback")
            answers.append(exchanged(client, code))
            page = client.get(f"/jobs/{DEP}")
            assert page.status_code == 404 and "read permission refused" in caplog.text
            answers.append(page)
            # GitHub failing while asked who else may read it: nothing is shown
            emulator.fail_next("GET", r"/repos/acme/fleet/installation$", 502, times=10)
            code = emulator.issue_oauth_code("other", f"{PUBLIC}/auth/callback")
            answers.append(exchanged(client, code))
            down = client.get(f"/api/jobs/{DEP}")
            assert down.status_code == 503 and "read permission unknown" in caplog.text
            answers.append(down)
            # wrong secrets sent
            client.cookies.clear()
            body = json.dumps({"zen": "kept"}).encode()
            answers.append(post(client, "ping", body, secret="not-the-hook-secret"))
            wrong = {"Authorization": "Bearer not-the-token"}
            answers.append(client.post("/api/deploy", headers=wrong, json={}))
            answers.append(client.get("/api/audit", headers=wrong))
            answers.append(client.get("/metrics", headers=wrong))
        database.close()
    kept = [*SECRETS.values(), client_secret, pem.strip()]
    kept += [line for line in pem.splitlines() if len(line) > 20 and "-----" not in line]
    said = [f"{a.status_code} {dict(a.headers)} {a.text}" for a in answers]
    said += [caplog.text, *(record.getMessage() for record in caplog.records)]
    for secret in kept:
        for text in said:
            assert secret not in text, secret[:12]
