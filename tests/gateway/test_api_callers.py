"""Who calls POST /api/deploy, as GitHub vouches for it: a person's GitHub token (the GitHub
emulator's `GET /user` over HTTP) or signed-in session with write access, the deploy admin
team for several roots, the API token as `api token`; refusals are 401 or 403 and audited,
and nobody names themselves in the body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from gateway.access.session import Signer
from gateway.access.viewer import SESSION_COOKIE, SESSION_PURPOSE
from gateway.app import create_app
from gateway.dispatcher import Dispatcher, DispatchError
from shared.devstack.credentials import new_app_key
from shared.devstack.emulator.server import GitHubEmulator
from shared.settings import Settings
from shared.stores.sql.audit import AuditStore
from shared.stores.sql.engine import Database
from tests.support.machine import MACHINE_SECRET
from tests.support.pages import QueueRecorder

APP_ID = 43
REPO = "acme/fleet"
SHA = "c3" * 20
PUBLIC = "http://rollwright.test"


class Gateway:
    def __init__(self, tmp: Path) -> None:
        pem = new_app_key()
        self.emulator = GitHubEmulator(
            app_id=APP_ID, app_key=pem, oauth_client_id="Iv1.callers"
        ).start()
        self.emulator.seed_repository("acme", "fleet", 7)
        self.emulator.set_permission("acme", "fleet", "reed", "read")
        self.emulator.set_permission("acme", "fleet", "wanda", "write")
        self.emulator.set_permission("acme", "fleet", "ada", "admin")
        self.emulator.add_team_member("acme", "platform", "ada")
        self.settings = Settings(
            data_dir=tmp / "state",
            public_url=PUBLIC,
            github_api_url=self.emulator.url,
            github_app_id=str(APP_ID),
            github_private_key=SecretStr(pem),
            github_oauth_client_id=self.emulator.oauth_client_id,
            github_oauth_client_secret=SecretStr(self.emulator.oauth_client_secret),
            api_token=MACHINE_SECRET,
            deploy_admin_team="acme/platform",
        )
        self.settings.data_dir.mkdir(parents=True)
        self.database = Database(self.settings.database)
        self.dispatcher = QueueRecorder()
        app = create_app(
            self.settings, dispatcher=cast(Dispatcher, self.dispatcher), database=self.database
        )
        self.client = TestClient(app).__enter__()

    def token(self, login: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.emulator.issue_user_token(login)}"}

    def deploy(self, headers: dict[str, str], **body: Any) -> Any:
        payload = {"repo": REPO, "revision": SHA, **body}
        if "roots" not in payload:
            payload.setdefault("root", "prod/eu-1")
        return self.client.post("/api/deploy", json=payload, headers=headers)

    def audits(self) -> list[tuple[str | None, str | None, bool | None, str]]:
        rows = AuditStore(self.database).query(repo=REPO)
        return [(r.actor, r.root, r.counted, r.reason) for r in reversed(rows)]

    def close(self) -> None:
        self.client.__exit__(None, None, None)
        self.database.close()
        self.emulator.stop()


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Gateway]:
    gateway = Gateway(tmp_path)
    yield gateway
    gateway.close()


def test_a_github_token_deploys_as_its_user(gw: Gateway) -> None:
    answer = gw.deploy(gw.token("wanda"))
    assert answer.status_code == 202, answer.text
    assert answer.json()["requested_by"] == "wanda"
    ((_, root, revision),) = gw.dispatcher.queued
    assert (root, revision.requested_by, revision.trigger) == ("prod/eu-1", "wanda", "manual")
    ((actor, audited_root, counted, reason),) = gw.audits()
    assert (actor, audited_root, counted) == ("wanda", "prod/eu-1", True)
    assert reason == f"revision {SHA[:12]} (via github token)"


def test_a_reader_is_refused_and_audited(gw: Gateway) -> None:
    answer = gw.deploy(gw.token("reed"))
    assert answer.status_code == 403, answer.text
    assert "@reed has read access to acme/fleet: a manual deploy needs write access" in (
        answer.text
    )
    assert gw.dispatcher.queued == []
    assert [a[:3] for a in gw.audits()] == [("reed", "prod/eu-1", False)]


def test_nobody_names_themselves(gw: Gateway) -> None:
    answer = gw.deploy(gw.token("wanda"), requested_by="someone-else")
    assert answer.status_code == 422 and "requested_by" in answer.text
    assert gw.dispatcher.queued == []


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer ghp_not-a-token-github-knows"}, {"Authorization": "Basic x"}],
    ids=["none", "unknown-token", "not-bearer"],
)
def test_a_caller_github_does_not_vouch_for_is_401(gw: Gateway, headers: dict[str, str]) -> None:
    answer = gw.deploy(headers)
    assert answer.status_code == 401, answer.text
    assert answer.headers["www-authenticate"] == "Bearer"
    assert gw.dispatcher.queued == [] and gw.audits() == []


def test_the_api_token_deploys_as_api_token_one_root_at_a_time(gw: Gateway) -> None:
    machine = {"Authorization": f"Bearer {MACHINE_SECRET.get_secret_value()}"}
    assert gw.deploy(machine).json()["requested_by"] == "api token"
    several = gw.deploy(machine, roots=["prod/eu-1", "prod/us-1"])
    assert several.status_code == 403 and "one root at a time" in several.text
    assert [a[:3] for a in gw.audits()] == [
        ("api token", "prod/eu-1", True),
        ("api token", "prod/eu-1", False),
        ("api token", "prod/us-1", False),
    ]


def test_several_roots_at_once_only_for_the_deploy_admin_team(gw: Gateway) -> None:
    refused = gw.deploy(gw.token("wanda"), roots=["prod/eu-1", "prod/us-1"])
    assert refused.status_code == 403, refused.text
    assert "@wanda is not in @acme/platform" in refused.text
    answer = gw.deploy(gw.token("ada"), roots=["prod/eu-1", "prod/us-1", "prod/eu-1"])
    assert answer.status_code == 202, answer.text
    deployments = answer.json()["deployments"]
    assert [(d["root"], d["requested_by"]) for d in deployments] == [
        ("prod/eu-1", "ada"),
        ("prod/us-1", "ada"),
    ]
    assert [(root, r.requested_by) for _, root, r in gw.dispatcher.queued] == [
        ("prod/eu-1", "ada"),
        ("prod/us-1", "ada"),
    ]
    both = gw.deploy(gw.token("ada"), root="prod/eu-1", roots=["prod/us-1"])
    assert both.status_code == 422 and "either root or roots" in both.text


def test_a_signed_in_person_deploys_from_the_gateways_pages_only(gw: Gateway) -> None:
    key = gw.settings.session_key()
    assert key is not None
    cookie = Signer(key).sign(SESSION_PURPOSE, {"login": "wanda", "id": 5}, 3600)
    gw.client.cookies.set(SESSION_COOKIE, cookie)
    elsewhere = gw.deploy({"Origin": "http://evil.test"})
    assert elsewhere.status_code == 401 and "gateway's pages" in elsewhere.text
    answer = gw.deploy({"Origin": PUBLIC})
    assert answer.status_code == 202, answer.text
    assert answer.json()["requested_by"] == "wanda"
    assert [a[:3] for a in gw.audits()] == [("wanda", "prod/eu-1", True)]


def test_a_deploy_of_several_roots_cut_short_says_which_were_queued(gw: Gateway) -> None:
    """Temporal goes away after the first root: the 503 names what was queued and what not."""
    calls = 0
    real = gw.dispatcher.queue_revision

    async def flaky(repo: Any, root: str, revision: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise DispatchError("Temporal is unavailable")
        return await real(repo, root, revision)

    gw.dispatcher.queue_revision = flaky  # type: ignore[method-assign]
    answer = gw.deploy(gw.token("ada"), roots=["prod/eu-1", "prod/us-1", "prod/ap-1"])
    assert answer.status_code == 503, answer.text
    detail = answer.json()["detail"]
    assert "queued: prod/eu-1 (" in detail and detail.endswith("not queued: prod/us-1, prod/ap-1")
    assert [root for _, root, _ in gw.dispatcher.queued] == ["prod/eu-1"]
    assert [a[:3] for a in gw.audits()] == [("ada", "prod/eu-1", True)]
