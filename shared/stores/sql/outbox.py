"""`OutboxStore`: the gateway's transactional outbox (`gateway_outbox`), the workflow starts and
signals it has accepted (answered 202) but may not have performed yet; gateway/outbox.py drains
it. Rows are added with their delivery (`DeliveryStore.claim`, shared/stores/sql/deliveries.py).

Safe with several gateways on one database (SQLite or PostgreSQL): a row is taken only by an
UPDATE whose WHERE re-checks that it is pending, unleased (or its lease expired) and the oldest
pending row of its repository. PostgreSQL re-evaluates that guard on the latest row version when
two UPDATEs race, and SQLite runs one writer at a time, so exactly one drainer wins. Later rows
of a repository are only taken by the drainer that holds its oldest pending row, which keeps
each repository's deliveries in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Row, bindparam, case, delete, exists, func, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from shared.contracts.deploy import AuditRecord
from shared.stores.sql.audit import audit_values
from shared.stores.sql.engine import Database
from shared.stores.sql.tables import AuditRow, OutboxRow, delivery_table, outbox_table, utc

_outbox = outbox_table
_deliveries = delivery_table
# the same table again, for "an earlier pending row of the repository"
_earlier = outbox_table.alias("earlier")


@dataclass(frozen=True)
class OutboxEntry:
    """What a claimed delivery stores in the outbox with it (see `DeliveryClaim`)."""

    repo: str
    kind: str
    target: str
    payload: str

    def row(self, delivery_id: str, now: datetime) -> dict[str, Any]:
        """The pending outbox row of this entry, accepted with `delivery_id` at `now`."""
        return {
            "delivery_id": delivery_id,
            "repo": self.repo[:255],
            "kind": self.kind[:32],
            "target": self.target[:1024],
            "payload": self.payload,
            "state": "pending",
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
            "outcome": "",
            "last_error": "",
        }


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
    infrastructure error, try again at `retry_at`; `failed`: it can never be performed.
    `audit`: an audit event to record with a done row (a click nobody was there to judge)."""

    id: int
    state: Literal["done", "retry", "failed"]
    outcome: str = ""
    error: str = ""
    retry_at: datetime | None = None
    audit: AuditRecord | None = None


@dataclass(frozen=True)
class OutboxStats:
    depth: int  # pending rows
    oldest_pending_at: datetime | None
    failed: int

    def oldest_pending_seconds(self, now: datetime | None = None) -> float | None:
        if self.oldest_pending_at is None:
            return None
        return max(0.0, ((now or datetime.now(UTC)) - self.oldest_pending_at).total_seconds())


@dataclass(frozen=True)
class _Lease:
    """A lease being taken: by whom, until when, and which rows are free to take."""

    owner: str
    until: datetime
    free: ColumnElement[bool]


class OutboxStore:
    """Leasing, finishing and pruning outbox rows."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def claim(
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
        taking = _Lease(
            owner, now + lease, or_(_outbox.c.lease_until.is_(None), _outbox.c.lease_until < now)
        )
        candidates = self._due_heads(taking, now, repos)
        if not candidates:
            return []
        claimed: list[int] = []
        with self._db.writing() as connection:
            for head, repo in candidates:
                claimed.extend(_lease_run(connection, taking, head, repo, per_repo))
            if not claimed:
                return []
            rows = connection.execute(
                select(_outbox).where(_outbox.c.id.in_(claimed)).order_by(_outbox.c.id)
            ).all()
        return [_claim_of(row) for row in rows]

    def _due_heads(self, taking: _Lease, now: datetime, repos: int) -> list[tuple[int, str]]:
        """(id, repo) of the oldest pending row of up to `repos` repositories, where that row
        is due and free; read outside the write transaction, re-checked when leased."""
        heads = (
            select(_outbox.c.repo, func.min(_outbox.c.id).label("head"))
            .where(_outbox.c.state == "pending")
            .group_by(_outbox.c.repo)
            .subquery()
        )
        due = (
            select(_outbox.c.id, _outbox.c.repo)
            .join(heads, _outbox.c.id == heads.c.head)
            .where(taking.free, _outbox.c.next_attempt_at <= now)
            .order_by(_outbox.c.id)
            .limit(repos)
        )
        with self._db.engine.connect() as connection:
            return [(int(row.id), str(row.repo)) for row in connection.execute(due)]

    def renew_leases(self, owner: str, ids: Sequence[int], lease: timedelta) -> int:
        """Extend this owner's lease on still-pending rows; how many it still holds."""
        if not ids:
            return 0
        with self._db.writing() as connection:
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

    def finish(
        self,
        owner: str,
        results: Sequence[OutboxResult],
        release: Sequence[int] = (),
        *,
        now: datetime | None = None,
    ) -> None:
        """Write what became of claimed rows (one transaction for the whole batch), copy the
        outcome onto their deliveries, record their audit events, and give back the leases of
        `release` (claimed rows that were not attempted). Rows whose lease this owner lost are
        left alone, their audit events too (whoever holds them now performs them)."""
        now = now or datetime.now(UTC)
        finished = [r for r in results if r.state in ("done", "failed")]
        retries = [
            {"row_id": r.id, "error": r.error, "retry_at": r.retry_at or now}
            for r in results
            if r.state == "retry"
        ]
        # Few statements however large the batch: in the gateway every statement's return
        # waits for the GIL behind the event loop, so their number is what costs.
        with self._db.writing() as connection:
            if finished:
                marked = _mark_finished(connection, owner, finished, now)
                _copy_outcomes(connection, [r.id for r in finished])
                audits = [audit_values(r.audit) for r in finished if r.audit and r.id in marked]
                if audits:
                    connection.execute(insert(AuditRow), audits)
            if retries:
                _schedule_retries(connection, owner, retries)
            if release:
                connection.execute(
                    update(_outbox)
                    .where(_outbox.c.id.in_(list(release)), _outbox.c.lease_owner == owner)
                    .values(lease_owner=None, lease_until=None)
                )

    def release(self, owner: str) -> int:
        """Give back every lease this owner holds (a gateway shutting down)."""
        with self._db.writing() as connection:
            result = connection.execute(
                update(_outbox)
                .where(_outbox.c.lease_owner == owner, _outbox.c.state == "pending")
                .values(lease_owner=None, lease_until=None)
            )
            return int(result.rowcount)

    def stats(self) -> OutboxStats:
        with self._db.engine.connect() as connection:
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
            oldest_pending_at=utc(oldest) if oldest is not None else None,
            failed=int(failed or 0),
        )

    def rows(self, delivery_id: str | None = None) -> list[OutboxRow]:
        """Outbox rows in `id` order (all, or one delivery's): for tests and inspection."""
        with self._db.session() as session:
            query = select(OutboxRow).order_by(OutboxRow.id)
            if delivery_id is not None:
                query = query.where(OutboxRow.delivery_id == delivery_id)
            return list(session.scalars(query))

    def previous_dispatch(self, repo: str, before_id: int) -> str | None:
        """The workflow id of the repository's last dispatch accepted before outbox row
        `before_id` (delivery order), whatever became of it; None when there is none left."""
        with self._db.session() as session:
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

    def prune(self, older_than: timedelta) -> int:
        """Delete finished rows (done or failed) older than `older_than`; the delivery rows
        keep their outcome."""
        cutoff = datetime.now(UTC) - older_than
        with self._db.writing() as connection:
            result = connection.execute(
                delete(_outbox).where(
                    _outbox.c.state.in_(["done", "failed"]), _outbox.c.done_at < cutoff
                )
            )
            return int(result.rowcount)


def _lease_run(
    connection: Connection, taking: _Lease, head: int, repo: str, per_repo: int
) -> list[int]:
    """Lease the repository's oldest pending row `head` and up to `per_repo - 1` rows after
    it; the ids of the unbroken run from `head` now leased, [] when another drainer won."""
    taken = connection.execute(
        update(_outbox)
        .where(
            _outbox.c.id == head,
            _outbox.c.state == "pending",
            taking.free,
            ~exists().where(
                _earlier.c.repo == repo,
                _earlier.c.state == "pending",
                _earlier.c.id < head,
            ),
        )
        .values(lease_owner=taking.owner, lease_until=taking.until)
    )
    if taken.rowcount != 1:
        return []  # another drainer was faster
    followers = list(
        connection.scalars(
            select(_outbox.c.id)
            .where(_outbox.c.repo == repo, _outbox.c.state == "pending", _outbox.c.id > head)
            .order_by(_outbox.c.id)
            .limit(per_repo - 1)
        )
    )
    if followers:
        connection.execute(
            update(_outbox)
            .where(_outbox.c.id.in_(followers), _outbox.c.state == "pending", taking.free)
            .values(lease_owner=taking.owner, lease_until=taking.until)
        )
    mine = set(
        connection.scalars(
            select(_outbox.c.id).where(
                _outbox.c.id.in_([head, *followers]),
                _outbox.c.lease_owner == taking.owner,
                _outbox.c.lease_until == taking.until,
            )
        )
    )
    # Only an unbroken run from the head: a follower still leased by someone else (a drainer
    # whose lease on the head expired) ends it; give back the rest.
    run = [head]
    for follower in followers:
        if follower not in mine:
            break
        run.append(follower)
    rest = mine - set(run)
    if rest:
        connection.execute(
            update(_outbox)
            .where(_outbox.c.id.in_(rest), _outbox.c.lease_owner == taking.owner)
            .values(lease_owner=None, lease_until=None)
        )
    return run


def _claim_of(row: Row[Any]) -> OutboxClaim:
    return OutboxClaim(
        id=int(row.id),
        delivery_id=row.delivery_id,
        repo=row.repo,
        kind=row.kind,
        target=row.target,
        payload=row.payload,
        attempts=int(row.attempts),
        created_at=utc(row.created_at),
    )


def _mark_finished(
    connection: Connection, owner: str, finished: Sequence[OutboxResult], now: datetime
) -> set[int]:
    """Done and failed rows this owner still holds, in one statement; their ids."""
    outcomes = {
        r.id: (r.outcome if r.state == "done" else f"failed: {r.error}")[:255] for r in finished
    }
    failed = {r.id: r.error for r in finished if r.state == "failed"}
    marked = connection.scalars(
        update(_outbox)
        .where(
            _outbox.c.id.in_([r.id for r in finished]),
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
        .returning(_outbox.c.id)
    )
    return set(marked)


def _copy_outcomes(connection: Connection, ids: Sequence[int]) -> None:
    """The outcome of each of these rows that is no longer pending, onto its delivery."""
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


def _schedule_retries(connection: Connection, owner: str, retries: list[dict[str, Any]]) -> None:
    """One more attempt each, at its `retry_at`, with the error kept (an executemany)."""
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
