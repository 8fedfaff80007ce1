"""The SQL side of rollwright: deployment history, webhook deliveries, the job index, and the
gateway's outbox.

Temporal stays the source of truth for workflow state; these tables are the query side for the job
pages and the API, the gateway's idempotency record, and its transactional outbox (the workflow
starts and signals it has accepted but not yet performed; gateway/outbox.py). SQLAlchemy 2 with
SQLite by default (`sqlite:///.rollwright/rollwright.db`) and PostgreSQL in compose. The schema is
versioned by the Alembic migrations in shared/stores/migrations (shared/stores/schema.py runs them
when a store is created); a change to the models here needs a migration there. Rows hold no secrets:
the records written here are built from redacted data only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Index,
    Integer,
    String,
    Table,
    Text,
    bindparam,
    case,
    create_engine,
    delete,
    event,
    exists,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from shared.contracts.deploy import (
    DELIVERED_STATES,
    TERMINAL_STATES,
    AuditRecord,
    DeploymentRecord,
)
from shared.stores import schema as dbschema


class Base(DeclarativeBase):
    pass


class DeploymentRow(Base):
    """One row per deployment, updated as it moves through its states."""

    __tablename__ = "deployments"
    # a root's deployments newest first, in any repository or in one (migration 0003)
    __table_args__ = (
        Index("ix_deployments_root_created_at", "root", "created_at", "deployment_id"),
        Index("ix_deployments_repo_root_created_at", "repo", "root", "created_at", "deployment_id"),
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
    counted: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


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


@dataclass(frozen=True)
class OutboxEntry:
    """What `claim_delivery` stores in the outbox with the delivery."""

    repo: str
    kind: str
    target: str
    payload: str


@dataclass(frozen=True)
class DeliveryClaim:
    """One webhook delivery to record, and what to enqueue with it (see `claim_deliveries`)."""

    delivery_id: str
    event: str
    action: str | None = None
    repo: str | None = None
    outcome: str = ""
    enqueue: OutboxEntry | None = None
    # A person's click the delivery carries (Unlock, Promote, ...): recorded with it, once.
    audit: AuditRecord | None = None


@dataclass(frozen=True)
class OutboxClaim:
    """A pending outbox row leased to one drainer."""

    id: int
    delivery_id: str
    repo: str
    kind: str
    target: str
    payload: str
    attempts: int
    created_at: datetime


@dataclass(frozen=True)
class OutboxResult:
    """What became of a claimed row. `done`: performed (`outcome` says how); `retry`: an
    infrastructure error, try again at `retry_at`; `failed`: it can never be performed."""

    id: int
    state: Literal["done", "retry", "failed"]
    outcome: str = ""
    error: str = ""
    retry_at: datetime | None = None


@dataclass(frozen=True)
class OutboxStats:
    depth: int  # pending rows
    oldest_pending_at: datetime | None
    failed: int

    def oldest_pending_seconds(self, now: datetime | None = None) -> float | None:
        if self.oldest_pending_at is None:
            return None
        return max(0.0, ((now or datetime.now(UTC)) - self.oldest_pending_at).total_seconds())


_deliveries = cast(Table, DeliveryRow.__table__)
_outbox = cast(Table, OutboxRow.__table__)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class SqlStore:
    """Thread-safe access to the three tables. Create with a SQLAlchemy URL."""

    def __init__(self, url: str) -> None:
        connect_args: dict[str, Any] = {}
        if url.startswith("sqlite"):
            connect_args = {"check_same_thread": False, "timeout": 30}
        # A file database has no connection to lose; pinging it would cost a statement per
        # transaction on the gateway's hot path.
        self.engine: Engine = create_engine(
            url, connect_args=connect_args, pool_pre_ping=not url.startswith("sqlite")
        )
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._lock = threading.Lock()
        # SQLite has one writer at a time and its busy handler sleeps (1, 2, 5, 10 … ms) when
        # a writer waits: threads of one process take turns here instead, which keeps the
        # gateway's per-webhook commit fast under load. PostgreSQL needs no such thing.
        self._write_turn: AbstractContextManager[Any] = (
            self._lock if url.startswith("sqlite") else nullcontext()
        )
        dbschema.upgrade(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # --- deliveries ------------------------------------------------------------------------

    def claim_delivery(
        self,
        delivery_id: str,
        event_name: str,
        action: str | None,
        repo: str | None,
        *,
        outcome: str = "",
        enqueue: OutboxEntry | None = None,
    ) -> bool:
        """Record a delivery; False when it was seen before (a redelivery: do nothing).

        With `enqueue`, the delivery and its outbox row are written in one transaction: both
        or neither. `outcome` is stored on the delivery row right away."""
        claim = DeliveryClaim(delivery_id, event_name, action, repo, outcome, enqueue)
        return self.claim_deliveries([claim])[0]

    def claim_deliveries(self, claims: Sequence[DeliveryClaim]) -> list[bool]:
        """`claim_delivery` for many deliveries in one transaction (the gateway's group
        commit): True for each one recorded now, False for one seen before or repeated
        earlier in `claims`. Outbox rows get ids in the order of `claims`."""
        now = datetime.now(UTC)
        first: dict[str, int] = {}
        for index, claim in enumerate(claims):
            first.setdefault(claim.delivery_id, index)
        candidates = [claims[i] for i in sorted(first.values())]
        if not candidates:
            return []
        insert_new = _insert_ignoring_duplicates(self.engine.dialect.name)
        with self._writing() as connection:
            statement = insert_new(_deliveries, _deliveries.c.delivery_id).values(
                [
                    {
                        "delivery_id": c.delivery_id,
                        "event": c.event[:64],
                        "action": c.action[:64] if c.action else c.action,
                        "repo": c.repo[:255] if c.repo else c.repo,
                        "received_at": now,
                        "outcome": c.outcome[:255],
                    }
                    for c in candidates
                ]
            )
            recorded = set(connection.scalars(statement))
            rows = [
                {
                    "delivery_id": c.delivery_id,
                    "repo": c.enqueue.repo[:255],
                    "kind": c.enqueue.kind[:32],
                    "target": c.enqueue.target[:1024],
                    "payload": c.enqueue.payload,
                    "state": "pending",
                    "attempts": 0,
                    "next_attempt_at": now,
                    "created_at": now,
                    "outcome": "",
                    "last_error": "",
                }
                for c in candidates
                if c.enqueue is not None and c.delivery_id in recorded
            ]
            if rows:
                # One row per statement on purpose: a multi-row VALUES list does not promise
                # ids in list order on every database, and the order is the delivery order.
                connection.execute(insert(_outbox), rows)
            audits = [
                _audit_values(c.audit)
                for c in candidates
                if c.audit is not None and c.delivery_id in recorded
            ]
            if audits:
                connection.execute(insert(AuditRow), audits)
        return [
            first[c.delivery_id] == i and c.delivery_id in recorded for i, c in enumerate(claims)
        ]

    def set_delivery_outcome(self, delivery_id: str, outcome: str) -> None:
        with self._writing() as connection:
            connection.execute(
                update(_deliveries)
                .where(_deliveries.c.delivery_id == delivery_id)
                .values(outcome=outcome[:255])
            )

    def forget_delivery(self, delivery_id: str) -> None:
        """Undo a claim when handling failed, so GitHub's redelivery is processed. A pending
        outbox row of the delivery goes too."""
        with self._writing() as connection:
            connection.execute(
                delete(_outbox).where(
                    _outbox.c.delivery_id == delivery_id, _outbox.c.state == "pending"
                )
            )
            connection.execute(delete(_deliveries).where(_deliveries.c.delivery_id == delivery_id))

    # --- outbox ----------------------------------------------------------------------------
    # Safe with several gateways on one database (SQLite or PostgreSQL): a row is taken only
    # by an UPDATE whose WHERE re-checks that it is pending, unleased (or its lease expired)
    # and the oldest pending row of its repository. PostgreSQL re-evaluates that guard on the
    # latest row version when two UPDATEs race, and SQLite runs one writer at a time, so
    # exactly one drainer wins. Later rows of a repository are only taken by the drainer that
    # holds its oldest pending row, which keeps each repository's deliveries in order.

    def claim_outbox(
        self,
        owner: str,
        *,
        lease: timedelta,
        repos: int = 32,
        per_repo: int = 20,
        now: datetime | None = None,
    ) -> list[OutboxClaim]:
        """Lease up to `per_repo` consecutive pending rows of up to `repos` repositories whose
        oldest pending row is due and not leased by someone else; in `id` order."""
        now = now or datetime.now(UTC)
        until = now + lease
        free = or_(_outbox.c.lease_until.is_(None), _outbox.c.lease_until < now)
        heads = (
            select(_outbox.c.repo, func.min(_outbox.c.id).label("head"))
            .where(_outbox.c.state == "pending")
            .group_by(_outbox.c.repo)
            .subquery()
        )
        due = (
            select(_outbox.c.id, _outbox.c.repo)
            .join(heads, _outbox.c.id == heads.c.head)
            .where(free, _outbox.c.next_attempt_at <= now)
            .order_by(_outbox.c.id)
            .limit(repos)
        )
        with self.engine.connect() as connection:
            candidates = [(int(row.id), str(row.repo)) for row in connection.execute(due)]
        if not candidates:
            return []
        earlier = _outbox.alias("earlier")
        claimed: list[int] = []
        with self._writing() as connection:
            for head, repo in candidates:
                taken = connection.execute(
                    update(_outbox)
                    .where(
                        _outbox.c.id == head,
                        _outbox.c.state == "pending",
                        free,
                        ~exists().where(
                            earlier.c.repo == repo,
                            earlier.c.state == "pending",
                            earlier.c.id < head,
                        ),
                    )
                    .values(lease_owner=owner, lease_until=until)
                )
                if taken.rowcount != 1:
                    continue  # another drainer was faster
                followers = list(
                    connection.scalars(
                        select(_outbox.c.id)
                        .where(
                            _outbox.c.repo == repo,
                            _outbox.c.state == "pending",
                            _outbox.c.id > head,
                        )
                        .order_by(_outbox.c.id)
                        .limit(per_repo - 1)
                    )
                )
                if followers:
                    connection.execute(
                        update(_outbox)
                        .where(_outbox.c.id.in_(followers), _outbox.c.state == "pending", free)
                        .values(lease_owner=owner, lease_until=until)
                    )
                mine = set(
                    connection.scalars(
                        select(_outbox.c.id).where(
                            _outbox.c.id.in_([head, *followers]),
                            _outbox.c.lease_owner == owner,
                            _outbox.c.lease_until == until,
                        )
                    )
                )
                # Only an unbroken run from the head: a follower still leased by someone else
                # (a drainer whose lease on the head expired) ends it; give back the rest.
                run = [head]
                for follower in followers:
                    if follower not in mine:
                        break
                    run.append(follower)
                rest = mine - set(run)
                if rest:
                    connection.execute(
                        update(_outbox)
                        .where(_outbox.c.id.in_(rest), _outbox.c.lease_owner == owner)
                        .values(lease_owner=None, lease_until=None)
                    )
                claimed.extend(run)
            if not claimed:
                return []
            rows = connection.execute(
                select(_outbox).where(_outbox.c.id.in_(claimed)).order_by(_outbox.c.id)
            ).all()
        return [
            OutboxClaim(
                id=int(row.id),
                delivery_id=row.delivery_id,
                repo=row.repo,
                kind=row.kind,
                target=row.target,
                payload=row.payload,
                attempts=int(row.attempts),
                created_at=_utc(row.created_at),
            )
            for row in rows
        ]

    def renew_outbox_lease(self, owner: str, ids: Sequence[int], lease: timedelta) -> int:
        """Extend this owner's lease on still-pending rows; how many it still holds."""
        if not ids:
            return 0
        with self._writing() as connection:
            result = connection.execute(
                update(_outbox)
                .where(
                    _outbox.c.id.in_(list(ids)),
                    _outbox.c.lease_owner == owner,
                    _outbox.c.state == "pending",
                )
                .values(lease_until=datetime.now(UTC) + lease)
            )
            return int(result.rowcount)

    def finish_outbox(
        self,
        owner: str,
        results: Sequence[OutboxResult],
        release: Sequence[int] = (),
        *,
        now: datetime | None = None,
    ) -> None:
        """Write what became of claimed rows (one transaction for the whole batch), copy the
        outcome onto their deliveries, and give back the leases of `release` (claimed rows
        that were not attempted). Rows whose lease this owner lost are left alone."""
        now = now or datetime.now(UTC)
        finished = [r for r in results if r.state in ("done", "failed")]
        retries = [
            {"row_id": r.id, "error": r.error, "retry_at": r.retry_at or now}
            for r in results
            if r.state == "retry"
        ]
        # Few statements however large the batch: in the gateway every statement's return
        # waits for the GIL behind the event loop, so their number is what costs.
        with self._writing() as connection:
            if finished:
                ids = [r.id for r in finished]
                outcomes = {
                    r.id: (r.outcome if r.state == "done" else f"failed: {r.error}")[:255]
                    for r in finished
                }
                failed = {r.id: r.error for r in finished if r.state == "failed"}
                connection.execute(
                    update(_outbox)
                    .where(
                        _outbox.c.id.in_(ids),
                        _outbox.c.lease_owner == owner,
                        _outbox.c.state == "pending",
                    )
                    .values(
                        state=(
                            case({i: "failed" for i in failed}, value=_outbox.c.id, else_="done")
                            if failed
                            else "done"
                        ),
                        outcome=case(outcomes, value=_outbox.c.id),
                        last_error=(case(failed, value=_outbox.c.id, else_="") if failed else ""),
                        done_at=now,
                        lease_owner=None,
                        lease_until=None,
                    )
                )
                finished_rows = select(_outbox.c.delivery_id).where(
                    _outbox.c.id.in_(ids), _outbox.c.state != "pending"
                )
                connection.execute(
                    update(_deliveries)
                    .where(_deliveries.c.delivery_id.in_(finished_rows))
                    .values(
                        outcome=select(_outbox.c.outcome)
                        .where(_outbox.c.delivery_id == _deliveries.c.delivery_id)
                        .scalar_subquery()
                    )
                )
            if retries:
                connection.execute(
                    update(_outbox)
                    .where(
                        _outbox.c.id == bindparam("row_id"),
                        _outbox.c.lease_owner == owner,
                        _outbox.c.state == "pending",
                    )
                    .values(
                        attempts=_outbox.c.attempts + 1,
                        next_attempt_at=bindparam("retry_at"),
                        last_error=bindparam("error"),
                        lease_owner=None,
                        lease_until=None,
                    ),
                    retries,
                )
            if release:
                connection.execute(
                    update(_outbox)
                    .where(_outbox.c.id.in_(list(release)), _outbox.c.lease_owner == owner)
                    .values(lease_owner=None, lease_until=None)
                )

    def release_outbox(self, owner: str) -> int:
        """Give back every lease this owner holds (a gateway shutting down)."""
        with self._writing() as connection:
            result = connection.execute(
                update(_outbox)
                .where(_outbox.c.lease_owner == owner, _outbox.c.state == "pending")
                .values(lease_owner=None, lease_until=None)
            )
            return int(result.rowcount)

    def outbox_stats(self) -> OutboxStats:
        with self.engine.connect() as connection:
            depth, oldest = connection.execute(
                select(func.count(), func.min(_outbox.c.created_at)).where(
                    _outbox.c.state == "pending"
                )
            ).one()
            failed = connection.scalar(
                select(func.count()).select_from(_outbox).where(_outbox.c.state == "failed")
            )
        return OutboxStats(
            depth=int(depth),
            oldest_pending_at=_utc(oldest) if oldest is not None else None,
            failed=int(failed or 0),
        )

    def outbox_rows(self, delivery_id: str | None = None) -> list[OutboxRow]:
        """Outbox rows in `id` order (all, or one delivery's): for tests and inspection."""
        with self._sessions() as session:
            query = select(OutboxRow).order_by(OutboxRow.id)
            if delivery_id is not None:
                query = query.where(OutboxRow.delivery_id == delivery_id)
            return list(session.scalars(query))

    def previous_dispatch(self, repo: str, before_id: int) -> str | None:
        """The workflow id of the repository's last dispatch accepted before outbox row
        `before_id` (delivery order), whatever became of it; None when there is none left."""
        with self._sessions() as session:
            found: str | None = session.scalar(
                select(OutboxRow.target)
                .where(
                    OutboxRow.repo == repo,
                    OutboxRow.kind == "start_dispatch",
                    OutboxRow.id < before_id,
                )
                .order_by(OutboxRow.id.desc())
                .limit(1)
            )
            return found

    def prune_outbox(self, older_than: timedelta) -> int:
        """Delete finished rows (done or failed) older than `older_than`; the delivery rows
        keep their outcome."""
        cutoff = datetime.now(UTC) - older_than
        with self._writing() as connection:
            result = connection.execute(
                delete(_outbox).where(
                    _outbox.c.state.in_(["done", "failed"]), _outbox.c.done_at < cutoff
                )
            )
            return int(result.rowcount)

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """One write transaction, committed on success, rolled back on error."""
        with self._write_turn, self.engine.begin() as connection:
            yield connection

    # --- deployments -----------------------------------------------------------------------

    def record_deployment(self, record: DeploymentRecord) -> None:
        """Insert or update the deployment's row, and add an event when its state changed.

        Idempotent (activities may retry): the same state recorded again adds no event and
        keeps the first times it was reached."""
        at = _utc(record.at)
        with self._write_turn, self._sessions() as session:
            row = session.get(DeploymentRow, record.deployment_id, with_for_update=True)
            if row is None:
                row = DeploymentRow(deployment_id=record.deployment_id, created_at=at)
                session.add(row)
                previous: str | None = None
            elif record.state == "queued" and row.state != "queued":
                # a late "queued" (an attempt that outlived its timeout) never moves a
                # deployment that has started back into the queue
                return
            else:
                previous = row.state
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
            if row.started_at is None and record.state != "queued":
                row.started_at = at
            if row.approved_at is None and (record.state == "approved" or record.approved_by):
                row.approved_at = at
            if row.finished_at is None and record.state in TERMINAL_STATES:
                row.finished_at = at
            if record.state != previous:
                session.add(
                    DeploymentEventRow(
                        deployment_id=record.deployment_id,
                        state=record.state,
                        at=at,
                        message=record.message,
                        check_run_id=record.check_run_id,
                    )
                )
            session.commit()

    def record_audit(self, record: AuditRecord) -> None:
        """Add one audit event. Retried activities may add it twice: an event carries its own
        time, so an exact repeat is skipped."""
        at = _utc(record.at)
        with self._write_turn, self._sessions() as session:
            seen = session.scalar(
                select(AuditRow.id).where(
                    AuditRow.deployment_id == record.deployment_id,
                    AuditRow.repo == record.repo,
                    AuditRow.action == record.action,
                    AuditRow.actor == record.actor,
                    AuditRow.at == at,
                )
            )
            if seen is None:
                session.add(
                    AuditRow(
                        repo=record.repo,
                        root=record.root,
                        deployment_id=record.deployment_id,
                        action=record.action,
                        actor=record.actor,
                        source=record.source,
                        counted=record.counted,
                        reason=record.reason,
                        at=at,
                    )
                )
                session.commit()

    def audit_events(self, deployment_id: str) -> list[AuditRow]:
        """A deployment's audit events, oldest first."""
        with self._sessions() as session:
            query = (
                select(AuditRow)
                .where(AuditRow.deployment_id == deployment_id)
                .order_by(AuditRow.at, AuditRow.id)
            )
            return list(session.scalars(query))

    def audit_query(
        self,
        *,
        repo: str | None = None,
        root: str | None = None,
        actor: str | None = None,
        action: str | None = None,
        counted: bool | None = None,
        before_id: int | None = None,
        limit: int = 100,
        repos: Sequence[str] | None = None,
    ) -> list[AuditRow]:
        """Audit events matching every filter given, newest first; `before_id` pages on
        (the smallest id of the previous page); `repos` keeps those of these repositories."""
        with self._sessions() as session:
            query = select(AuditRow)
            if repo is not None:
                query = query.where(AuditRow.repo == repo)
            if repos is not None:
                query = query.where(AuditRow.repo.in_(list(repos)))
            if root is not None:
                query = query.where(AuditRow.root == root)
            if actor is not None:
                query = query.where(AuditRow.actor == actor)
            if action is not None:
                query = query.where(AuditRow.action == action)
            if counted is not None:
                query = query.where(AuditRow.counted == counted)
            if before_id is not None:
                query = query.where(AuditRow.id < before_id)
            query = query.order_by(AuditRow.id.desc()).limit(limit)
            return list(session.scalars(query))

    def deployment(self, deployment_id: str) -> DeploymentRow | None:
        with self._sessions() as session:
            return session.get(DeploymentRow, deployment_id)

    def deployment_events(self, deployment_id: str) -> list[DeploymentEventRow]:
        """The deployment's state changes, oldest first."""
        with self._sessions() as session:
            query = (
                select(DeploymentEventRow)
                .where(DeploymentEventRow.deployment_id == deployment_id)
                .order_by(DeploymentEventRow.at, DeploymentEventRow.id)
            )
            return list(session.scalars(query))

    def deployments(
        self, repo: str, root: str | None = None, *, limit: int = 50, offset: int = 0
    ) -> list[DeploymentRow]:
        """A repository's deployments (of one root), newest first."""
        return self._deployments(repo, root, limit, offset)

    def find_deployments(
        self, root: str, *, limit: int = 50, offset: int = 0, repo: str | None = None
    ) -> list[DeploymentRow]:
        """Deployments of a root in any repository (or in `repo`), newest first."""
        return self._deployments(repo, root, limit, offset)

    def count_deployments(self, repo: str | None, root: str | None = None) -> int:
        """How many deployments `deployments` (or `find_deployments`) would page through."""
        with self._sessions() as session:
            query = _deployment_filter(select(func.count()).select_from(DeploymentRow), repo, root)
            return int(session.scalar(query) or 0)

    def revision_published(self, repo: str, root: str, revision: str) -> bool:
        """Whether some deployment published `revision` on the root: only such a revision
        is offered as a rollback target (it is known to have run there)."""
        with self._sessions() as session:
            query = (
                select(DeploymentRow.deployment_id)
                .where(
                    DeploymentRow.repo == repo,
                    DeploymentRow.root == root,
                    DeploymentRow.revision == revision,
                    # delivered: published, and verifying/verified/unhealthy after it
                    DeploymentRow.state.in_(sorted(DELIVERED_STATES)),
                )
                .limit(1)
            )
            return session.scalar(query) is not None

    def live_deployment(self, root: str, repo: str) -> DeploymentRow | None:
        """The deployment whose render the root runs: the one published last (whatever its
        verification said)."""
        with self._sessions() as session:
            query = (
                select(DeploymentRow)
                .where(
                    DeploymentRow.repo == repo,
                    DeploymentRow.root == root,
                    # delivered: published, and verifying/verified/unhealthy after it
                    DeploymentRow.state.in_(sorted(DELIVERED_STATES)),
                )
                .order_by(DeploymentRow.updated_at.desc(), DeploymentRow.deployment_id.desc())
                .limit(1)
            )
            return session.scalar(query)

    def queued(self, root: str, repo: str | None, *, limit: int = 200) -> list[DeploymentRow]:
        """A root's queued deployments in the order its queue takes them: manual before merge,
        first come first served within each (the DeployWorkflow's rule; each row is
        recorded when its deployment joins the queue)."""
        with self._sessions() as session:
            query = _deployment_filter(select(DeploymentRow), repo, root).where(
                DeploymentRow.state == "queued"
            )
            rows = list(
                session.scalars(
                    query.order_by(DeploymentRow.created_at, DeploymentRow.deployment_id).limit(
                        limit
                    )
                )
            )
        return sorted(rows, key=lambda r: 0 if r.trigger == "manual" else 1)

    def roots(self, *, limit: int = 500) -> list[tuple[str, str, int, datetime]]:
        """(repo, root, deployments, last started) of every root with a deployment, the most
        recently active first: the gateway's front page."""
        with self._sessions() as session:
            last = func.max(DeploymentRow.created_at)
            query = (
                select(DeploymentRow.repo, DeploymentRow.root, func.count(), last)
                .group_by(DeploymentRow.repo, DeploymentRow.root)
                .order_by(last.desc(), DeploymentRow.repo, DeploymentRow.root)
                .limit(limit)
            )
            return [(r, t, int(n), at) for r, t, n, at in session.execute(query)]

    def _deployments(
        self, repo: str | None, root: str | None, limit: int, offset: int
    ) -> list[DeploymentRow]:
        with self._sessions() as session:
            query = _deployment_filter(select(DeploymentRow), repo, root)
            query = query.order_by(
                DeploymentRow.created_at.desc(), DeploymentRow.deployment_id.desc()
            )
            return list(session.scalars(query.limit(limit).offset(offset)))

    def repositories(self, root: str | None = None) -> list[str]:
        """Every repository with a recorded deployment (of `root`, when given), by name."""
        with self._sessions() as session:
            query = select(DeploymentRow.repo).distinct().order_by(DeploymentRow.repo)
            if root is not None:
                query = query.where(DeploymentRow.root == root)
            return list(session.scalars(query))

    def fleet(self, repo: str) -> list[FleetRoot]:
        """Every root of `repo` with a recorded deployment: its newest deployment, its newest
        one that reached the cluster (published, verifying, verified, unhealthy) and how many
        are queued; by root. Three indexed queries, however long the history."""
        with self._sessions() as session:
            latest = self._newest_per_root(session, repo, None)
            delivered = self._newest_per_root(session, repo, DELIVERED_STATES)
            queued = dict(
                session.execute(
                    select(DeploymentRow.root, func.count())
                    .where(DeploymentRow.repo == repo, DeploymentRow.state == "queued")
                    .group_by(DeploymentRow.root)
                ).all()
            )
        return [
            FleetRoot(
                root=root,
                latest=row,
                delivered=delivered.get(root),
                queued=int(queued.get(root, 0)),
            )
            for root, row in sorted(latest.items())
        ]

    def _newest_per_root(
        self, session: Session, repo: str, states: frozenset[str] | None
    ) -> dict[str, DeploymentRow]:
        rank = (
            func.row_number()
            .over(
                partition_by=DeploymentRow.root,
                order_by=(DeploymentRow.created_at.desc(), DeploymentRow.deployment_id.desc()),
            )
            .label("rank")
        )
        inner = select(DeploymentRow.deployment_id, rank).where(DeploymentRow.repo == repo)
        if states is not None:
            inner = inner.where(DeploymentRow.state.in_(sorted(states)))
        ranked = inner.subquery()
        query = (
            select(DeploymentRow)
            .join(ranked, DeploymentRow.deployment_id == ranked.c.deployment_id)
            .where(ranked.c.rank == 1)
        )
        return {row.root: row for row in session.scalars(query)}

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


@dataclass(frozen=True)
class FleetRoot:
    """One root on the fleet page (`SqlStore.fleet`)."""

    root: str
    latest: DeploymentRow
    delivered: DeploymentRow | None
    queued: int


def _deployment_filter(query: Any, repo: str | None, root: str | None) -> Any:
    if repo is not None:
        query = query.where(DeploymentRow.repo == repo)
    if root is not None:
        query = query.where(DeploymentRow.root == root)
    return query


def _insert_ignoring_duplicates(dialect: str) -> Callable[[Table, Any], Any]:
    """`insert(table, key)`: INSERT … ON CONFLICT DO NOTHING RETURNING key, so a batch with a
    delivery seen before still records the others (SQLite ≥ 3.35 and PostgreSQL)."""
    if dialect == "sqlite":
        return lambda table, key: sqlite.insert(table).on_conflict_do_nothing().returning(key)
    if dialect == "postgresql":
        return lambda table, key: postgresql.insert(table).on_conflict_do_nothing().returning(key)
    raise NotImplementedError(f"claiming deliveries on {dialect} is not supported")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets the gateway read while the worker writes.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _audit_values(record: AuditRecord) -> dict[str, Any]:
    return {
        "repo": record.repo[:255],
        "root": record.root[:512] if record.root else record.root,
        "deployment_id": record.deployment_id,
        "action": record.action[:32],
        "actor": record.actor[:255] if record.actor else record.actor,
        "source": record.source,
        "counted": record.counted,
        "reason": record.reason,
        "at": _utc(record.at),
    }
