"""`Database`: the one SQLAlchemy engine a process keeps on rollwright's SQL database, and the
sessions and write transactions the stores of shared/stores/sql run on it.

SQLAlchemy 2 with SQLite by default (`sqlite:///.rollwright/rollwright.db`) and PostgreSQL in
compose. Opening a `Database` migrates it to the newest schema (shared/stores/schema.py), so the
gateway and every worker migrate at start.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

from shared.stores import schema as dbschema


class Database:
    """Thread-safe access to the database for the stores built over it. Create with a
    SQLAlchemy URL; whoever creates it closes it."""

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

    def session(self) -> Session:
        """A new ORM session (a context manager); for reads, and writes that need no turn."""
        return self._sessions()

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """One write transaction, committed on success, rolled back on error."""
        with self._write_turn, self.engine.begin() as connection:
            yield connection

    @contextmanager
    def writing_session(self) -> Iterator[Session]:
        """An ORM session holding this process's write turn; the caller commits (closing it
        uncommitted rolls back)."""
        with self._write_turn, self._sessions() as session:
            yield session


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets the gateway read while the worker writes.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()
