"""`RootLockStore`: the queue locks of every root (`root_locks`), kept in step with latest.json
by the activity that writes it, and read by the gateway's metrics."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select

from shared.contracts.deploy import LockState
from shared.stores.sql.engine import Database
from shared.stores.sql.tables import RootLockRow, utc


@dataclass(frozen=True)
class HeldLock:
    repo: str
    root: str
    deployment_id: str
    revision: str
    since: datetime | None


class RootLockStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    def set(self, repo: str, root: str, lock: LockState, at: datetime) -> None:
        """The root's lock as latest.json now says it: a row while locked, none once open.
        Idempotent (the activity may retry)."""
        with self._db.writing_session() as session:
            if not lock.locked:
                session.execute(
                    delete(RootLockRow).where(RootLockRow.repo == repo, RootLockRow.root == root)
                )
            else:
                row = session.get(RootLockRow, (repo, root), with_for_update=True)
                if row is None:
                    row = RootLockRow(repo=repo, root=root)
                    session.add(row)
                row.deployment_id = lock.by_deployment or ""
                row.revision = lock.revision or ""
                row.since = lock.since
                row.updated_at = at
            session.commit()

    def held(self) -> list[HeldLock]:
        """Every locked root, by repository and root."""
        with self._db.session() as session:
            rows = session.scalars(select(RootLockRow).order_by(RootLockRow.repo, RootLockRow.root))
            return [
                HeldLock(
                    repo=row.repo,
                    root=row.root,
                    deployment_id=row.deployment_id,
                    revision=row.revision,
                    since=None if row.since is None else utc(row.since),
                )
                for row in rows
            ]
