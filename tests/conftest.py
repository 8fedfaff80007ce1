"""Fixtures the tests of several folders use: the remote-chart cache every test gets of its
own, S3 and SQL servers for the session, SQL databases, a throwaway age key and a GitHub App
key. A folder's own fixtures are in its conftest.py; plain helpers are in tests/support/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from shared.devstack.credentials import new_app_key
from shared.engine.charts import remote
from shared.engine.secrets import sops
from tests.support.age import AgeKey, generate_key
from tests.support.databases import PostgresDatabases, database_url
from tests.support.postgres import postgres_server
from tests.support.seaweed import S3Server, seaweed_server
from tests.support.secrets import KEY_VARIABLES

# CI runs the property tests on a fixed sequence of examples, so a red CI always reproduces;
# local runs stay random and keep finding new cases.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


# --- remote charts: every test its own cache --------------------------------------------------


@pytest.fixture(autouse=True)
def _isolated_chart_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets its own remote-chart cache, never the user's ~/.cache/rollwright."""
    cache = tmp_path_factory.mktemp("rollwright-cache")
    monkeypatch.setenv(remote.CACHE_ENV, str(cache))
    remote.forget_resolutions()
    return cache


# --- S3: one SeaweedFS server for the session, started by the first test that asks ---------


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A running SeaweedFS S3 gateway on 127.0.0.1; `new_bucket()` makes a fresh bucket."""
    with seaweed_server() as server:
        yield server


# --- SQL: SQLite files, and one PostgreSQL server for the session -----------------------------


@pytest.fixture(scope="session")
def pg_databases() -> Iterator[PostgresDatabases]:
    """Fresh databases on a PostgreSQL server started by the first test that asks."""
    with postgres_server() as server:
        databases = PostgresDatabases(server)
        try:
            yield databases
        finally:
            databases.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of this test's own, on SQLite and on PostgreSQL (SQLite files are migrated
    when the first `Database` opens them, PostgreSQL ones are copies of a migrated template)."""
    yield from database_url(request, tmp_path, migrated=True)


# --- keys: a throwaway age key for SOPS, a GitHub App's private key ---------------------------


@pytest.fixture
def age_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgeKey:
    """A throwaway age key, the only one sops can use; the decryption cache starts cold."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    key = generate_key(tmp_path / "keys")
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key.key_file))
    sops.clear_cache()
    return key


@pytest.fixture(scope="module")
def app_key() -> str:
    """A GitHub App's private key (PEM), one per module."""
    return new_app_key()
