"""`AuditStore`: the audit trail (`audit_events`), who did what to a deployment or a root, from
where, and whether it counted (docs/governance.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select

from shared.contracts.deploy import AuditRecord
from shared.stores.sql.engine import Database
from shared.stores.sql.tables import AuditRow, utc


class AuditStore:
    """Recording audit events and reading them back."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def record(self, record: AuditRecord) -> None:
        """Add one audit event. Retried activities may add it twice: an event carries its own
        time, so an exact repeat is skipped."""
        at = utc(record.at)
        with self._db.writing_session() as session:
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

    def of_deployment(self, deployment_id: str) -> list[AuditRow]:
        """A deployment's audit events, oldest first."""
        with self._db.session() as session:
            query = (
                select(AuditRow)
                .where(AuditRow.deployment_id == deployment_id)
                .order_by(AuditRow.at, AuditRow.id)
            )
            return list(session.scalars(query))

    def query(
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
        with self._db.session() as session:
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


def audit_values(record: AuditRecord) -> dict[str, Any]:
    """The `audit_events` row of `record`, cut to the columns' widths (for a bulk insert)."""
    return {
        "repo": record.repo[:255],
        "root": record.root[:512] if record.root else record.root,
        "deployment_id": record.deployment_id,
        "action": record.action[:32],
        "actor": record.actor[:255] if record.actor else record.actor,
        "source": record.source,
        "counted": record.counted,
        "reason": record.reason,
        "at": utc(record.at),
    }
