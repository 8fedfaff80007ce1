"""GitHub's webhooks as the gateway receives them: GitHub's own example payloads
(tests/fixtures/github/webhooks/) with a repository of their own and fresh commits, signed
with the tests' secret and posted to `/events`."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import uuid
from typing import Any

from fastapi.testclient import TestClient

from tests.support.vendored import GITHUB_WEBHOOKS

SECRET = "webhook-secret-for-tests"
API_TOKEN = "api-token-for-tests"
BEARER = {"Authorization": "Bearer " + API_TOKEN}
APP_ID = 4242


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GITHUB_WEBHOOKS / name).read_text())
    return data


def sha() -> str:
    return uuid.uuid4().hex + uuid.uuid4().hex[:8]


def unique_repo(payload: dict[str, Any], owner: str | None = None) -> str:
    """Give the payload's repository a name of its own; returns `owner/name`."""
    repo = payload["repository"]
    owner = owner or repo["full_name"].split("/")[0]
    name = f"fleet-{uuid.uuid4().hex[:8]}"
    repo["name"] = name
    repo["full_name"] = f"{owner}/{name}"
    repo["html_url"] = f"https://github.com/{owner}/{name}"
    repo["clone_url"] = f"https://github.com/{owner}/{name}.git"
    return f"{owner}/{name}"


def push_payload(**changes: Any) -> tuple[dict[str, Any], str]:
    payload = copy.deepcopy(load("push.event.4.json"))
    full_name = unique_repo(payload)
    payload["before"] = sha()
    payload["after"] = sha()
    payload.update(changes)
    return payload, full_name


def action_payload(identifier: str, root: str, external_id: str) -> tuple[dict[str, Any], str]:
    payload = load("check_run.requested_action.6.json")
    full_name = unique_repo(payload)
    run = payload["check_run"]
    run["name"] = f"rollwright/{root}"
    run["external_id"] = external_id
    run["app"]["id"] = APP_ID
    payload["requested_action"] = {"identifier": identifier}
    return payload, full_name


def post(
    client: TestClient,
    event: str,
    payload: dict[str, Any] | bytes,
    *,
    delivery: str | None = None,
    secret: str | None = SECRET,
    signature: str | None = None,
) -> Any:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
    }
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    elif secret is not None:
        # Computed here, independently of shared.github.app, so a broken verifier cannot agree
        # with a broken signer.
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers["X-Hub-Signature-256"] = f"sha256={digest}"
    return client.post("/events", content=body, headers=headers)


def rerequested_run(root: str, branch: str = "master") -> tuple[dict[str, Any], str]:
    payload = load("check_run.rerequested.7.json")
    full_name = unique_repo(payload)
    run = payload["check_run"]
    run["name"] = f"rollwright/{root}"
    run["app"]["id"] = APP_ID
    run["head_sha"] = sha()
    run["check_suite"]["head_branch"] = branch
    return payload, full_name
