"""The gateway's pages over real SQLite and a real file blob store, filled the way the worker
fills them (the record activity's SQL calls, `JobLog` lines, `diff.json`), with a dispatcher
that records manual deploys; and a receiver for the webhooks the GitHub emulator sends."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar, cast

from fastapi.testclient import TestClient

from activities.joblog import JobLog
from gateway.app import create_app
from gateway.dispatcher import Dispatched, Dispatcher, DispatchError
from shared.contracts.deploy import TERMINAL_STATES, DeploymentRecord, NewRevision, RepoRef
from shared.review.diff import diff_renders
from shared.review.diffdoc import diff_document, document_key
from shared.settings import Settings
from shared.stores.blob import FileBlobStore, job_log_key
from shared.stores.sql.audit import AuditStore
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from shared.stores.sql.jobs import JobStore
from tests.support.machine import MACHINE_SECRET

REPO = "acme/fleet"
ROOT = "prod/eu-1"
SHA = "a1" * 20
DEP = "0b6f4c3e-1d2a-4c55-9e1f-aaaaaaaaaaaa"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
PUBLIC = "http://rollwright.test"
GITHUB = "https://api.github.com"
UI = "http://temporal.test:8233"


def cm(name: str, namespace: str, **data: str) -> bytes:
    body = "".join(f"  {k}: {v}\n" for k, v in data.items())
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
        f"  namespace: {namespace}\n  labels:\n    name: not-this\ndata:\n{body}"
    ).encode()


OLD = {
    "web/web/web/ConfigMap_settings.yaml": cm("settings", "web", region="eu", tier="1"),
    "web/web/web/ConfigMap_gone.yaml": cm("gone", "web", a="1"),
}
NEW = {
    "web/web/web/ConfigMap_settings.yaml": cm("settings", "web", region="us", tier="1"),
    "web/web/web/ConfigMap_new.yaml": cm("new", "web", html="'<script>alert(1)</script>'"),
}


class QueueRecorder:
    """The gateway's dispatcher, recording manual deploys; pages never dispatch."""

    def __init__(self) -> None:
        self.queued: list[tuple[RepoRef, str, NewRevision]] = []

    async def queue_revision(self, repo: RepoRef, root: str, revision: NewRevision) -> Dispatched:
        self.queued.append((repo, root, revision))
        return Dispatched(f"deploy:{repo.full_name}:{root}", "signalled")  # type: ignore[arg-type]

    async def check_health(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        async def refuse(*args: Any, **kwargs: Any) -> Dispatched:
            raise DispatchError(f"{name} is not expected in these tests")

        return refuse


class World:
    def __init__(self, tmp: Path, dispatcher: QueueRecorder | None = None, **settings: Any) -> None:
        # the pages are read as a machine would (the bearer token); sign-in has its own tests
        defaults = {
            "public_url": PUBLIC,
            "temporal_ui_url": UI,
            "github_api_url": GITHUB,
            "api_token": MACHINE_SECRET,
        }
        self.settings = Settings(data_dir=tmp / "state", **{**defaults, **settings})
        self.settings.data_dir.mkdir(parents=True)
        self.database = Database(self.settings.database)
        self.deployments = DeploymentStore(self.database)
        self.audit_trail = AuditStore(self.database)
        self.job_index = JobStore(self.database)
        self.blobs = FileBlobStore(tmp / "state" / "blobs")
        self.jobs = JobLog(self.blobs)
        self.dispatcher = dispatcher or QueueRecorder()
        app = create_app(
            self.settings, dispatcher=cast(Dispatcher, self.dispatcher), database=self.database
        )
        token = self.settings.api_token
        assert token is not None
        self.client = TestClient(
            app, headers={"Authorization": f"Bearer {token.get_secret_value()}"}
        )

    def record(self, state: str, at: datetime, deployment_id: str = DEP, **fields: Any) -> None:
        """What the record activity does for one state change."""
        record = DeploymentRecord(
            deployment_id=deployment_id,
            repo=fields.pop("repo", REPO),
            root=fields.pop("root", ROOT),
            revision=fields.pop("revision", SHA),
            trigger=fields.pop("trigger", "merge"),
            state=state,  # type: ignore[arg-type]
            requested_by=fields.pop("requested_by", "alice"),
            at=at,
            **fields,
        )
        self.deployments.record(record)
        self.job_index.start(deployment_id, deployment_id, "deployment", job_log_key(deployment_id))
        if state in TERMINAL_STATES:
            self.job_index.finish(deployment_id, state)
        self.jobs.write(deployment_id, f"state: {state}", state=state)

    def store_diff(self, deployment_id: str = DEP) -> None:
        diff = diff_renders(OLD, NEW)
        self.blobs.put(document_key(deployment_id), diff_document(diff, OLD, NEW).to_json())

    def close(self) -> None:
        self.client.close()
        self.database.close()


class Hooks(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.headers["X-GitHub-Event"], json.loads(body)))
        self.send_response(202)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None
