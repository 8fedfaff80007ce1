"""Names in the pages' and the JSON API's paths are checked before anything is looked up with
them: a malformed one is 404 for everyone, and no store, GitHub or Temporal is asked; a root
of a repository the viewer cannot read answers exactly as a root that does not exist, without
reading it.

The blob store is a tripwire: its URL names a regular file, so the first request that touches
it fails (500). SQL statements the pages' tables see are recorded from the real engine; the
dispatcher refuses every Temporal call (503). The GitHub emulator answers the permission
questions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from gateway.access.session import Signer
from gateway.access.viewer import SESSION_COOKIE, SESSION_PURPOSE
from gateway.app import create_app
from gateway.dispatcher import Dispatcher
from shared.contracts.deploy import DeploymentRecord
from shared.devstack.credentials import new_app_key
from shared.devstack.emulator.server import GitHubEmulator
from shared.settings import Settings
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from tests.support.machine import MACHINE_HEADERS, MACHINE_SECRET
from tests.support.pages import QueueRecorder
from tests.support.signin import PUBLIC, signin_settings

APP_ID = 52
FLEET = "acme/fleet"
ROOT = "prod/eu"
MALFORMED = [
    "/roots/..%2f..%2fetc?repo=acme/fleet",
    "/roots/..%2f..%2fetc",
    "/roots/prod/%2e/eu?repo=acme/fleet",
    "/roots/prod//eu?repo=acme/fleet",
    "/roots/prod/e%00u?repo=acme/fleet",
    "/roots/prod%5ceu?repo=acme/fleet",
    f"/roots/{'r' * 401}?repo=acme/fleet",
    f"/roots/prod/{'s' * 256}?repo=acme/fleet",
    "/api/roots/..%2f..%2fetc?repo=acme/fleet",
    "/api/roots/prod/%2e%2e/eu",
    f"/rollouts/acme/fleet/{'p' * 201}",
    "/rollouts/acme/fleet/p%0a1",
    "/rollouts/ac.me/fleet/p1",
    "/rollouts/acme/..%2f..%2fx/p1",
    "/previews/a_b/fleet/1",
    "/previews/acme/fleet/0",
    "/previews/acme/fleet/1/not-a-sha",
    "/previews/acme/fl%2fet/1",
    "/jobs/..%2Fetc",
    "/api/jobs/..%2Fetc",
    "/api/jobs/a%20b/log",
    "/api/jobs/-x/diff",
]

# no route takes a name with a `/` there: FastAPI's own 404 (JSON), before any handler runs
UNROUTED = {"/rollouts/acme/..%2f..%2fx/p1", "/jobs/..%2Fetc"}


@dataclass
class Gate:
    client: TestClient
    settings: Settings
    statements: list[str] = field(default_factory=list)

    def as_(self, login: str | None) -> dict[str, str]:
        """Headers of a signed-in person (None: the machine's bearer token)."""
        if login is None:
            return MACHINE_HEADERS
        key = self.settings.session_key()
        assert key is not None
        value = Signer(key).sign(SESSION_PURPOSE, {"login": login, "id": 1}, 60)
        return {"Cookie": f"{SESSION_COOKIE}={value}"}

    def get(self, path: str, login: str | None) -> Any:
        self.client.cookies.clear()
        return self.client.get(path, headers=self.as_(login), follow_redirects=False)


@contextmanager
def serving(tmp_path: Path, blob_url: str | None) -> Iterator[Gate]:
    pem = new_app_key()
    with GitHubEmulator(app_id=APP_ID, app_key=pem) as emulator:
        emulator.seed_repository("acme", "fleet", 7)
        emulator.set_permission("acme", "fleet", "reader", "read")
        settings = signin_settings(
            tmp_path, emulator, pem, blob_url=blob_url, api_token=MACHINE_SECRET
        )
        database = Database(settings.database)
        DeploymentStore(database).record(
            DeploymentRecord(
                deployment_id="0b6f4c3e-1d2a-4c55-9e1f-aaaaaaaaaaaa",
                repo=FLEET,
                root=ROOT,
                revision="a1" * 20,
                trigger="merge",
                state="published",
                at=datetime(2026, 3, 1, tzinfo=UTC),
            )
        )
        dispatcher = cast(Dispatcher, QueueRecorder())
        app = create_app(settings, dispatcher=dispatcher, database=database)
        gate = Gate(TestClient(app, base_url=PUBLIC), settings)

        @event.listens_for(database.engine, "before_cursor_execute")
        def seen(*args: Any) -> None:
            statement = str(args[2])
            if "gateway_outbox" not in statement:  # the drainer's own rounds
                gate.statements.append(statement)

        try:
            with gate.client:
                yield gate
        finally:
            database.close()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    """The pages over a blob store that fails when touched."""
    tripwire = tmp_path / "not-a-directory"
    tripwire.write_text("a blob store cannot be opened here\n")
    with serving(tmp_path, f"file://{tripwire}") as gate:
        yield gate


def test_a_traversal_in_a_root_is_404_also_for_someone_without_read_access(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, None) as gate:  # the default file blob store
        for login in ("outsider", "reader", None):
            for path in ("/roots/..%2f..%2fetc?repo=acme/fleet", "/api/roots/..%2f..%2fetc"):
                assert gate.get(path, login).status_code == 404, (login, path)


@pytest.mark.parametrize("login", [None, "reader", "outsider"])
def test_a_malformed_name_is_404_before_anything_is_looked_up(
    gate: Gate, login: str | None
) -> None:
    for path in MALFORMED:
        gate.statements.clear()
        answer = gate.get(path, login)
        assert answer.status_code == 404, path
        assert gate.statements == [], path
        if not path.startswith("/api/") and path not in UNROUTED:
            assert answer.headers["content-type"].startswith("text/html"), path


def test_the_tripwires_fire(gate: Gate) -> None:
    """What the test above relies on: a page that reads the blob store fails here, and one
    that asks Temporal answers 503."""
    with pytest.raises(FileExistsError):
        gate.get(f"/roots/{ROOT}?repo={FLEET}", None)
    assert gate.get(f"/rollouts/{FLEET}/p1", None).status_code == 503


def test_an_unreadable_repository_answers_as_a_missing_root(gate: Gate) -> None:
    for prefix in ("/roots", "/api/roots"):
        hidden = gate.get(f"{prefix}/{ROOT}?repo={FLEET}", "outsider")
        missing = gate.get(f"{prefix}/prod/none?repo={FLEET}", "outsider")
        assert hidden.status_code == missing.status_code == 404, prefix
        assert hidden.text.replace(ROOT, "X") == missing.text.replace("prod/none", "X")
        assert {k: v for k, v in hidden.headers.items() if k != "content-length"} == {
            k: v for k, v in missing.headers.items() if k != "content-length"
        }
