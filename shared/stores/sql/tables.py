"""The SQL tables of rollwright: their SQLAlchemy models, and the one fix-up of what the
database hands back.

Temporal stays the source of truth for workflow state; these tables are the query side for the
job pages and the API (`deployments`, `deployment_events`, `audit_events`, `jobs`), the
gateway's idempotency record (`webhook_deliveries`) and its transactional outbox
(`gateway_outbox`: the workflow starts and signals it has accepted but not yet performed;
gateway/outbox.py). The schema is versioned by the Alembic migrations in
shared/stores/migrations (shared/stores/schema.py runs them when a database is opened); a change
to the models here needs a migration there. Rows hold no secrets: the records written here are
built from redacted data only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

from sqlalchemy import BigInteger, Boolean, DateTime, Index, Integer, String, Table, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class DeploymentRow(Base):
    """One row per deployment, updated as it moves through its states."""

    __tablename__ = "deployments"
    # a root's deployments newest first, in any repository or in one (migration 0003)
    __table_args__ = (
        Index("ix_deployments_root_created_at", "root", "created_at", "deployment_id"),
        Index("ix_deployments_repo_root_created_at", "repo", "root", "created_at", "deployment_id"),
        # a revision's deployments by root, the newest of a root first (migration 0006)
        Index(
            "ix_deployments_repo_revision_root",
            "repo",
            "revision",
            "root",
            "created_at",
            "deployment_id",
        ),
    )

    deployment_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    repo: Mapped[str] = mapped_column(String(255), index=True)
    root: Mapped[str] = mapped_column(String(512))
    revision: Mapped[str] = mapped_column(String(64))
    trigger: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(32), index=True)
    requested_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    approved_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # the latest check run; GitHub's ids need 64 bits (INTEGER is 64-bit on SQLite)
    check_run_id: Mapped[int | None] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), nullable=True
    )
    render_digest: Mapped[str | None] = mapped_column(String(80), nullable=True)
    added: Mapped[int | None] = mapped_column(Integer, nullable=True)
    removed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    changed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    # first state past "queued"; state "approved" (or approved_by) first seen; terminal state
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    approved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # a hotfix: the unmerged pull request and the head deployed (migration 0009)
    hotfix_pr: Mapped[int | None] = mapped_column(Integer, nullable=True)
    hotfix_head: Mapped[str | None] = mapped_column(String(64), nullable=True)


class DeploymentEventRow(Base):
    """A deployment's history: one row each time its state changed (job pages)."""

    __tablename__ = "deployment_events"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    deployment_id: Mapped[str] = mapped_column(String(64), index=True)
    state: Mapped[str] = mapped_column(String(32))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    message: Mapped[str] = mapped_column(Text, default="")
    check_run_id: Mapped[int | None] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), nullable=True
    )


class AuditRow(Base):
    """Who did what to a deployment or a root, from where, and whether it counted."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    repo: Mapped[str] = mapped_column(String(255))
    root: Mapped[str | None] = mapped_column(String(512), nullable=True)
    deployment_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    action: Mapped[str] = mapped_column(String(32))
    actor: Mapped[str | None] = mapped_column(String(255), nullable=True)
    source: Mapped[str] = mapped_column(String(32))
    # None: received, not judged yet (the gateway's row of a click a workflow judges).
    counted: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class RootLockRow(Base):
    """A root whose queue is locked (a manual deployment reached publish; nobody unlocked it
    yet): the copy of latest.json's lock that readers of many roots use (migration 0007)."""

    __tablename__ = "root_locks"

    repo: Mapped[str] = mapped_column(String(255), primary_key=True)
    root: Mapped[str] = mapped_column(String(512), primary_key=True)
    deployment_id: Mapped[str] = mapped_column(String(64))
    revision: Mapped[str] = mapped_column(String(64))
    since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class NotificationRow(Base):
    """One event for one sink (Slack, a signed webhook): written once per event id, delivered
    by a worker's notifier (migration 0008)."""

    __tablename__ = "notifications"
    __table_args__ = (Index("ix_notifications_state_next", "state", "next_attempt_at"),)

    event_id: Mapped[str] = mapped_column(String(160), primary_key=True)
    sink: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(64))
    repo: Mapped[str] = mapped_column(String(255))
    root: Mapped[str | None] = mapped_column(String(512), nullable=True)
    deployment_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    body: Mapped[str] = mapped_column(Text)  # the event as JSON (no secret: redacted records)
    state: Mapped[str] = mapped_column(String(16))  # pending, sent, failed
    attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # who holds the lease: a notifier whose lease ran out cannot mark the row afterwards
    claim_token: Mapped[str | None] = mapped_column(String(32), nullable=True)
    last_error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


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


class OutboxRow(Base):
    """A workflow start or signal the gateway has accepted (answered 202) but may not have
    performed yet. Written in the same transaction as the delivery's `webhook_deliveries` row;
    drained in `id` order per `repo` by gateway/outbox.py. `state`: pending → done | failed.
    A pending row is being performed by `lease_owner` until `lease_until`; after that any
    gateway may take it over."""

    __tablename__ = "gateway_outbox"
    __table_args__ = (Index("ix_gateway_outbox_pending", "state", "repo", "id"),)

    # BIGSERIAL on PostgreSQL; SQLite needs exactly INTEGER PRIMARY KEY for its rowid alias.
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    delivery_id: Mapped[str] = mapped_column(String(64), unique=True)
    repo: Mapped[str] = mapped_column(String(255))  # ordering key: owner/name
    kind: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(String(1024))  # the workflow id, for people
    payload: Mapped[str] = mapped_column(Text)  # the routed action as JSON
    state: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    done_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    outcome: Mapped[str] = mapped_column(String(255), default="")
    last_error: Mapped[str] = mapped_column(Text, default="")


delivery_table = cast(Table, DeliveryRow.__table__)
outbox_table = cast(Table, OutboxRow.__table__)


def utc(value: datetime) -> datetime:
    """A time read back from the database, with its zone: SQLite hands back naive datetimes
    (it stores no zone), and every column holds UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)
