"""The embedded stack's notification sink: a generic webhook receiver that checks each
event's signature (`X-Rollwright-Signature-256`, the secret the stack gives the worker), keeps
one copy per event id (a repeat is answered 200 and counted, as a receiver that dedupes does),
and a Slack-compatible endpoint that keeps the messages' text. `GET /events` lists what it
received; `rollwright demo` prints it."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from shared.devstack.background import BackgroundHTTPServer, FakeRequestHandler
from shared.github.app import verify_webhook_signature

WEBHOOK_PATH = "/webhook"
SLACK_PATH = "/slack"


@dataclass
class Received:
    events: list[dict[str, Any]] = field(default_factory=list)  # each event id once
    repeats: dict[str, int] = field(default_factory=dict)  # event id → copies beyond the first
    slack: list[str] = field(default_factory=list)
    refused: int = 0  # bad signatures


class _Handler(FakeRequestHandler):
    owner: NotificationSink
    server_version = "rollwright-sink"

    def do_POST(self) -> None:
        headers, raw = self.read_request()
        status, text = self.owner.receive(self.path, headers, raw)
        self.write_answer(status, "text/plain", text.encode())

    def do_GET(self) -> None:
        body = json.dumps(self.owner.snapshot()).encode()
        self.write_answer(200, "application/json", body)


class NotificationSink(BackgroundHTTPServer):
    handler = _Handler

    def __init__(self, *, secret: str, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__("notification sink", host, port)
        self.secret = secret
        self._lock = threading.Lock()
        self._received = Received()

    @property
    def webhook_url(self) -> str:
        return self.url + WEBHOOK_PATH

    @property
    def slack_url(self) -> str:
        return self.url + SLACK_PATH

    def receive(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, str]:
        if path == SLACK_PATH:
            text = str(json.loads(raw or b"{}").get("text", ""))
            with self._lock:
                self._received.slack.append(text)
            return 200, "ok"
        if path != WEBHOOK_PATH:
            return 404, "not found"
        given = headers.get("x-rollwright-signature-256")
        if not verify_webhook_signature(self.secret, raw, given):
            with self._lock:
                self._received.refused += 1
            return 401, "bad signature"
        event = json.loads(raw)
        event_id = headers.get("x-rollwright-event-id", "")
        if event_id != event.get("id"):
            return 400, "the event id header and body disagree"
        with self._lock:
            if any(e["id"] == event_id for e in self._received.events):
                self._received.repeats[event_id] = self._received.repeats.get(event_id, 0) + 1
            else:
                self._received.events.append(event)
        return 200, "ok"

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "events": list(self._received.events),
                "repeats": dict(self._received.repeats),
                "slack": list(self._received.slack),
                "refused": self._received.refused,
            }

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._received.events)
