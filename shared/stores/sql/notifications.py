"""`NotificationStore`: events for the notification sinks (`notifications`), one row per event
and sink. A row is written once per event id (the primary key: the same state change or
reminder recorded again adds nothing), taken by one notifier at a time under a lease (an
UPDATE that re-checks the row is due and unleased, as the gateway's outbox does), and marked
sent, retried later or failed."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.exc import IntegrityError

from shared.stores.sql.engine import Database
from shared.stores.sql.tables import NotificationRow, utc


@dataclass(frozen=True)
class NewEvent:
    event_id: str
    kind: str
    repo: str
    root: str | None
    deployment_id: str | None
    body: str  # JSON


@dataclass(frozen=True)
class Due:
    """A row leased to one notifier; `token` proves the lease when the row is marked."""

    event_id: str
    sink: str
    kind: str
    body: str
    attempts: int
    token: str


@dataclass(frozen=True)
class Sent:
    """A row as the job page lists it."""

    event_id: str
    sink: str
    kind: str
    state: str
    attempts: int
    created_at: datetime
    sent_at: datetime | None
    last_error: str


class NotificationStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    def add(self, event: NewEvent, sinks: list[str], now: datetime) -> int:
        """The event's rows for `sinks` (pending, due now) unless they exist; how many were
        added (0: the event id was seen before)."""
        added = 0
        for sink in sinks:
            with self._db.writing_session() as session:
                if session.get(NotificationRow, (event.event_id, sink)) is not None:
                    continue
                session.add(
                    NotificationRow(
                        event_id=event.event_id[:160],
                        sink=sink,
                        kind=event.kind[:64],
                        repo=event.repo[:255],
                        root=event.root,
                        deployment_id=event.deployment_id,
                        body=event.body,
                        state="pending",
                        attempts=0,
                        next_attempt_at=now,
                        lease_until=None,
                        last_error="",
                        created_at=now,
                        sent_at=None,
                    )
                )
                try:
                    session.commit()
                    added += 1
                except IntegrityError:  # another writer added it first
                    session.rollback()
        return added

    def claim(self, now: datetime, *, limit: int = 1, lease: timedelta) -> list[Due]:
        """Up to `limit` due rows, oldest first, leased to the caller until `now + lease`
        (take one at a time, just before sending it: a batch's later rows could outlive their
        lease while the first are sent, and another notifier would send them too)."""
        row = NotificationRow
        due = and_(
            row.state == "pending",
            row.next_attempt_at <= now,
            or_(row.lease_until.is_(None), row.lease_until < now),
        )
        with self._db.session() as session:
            candidates = session.execute(
                select(row.event_id, row.sink).where(due).order_by(row.created_at).limit(limit)
            ).all()
        taken = []
        for event_id, sink in candidates:
            token = uuid.uuid4().hex
            with self._db.writing() as connection:
                result = connection.execute(
                    update(row)
                    .where(row.event_id == event_id, row.sink == sink, due)
                    .values(lease_until=now + lease, attempts=row.attempts + 1, claim_token=token)
                )
                if result.rowcount != 1:  # another notifier took it
                    continue
                found = connection.execute(
                    select(row.kind, row.body, row.attempts).where(
                        row.event_id == event_id, row.sink == sink
                    )
                ).one()
            taken.append(Due(event_id, sink, found.kind, found.body, found.attempts, token))
        return taken

    def sent(self, due: Due, now: datetime) -> bool:
        return self._finish(due, state="sent", sent_at=now, last_error="")

    def retry(self, due: Due, error: str, at: datetime) -> bool:
        return self._finish(due, state="pending", next_attempt_at=at, last_error=error)

    def failed(self, due: Due, error: str) -> bool:
        return self._finish(due, state="failed", last_error=error)

    def _finish(self, due: Due, **values: object) -> bool:
        """Mark a row this lease still holds; False: the lease was lost (another notifier
        took the row), and it is left as that one marks it."""
        row = NotificationRow
        with self._db.writing() as connection:
            result = connection.execute(
                update(row)
                .where(
                    row.event_id == due.event_id,
                    row.sink == due.sink,
                    row.claim_token == due.token,
                )
                .values(lease_until=None, claim_token=None, **values)
            )
            return bool(result.rowcount == 1)

    def of_deployment(self, deployment_id: str) -> list[Sent]:
        """What was sent (or is still to be) about a deployment, oldest first."""
        with self._db.session() as session:
            rows = session.scalars(
                select(NotificationRow)
                .where(NotificationRow.deployment_id == deployment_id)
                .order_by(
                    NotificationRow.created_at, NotificationRow.event_id, NotificationRow.sink
                )
            )
            return [
                Sent(
                    event_id=r.event_id,
                    sink=r.sink,
                    kind=r.kind,
                    state=r.state,
                    attempts=r.attempts,
                    created_at=utc(r.created_at),
                    sent_at=None if r.sent_at is None else utc(r.sent_at),
                    last_error=r.last_error,
                )
                for r in rows
            ]
