"""Fixtures of the stores' tests: an empty database for the migration tests (`sql_url`, a
migrated one, is in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import database_url


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all, on SQLite and on PostgreSQL."""
    yield from database_url(request, tmp_path, migrated=False)
