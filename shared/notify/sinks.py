"""Where events go: a Slack-compatible incoming webhook (`{"text": …}`, which Slack,
Mattermost and Rocket.Chat accept) and a generic HTTP webhook that gets the event as JSON,
signed like GitHub signs its webhooks (`X-Rollwright-Signature-256: sha256=<HMAC-SHA256 of the
body>`), with the event's id and type in headers so a receiver drops repeats."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from shared.github.app import webhook_signature  # GitHub's scheme, as documented
from shared.settings import Settings


@dataclass(frozen=True)
class Request:
    url: str
    body: bytes
    headers: dict[str, str]


class Sink(Protocol):
    @property
    def name(self) -> str: ...

    def request(self, event_id: str, kind: str, body: str) -> Request: ...


@dataclass(frozen=True)
class SlackSink:
    url: str
    name: str = "slack"

    def request(self, event_id: str, kind: str, body: str) -> Request:
        event = json.loads(body)
        text = str(event.get("summary") or kind)
        if event.get("url"):
            text += f" (<{event['url']}|details>)"
        data = json.dumps({"text": text}).encode()
        return Request(self.url, data, {"Content-Type": "application/json"})


@dataclass(frozen=True)
class WebhookSink:
    url: str
    secret: str | None
    name: str = "webhook"

    def request(self, event_id: str, kind: str, body: str) -> Request:
        data = body.encode()
        headers = {
            "Content-Type": "application/json",
            "X-Rollwright-Event": kind,
            "X-Rollwright-Event-Id": event_id,
        }
        if self.secret:
            headers["X-Rollwright-Signature-256"] = webhook_signature(self.secret, data)
        return Request(self.url, data, headers)


def configured_sinks(settings: Settings) -> list[Sink]:
    sinks: list[Sink] = []
    if settings.notify_slack_url is not None:
        sinks.append(SlackSink(settings.notify_slack_url.get_secret_value()))
    if settings.notify_webhook_url:
        secret = settings.notify_webhook_secret
        sinks.append(
            WebhookSink(settings.notify_webhook_url, secret.get_secret_value() if secret else None)
        )
    return sinks
