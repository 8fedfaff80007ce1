"""`DeploymentStore`: deployment history (`deployments`, one row per deployment updated as it
moves through its states, and `deployment_events`, one row per state change), and the reads
the job, fleet, root and front pages make of it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session
from sqlalchemy.sql import Subquery

from shared.contracts.deploy import DELIVERED_STATES, TERMINAL_STATES, DeploymentRecord
from shared.stores.sql.engine import Database
from shared.stores.sql.tables import DeploymentEventRow, DeploymentRow, utc


@dataclass(frozen=True)
class StateChange:
    """What `DeploymentStore.record` changed: the state left (None: a new deployment) and
    entered, and how long the deployment had waited for review when this change ends that
    wait (None otherwise)."""

    previous: str | None
    state: str
    review_wait_seconds: float | None = None


@dataclass(frozen=True)
class Waiting:
    """Deployments of one root waiting in one state (`DeploymentStore.waiting`)."""

    repo: str
    root: str
    state: str  # queued or awaiting_review
    count: int
    oldest: datetime  # when the longest-waiting of them entered the state


@dataclass(frozen=True)
class AwaitingReview:
    repo: str
    root: str
    deployment_id: str
    since: datetime  # when it reached the review gate


@dataclass(frozen=True)
class FleetRoot:
    """One root on the fleet page (`DeploymentStore.fleet`)."""

    root: str
    latest: DeploymentRow
    delivered: DeploymentRow | None
    queued: int


@dataclass(frozen=True)
class RootActivity:
    """One root on the front page (`DeploymentStore.roots`)."""

    repo: str
    root: str
    deployments: int
    last: datetime  # its newest deployment's start
    newest: DeploymentRow
    awaiting_review: int


class DeploymentStore:
    """Recording deployments' states, and reading deployments back."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def record(self, record: DeploymentRecord) -> StateChange | None:
        """Insert or update the deployment's row, and add an event when its state changed;
        that change (None: the state stayed, or a late "queued" was ignored).

        Idempotent (activities may retry): the same state recorded again adds no event and
        keeps the first times it was reached, so a change is reported once."""
        at = utc(record.at)
        with self._db.writing_session() as session:
            row = session.get(DeploymentRow, record.deployment_id, with_for_update=True)
            if row is None:
                row = DeploymentRow(deployment_id=record.deployment_id, created_at=at)
                session.add(row)
                previous: str | None = None
            elif record.state == "queued" and row.state != "queued":
                # a late "queued" (an attempt that outlived its timeout) never moves a
                # deployment that has started back into the queue
                return None
            else:
                previous = row.state
            _update(row, record, at)
            if record.state == previous:
                session.commit()
                return None
            waited = None
            if previous == "awaiting_review":
                since = session.scalar(
                    select(func.max(DeploymentEventRow.at)).where(
                        DeploymentEventRow.deployment_id == record.deployment_id,
                        DeploymentEventRow.state == "awaiting_review",
                    )
                )
                if since is not None:
                    waited = max(0.0, (at - utc(since)).total_seconds())
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
            return StateChange(previous=previous, state=record.state, review_wait_seconds=waited)

    def get(self, deployment_id: str) -> DeploymentRow | None:
        with self._db.session() as session:
            return session.get(DeploymentRow, deployment_id)

    def last_change(self, deployment_id: str) -> StateChange | None:
        """The deployment's newest recorded state change (for whoever must act on it once
        more: an activity retried after `record` committed)."""
        with self._db.session() as session:
            states = session.scalars(
                select(DeploymentEventRow.state)
                .where(DeploymentEventRow.deployment_id == deployment_id)
                .order_by(DeploymentEventRow.at.desc(), DeploymentEventRow.id.desc())
                .limit(2)
            ).all()
        if not states:
            return None
        return StateChange(previous=states[1] if len(states) > 1 else None, state=states[0])

    def many(self, deployment_ids: list[str]) -> dict[str, DeploymentRow]:
        """The deployments of these ids that are recorded, by id (one query)."""
        if not deployment_ids:
            return {}
        with self._db.session() as session:
            query = select(DeploymentRow).where(
                DeploymentRow.deployment_id.in_(sorted(set(deployment_ids)))
            )
            return {row.deployment_id: row for row in session.scalars(query)}

    def events(self, deployment_id: str) -> list[DeploymentEventRow]:
        """The deployment's state changes, oldest first."""
        with self._db.session() as session:
            query = (
                select(DeploymentEventRow)
                .where(DeploymentEventRow.deployment_id == deployment_id)
                .order_by(DeploymentEventRow.at, DeploymentEventRow.id)
            )
            return list(session.scalars(query))

    def in_repo(
        self, repo: str, root: str | None = None, *, limit: int = 50, offset: int = 0
    ) -> list[DeploymentRow]:
        """A repository's deployments (of one root), newest first."""
        return self._newest_first(repo, root, limit, offset)

    def of_root(
        self, root: str, *, limit: int = 50, offset: int = 0, repo: str | None = None
    ) -> list[DeploymentRow]:
        """Deployments of a root in any repository (or in `repo`), newest first."""
        return self._newest_first(repo, root, limit, offset)

    def of_revision(self, repo: str, revision: str, *, limit: int = 2000) -> list[DeploymentRow]:
        """Every deployment of `revision` in `repo` (a merged revision's page), by root, the
        newest of a root first."""
        with self._db.session() as session:
            # Read backwards along ix_deployments_repo_revision_root (no sort of the rows);
            # the roots are put back in ascending order here.
            query = (
                select(DeploymentRow)
                .where(DeploymentRow.repo == repo, DeploymentRow.revision == revision)
                .order_by(
                    DeploymentRow.root.desc(),
                    DeploymentRow.created_at.desc(),
                    DeploymentRow.deployment_id.desc(),
                )
                .limit(limit)
            )
            rows = list(session.scalars(query))
        rows.sort(key=lambda row: row.root)  # stable: a root's newest stays first
        return rows

    def waiting(self) -> list[Waiting]:
        """Per repository and root: deployments queued, and deployments awaiting review, with
        the oldest of each (read along the `state` index; the metrics of every root). A wait
        starts when the deployment entered its state: a record of the same state again (a
        review click that decided nothing) does not restart it."""
        d = DeploymentRow
        entered = _entered_review()
        with self._db.session() as session:
            queued = session.execute(
                select(d.repo, d.root, func.count(), func.min(d.created_at))
                .where(d.state == "queued")
                .group_by(d.repo, d.root)
            ).all()
            reviews = session.execute(
                select(d.repo, d.root, func.count(), func.min(entered.c.at))
                .join(entered, entered.c.deployment_id == d.deployment_id)
                .where(d.state == "awaiting_review")
                .group_by(d.repo, d.root)
            ).all()
        out = [Waiting(r, root, "queued", int(n), utc(at)) for r, root, n, at in queued]
        out += [Waiting(r, root, "awaiting_review", int(n), utc(at)) for r, root, n, at in reviews]
        return sorted(out, key=lambda w: (w.repo, w.root, w.state))

    def awaiting_review(self, *, limit: int = 5000) -> list[AwaitingReview]:
        """Every deployment at the review gate, the longest-waiting first (reminders), since
        it reached the gate."""
        d = DeploymentRow
        entered = _entered_review()
        with self._db.session() as session:
            query = (
                select(d.repo, d.root, d.deployment_id, entered.c.at)
                .join(entered, entered.c.deployment_id == d.deployment_id)
                .where(d.state == "awaiting_review")
                .order_by(entered.c.at, d.deployment_id)
                .limit(limit)
            )
            return [
                AwaitingReview(repo, root, deployment_id, utc(since))
                for repo, root, deployment_id, since in session.execute(query)
            ]

    def count(self, repo: str | None, root: str | None = None) -> int:
        """How many deployments `in_repo` (or `of_root`) would page through."""
        with self._db.session() as session:
            query = _deployment_filter(select(func.count()).select_from(DeploymentRow), repo, root)
            return int(session.scalar(query) or 0)

    def revision_published(self, repo: str, root: str, revision: str) -> bool:
        """Whether some deployment published `revision` on the root: only such a revision
        is offered as a rollback target (it is known to have run there)."""
        with self._db.session() as session:
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

    def live(self, root: str, repo: str) -> DeploymentRow | None:
        """The deployment whose render the root runs: the one published last (whatever its
        verification said)."""
        with self._db.session() as session:
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
        with self._db.session() as session:
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

    def roots(self, *, limit: int = 500) -> list[RootActivity]:
        """Every root with a deployment, the most recently active first, with its newest
        deployment and how many await review: the gateway's front page. Two queries."""
        with self._db.session() as session:
            last = func.max(DeploymentRow.created_at)
            awaiting = func.sum(case((DeploymentRow.state == "awaiting_review", 1), else_=0))
            query = (
                select(DeploymentRow.repo, DeploymentRow.root, func.count(), last, awaiting)
                .group_by(DeploymentRow.repo, DeploymentRow.root)
                .order_by(last.desc(), DeploymentRow.repo, DeploymentRow.root)
                .limit(limit)
            )
            groups = list(session.execute(query))
            rank = (
                func.row_number()
                .over(
                    partition_by=(DeploymentRow.repo, DeploymentRow.root),
                    order_by=(DeploymentRow.created_at.desc(), DeploymentRow.deployment_id.desc()),
                )
                .label("rank")
            )
            ranked = select(DeploymentRow.deployment_id, rank).subquery()
            newest = {
                (row.repo, row.root): row
                for row in session.scalars(
                    select(DeploymentRow)
                    .join(ranked, DeploymentRow.deployment_id == ranked.c.deployment_id)
                    .where(ranked.c.rank == 1)
                )
            }
        return [
            RootActivity(repo, root, int(count), at, newest[(repo, root)], int(waiting or 0))
            for repo, root, count, at, waiting in groups
            if (repo, root) in newest
        ]

    def repositories(self, root: str | None = None) -> list[str]:
        """Every repository with a recorded deployment (of `root`, when given), by name."""
        with self._db.session() as session:
            query = select(DeploymentRow.repo).distinct().order_by(DeploymentRow.repo)
            if root is not None:
                query = query.where(DeploymentRow.root == root)
            return list(session.scalars(query))

    def fleet(self, repo: str) -> list[FleetRoot]:
        """Every root of `repo` with a recorded deployment: its newest deployment, its newest
        one that reached the cluster (published, verifying, verified, unhealthy) and how many
        are queued; by root. Three indexed queries, however long the history."""
        with self._db.session() as session:
            latest = _newest_per_root(session, repo, None)
            delivered = _newest_per_root(session, repo, DELIVERED_STATES)
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

    def _newest_first(
        self, repo: str | None, root: str | None, limit: int, offset: int
    ) -> list[DeploymentRow]:
        with self._db.session() as session:
            query = _deployment_filter(select(DeploymentRow), repo, root)
            query = query.order_by(
                DeploymentRow.created_at.desc(), DeploymentRow.deployment_id.desc()
            )
            return list(session.scalars(query.limit(limit).offset(offset)))


def _update(row: DeploymentRow, record: DeploymentRecord, at: datetime) -> None:
    """The row as `record` says at `at`; the first times a state was reached are kept."""
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
    if record.hotfix is not None:  # rows written without it keep what an earlier one said
        row.hotfix_pr = record.hotfix.pr
        row.hotfix_head = record.hotfix.head
    if row.started_at is None and record.state != "queued":
        row.started_at = at
    if row.approved_at is None and (record.state == "approved" or record.approved_by):
        row.approved_at = at
    if row.finished_at is None and record.state in TERMINAL_STATES:
        row.finished_at = at


def _newest_per_root(
    session: Session, repo: str, states: frozenset[str] | None
) -> dict[str, DeploymentRow]:
    """The newest deployment of each root of `repo` (in one of `states`, when given)."""
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


def _deployment_filter(query: Any, repo: str | None, root: str | None) -> Any:
    if repo is not None:
        query = query.where(DeploymentRow.repo == repo)
    if root is not None:
        query = query.where(DeploymentRow.root == root)
    return query


def _entered_review() -> Subquery:
    """deployment_id → when it last entered awaiting_review (its event)."""
    e = DeploymentEventRow
    return (
        select(e.deployment_id, func.max(e.at).label("at"))
        .where(e.state == "awaiting_review")
        .group_by(e.deployment_id)
        .subquery()
    )
