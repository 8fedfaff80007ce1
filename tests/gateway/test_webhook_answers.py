"""`POST /events` answers every refusal and every outcome as before, and counts each delivery
exactly once in `rollwright_gateway_webhooks_total`, under its outcome."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from gateway.app import create_app
from gateway.dispatcher import Dispatcher
from gateway.metrics import GatewayMetrics
from shared.settings import Settings
from shared.stores.sql.engine import Database
from tests.support.pages import QueueRecorder

SECRET = "webhook-secret"
LIMIT = 4096


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path,
        webhook_secret=SecretStr(SECRET),
        webhook_max_bytes=LIMIT,
        github_app_id="7",
    )
    database = Database(f"sqlite:///{tmp_path / 'gateway.db'}")
    # The recorder refuses to start a dispatch: the accepted push stays pending in the outbox.
    dispatcher = cast(Dispatcher, QueueRecorder())
    with TestClient(create_app(settings, dispatcher=dispatcher, database=database)) as client:
        yield client
    database.close()


def signed(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def send(
    client: TestClient,
    body: bytes,
    *,
    event: str | None = "ping",
    delivery: str | None = None,
    content_type: str = "application/json",
    signature: str | None = None,
) -> Any:
    headers = {"Content-Type": content_type, "X-Hub-Signature-256": signature or signed(body)}
    if event is not None:
        headers["X-GitHub-Event"] = event
    if delivery != "":
        headers["X-GitHub-Delivery"] = delivery or str(uuid.uuid4())
    return client.post("/events", content=body, headers=headers)


def counts(client: TestClient) -> dict[tuple[str, str], float]:
    metrics: GatewayMetrics = client.app.state.gateway.metrics  # type: ignore[attr-defined]
    return {
        (sample.labels["event"], sample.labels["outcome"]): sample.value
        for family in metrics.registry.collect()
        if family.name == "rollwright_gateway_webhooks"
        for sample in family.samples
        if sample.name.endswith("_total")
    }


def counted_once(client: TestClient, before: dict[tuple[str, str], float]) -> tuple[str, str]:
    """The one (event, outcome) counted since `before`; fails on none or several."""
    after = counts(client)
    changed = {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}
    assert list(changed.values()) == [1.0], changed
    return next(iter(changed))


PUSH = json.dumps(
    {
        "ref": "refs/heads/main",
        "before": "1" * 40,
        "after": "2" * 40,
        "repository": {"full_name": "acme/fleet", "default_branch": "main"},
    }
).encode()


def test_refusals_answer_and_count_once(client: TestClient) -> None:
    cases: list[tuple[dict[str, Any], int, str, tuple[str, str]]] = [
        (
            {"body": b"{}", "content_type": "text/plain"},
            415,
            "webhooks are JSON or form-encoded\n",
            ("ping", "bad_request"),
        ),
        ({"body": b"x" * (LIMIT + 1)}, 413, "payload too large\n", ("ping", "too_large")),
        ({"body": b"{}", "signature": "sha256=00"}, 401, "", ("ping", "bad_signature")),
        (
            {"body": b"{}", "event": None},
            400,
            "missing X-GitHub-Event or X-GitHub-Delivery\n",
            ("other", "bad_request"),
        ),
        (
            {"body": b"{}", "delivery": ""},
            400,
            "missing X-GitHub-Event or X-GitHub-Delivery\n",
            ("ping", "bad_request"),
        ),
        (
            {"body": b"{}", "delivery": "d" * 65},
            400,
            "X-GitHub-Delivery is too long\n",
            ("ping", "bad_request"),
        ),
        (
            {"body": b"[1]", "event": "push"},
            400,
            "unreadable push payload\n",
            ("push", "bad_request"),
        ),
    ]
    for arguments, code, text, counted in cases:
        before = counts(client)
        answer = send(client, **arguments)
        assert (answer.status_code, answer.text) == (code, text), arguments
        assert counted_once(client, before) == counted, arguments
    assert send(client, b"x" * (LIMIT + 1)).headers["connection"] == "close"


def test_outcomes_answer_and_count_once(client: TestClient) -> None:
    delivery = str(uuid.uuid4())
    cases: list[tuple[dict[str, Any], int, dict[str, Any], tuple[str, str]]] = [
        (
            {"body": b"{}", "event": "ping", "delivery": delivery},
            200,
            {"status": "acknowledged", "detail": "ping acknowledged", "workflow_id": None},
            ("ping", "acknowledged"),
        ),
        (
            {"body": b"{}", "event": "ping", "delivery": delivery},
            200,
            {"status": "duplicate", "detail": "delivery already processed"},
            ("ping", "duplicate"),
        ),
        (
            {"body": b"{}", "event": "watch"},
            200,
            {"status": "ignored", "detail": "event 'watch' is not handled"},
            ("other", "ignored"),
        ),
        (
            {"body": PUSH, "event": "push"},
            202,
            {"status": "accepted", "workflow_id": "dispatch:acme/fleet:" + "2" * 40},
            ("push", "accepted"),
        ),
    ]
    for arguments, code, fields, counted in cases:
        before = counts(client)
        answer = send(client, **arguments)
        assert answer.status_code == code, answer.text
        assert fields.items() <= answer.json().items(), answer.json()
        assert counted_once(client, before) == counted, arguments
