"""`JobStore`: the index of job logs (`jobs`, one job per deployment activity run) that the job
pages list; the logs themselves are in the blob store (shared/stores/joblog.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from shared.stores.sql.engine import Database
from shared.stores.sql.tables import JobRow


class JobStore:
    """Starting and finishing jobs, and a deployment's jobs."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def start(self, job_id: str, deployment_id: str, kind: str, log_key: str) -> None:
        """Add the job, once: a retry of a started job changes nothing."""
        with self._db.session() as session:
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

    def finish(self, job_id: str, state: str) -> None:
        with self._db.session() as session:
            row = session.get(JobRow, job_id)
            if row is not None:
                row.state = state
                row.finished_at = datetime.now(UTC)
                session.commit()

    def of_deployment(self, deployment_id: str) -> list[JobRow]:
        """A deployment's jobs, in the order they started."""
        with self._db.session() as session:
            query = (
                select(JobRow)
                .where(JobRow.deployment_id == deployment_id)
                .order_by(JobRow.started_at)
            )
            return list(session.scalars(query))
