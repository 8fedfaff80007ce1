"""State activities (latest.json, deployment history) and how renders sit in the blob store.

A stored render, under `renders/<owner>/<repo>/<root>/<sha>/` (shared.stores.blob.render_prefix):

    digest.json         {"schema": 1, "root", "revision", "digest", "files": [...],
                         "file_digests": {path: digest}, "hidden": {path: {pointer: digest}},
                         "warnings": ["path:line: warning: ...", ...],
                         "commit": {"sha", "subject", "author", "date"}}
    files/<path>        each redacted output file, path relative to the root

`digest`, `file_digests` and `hidden` are digests of the plaintext (see
shared.engine.render.Render): they let a diff notice a changed secret whose redacted text looks the
same. They stay in the blob store (internal state) and are never shown: a guessable value's digest
can be confirmed by hashing guesses.

`files/` keeps output names apart from rollwright's own objects, whatever a layout names its
files. digest.json is written last, so a reader that finds it finds every file it lists; files
are read through its list, never by listing the prefix (a re-render of the same revision
overwrites in place and may leave a stale object behind, which nobody reads).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import ERR_MISSING_RENDER
from activities.heartbeat import blocking
from activities.joblog import JobLog
from activities.metrics import WorkerMetrics
from shared.contracts.activityrefs import (
    ACT_LOAD_LATEST,
    ACT_PERSIST_LATEST,
    ACT_RECORD_AUDIT,
    ACT_RECORD_DEPLOYMENT,
    ACT_RECORD_DEPLOYMENTS,
)
from shared.contracts.deploy import (
    TERMINAL_STATES,
    AuditRecord,
    DeploymentRecord,
    DeploymentRecords,
    LatestDeployment,
    LatestLookup,
    LoadLatestRequest,
    PersistLatestRequest,
    lock_from_latest,
)
from shared.engine.render import Render
from shared.notify.notifier import Announcer
from shared.review.diff import RenderFiles
from shared.stores.blob import BlobStore, job_log_key, latest_key
from shared.stores.sql.audit import AuditStore
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from shared.stores.sql.jobs import JobStore
from shared.stores.sql.locks import RootLockStore

DIGEST_FILE = "digest.json"
FILES_DIR = "files/"
RENDER_SCHEMA = 1


# --- renders ---------------------------------------------------------------------------------


class StoredRender:
    """A render read back from the blob store (redacted files, path → bytes)."""

    def __init__(
        self,
        prefix: str,
        digest: str,
        side: RenderFiles,
        warnings: list[str] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.prefix = prefix
        self.digest = digest
        self.side = side
        self.warnings = list(warnings or [])
        self.meta = dict(meta or {})  # digest.json as stored (revision, commit, ...)

    @property
    def files(self) -> Mapping[str, bytes]:
        return self.side.files


def save_render(
    store: BlobStore,
    prefix: str,
    revision: str,
    render: Render,
    warnings: list[str] | None = None,
    commit: dict[str, str] | None = None,
) -> None:
    """Store the redacted files of `render` under `prefix` (module docstring), with the fleet's
    warnings about the root (values keys no template reads). Idempotent."""
    for path, data in render.files.items():
        store.put(prefix + FILES_DIR + path, data)
    meta = {
        "schema": RENDER_SCHEMA,
        "root": render.root,
        "revision": revision,
        "digest": render.digest,
        "files": sorted(render.files),
        "file_digests": render.file_digests,
        "hidden": render.leaf_digests(),
        "warnings": list(warnings or []),
        "commit": commit or {},
    }
    store.put(prefix + DIGEST_FILE, (json.dumps(meta, indent=2) + "\n").encode())


def load_render_meta(store: BlobStore, prefix: str) -> dict[str, Any]:
    raw = store.get(prefix + DIGEST_FILE)
    if raw is None:
        raise ApplicationError(
            f"no stored render at {prefix} (the blob store lost it, or it was never written)",
            type=ERR_MISSING_RENDER,
            non_retryable=True,
        )
    meta: dict[str, Any] = json.loads(raw)
    return meta


def load_render(store: BlobStore, prefix: str) -> StoredRender:
    meta = load_render_meta(store, prefix)
    files: dict[str, bytes] = {}
    for path in meta["files"]:
        data = store.get(prefix + FILES_DIR + path)
        if data is None:
            raise ApplicationError(
                f"stored render {prefix} lists {path} but the blob store has no such object",
                type=ERR_MISSING_RENDER,
                non_retryable=True,
            )
        files[path] = data
    side = RenderFiles(files, meta.get("file_digests") or {}, meta.get("hidden") or {})
    warnings = [str(w) for w in meta.get("warnings") or []]
    return StoredRender(prefix, str(meta["digest"]), side, warnings, meta)


def with_publisher(latest: LatestDeployment, previous: LatestDeployment | None) -> LatestDeployment:
    """`latest` with the deployment that published its `published_prefix` and when: itself
    when it published, else carried from the root's previous latest.json (the deployment
    workflow sends the prefix and revision along, and reviews name the deployment too)."""
    if latest.state == "published" and latest.published_revision == latest.revision:
        return latest.model_copy(
            update={
                "published_deployment_id": latest.deployment_id,
                "published_at": latest.finished_at,
            }
        )
    if previous is None or previous.published_prefix != latest.published_prefix:
        return latest
    who, when = publisher(previous)
    return latest.model_copy(update={"published_deployment_id": who, "published_at": when})


def publisher(latest: LatestDeployment) -> tuple[str | None, datetime | None]:
    """The deployment that published `latest.published_prefix`, and when (None: unknown)."""
    if latest.published_deployment_id is not None:
        return latest.published_deployment_id, latest.published_at
    if latest.state == "published" and latest.published_revision == latest.revision:
        return latest.deployment_id, latest.finished_at
    return None, None


def _parse_latest(raw: bytes | None) -> LatestDeployment | None:
    if raw is None:
        return None
    try:
        return LatestDeployment.model_validate_json(raw)
    except ValidationError:
        return None  # nothing to carry over; load_latest reports the broken file


# --- activities ------------------------------------------------------------------------------


class StoreActivities:
    """latest.json per root in the blob store; the SQL deployment history, audit trail and job
    index."""

    def __init__(
        self,
        blobs: BlobStore,
        database: Database,
        metrics: WorkerMetrics | None = None,
        announcer: Announcer | None = None,
    ) -> None:
        self.blobs = blobs
        self.metrics = metrics
        self.announcer = announcer
        self.deployments = DeploymentStore(database)
        self.locks = RootLockStore(database)
        self.audit = AuditStore(database)
        self.job_index = JobStore(database)
        self.jobs = JobLog(blobs)

    @activity.defn(name=ACT_LOAD_LATEST.name)
    async def load_latest(self, request: LoadLatestRequest) -> LatestLookup:
        key = latest_key(request.repo.full_name, request.root)
        raw = await blocking(self.blobs.get, key)
        if raw is None:
            return LatestLookup()
        try:
            latest = LatestDeployment.model_validate_json(raw)
        except ValidationError as err:
            # Retried (not fatal): an operator can repair the object and the root carries on;
            # treating it as "nothing deployed" would silently drop the lock and the diff base.
            activity.logger.error("unreadable latest deployment", extra={"key": key})
            raise RuntimeError(
                f"{key} is not a valid latest deployment: {err.error_count()} problem(s)"
            ) from None
        return LatestLookup(latest=latest)

    @activity.defn(name=ACT_PERSIST_LATEST.name)
    async def persist_latest(self, request: PersistLatestRequest) -> None:
        key = latest_key(request.repo.full_name, request.root)
        latest = request.latest
        if latest.published_deployment_id is None and latest.published_prefix:
            previous = await blocking(self.blobs.get, key)
            latest = with_publisher(latest, _parse_latest(previous))
        data = latest.model_dump_json(indent=2).encode() + b"\n"
        await blocking(self.blobs.put, key, data)
        # its copy for readers of every root (the gateway's lock metrics)
        lock = lock_from_latest(latest)
        await blocking(
            self.locks.set, request.repo.full_name, request.root, lock, datetime.now(UTC)
        )
        activity.logger.info(
            "latest deployment persisted",
            extra={
                "key": key,
                "deployment": request.latest.deployment_id,
                "state": request.latest.state,
            },
        )
        self.jobs.write(
            request.latest.deployment_id,
            "latest deployment persisted",
            key=key,
            state=request.latest.state,
        )

    @activity.defn(name=ACT_RECORD_AUDIT.name)
    async def record_audit(self, record: AuditRecord) -> None:
        """One person's action, counted or refused: SQL (job pages, `/api/`) and a line in
        the deployment's job log."""
        await blocking(self.audit.record, record)
        if record.deployment_id:
            self.jobs.write(
                record.deployment_id,
                f"{record.action} by {record.actor or 'someone'} "
                + ("counted" if record.counted else "refused"),
                source=record.source,
                reason=record.reason or None,
            )

    @activity.defn(name=ACT_RECORD_DEPLOYMENTS.name)
    async def record_deployments(self, batch: DeploymentRecords) -> None:
        """Several deployments' rows at once (a long queue's queued items); idempotent."""
        for record in batch.records:
            await blocking(self._record, record)

    @activity.defn(name=ACT_RECORD_DEPLOYMENT.name)
    async def record_deployment(self, record: DeploymentRecord) -> None:
        """One state change of a deployment: its SQL row (and event), its job's index row,
        and a line in its job log. Called at every state change by RenderWorkflows started
        since `record-each-state`, at the end only by older ones."""
        await blocking(self._record, record)

    def _record(self, record: DeploymentRecord) -> None:
        change = self.deployments.record(record)
        if change is not None and self.metrics is not None:
            self.metrics.state_changed(change)  # once per change: a retry records none
        if self.announcer is not None and self.announcer.sinks:  # nothing to ask SQL for else
            # A retry after `record` committed finds no change: the newest one is announced
            # again, which adds nothing when its event is already written (its id is the key).
            announced = change or self.deployments.last_change(record.deployment_id)
            if announced is not None and announced.state == record.state:
                self.announcer.deployment(record, announced)
        key = job_log_key(record.deployment_id)
        # Idempotent: the first state seen starts the job, a terminal one finishes it.
        self.job_index.start(record.deployment_id, record.deployment_id, "deployment", key)
        if record.state in TERMINAL_STATES:
            self.job_index.finish(record.deployment_id, record.state)
        self.jobs.write(
            record.deployment_id,
            f"state: {record.state}",
            state=record.state,
            approved_by=record.approved_by,
            check_run=record.check_run_id,
            detail=record.message or None,
        )
