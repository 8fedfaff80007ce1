"""`DeliveryStore`: the GitHub webhook deliveries the gateway has seen (`webhook_deliveries`), its
idempotency record. A delivery is claimed with what it enqueues in the outbox and the person's
click it carries, in one transaction: all of them or none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, delete, insert, update
from sqlalchemy.dialects import postgresql, sqlite

from shared.contracts.deploy import AuditRecord
from shared.stores.sql.audit import audit_values
from shared.stores.sql.engine import Database
from shared.stores.sql.outbox import OutboxEntry
from shared.stores.sql.tables import AuditRow, delivery_table, outbox_table

_deliveries = delivery_table
_outbox = outbox_table


@dataclass(frozen=True)
class DeliveryClaim:
    """One webhook delivery to record, and what to enqueue with it (see `DeliveryStore.claim`)."""

    delivery_id: str
    event: str
    action: str | None = None
    repo: str | None = None
    outcome: str = ""
    enqueue: OutboxEntry | None = None
    # A person's click the delivery carries (Unlock, Promote, ...): recorded with it, once.
    audit: AuditRecord | None = None


class DeliveryStore:
    """Claiming deliveries (with their outbox rows and audit events), and their outcomes."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def claim_one(
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
        return self.claim([claim])[0]

    def claim(self, claims: Sequence[DeliveryClaim]) -> list[bool]:
        """`claim_one` for many deliveries in one transaction (the gateway's group commit):
        True for each one recorded now, False for one seen before or repeated earlier in
        `claims`. Outbox rows get ids in the order of `claims`."""
        now = datetime.now(UTC)
        first: dict[str, int] = {}
        for index, claim in enumerate(claims):
            first.setdefault(claim.delivery_id, index)
        candidates = [claims[i] for i in sorted(first.values())]
        if not candidates:
            return []
        insert_new = _insert_ignoring_duplicates(self._db.engine.dialect.name)
        with self._db.writing() as connection:
            statement = insert_new(_deliveries, _deliveries.c.delivery_id).values(
                [_delivery_values(c, now) for c in candidates]
            )
            recorded = set(connection.scalars(statement))
            rows = [
                c.enqueue.row(c.delivery_id, now)
                for c in candidates
                if c.enqueue is not None and c.delivery_id in recorded
            ]
            if rows:
                # One row per statement on purpose: a multi-row VALUES list does not promise
                # ids in list order on every database, and the order is the delivery order.
                connection.execute(insert(_outbox), rows)
            audits = [
                audit_values(c.audit)
                for c in candidates
                if c.audit is not None and c.delivery_id in recorded
            ]
            if audits:
                connection.execute(insert(AuditRow), audits)
        return [
            first[c.delivery_id] == i and c.delivery_id in recorded for i, c in enumerate(claims)
        ]

    def set_outcome(self, delivery_id: str, outcome: str) -> None:
        with self._db.writing() as connection:
            connection.execute(
                update(_deliveries)
                .where(_deliveries.c.delivery_id == delivery_id)
                .values(outcome=outcome[:255])
            )

    def forget(self, delivery_id: str) -> None:
        """Undo a claim when handling failed, so GitHub's redelivery is processed. A pending
        outbox row of the delivery goes too."""
        with self._db.writing() as connection:
            connection.execute(
                delete(_outbox).where(
                    _outbox.c.delivery_id == delivery_id, _outbox.c.state == "pending"
                )
            )
            connection.execute(delete(_deliveries).where(_deliveries.c.delivery_id == delivery_id))


def _delivery_values(claim: DeliveryClaim, now: datetime) -> dict[str, Any]:
    return {
        "delivery_id": claim.delivery_id,
        "event": claim.event[:64],
        "action": claim.action[:64] if claim.action else claim.action,
        "repo": claim.repo[:255] if claim.repo else claim.repo,
        "received_at": now,
        "outcome": claim.outcome[:255],
    }


def _insert_ignoring_duplicates(dialect: str) -> Callable[[Table, Any], Any]:
    """`insert(table, key)`: INSERT … ON CONFLICT DO NOTHING RETURNING key, so a batch with a
    delivery seen before still records the others (SQLite ≥ 3.35 and PostgreSQL)."""
    if dialect == "sqlite":
        return lambda table, key: sqlite.insert(table).on_conflict_do_nothing().returning(key)
    if dialect == "postgresql":
        return lambda table, key: postgresql.insert(table).on_conflict_do_nothing().returning(key)
    raise NotImplementedError(f"claiming deliveries on {dialect} is not supported")
