"""Fixtures of the notification tests: a SQLite database, a receiving HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.devstack.sink import NotificationSink
from shared.stores.sql.engine import Database


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    yield db
    db.close()


@pytest.fixture
def sink() -> Iterator[NotificationSink]:
    with NotificationSink(secret="sink-secret") as server:
        yield server
