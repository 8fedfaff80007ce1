"""Fixtures of the engine's tests: remote charts, the echo chart packaged by Helm and served
from a Helm HTTP repository and an OCI registry on 127.0.0.1, and the chart cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import helm_python
import pytest

from tests.support.chart_repo import ChartRepo
from tests.support.oci_registry import OciRegistry
from tests.support.paths import ECHO_CHART


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
