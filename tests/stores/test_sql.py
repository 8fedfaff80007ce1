"""The SQL stores on SQLite and on a real PostgreSQL server: Alembic migrations (new databases,
databases made by `create_all` before migrations, concurrent migrators, no drift between the
models and the migrations), the `rollwright db` commands, and deployment history."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from shared.cli.main import main
from shared.contracts.deploy import DeploymentRecord
from shared.devstack.ports import free_port
from shared.stores import schema as dbschema
from shared.stores.sql.deliveries import DeliveryClaim, DeliveryStore
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from shared.stores.sql.jobs import JobStore
from shared.stores.sql.outbox import OutboxEntry, OutboxResult, OutboxStore
from shared.stores.sql.tables import Base, DeliveryRow
from tests.support.paths import REPO_ROOT

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TABLES = {
    "alembic_version",
    "audit_events",
    "deployments",
    "deployment_events",
    "webhook_deliveries",
    "jobs",
    "gateway_outbox",
    "root_locks",
    "notifications",
}

HEAD = "0009"  # the newest migration


def _engine(url: str) -> Engine:
    return create_engine(url, poolclass=NullPool)


def _aware(value: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes (it stores no zone); both store UTC
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def _drift(engine: Engine) -> list[Any]:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))


# --- migrations --------------------------------------------------------------------------------


def test_a_new_database_is_migrated_to_the_newest_revision(empty_sql_url: str) -> None:
    engine = _engine(empty_sql_url)
    assert dbschema.current_revision(engine) is None
    Database(empty_sql_url).close()
    assert dbschema.current_revision(engine) == dbschema.head_revision() == HEAD
    assert set(inspect(engine).get_table_names()) == TABLES
    # a second store finds it at head and changes nothing
    assert dbschema.upgrade(engine) == (HEAD, HEAD)
    engine.dispose()


def test_models_and_migrations_do_not_drift(empty_sql_url: str) -> None:
    """What the migrations build is what the models describe: columns, types, nullability,
    indexes and unique constraints (alembic's autogenerate comparison finds nothing)."""
    Database(empty_sql_url).close()
    engine = _engine(empty_sql_url)
    assert _drift(engine) == []
    engine.dispose()


def test_drift_is_noticed(empty_sql_url: str) -> None:
    """The drift check can fail: a column the models lack, an index the migrations lack."""
    Database(empty_sql_url).close()
    engine = _engine(empty_sql_url)
    with engine.begin() as connection:
        connection.execute(text("ALTER TABLE jobs ADD COLUMN surprise VARCHAR(10)"))
        connection.execute(text("DROP INDEX ix_jobs_deployment_id"))
    kinds = sorted(diff[0] if isinstance(diff, tuple) else "modify" for diff in _drift(engine))
    assert kinds == ["add_index", "remove_column"]
    engine.dispose()


def _legacy_schema(dialect: str, *, outbox: bool) -> list[str]:
    """The DDL `Base.metadata.create_all` ran before migrations existed (rollwright up to the
    outbox, and before it)."""
    ts = "TIMESTAMP WITH TIME ZONE" if dialect == "postgresql" else "DATETIME"
    serial = "BIGSERIAL" if dialect == "postgresql" else "INTEGER"
    statements = [
        f"""CREATE TABLE deployments (
            deployment_id VARCHAR(64) NOT NULL, repo VARCHAR(255) NOT NULL,
            root VARCHAR(512) NOT NULL, revision VARCHAR(64) NOT NULL,
            "trigger" VARCHAR(16) NOT NULL, state VARCHAR(32) NOT NULL,
            requested_by VARCHAR(255), approved_by VARCHAR(255), check_run_id INTEGER,
            render_digest VARCHAR(80), added INTEGER, removed INTEGER, changed INTEGER,
            message TEXT NOT NULL, created_at {ts} NOT NULL, updated_at {ts} NOT NULL,
            PRIMARY KEY (deployment_id))""",
        "CREATE INDEX ix_deployments_repo ON deployments (repo)",
        "CREATE INDEX ix_deployments_root ON deployments (root)",
        "CREATE INDEX ix_deployments_state ON deployments (state)",
        "CREATE INDEX ix_deployments_updated_at ON deployments (updated_at)",
        f"""CREATE TABLE webhook_deliveries (
            delivery_id VARCHAR(64) NOT NULL, event VARCHAR(64) NOT NULL, action VARCHAR(64),
            repo VARCHAR(255), received_at {ts} NOT NULL, outcome VARCHAR(255) NOT NULL,
            PRIMARY KEY (delivery_id))""",
        f"""CREATE TABLE jobs (
            job_id VARCHAR(128) NOT NULL, deployment_id VARCHAR(64) NOT NULL,
            kind VARCHAR(64) NOT NULL, log_key VARCHAR(512) NOT NULL, started_at {ts} NOT NULL,
            finished_at {ts}, state VARCHAR(32) NOT NULL, PRIMARY KEY (job_id))""",
        "CREATE INDEX ix_jobs_deployment_id ON jobs (deployment_id)",
    ]
    if outbox:
        statements += [
            f"""CREATE TABLE gateway_outbox (
                id {serial} NOT NULL, delivery_id VARCHAR(64) NOT NULL,
                repo VARCHAR(255) NOT NULL, kind VARCHAR(32) NOT NULL,
                target VARCHAR(1024) NOT NULL, payload TEXT NOT NULL, state VARCHAR(16) NOT NULL,
                attempts INTEGER NOT NULL, next_attempt_at {ts} NOT NULL,
                lease_owner VARCHAR(128), lease_until {ts}, created_at {ts} NOT NULL,
                done_at {ts}, outcome VARCHAR(255) NOT NULL, last_error TEXT NOT NULL,
                PRIMARY KEY (id), UNIQUE (delivery_id))""",
            "CREATE INDEX ix_gateway_outbox_pending ON gateway_outbox (state, repo, id)",
        ]
    return statements


@pytest.mark.parametrize("outbox", [True, False], ids=["with-outbox", "before-the-outbox"])
def test_a_database_made_by_create_all_is_adopted_and_upgraded(
    empty_sql_url: str, outbox: bool
) -> None:
    engine = _engine(empty_sql_url)
    with engine.begin() as connection:
        for statement in _legacy_schema(engine.dialect.name, outbox=outbox):
            connection.execute(text(statement))
        connection.execute(
            text(
                'INSERT INTO deployments (deployment_id, repo, root, revision, "trigger", '
                "state, approved_by, check_run_id, message, created_at, updated_at) VALUES "
                "('d-old', 'acme/fleet', 'prod/eu', 'abc', 'merge', 'published', 'alice', 7, "
                "'done', :created, :updated)"
            ),
            {"created": T0, "updated": T0 + timedelta(minutes=5)},
        )
        connection.execute(
            text(
                "INSERT INTO webhook_deliveries VALUES ('g-old', 'push', NULL, 'acme/fleet', "
                ":at, 'dispatched')"
            ),
            {"at": T0},
        )
    assert dbschema.current_revision(engine) is None

    database = Database(empty_sql_url)
    deployments, deliveries = DeploymentStore(database), DeliveryStore(database)
    try:
        assert dbschema.current_revision(engine) == HEAD
        assert _drift(engine) == []
        # the old rows are kept, and what can be known of their history is filled in
        row = deployments.get("d-old")
        assert row is not None and (row.state, row.approved_by) == ("published", "alice")
        assert _aware(row.started_at) == T0
        assert _aware(row.finished_at) == T0 + timedelta(minutes=5)
        assert row.approved_at is None  # not known
        events = deployments.events("d-old")
        assert [(e.state, _aware(e.at), e.message) for e in events] == [
            ("published", T0 + timedelta(minutes=5), "done")
        ]
        assert deliveries.claim_one("g-old", "push", None, "acme/fleet") is False
        entry = OutboxEntry(repo="acme/fleet", kind="start_dispatch", target="t", payload="{}")
        assert deliveries.claim_one("g-new", "push", None, "acme/fleet", enqueue=entry)
        claimed = OutboxStore(database).claim("me", lease=timedelta(seconds=30))
        assert [c.delivery_id for c in claimed] == ["g-new"]
    finally:
        database.close()
        engine.dispose()


_MIGRATOR = """
import sys, time
from shared.stores.sql.engine import Database
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
Database(sys.argv[1]).close()
"""


@pytest.mark.slow
def test_concurrent_migrators_migrate_once(empty_sql_url: str) -> None:
    """A gateway and workers starting together on a new database: one migrates, the others
    wait for it (advisory lock on PostgreSQL, BEGIN IMMEDIATE on SQLite), none fails."""
    start = time.time() + 2.5  # after every interpreter has imported SQLAlchemy and alembic
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _MIGRATOR, empty_sql_url, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        for _ in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    engine = _engine(empty_sql_url)
    with engine.connect() as connection:
        versions = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    assert [v[0] for v in versions] == [HEAD]
    assert _drift(engine) == []
    engine.dispose()


def test_db_commands(empty_sql_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "current", "--database", empty_sql_url]) == 0
    assert "revision none" in capsys.readouterr().out
    assert main(["db", "upgrade", "--database", empty_sql_url]) == 0
    assert f"migrated from an empty database to revision {HEAD}" in capsys.readouterr().out
    assert main(["db", "upgrade", "--database", empty_sql_url]) == 0
    assert f"already at revision {HEAD}" in capsys.readouterr().out
    assert main(["db", "current", "--database", empty_sql_url]) == 0
    assert f"revision {HEAD} (the newest)" in capsys.readouterr().out


def test_db_commands_say_what_failed(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql+psycopg://rollwright:hunter2@127.0.0.1:{free_port()}/rollwright"
    assert main(["db", "upgrade", "--database", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: migrating the database postgresql+psycopg://rollwright:***@")
    assert "hunter2" not in err


def test_db_commands_default_to_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROLLWRIGHT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ROLLWRIGHT_DATABASE_URL", raising=False)
    assert main(["db", "upgrade"]) == 0
    assert str(tmp_path / "rollwright.db") in capsys.readouterr().out
    assert dbschema.current_revision(_engine(f"sqlite:///{tmp_path / 'rollwright.db'}")) == HEAD


# --- deployment history ------------------------------------------------------------------------


def _record(state: str, minutes: int, **fields: Any) -> DeploymentRecord:
    values: dict[str, Any] = {
        "deployment_id": "d-1",
        "repo": "acme/fleet",
        "root": "prod/eu",
        "revision": "a" * 40,
        "trigger": "merge",
        "state": state,
        "at": T0 + timedelta(minutes=minutes),
    }
    values.update(fields)
    return DeploymentRecord(**values)


def test_each_state_change_is_an_event_and_sets_the_times(sql_url: str) -> None:
    database = Database(sql_url)
    store = DeploymentStore(database)
    big_run = 2**40 + 5  # GitHub's check run ids are past 32 bits
    try:
        store.record(_record("queued", 0, requested_by="alice"))
        store.record(_record("queued", 0, requested_by="alice"))  # a retry
        row = store.get("d-1")
        assert row is not None and row.started_at is None and row.finished_at is None
        store.record(_record("rendering", 1))
        store.record(
            _record("awaiting_review", 2, check_run_id=big_run, added=3, removed=1, changed=2)
        )
        store.record(
            _record("approved", 5, check_run_id=big_run, approved_by="bob", message="lgtm")
        )
        store.record(_record("publishing", 6, check_run_id=big_run))
        store.record(_record("published", 7, check_run_id=big_run + 1))
        store.record(_record("published", 9, check_run_id=big_run + 1))  # a retry
        events = store.events("d-1")
        assert [(e.state, _aware(e.at)) for e in events] == [
            ("queued", T0),
            ("rendering", T0 + timedelta(minutes=1)),
            ("awaiting_review", T0 + timedelta(minutes=2)),
            ("approved", T0 + timedelta(minutes=5)),
            ("publishing", T0 + timedelta(minutes=6)),
            ("published", T0 + timedelta(minutes=7)),
        ]
        assert [e.check_run_id for e in events] == [None, None, *[big_run] * 3, big_run + 1]
        assert events[3].message == "lgtm"
        row = store.get("d-1")
        assert row is not None
        assert _aware(row.created_at) == T0
        assert _aware(row.started_at) == T0 + timedelta(minutes=1)
        assert _aware(row.approved_at) == T0 + timedelta(minutes=5)
        assert _aware(row.finished_at) == T0 + timedelta(minutes=7)  # not the retry's
        assert _aware(row.updated_at) == T0 + timedelta(minutes=9)
        assert (row.check_run_id, row.added, row.removed, row.changed) == (
            big_run + 1,
            None,
            None,
            None,
        )
        assert store.events("d-unknown") == []
    finally:
        database.close()


def test_a_late_queued_record_does_not_move_a_deployment_back(sql_url: str) -> None:
    database = Database(sql_url)
    store = DeploymentStore(database)
    try:
        store.record(_record("queued", 0, trigger="manual", requested_by="ops"))
        store.record(_record("rendering", 1, trigger="manual", requested_by="ops"))
        store.record(_record("queued", 2, trigger="manual", requested_by="ops"))
        row = store.get("d-1")
        assert row is not None and row.state == "rendering"
        assert _aware(row.updated_at) == T0 + timedelta(minutes=1)
        assert [e.state for e in store.events("d-1")] == ["queued", "rendering"]
    finally:
        database.close()


def test_rejected_deployments_finish_without_approval(sql_url: str) -> None:
    database = Database(sql_url)
    store = DeploymentStore(database)
    try:
        store.record(_record("rendering", 0))
        store.record(_record("rejected", 3, approved_by=None, message="no"))
        row = store.get("d-1")
        assert row is not None
        assert row.approved_at is None
        assert _aware(row.started_at) == T0 and _aware(row.finished_at) == T0 + timedelta(minutes=3)
        assert [e.state for e in store.events("d-1")] == ["rendering", "rejected"]
    finally:
        database.close()


def test_listing_counting_and_paging(sql_url: str) -> None:
    database = Database(sql_url)
    store = DeploymentStore(database)
    try:
        layout = [
            ("acme/fleet", "prod/eu"),
            ("acme/fleet", "prod/us"),
            ("acme/other", "prod/eu"),
        ]
        for n in range(12):
            repo, root = layout[n % 3]
            store.record(_record("published", n, deployment_id=f"d-{n:02d}", repo=repo, root=root))
        newest_first = [f"d-{n:02d}" for n in range(11, -1, -1)]

        def ids(rows: list[Any]) -> list[str]:
            return [r.deployment_id for r in rows]

        fleet = [d for d in newest_first if int(d[2:]) % 3 in (0, 1)]
        assert ids(store.in_repo("acme/fleet", limit=100)) == fleet
        assert ids(store.in_repo("acme/fleet", limit=3, offset=2)) == fleet[2:5]
        assert store.count("acme/fleet") == 8
        eu_fleet = [d for d in newest_first if int(d[2:]) % 3 == 0]
        assert ids(store.in_repo("acme/fleet", "prod/eu")) == eu_fleet
        assert store.count("acme/fleet", "prod/eu") == 4
        # a root in every repository, or in one
        eu = [d for d in newest_first if int(d[2:]) % 3 in (0, 2)]
        assert ids(store.of_root("prod/eu")) == eu
        assert ids(store.of_root("prod/eu", limit=2, offset=1)) == eu[1:3]
        assert ids(store.of_root("prod/eu", repo="acme/other")) == [
            d for d in newest_first if int(d[2:]) % 3 == 2
        ]
        assert store.count(None, "prod/eu") == 8
        assert store.count("acme/none") == 0
        assert store.in_repo("acme/none") == [] and store.of_root("nope") == []
    finally:
        database.close()


def _plan(database: Database, read: Any) -> str:
    """The database's plan for the SELECT `read()` runs (the store's own statement and
    parameters, caught on their way to the driver)."""
    seen: list[tuple[str, Any]] = []

    def catch(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    event.listen(database.engine, "before_cursor_execute", catch)
    try:
        read()
    finally:
        event.remove(database.engine, "before_cursor_execute", catch)
    statement, parameters = next(s for s in seen if "ORDER BY" in s[0])
    with database.engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            # a test table is tiny: make the planner show what it does with a real one
            connection.exec_driver_sql("SET enable_seqscan = off")
            rows = connection.exec_driver_sql(f"EXPLAIN {statement}", parameters)
            return "\n".join(r[0] for r in rows)
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        return "\n".join(r[-1] for r in rows)


ROOTS = ("prod/eu", "prod/us", "staging")


def _forty(store: DeploymentStore) -> None:
    """Deployment n: two repositories in turn, three roots in turn, two revisions in pairs."""
    for n in range(40):
        store.record(
            _record(
                "published",
                n,
                deployment_id=f"d-{n:02d}",
                repo=("acme/fleet", "acme/other")[n % 2],
                root=ROOTS[n % 3],
                revision=("a" * 40, "b" * 40)[n % 4 // 2],
            )
        )


def test_a_roots_page_is_read_in_index_order(sql_url: str) -> None:
    """`/roots` filters on root (and repo) and orders newest first: composite indexes let
    the database read a page in index order, with no sort of the root's whole history."""
    database = Database(sql_url)
    store = DeploymentStore(database)
    try:
        _forty(store)
        every_repo = _plan(database, lambda: store.of_root("prod/eu", limit=25))
        one_repo = _plan(database, lambda: store.of_root("prod/eu", limit=25, repo="acme/fleet"))
        assert "ix_deployments_root_created_at" in every_repo, every_repo
        assert "ix_deployments_repo_root_created_at" in one_repo, one_repo
        for plan in (every_repo, one_repo):
            assert "TEMP B-TREE" not in plan.upper() and "Sort" not in plan, plan
    finally:
        database.close()


def test_a_revisions_page_is_read_in_index_order(sql_url: str) -> None:
    """The revision page filters on repository and revision and orders by root, the newest of
    a root first: an index reads it in order, and the roots come back ascending."""
    database = Database(sql_url)
    store = DeploymentStore(database)
    try:
        _forty(store)
        plan = _plan(database, lambda: store.of_revision("acme/fleet", "a" * 40))
        assert "ix_deployments_repo_revision_root" in plan, plan
        assert "TEMP B-TREE" not in plan.upper() and "Sort" not in plan, plan
        rows = store.of_revision("acme/fleet", "a" * 40)
        expected = sorted((ROOTS[n % 3], -n) for n in range(40) if n % 2 == 0 and n % 4 // 2 == 0)
        assert [(r.root, -int(r.deployment_id[2:])) for r in rows] == expected
    finally:
        database.close()


# --- deliveries, the outbox's bookkeeping and jobs on both databases ------------------------------


def test_claiming_a_batch_of_deliveries(sql_url: str) -> None:
    """INSERT … ON CONFLICT DO NOTHING RETURNING differs per database: a batch records the new
    deliveries, not the ones seen before or repeated, and enqueues only what it recorded, in
    the batch's order."""
    database = Database(sql_url)
    deliveries, outbox = DeliveryStore(database), OutboxStore(database)
    try:

        def claim(delivery: str, repo: str | None = "acme/fleet") -> DeliveryClaim:
            entry = OutboxEntry(repo="acme/fleet", kind="k", target=delivery, payload="{}")
            return DeliveryClaim(delivery, "push", None, repo, "accepted", entry)

        assert deliveries.claim_one("seen", "push", None, "acme/fleet") is True
        batch = [claim("b"), claim("seen"), claim("a"), claim("b"), claim("c", repo=None)]
        assert deliveries.claim(batch) == [True, False, True, False, True]
        assert deliveries.claim([]) == []
        assert [(r.delivery_id, r.target) for r in outbox.rows()] == [
            ("b", "b"),
            ("a", "a"),
            ("c", "c"),
        ]
        deliveries.set_outcome("a", "x" * 300)  # cut to the column's width
        with database.session() as session:
            outcome = session.get(DeliveryRow, "a")
            assert outcome is not None and outcome.outcome == "x" * 255
        deliveries.forget("b")
        assert [r.delivery_id for r in outbox.rows()] == ["a", "c"]
        assert deliveries.claim([claim("b")]) == [True]
    finally:
        database.close()


def test_outbox_leases_and_pruning(sql_url: str) -> None:
    database = Database(sql_url)
    deliveries, outbox = DeliveryStore(database), OutboxStore(database)
    try:
        for n in range(3):
            entry = OutboxEntry(repo=f"acme/r{n}", kind="k", target="t", payload="{}")
            assert deliveries.claim_one(f"d{n}", "push", None, f"acme/r{n}", enqueue=entry)
        held = outbox.claim("a", lease=timedelta(seconds=30), repos=2)
        assert len(held) == 2
        assert outbox.renew_leases("a", [c.id for c in held], timedelta(seconds=60)) == 2
        assert outbox.renew_leases("b", [c.id for c in held], timedelta(seconds=60)) == 0
        assert outbox.release("a") == 2
        taken = outbox.claim("b", lease=timedelta(seconds=30), repos=5)
        assert len(taken) == 3
        outbox.finish("b", [OutboxResult(c.id, "done", outcome="ok") for c in taken])
        stats = outbox.stats()
        assert (stats.depth, stats.oldest_pending_at, stats.failed) == (0, None, 0)
        assert outbox.prune(timedelta(hours=1)) == 0  # too recent
        assert outbox.prune(timedelta(seconds=-1)) == 3
        assert outbox.rows() == []
    finally:
        database.close()


def test_jobs(sql_url: str) -> None:
    database = Database(sql_url)
    store = JobStore(database)
    try:
        store.start("j-2", "d-1", "publish", "jobs/j-2/log")
        store.start("j-1", "d-1", "render", "jobs/j-1/log")
        store.start("j-1", "d-1", "render", "jobs/j-1/log")  # a retry changes nothing
        store.finish("j-2", "published")
        store.finish("j-unknown", "failed")
        jobs = store.of_deployment("d-1")
        assert [(j.job_id, j.state, j.finished_at is not None) for j in jobs] == [
            ("j-2", "published", True),
            ("j-1", "running", False),
        ]
        assert store.of_deployment("d-2") == []
    finally:
        database.close()
