"""The SQL schema's versions: the Alembic migrations in `shared/stores/migrations`, run in code.

`upgrade(engine)` brings a database to the newest revision; `Database`
(shared/stores/sql/engine.py) calls it when it is opened, so the gateway and every worker
migrate at start, and `rollwright db upgrade` does it by hand. No alembic.ini: the
configuration is built here.

Several processes may start at once on one database. On PostgreSQL the migration runs in one
transaction holding a transaction-level advisory lock, so the first migrates and the others
wait, then find the database at head. On SQLite the transaction starts with BEGIN IMMEDIATE,
SQLite's own write lock, for the same effect. A database made by `create_all` before
migrations existed (tables, no `alembic_version`) is adopted by revision 0001.
"""

from __future__ import annotations

import logging
import threading
from functools import cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
# pg_advisory_xact_lock key: "rollwright" as a number, unlikely to meet another app's key
LOCK_KEY = int.from_bytes(b"rollwrit", "big") >> 1

# Alembic's `context` is module-global: one migration at a time per process.
_running = threading.Lock()


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


@cache
def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS}")
    return head


def command_engine(url: str) -> Engine:
    """An engine for one command (`rollwright db`): no connection outlives its use."""
    return create_engine(url, poolclass=NullPool)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at; None for a new (or pre-migration) database."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str | None]:
    """Migrate to `revision` (default: the newest); (revision before, revision after)."""
    target = head_revision() if revision == "head" else revision
    before = current_revision(engine)
    if before == target:
        return before, before  # the common case, without loading any migration script
    with _running, _migration_engine(engine) as migrating, migrating.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY})
        # under the lock: another process may have migrated while we waited
        before = MigrationContext.configure(connection).get_current_revision()
        if before != target:
            log.info(
                "migrating the sql database",
                extra={
                    "database": _safe_url(engine),
                    "from_revision": before,
                    "to_revision": target,
                },
            )
            command.upgrade(alembic_config(connection), revision)
        after = MigrationContext.configure(connection).get_current_revision()
    return before, after


class _migration_engine:
    """The engine to migrate with. SQLite files get one of their own whose transactions
    begin with BEGIN IMMEDIATE (the pysqlite driver would otherwise run DDL outside any
    transaction); other databases use the database's own engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.own: Engine | None = None

    def __enter__(self) -> Engine:
        url = self.engine.url
        if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
            return self.engine
        own = create_engine(url, poolclass=NullPool, connect_args={"timeout": 60})
        event.listen(own, "connect", _sqlite_manual_transactions)
        event.listen(own, "begin", _sqlite_begin_immediate)
        self.own = own
        return own

    def __exit__(self, *exc: object) -> None:
        if self.own is not None:
            self.own.dispose()


def _sqlite_manual_transactions(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we say BEGIN ourselves


def _sqlite_begin_immediate(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _safe_url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)
