"""Shared fixtures: real git repositories and the echo chart."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import helm_python
import pytest
from hypothesis import settings

from shared.engine import charts
from shared.engine.secrets import sops
from tests.support.age import AgeKey, generate_key
from tests.support.chart_repo import ChartRepo
from tests.support.databases import PostgresDatabases
from tests.support.gitrepo import init_repo
from tests.support.oci_registry import OciRegistry
from tests.support.paths import ECHO_CHART
from tests.support.postgres import postgres_server
from tests.support.seaweed import S3Server, seaweed_server
from tests.support.secrets import KEY_VARIABLES

# CI runs the property tests on a fixed sequence of examples, so a red CI always reproduces;
# local runs stay random and keep finding new cases.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def repo_factory(tmp_path: Path) -> Callable[[str], Path]:
    def make(name: str = "fleet") -> Path:
        return init_repo(tmp_path / name)

    return make


@pytest.fixture
def echo_chart() -> Path:
    return ECHO_CHART


# --- remote charts: a Helm HTTP repository and an OCI registry on 127.0.0.1 -----------------


@pytest.fixture(autouse=True)
def _isolated_chart_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets its own remote-chart cache, never the user's ~/.cache/rollwright."""
    cache = tmp_path_factory.mktemp("rollwright-cache")
    monkeypatch.setenv(charts.CACHE_ENV, str(cache))
    charts.forget_resolutions()
    return cache


@pytest.fixture
def chart_cache(_isolated_chart_cache: Path) -> Path:
    """The directory `ROLLWRIGHT_CACHE_DIR` points at for this test."""
    return _isolated_chart_cache


@pytest.fixture(scope="session")
def echo_archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The echo chart packaged by Helm at versions 0.1.0 and 0.2.0 (version → archive)."""
    out = tmp_path_factory.mktemp("echo-archives")
    return {
        version: Path(helm_python.package(ECHO_CHART, destination=out, version=version))
        for version in ("0.1.0", "0.2.0")
    }


@pytest.fixture
def chart_repo(tmp_path: Path, echo_archives: dict[str, Path]) -> Iterator[ChartRepo]:
    """A running Helm HTTP chart repository holding echo 0.1.0 and 0.2.0."""
    repo = ChartRepo(tmp_path / "chart-repo")
    for archive in echo_archives.values():
        repo.add_archive(archive)
    repo.index()
    with repo:
        yield repo


@pytest.fixture
def oci_registry(echo_archives: dict[str, Path]) -> Iterator[OciRegistry]:
    """A running OCI registry holding echo 0.1.0 and 0.2.0 at oci://HOST/charts/echo."""
    registry = OciRegistry()
    for archive in echo_archives.values():
        registry.add_chart(archive)
    with registry:
        yield registry


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


def _sql_url(request: pytest.FixtureRequest, tmp_path: Path, *, migrated: bool) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rollwright.db'}"
        return
    databases: PostgresDatabases = request.getfixturevalue("pg_databases")
    url = databases.new(migrated=migrated)
    try:
        yield url
    finally:
        databases.drop(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of this test's own, on SQLite and on PostgreSQL (SQLite files are migrated
    when the first `Database` opens them, PostgreSQL ones are copies of a migrated template)."""
    yield from _sql_url(request, tmp_path, migrated=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all, on SQLite and on PostgreSQL."""
    yield from _sql_url(request, tmp_path, migrated=False)


# --- SOPS: a throwaway age key --------------------------------------------------------------


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
