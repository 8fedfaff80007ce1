"""The GitHub client and the GitHub emulator, over real HTTP on loopback.

Two paths for every limit: the emulator answering 422 to a raw request (httpx), and the
client refusing before anything is sent (PyGithub through `GitHubApp`).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.devstack.emulator.server import SCHEMAS_FILE, GitHubEmulator, extract_request_schemas
from shared.github.app import (
    CheckRunAction,
    CheckRunOutput,
    GitHubApp,
    GitHubRequestError,
    GitHubRetryableError,
    verify_webhook_signature,
    webhook_signature,
)
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.paths import REPO_ROOT
from tests.support.vendored import GITHUB_ENDPOINTS, GITHUB_WEBHOOKS

APP_ID = 4242
INSTALLATION = 77
SHA = "c0ffee" + "0" * 34
REPO = "acme/fleet"


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture(scope="module")
def app_key() -> str:
    return _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture(scope="module")
def other_key() -> str:
    return _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))


class Receiver:
    """A webhook endpoint: records the raw bytes and headers of every POST."""

    def __init__(self) -> None:
        self.received: queue.Queue[tuple[dict[str, str], bytes]] = queue.Queue()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.put(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(202)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/events"

    def next(self) -> tuple[dict[str, str], bytes]:
        return self.received.get(timeout=10)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


@pytest.fixture
def emulator(app_key: str, receiver: Receiver) -> Iterator[GitHubEmulator]:
    emu = GitHubEmulator(
        app_id=APP_ID, app_key=app_key, webhook_url=receiver.url, webhook_secret="hook-secret"
    )
    emu.seed_repository("acme", "fleet", INSTALLATION, "main")
    with emu:
        yield emu


@pytest.fixture
def app(emulator: GitHubEmulator, app_key: str) -> Iterator[GitHubApp]:
    client = GitHubApp(APP_ID, app_key, emulator.url, min_request_interval=0, min_write_interval=0)
    yield client
    client.close()


def app_jwt(key: str, *, iss: Any = APP_ID, iat_offset: int = -60, exp_offset: int = 540) -> str:
    now = int(time.time())
    claims = {"iat": now + iat_offset, "exp": now + exp_offset, "iss": str(iss)}
    return jwt.encode(claims, key, algorithm="RS256")


def api(emulator: GitHubEmulator, token: str | None = None) -> httpx.Client:
    headers = {"Accept": "application/vnd.github+json"}
    if token:
        headers["Authorization"] = f"token {token}"
    return httpx.Client(base_url=emulator.url, headers=headers, timeout=10)


def output(**extra: str) -> CheckRunOutput:
    return CheckRunOutput(title="Rendering", summary="Queued behind 0 deployments", **extra)


APPROVE = CheckRunAction(label="Approve", description="Publish this render", identifier="approve")
REJECT = CheckRunAction(label="Reject", description="Drop this deployment", identifier="reject")
UNLOCK = CheckRunAction(label="Unlock", description="Let merges deploy again", identifier="unlock")
PROMOTE = CheckRunAction(
    label="Promote", description="Promote to the next stage", identifier="promote"
)


# --------------------------------------------------------------------------- auth


def test_token_exchange_with_app_jwt(emulator: GitHubEmulator, app_key: str) -> None:
    with api(emulator) as http:
        bearer = {"Authorization": f"Bearer {app_jwt(app_key)}"}
        found = http.get("/repos/acme/fleet/installation", headers=bearer)
        assert found.status_code == 200
        assert found.json()["id"] == INSTALLATION
        assert found.json()["app_id"] == APP_ID
        minted = http.post(
            f"/app/installations/{INSTALLATION}/access_tokens", headers=bearer, json={}
        )
        assert minted.status_code == 201, minted.text
        token = minted.json()["token"]
        assert token.startswith("ghs_")
        assert [r["full_name"] for r in minted.json()["repositories"]] == [REPO]
        # the JWT itself is not an installation token
        denied = http.get("/repos/acme/fleet", headers=bearer)
        assert denied.status_code == 401
    for scheme in ("token", "Bearer"):
        with httpx.Client(base_url=emulator.url, timeout=10) as http:
            ok = http.get("/repos/acme/fleet", headers={"Authorization": f"{scheme} {token}"})
            assert ok.status_code == 200
            assert ok.json()["full_name"] == REPO


@pytest.mark.parametrize(
    "make_jwt, message",
    [
        (lambda key, other: app_jwt(other), "could not be decoded"),
        (lambda key, other: app_jwt(key, iss=APP_ID + 1), "Integration not found"),
        (lambda key, other: app_jwt(key, iat_offset=-1200, exp_offset=-600), "'exp'"),
        (lambda key, other: app_jwt(key, exp_offset=3600), "too far in the future"),
        (
            lambda key, other: jwt.encode(
                {"iat": int(time.time()), "exp": int(time.time()) + 60, "iss": str(APP_ID)},
                "a-shared-secret-instead-of-an-rsa-key",
                algorithm="HS256",
            ),
            "could not be decoded",
        ),
    ],
    ids=["wrong-key", "wrong-iss", "expired", "too-long", "hs256"],
)
def test_bad_app_jwt_is_401(
    emulator: GitHubEmulator, app_key: str, other_key: str, make_jwt: Any, message: str
) -> None:
    token = make_jwt(app_key, other_key)
    with api(emulator) as http:
        answer = http.post(
            f"/app/installations/{INSTALLATION}/access_tokens",
            headers={"Authorization": f"Bearer {token}"},
            json={},
        )
    assert answer.status_code == 401
    assert message in answer.json()["message"]
    assert emulator.check_runs("acme", "fleet") == []


def test_repo_endpoints_need_an_installation_token(emulator: GitHubEmulator) -> None:
    emulator.seed_repository("other", "repo", INSTALLATION + 1)
    foreign = emulator.issue_token(INSTALLATION + 1)
    with api(emulator) as http:
        assert http.get("/repos/acme/fleet/check-runs/1").status_code == 401
        bogus = http.get("/repos/acme/fleet", headers={"Authorization": "token ghs_nope"})
        assert (bogus.status_code, bogus.json()["message"]) == (401, "Bad credentials")
        hidden = http.get("/repos/acme/fleet", headers={"Authorization": f"token {foreign}"})
        assert hidden.status_code == 404


def test_client_with_wrong_key_fails_with_401(emulator: GitHubEmulator, other_key: str) -> None:
    client = GitHubApp(APP_ID, other_key, emulator.url, min_request_interval=0)
    with pytest.raises(GitHubRequestError) as caught:
        client.installation_for(REPO)
    assert caught.value.status == 401
    assert not caught.value.retryable
    assert "finding the GitHub App installation on acme/fleet" in str(caught.value)


def test_client_exchanges_the_token_once_and_caches_the_installation(
    emulator: GitHubEmulator, app: GitHubApp
) -> None:
    for n in range(3):
        app.create_check_run(REPO, f"rollwright/r{n}", SHA, f"d{n}", "queued", None, output())
    paths = [(r.method, r.path) for r in emulator.requests()]
    assert paths.count(("GET", "/repos/acme/fleet/installation")) == 1
    assert paths.count(("POST", f"/app/installations/{INSTALLATION}/access_tokens")) == 1
    assert paths.count(("POST", "/repos/acme/fleet/check-runs")) == 3
    assert app.installation_for(REPO) == INSTALLATION


# --------------------------------------------------------------------------- check runs


def test_check_run_lifecycle_through_the_client(emulator: GitHubEmulator, app: GitHubApp) -> None:
    run_id = app.create_check_run(
        REPO,
        "rollwright/clusters/prod-eu",
        SHA,
        "deployment-1",
        "queued",
        "http://127.0.0.1:8000/jobs/deployment-1",
        output(),
    )
    waiting = app.update_check_run(
        REPO,
        run_id,
        conclusion="action_required",
        output=output(text="```diff\n+replicas: 3\n```"),
        actions=[APPROVE, REJECT],
    )
    assert (waiting.status, waiting.conclusion) == ("completed", "action_required")
    done = app.update_check_run(
        REPO,
        run_id,
        conclusion="success",
        output=CheckRunOutput(title="Published", summary="approved by @alice"),
        actions=[],
    )
    assert (done.id, done.status, done.conclusion) == (run_id, "completed", "success")

    [run] = emulator.check_runs("acme", "fleet")
    assert run.id == run_id
    assert run.state["external_id"] == "deployment-1"
    assert run.state["details_url"] == "http://127.0.0.1:8000/jobs/deployment-1"
    assert [(u.method, u.state["status"], u.state["conclusion"]) for u in run.history] == [
        ("POST", "queued", None),
        ("PATCH", "completed", "action_required"),
        ("PATCH", "completed", "success"),
    ]
    # every update carries the complete output and the complete set of buttons
    for update in run.history[1:]:
        assert {"title", "summary"} <= set(update.request["output"])
        assert "actions" in update.request
    assert run.history[1].state["actions"] == [APPROVE.payload(), REJECT.payload()]
    assert run.actions == []
    assert run.output["title"] == "Published"
    assert run.output["text"] is None
    # an update is one PATCH: the check run object is lazy, nothing is fetched first
    assert ("GET", f"/repos/acme/fleet/check-runs/{run_id}") not in [
        (r.method, r.path) for r in emulator.requests()
    ]


def test_completed_run_updated_again_keeps_its_id_and_stays_completed(
    emulator: GitHubEmulator, app: GitHubApp
) -> None:
    run_id = app.create_check_run(
        REPO, "rollwright/a", SHA, "d1", "in_progress", None, output(), [APPROVE]
    )
    app.update_check_run(REPO, run_id, conclusion="failure", output=output(), actions=[])
    again = app.update_check_run(
        REPO, run_id, status="in_progress", output=output(text="retrying"), actions=[]
    )
    assert (again.id, again.status, again.conclusion) == (run_id, "completed", "failure")
    changed = app.update_check_run(REPO, run_id, conclusion="success", output=output(), actions=[])
    assert (changed.id, changed.conclusion) == (run_id, "success")
    runs = emulator.check_runs("acme", "fleet")
    assert [r.id for r in runs] == [run_id]
    assert [u.state["conclusion"] for u in runs[0].history] == [
        None,
        "failure",
        "failure",
        "success",
    ]
    assert runs[0].history[2].state["output"]["text"] == "retrying"


def test_check_run_ids_increment_and_get_returns_state(emulator: GitHubEmulator) -> None:
    token = emulator.issue_token(INSTALLATION)
    with api(emulator, token) as http:
        ids = []
        for n in range(3):
            made = http.post(
                "/repos/acme/fleet/check-runs",
                json={"name": f"rollwright/{n}", "head_sha": SHA, "external_id": str(n)},
            )
            assert made.status_code == 201
            ids.append(made.json()["id"])
        assert ids == [ids[0], ids[0] + 1, ids[0] + 2]
        got = http.get(f"/repos/acme/fleet/check-runs/{ids[1]}").json()
        assert (got["name"], got["status"], got["external_id"]) == ("rollwright/1", "queued", "1")
        assert (
            got["check_suite"]["id"]
            == http.get(f"/repos/acme/fleet/check-runs/{ids[0]}").json()["check_suite"]["id"]
        )
        incomplete = http.patch(
            f"/repos/acme/fleet/check-runs/{ids[0]}", json={"status": "completed"}
        )
        assert incomplete.status_code == 422
        assert http.get("/repos/acme/fleet/check-runs/999").status_code == 404


def test_check_run_response_has_githubs_shape(emulator: GitHubEmulator) -> None:
    endpoints = json.loads(GITHUB_ENDPOINTS.read_text())
    token = emulator.issue_token(INSTALLATION)
    emulator.set_pull("acme", "fleet", 3, head_sha=SHA)
    with api(emulator, token) as http:
        run = http.post(
            "/repos/acme/fleet/check-runs",
            json={"name": "n", "head_sha": SHA, "output": {"title": "t", "summary": "s"}},
        ).json()
        comment = http.post("/repos/acme/fleet/issues/3/comments", json={"body": "b"}).json()
        pull = http.get("/repos/acme/fleet/pulls/3").json()

    def keys(endpoint: str) -> set[str]:
        return set(endpoints[endpoint]["response_example"])

    assert keys("POST /repos/{owner}/{repo}/check-runs") <= set(run)
    assert set(keys("POST /repos/{owner}/{repo}/check-runs")) >= {"output", "check_suite"}
    assert set(run["output"]) == {
        "title",
        "summary",
        "text",
        "annotations_count",
        "annotations_url",
    }
    assert run["pull_requests"][0]["number"] == 3
    # `pin` and `minimized` are newer additions GitHub only sends on some plans
    assert keys("POST /repos/{owner}/{repo}/issues/{issue_number}/comments") - {
        "pin",
        "minimized",
    } <= set(comment)
    assert comment["user"]["type"] == "Bot"
    assert comment["user"]["login"] == "rollwright[bot]"
    assert set(pull) >= set(
        json.loads((GITHUB_WEBHOOKS / "pull_request.opened.12.json").read_text())["pull_request"]
    ) - {"_links"}


# --------------------------------------------------------------------------- validation


def _create(http: httpx.Client, **extra: Any) -> httpx.Response:
    body = {"name": "rollwright/x", "head_sha": SHA, **extra}
    return http.post("/repos/acme/fleet/check-runs", json=body)


def _action(label: str = "Approve", identifier: str = "approve", description: str = "ok") -> Any:
    return {"label": label, "identifier": identifier, "description": description}


@pytest.mark.parametrize(
    "body, field",
    [
        ({"actions": [_action(identifier=f"a{n}") for n in range(4)]}, "actions"),
        ({"actions": [_action(label="L" * 21)]}, "actions.0.label"),
        ({"actions": [_action(identifier="i" * 21)]}, "actions.0.identifier"),
        ({"actions": [_action(description="d" * 41)]}, "actions.0.description"),
        ({"actions": [{"label": "Approve", "identifier": "approve"}]}, "actions.0.description"),
        ({"output": {"title": "t", "summary": "s", "text": "x" * 65536}}, "output.text"),
        ({"output": {"title": "t", "summary": "s" * 65536}}, "output.summary"),
        # 65,535 characters but 131,070 bytes: GitHub's limit read the strict way
        ({"output": {"title": "t", "summary": "s", "text": "é" * 65535}}, "output.text"),
        ({"output": {"title": "t"}}, "output.summary"),
        ({"status": "done"}, "status"),
    ],
    ids=[
        "4-actions",
        "label-21",
        "identifier-21",
        "description-41",
        "description-missing",
        "text-65536",
        "summary-65536",
        "text-bytes",
        "summary-missing",
        "bad-status",
    ],
)
def test_emulator_answers_422_like_github(
    emulator: GitHubEmulator, body: dict[str, Any], field: str
) -> None:
    token = emulator.issue_token(INSTALLATION)
    with api(emulator, token) as http:
        answer = _create(http, **body)
        assert answer.status_code == 422, answer.text
        error = answer.json()
        assert error["message"] == "Invalid request."
        assert error["documentation_url"].startswith("https://docs.github.com/rest/checks/runs")
        assert field in [e["field"] for e in error["errors"]], error
        # nothing was created, and an update is validated the same way
        assert emulator.check_runs("acme", "fleet") == []
        made = _create(http)
        assert made.status_code == 201
        patched = http.patch(f"/repos/acme/fleet/check-runs/{made.json()['id']}", json=body)
        if field != "output.summary" or "summary" in body.get("output", {}):
            assert patched.status_code == 422, patched.text


def test_emulator_accepts_the_limits_exactly(emulator: GitHubEmulator) -> None:
    token = emulator.issue_token(INSTALLATION)
    with api(emulator, token) as http:
        answer = _create(
            http,
            actions=[
                _action("L" * 20, "i" * 20, "d" * 40),
                _action(identifier="b"),
                _action(identifier="c"),
            ],
            output={"title": "t", "summary": "s" * 65535, "text": "é" * 32767},
        )
        assert answer.status_code == 201, answer.text[:300]


def test_comment_body_limit_and_bad_json(emulator: GitHubEmulator) -> None:
    emulator.set_pull("acme", "fleet", 9, head_sha=SHA)
    token = emulator.issue_token(INSTALLATION)
    with api(emulator, token) as http:
        too_long = http.post("/repos/acme/fleet/issues/9/comments", json={"body": "x" * 65537})
        assert too_long.status_code == 422
        assert too_long.json()["errors"][0]["field"] == "body"
        broken = http.post(
            "/repos/acme/fleet/issues/9/comments",
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        )
        assert (broken.status_code, broken.json()["message"]) == (400, "Problems parsing JSON")
        assert (
            http.post("/repos/acme/fleet/issues/10/comments", json={"body": "x"}).status_code == 404
        )


def test_client_models_reject_before_sending(emulator: GitHubEmulator, app: GitHubApp) -> None:
    with pytest.raises(ValueError, match="at most 20 characters"):
        CheckRunAction(label="L" * 21, description="d", identifier="x")
    with pytest.raises(ValueError, match="at most 40 characters"):
        CheckRunAction(label="L", description="d" * 41, identifier="x")
    with pytest.raises(ValueError, match="at most 20 characters"):
        CheckRunAction(label="L", description="d", identifier="i" * 21)
    with pytest.raises(ValueError, match="65,536 bytes; GitHub allows at most 65,535"):
        CheckRunOutput(title="t", summary="s", text="x" * 65536)
    with pytest.raises(ValueError, match="131,070 bytes"):
        CheckRunOutput(title="t", summary="é" * 65535)
    before = len(emulator.requests())
    with pytest.raises(
        ValueError, match="at most 3 actions, got 4: Approve, Reject, Unlock, Promote"
    ):
        app.create_check_run(
            REPO,
            "rollwright/x",
            SHA,
            "d",
            "queued",
            None,
            output(),
            [APPROVE, REJECT, UNLOCK, PROMOTE],
        )
    with pytest.raises(ValueError, match="needs a conclusion"):
        app.create_check_run(REPO, "rollwright/x", SHA, "d", "completed", None, output())
    assert len(emulator.requests()) == before
    # at the limits exactly, the same request goes through
    app.create_check_run(
        REPO,
        "rollwright/x",
        SHA,
        "d",
        "queued",
        None,
        CheckRunOutput(title="t", summary="s", text="x" * 65535),
        [CheckRunAction(label="L" * 20, description="d" * 40, identifier="i" * 20), REJECT, UNLOCK],
    )
    assert len(emulator.check_runs("acme", "fleet")) == 1


# --------------------------------------------------------------------------- errors


def test_server_errors_and_rate_limits_are_retryable(
    emulator: GitHubEmulator, app: GitHubApp
) -> None:
    app.installation_for(REPO)
    emulator.fail_next("POST", r"/check-runs$", 502, message="Server Error")
    with pytest.raises(GitHubRetryableError) as failed:
        app.create_check_run(REPO, "rollwright/x", SHA, "d", "queued", None, output())
    assert failed.value.status == 502 and failed.value.retryable
    emulator.fail_next(
        "POST",
        r"/check-runs$",
        403,
        message="You have exceeded a secondary rate limit. Please wait a few minutes before "
        "you try again.",
        headers={"Retry-After": "60"},
    )
    with pytest.raises(GitHubRetryableError) as limited:
        app.create_check_run(REPO, "rollwright/x", SHA, "d", "queued", None, output())
    assert (limited.value.status, limited.value.retry_after) == (403, 60.0)
    emulator.fail_next("PATCH", r"/check-runs/", 404, message="Not Found")
    with pytest.raises(GitHubRequestError) as missing:
        app.update_check_run(REPO, 12345, output=output(), actions=[])
    assert missing.value.status == 404 and not missing.value.retryable
    assert "updating check run 12345 on acme/fleet" in str(missing.value)
    # the faults were used up: the next call works
    assert app.create_check_run(REPO, "rollwright/x", SHA, "d", "queued", None, output()) > 0


def test_network_errors_are_retryable(app_key: str) -> None:
    client = GitHubApp(APP_ID, app_key, "http://127.0.0.1:9", min_request_interval=0, timeout=2)
    with pytest.raises(GitHubRetryableError) as caught:
        client.installation_for(REPO)
    assert caught.value.status is None


# --------------------------------------------------------------------------- comments


def test_sticky_comment_is_edited_in_place(emulator: GitHubEmulator, app: GitHubApp) -> None:
    emulator.set_pull("acme", "fleet", 12, head_sha=SHA)
    # a human quoting the marker must not take the sticky comment over
    emulator.add_comment(
        "acme", "fleet", 12, "<!-- rollwright:preview -->\nnice", user_login="alice"
    )
    first = app.upsert_sticky_comment(REPO, 12, "rollwright:preview", "## Preview\n1 root")
    second = app.upsert_sticky_comment(REPO, 12, "rollwright:preview", "## Preview\n2 roots")
    assert first == second
    ours = [c for c in emulator.comments("acme", "fleet", 12) if c.user_login != "alice"]
    assert len(ours) == 1
    assert ours[0].body == "<!-- rollwright:preview -->\n## Preview\n2 roots"
    assert ours[0].bodies == [
        "<!-- rollwright:preview -->\n## Preview\n1 root",
        "<!-- rollwright:preview -->\n## Preview\n2 roots",
    ]
    # the same body again: no edit at all
    patches = sum(r.method == "PATCH" for r in emulator.requests())
    assert app.upsert_sticky_comment(REPO, 12, "rollwright:preview", "## Preview\n2 roots") == first
    assert sum(r.method == "PATCH" for r in emulator.requests()) == patches
    # another marker is another comment
    other = app.upsert_sticky_comment(REPO, 12, "rollwright:other", "x")
    assert other != first
    with pytest.raises(ValueError, match="bytes; GitHub allows at most 65,536"):
        app.upsert_sticky_comment(REPO, 12, "rollwright:preview", "x" * 65536)
    with pytest.raises(ValueError, match="marker"):
        app.upsert_sticky_comment(REPO, 12, "--> <script>", "x")


def test_sticky_comment_found_beyond_the_first_page(
    emulator: GitHubEmulator, app: GitHubApp
) -> None:
    emulator.set_pull("acme", "fleet", 4, head_sha=SHA)
    for n in range(120):
        emulator.add_comment("acme", "fleet", 4, f"comment {n}", user_login="bob")
    first = app.upsert_sticky_comment(REPO, 4, "rollwright:preview", "v1")
    assert app.upsert_sticky_comment(REPO, 4, "rollwright:preview", "v2") == first
    assert (
        sum(c.user_login == "rollwright[bot]" for c in emulator.comments("acme", "fleet", 4)) == 1
    )
    token = emulator.issue_token(INSTALLATION)
    with api(emulator, token) as http:
        page = http.get("/repos/acme/fleet/issues/4/comments", params={"per_page": 50})
        assert len(page.json()) == 50
        assert 'rel="next"' in page.headers["Link"] and "page=2" in page.headers["Link"]
        last = http.get("/repos/acme/fleet/issues/4/comments", params={"per_page": 50, "page": 3})
        assert [c["body"] for c in last.json()][-1].endswith("v2")


# --------------------------------------------------------------------------- pulls, compare


def test_pull_request_state_is_seeded(emulator: GitHubEmulator) -> None:
    emulator.set_pull(
        "acme", "fleet", 7, head_sha="a" * 40, base_sha="b" * 40, head_ref="feature", mergeable=None
    )
    token = emulator.issue_token(INSTALLATION)
    with api(emulator, token) as http:
        pull = http.get("/repos/acme/fleet/pulls/7").json()
        assert (pull["head"]["sha"], pull["base"]["sha"]) == ("a" * 40, "b" * 40)
        assert (pull["head"]["ref"], pull["base"]["ref"]) == ("feature", "main")
        assert (pull["state"], pull["mergeable"], pull["mergeable_state"]) == (
            "open",
            None,
            "unknown",
        )
        emulator.set_pull("acme", "fleet", 7, head_sha="c" * 40, state="closed", merged=True)
        pull = http.get("/repos/acme/fleet/pulls/7").json()
        assert (pull["state"], pull["merged"], pull["head"]["sha"]) == ("closed", True, "c" * 40)
        assert http.get("/repos/acme/fleet/pulls/8").status_code == 404


def test_compare_and_push_from_a_real_git_repo(
    tmp_path: Path, app_key: str, receiver: Receiver
) -> None:
    repo = init_repo(tmp_path / "fleet")
    write_files(repo, {"a.yaml": "a: 1\n", "b.yaml": "b: 1\n"})
    first = commit_all(repo, "first")
    write_files(repo, {"a.yaml": "a: 2\n", "c.yaml": "c: 1\n"})
    (repo / "b.yaml").unlink()
    second = commit_all(repo, "second")
    git(repo, "checkout", "-q", "-b", "side", first)
    write_files(repo, {"side.yaml": "s: 1\n"})
    side = commit_all(repo, "side")
    emu = GitHubEmulator(
        app_id=APP_ID, app_key=app_key, webhook_url=receiver.url, webhook_secret="s"
    )
    emu.seed_repository("acme", "fleet", INSTALLATION, git_dir=repo)
    with emu, api(emu, emu.issue_token(INSTALLATION)) as http:
        ahead = http.get(f"/repos/acme/fleet/compare/{first}...{second}").json()
        assert (ahead["status"], ahead["ahead_by"], ahead["behind_by"]) == ("ahead", 1, 0)
        assert {f["filename"]: f["status"] for f in ahead["files"]} == {
            "a.yaml": "modified",
            "b.yaml": "removed",
            "c.yaml": "added",
        }
        assert [c["sha"] for c in ahead["commits"]] == [second]
        assert http.get(f"/repos/acme/fleet/compare/{second}...{first}").json()["status"] == (
            "behind"
        )
        diverged = http.get(f"/repos/acme/fleet/compare/{second}...{side}").json()
        assert (diverged["status"], diverged["merge_base_commit"]["sha"]) == ("diverged", first)
        assert http.get(f"/repos/acme/fleet/compare/{first}...{first}").json()["status"] == (
            "identical"
        )
        assert http.get("/repos/acme/fleet/compare/nope...main").status_code == 404

        delivery = emu.send_push("acme", "fleet", first, second)
        headers, body = receiver.next()
        payload = json.loads(body)
        assert delivery.status == 202 and headers["x-github-event"] == "push"
        assert (payload["before"], payload["after"], payload["forced"]) == (first, second, False)
        assert payload["ref"] == "refs/heads/main"
        [commit] = payload["commits"]
        assert (commit["added"], commit["removed"], commit["modified"]) == (
            ["c.yaml"],
            ["b.yaml"],
            ["a.yaml"],
        )
        fixture = json.loads((GITHUB_WEBHOOKS / "push.event.4.json").read_text())
        assert set(payload) - {"organization"} == set(fixture)
        assert set(payload["repository"]) == set(fixture["repository"])
        for key in ("created_at", "updated_at", "pushed_at"):
            assert type(payload["repository"][key]) is type(fixture["repository"][key])
        assert set(payload["head_commit"]) == set(fixture["head_commit"])
        forced = emu.push_payload("acme", "fleet", second, side)
        assert forced["forced"] is True


# --------------------------------------------------------------------------- webhooks


def test_webhook_signature_matches_githubs_test_vector() -> None:
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert webhook_signature("It's a Secret to Everybody", b"Hello, World!") == expected
    assert verify_webhook_signature("It's a Secret to Everybody", b"Hello, World!", expected)
    assert not verify_webhook_signature("It's a Secret to Everybody", b"Hello, World!!", expected)
    assert not verify_webhook_signature("another secret", b"Hello, World!", expected)
    assert not verify_webhook_signature("It's a Secret to Everybody", b"Hello, World!", None)


def test_send_webhook_is_signed_over_the_exact_bytes(
    emulator: GitHubEmulator, receiver: Receiver
) -> None:
    raw = (GITHUB_WEBHOOKS / "ping.event.0.json").read_bytes()
    delivery = emulator.send_webhook("ping", raw)
    headers, body = receiver.next()
    assert body == raw
    assert headers["x-github-event"] == "ping"
    assert headers["user-agent"].startswith("GitHub-Hookshot/")
    assert str(uuid.UUID(headers["x-github-delivery"])) == delivery.delivery_id
    assert headers["x-hub-signature-256"] == webhook_signature("hook-secret", raw)
    assert verify_webhook_signature("hook-secret", body, headers["x-hub-signature-256"])
    assert delivery.status == 202
    again = emulator.redeliver(delivery.delivery_id)
    headers2, body2 = receiver.next()
    assert (again.delivery_id, body2) == (delivery.delivery_id, raw)
    assert headers2["x-github-delivery"] == delivery.delivery_id


def test_click_action_sends_requested_action(
    emulator: GitHubEmulator, app: GitHubApp, receiver: Receiver
) -> None:
    emulator.set_pull("acme", "fleet", 5, head_sha=SHA, head_ref="feature")
    run_id = app.create_check_run(
        REPO, "rollwright/clusters/prod", SHA, "dep-7", "in_progress", None, output(), [APPROVE]
    )
    app.update_check_run(
        REPO, run_id, conclusion="action_required", output=output(), actions=[APPROVE, REJECT]
    )
    with pytest.raises(ValueError, match="has no button 'unlock'"):
        emulator.click_action(run_id, "unlock", "alice")
    delivery = emulator.click_action(run_id, "reject", "alice")
    headers, body = receiver.next()
    assert headers["x-github-event"] == "check_run"
    assert verify_webhook_signature("hook-secret", body, headers["x-hub-signature-256"])
    payload = json.loads(body)
    assert delivery.status == 202
    assert payload["action"] == "requested_action"
    assert payload["requested_action"] == {"identifier": "reject"}
    run = payload["check_run"]
    assert (run["id"], run["name"], run["external_id"]) == (
        run_id,
        "rollwright/clusters/prod",
        "dep-7",
    )
    assert (run["status"], run["conclusion"]) == ("completed", "action_required")
    assert run["app"]["id"] == APP_ID
    assert run["check_suite"]["head_branch"] == "feature"
    assert [p["number"] for p in run["pull_requests"]] == [5]
    assert payload["installation"]["id"] == INSTALLATION
    assert payload["repository"]["full_name"] == REPO
    assert payload["sender"]["login"] == "alice"
    # same shape as the real payload GitHub sent
    fixture = json.loads((GITHUB_WEBHOOKS / "check_run.requested_action.6.json").read_text())
    assert set(payload) == set(fixture)
    assert set(run) == set(fixture["check_run"])
    assert set(run["check_suite"]) == set(fixture["check_run"]["check_suite"])
    assert set(run["app"]) - {"client_id"} == set(fixture["check_run"]["app"])
    assert set(run["output"]) == set(fixture["check_run"]["output"])
    assert set(payload["repository"]) == set(fixture["repository"])
    assert set(payload["sender"]) == set(fixture["sender"])
    assert set(payload["organization"]) == set(fixture["organization"])
    assert set(payload["installation"]) == set(fixture["installation"])


# --------------------------------------------------------------------------- control + page


def test_check_run_page_and_button_click_over_http(
    emulator: GitHubEmulator, app: GitHubApp, receiver: Receiver
) -> None:
    run_id = app.create_check_run(
        REPO,
        "rollwright/web",
        SHA,
        "dep-9",
        "completed",
        None,
        output(text="**Compared with** `abc`\n\n<script>alert(1)</script>"),
        [APPROVE, REJECT],
        conclusion="action_required",
    )
    with httpx.Client(base_url=emulator.url, timeout=10) as http:
        page = http.get(f"/acme/fleet/runs/{run_id}")
        assert page.status_code == 200
        # The text as GitHub shows it: Markdown rendered, other markup escaped.
        assert "<strong>Compared with</strong> <code>abc</code>" in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        assert "<script>" not in page.text
        assert 'name="identifier" value="approve"' in page.text
        clicked = http.post(
            f"/_emulator/check-runs/{run_id}/click",
            data={"identifier": "approve", "sender": "carol"},
        )
        assert clicked.status_code == 303
        assert clicked.headers["location"].endswith(f"/acme/fleet/runs/{run_id}")
        payload = json.loads(receiver.next()[1])
        assert (payload["requested_action"]["identifier"], payload["sender"]["login"]) == (
            "approve",
            "carol",
        )
        refused = http.post(f"/_emulator/check-runs/{run_id}/click", json={"identifier": "nope"})
        assert refused.status_code == 422
        bad = http.put("/_emulator/repos/acme/fleet/pulls/3", json={"head": "x"})
        assert bad.status_code == 400 and "bad emulator request" in bad.json()["message"]
        assert http.post("/_emulator/repos", json={"owner": "x"}).status_code == 400
        state = http.get("/_emulator/state").json()
        assert [r["id"] for r in state["check_runs"]] == [run_id]
        assert state["deliveries"][0]["status"] == 202


def test_standalone_process(tmp_path: Path, app_key: str) -> None:
    key_file = tmp_path / "app.pem"
    key_file.write_text(app_key)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "shared.devstack.emulator.server",
            "--app-id",
            str(APP_ID),
            "--app-key",
            str(key_file),
            "--port",
            "0",
            "--repo",
            "acme/fleet:31:trunk",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line, line
        url = line.rsplit(" ", 1)[1].strip()
        client = GitHubApp(APP_ID, app_key, url, min_request_interval=0, min_write_interval=0)
        assert client.installation_for(REPO) == 31
        run_id = client.create_check_run(REPO, "rollwright/x", SHA, "d", "queued", None, output())
        state = httpx.get(f"{url}/_emulator/state", timeout=10).json()
        assert [r["id"] for r in state["check_runs"]] == [run_id]
        seeded = httpx.post(
            f"{url}/_emulator/repos",
            json={"owner": "acme", "repo": "other", "installation_id": 32},
            timeout=10,
        )
        assert seeded.status_code == 201
        assert client.installation_for("acme/other") == 32
        client.close()
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_packaged_schemas_match_githubs_description() -> None:
    endpoints = json.loads(GITHUB_ENDPOINTS.read_text())
    packaged = json.loads(SCHEMAS_FILE.read_text())["endpoints"]
    assert packaged == extract_request_schemas(endpoints)
