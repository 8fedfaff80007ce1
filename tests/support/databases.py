"""Fresh databases for SQL tests on one PostgreSQL server per session.

A test gets a database of its own, made with CREATE DATABASE … TEMPLATE from a database
migrated once to the newest revision (a file copy on the server: milliseconds), or an empty
one for the migration tests. Each is dropped when its test ends.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from shared.stores.sql.engine import Database
from tests.support.postgres import PostgresServer

TEMPLATE = "rollwright_template"


class PostgresDatabases:
    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self._admin: Engine = create_engine(
            server.url(), isolation_level="AUTOCOMMIT", poolclass=NullPool
        )
        self._names = itertools.count()
        self._template_ready = False

    def new(self, *, migrated: bool = True) -> str:
        """The URL of a new database: at the newest revision, or empty."""
        name = f"test_{os.getpid()}_{next(self._names)}"
        template = f' TEMPLATE "{self._template()}"' if migrated else ""
        self._execute(f'CREATE DATABASE "{name}"{template}')
        return self.server.url(name)

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        # FORCE: a test that failed may have left connections open
        self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        self._admin.dispose()

    def _template(self) -> str:
        if not self._template_ready:
            self._execute(f'CREATE DATABASE "{TEMPLATE}"')
            Database(self.server.url(TEMPLATE)).close()  # migrates; no connection stays
            self._template_ready = True
        return TEMPLATE

    def _execute(self, statement: str) -> None:
        with self._admin.connect() as connection:
            connection.exec_driver_sql(statement)


def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, *, migrated: bool
) -> Iterator[str]:
    """A database of the test's own, for a fixture parametrized with "sqlite" and
    "postgresql": a SQLite file, or a PostgreSQL database (a copy of the migrated template, or
    an empty one), dropped when the test ends."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rollwright.db'}"
        return
    databases: PostgresDatabases = request.getfixturevalue("pg_databases")
    url = databases.new(migrated=migrated)
    try:
        yield url
    finally:
        databases.drop(url)
