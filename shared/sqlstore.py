"""The SQL side of rollwright: deployment history, webhook deliveries and the job index.

Temporal stays the source of truth for workflow state; these tables are the query side for the
job pages and the API, and the gateway's idempotency record. SQLAlchemy 2 with SQLite by default
(`sqlite:///.rollwright/rollwright.db`) and PostgreSQL in compose. Rows hold no secrets: the
records written here are built from redacted data only.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    DateTime,
    Integer,
    String,
    Text,
    create_engine,
    event,
    select,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from shared.payloads import DeploymentRecord


class Base(DeclarativeBase):
    pass


class DeploymentRow(Base):
    """One row per deployment, updated as it moves through its states."""

    __tablename__ = "deployments"

    deployment_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    repo: Mapped[str] = mapped_column(String(255), index=True)
    root: Mapped[str] = mapped_column(String(512), index=True)
    revision: Mapped[str] = mapped_column(String(64))
    trigger: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(32), index=True)
    requested_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    approved_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    check_run_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    render_digest: Mapped[str | None] = mapped_column(String(80), nullable=True)
    added: Mapped[int | None] = mapped_column(Integer, nullable=True)
    removed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    changed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class DeliveryRow(Base):
    """GitHub webhook deliveries seen by the gateway (X-GitHub-Delivery), for idempotency."""

    __tablename__ = "webhook_deliveries"

    delivery_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64), nullable=True)
    repo: Mapped[str | None] = mapped_column(String(255), nullable=True)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    outcome: Mapped[str] = mapped_column(String(255), default="")


class JobRow(Base):
    """Index of job logs (one job per deployment activity run), for the job pages."""

    __tablename__ = "jobs"

    job_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    deployment_id: Mapped[str] = mapped_column(String(64), index=True)
    kind: Mapped[str] = mapped_column(String(64))
    log_key: Mapped[str] = mapped_column(String(512))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    state: Mapped[str] = mapped_column(String(32), default="running")


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class SqlStore:
    """Thread-safe access to the three tables. Create with a SQLAlchemy URL."""

    def __init__(self, url: str) -> None:
        connect_args: dict[str, Any] = {}
        if url.startswith("sqlite"):
            connect_args = {"check_same_thread": False, "timeout": 30}
        self.engine: Engine = create_engine(url, connect_args=connect_args, pool_pre_ping=True)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._lock = threading.Lock()
        Base.metadata.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # --- deliveries ------------------------------------------------------------------------

    def claim_delivery(
        self, delivery_id: str, event_name: str, action: str | None, repo: str | None
    ) -> bool:
        """Record a delivery; False when it was seen before (a redelivery: do nothing)."""
        row = DeliveryRow(
            delivery_id=delivery_id,
            event=event_name,
            action=action,
            repo=repo,
            received_at=datetime.now(UTC),
        )
        with self._sessions() as session:
            session.add(row)
            try:
                session.commit()
            except IntegrityError:
                session.rollback()
                return False
        return True

    def set_delivery_outcome(self, delivery_id: str, outcome: str) -> None:
        with self._sessions() as session:
            row = session.get(DeliveryRow, delivery_id)
            if row is not None:
                row.outcome = outcome[:255]
                session.commit()

    def forget_delivery(self, delivery_id: str) -> None:
        """Undo a claim when handling failed, so GitHub's redelivery is processed."""
        with self._sessions() as session:
            row = session.get(DeliveryRow, delivery_id)
            if row is not None:
                session.delete(row)
                session.commit()

    # --- deployments -----------------------------------------------------------------------

    def record_deployment(self, record: DeploymentRecord) -> None:
        """Insert or update the deployment's row (idempotent: activities may retry)."""
        at = _utc(record.at)
        with self._sessions() as session:
            row = session.get(DeploymentRow, record.deployment_id)
            if row is None:
                row = DeploymentRow(deployment_id=record.deployment_id, created_at=at)
                session.add(row)
            row.repo = record.repo
            row.root = record.root
            row.revision = record.revision
            row.trigger = record.trigger
            row.state = record.state
            row.requested_by = record.requested_by
            row.approved_by = record.approved_by
            row.check_run_id = record.check_run_id
            row.render_digest = record.render_digest
            row.added = record.added
            row.removed = record.removed
            row.changed = record.changed
            row.message = record.message
            row.updated_at = at
            session.commit()

    def deployment(self, deployment_id: str) -> DeploymentRow | None:
        with self._sessions() as session:
            return session.get(DeploymentRow, deployment_id)

    def deployments(
        self, repo: str, root: str | None = None, *, limit: int = 50, offset: int = 0
    ) -> list[DeploymentRow]:
        """Newest first."""
        with self._sessions() as session:
            query = select(DeploymentRow).where(DeploymentRow.repo == repo)
            if root is not None:
                query = query.where(DeploymentRow.root == root)
            query = query.order_by(DeploymentRow.created_at.desc()).limit(limit).offset(offset)
            return list(session.scalars(query))

    # --- jobs ------------------------------------------------------------------------------

    def start_job(self, job_id: str, deployment_id: str, kind: str, log_key: str) -> None:
        with self._sessions() as session:
            row = session.get(JobRow, job_id)
            if row is None:
                session.add(
                    JobRow(
                        job_id=job_id,
                        deployment_id=deployment_id,
                        kind=kind,
                        log_key=log_key,
                        started_at=datetime.now(UTC),
                    )
                )
                session.commit()

    def finish_job(self, job_id: str, state: str) -> None:
        with self._sessions() as session:
            row = session.get(JobRow, job_id)
            if row is not None:
                row.state = state
                row.finished_at = datetime.now(UTC)
                session.commit()

    def jobs(self, deployment_id: str) -> list[JobRow]:
        with self._sessions() as session:
            query = (
                select(JobRow)
                .where(JobRow.deployment_id == deployment_id)
                .order_by(JobRow.started_at)
            )
            return list(session.scalars(query))

    def session(self) -> Session:
        return self._sessions()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets the gateway read while the worker writes.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()
