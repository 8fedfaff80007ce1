"""Remote charts: pulling from an HTTP chart repository and an OCI registry on 127.0.0.1, and
the digest-addressed cache that lets later renders work without the network."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import helm_python
import pytest

from shared.engine.charts import remote
from shared.engine.errors import FleetError
from shared.engine.release import ChartSource
from tests.support.chart_repo import ChartRepo
from tests.support.oci_registry import OciRegistry
from tests.support.paths import ECHO_CHART, REPO_ROOT

ORIGIN = "templates/shop/helmfile.yaml.gotmpl"


def http(repo: ChartRepo, version: str | None, ref: str = "stable/echo") -> ChartSource:
    return ChartSource(kind="remote-chart", ref=ref, version=version, repo_url=repo.url)


def oci(registry: OciRegistry, version: str | None, ref: str = "charts/echo") -> ChartSource:
    return ChartSource(kind="remote-chart", ref=f"oci://{registry.host}/{ref}", version=version)


def chart_version(archive: Path) -> str:
    meta = helm_python.Chart.load(str(archive)).metadata
    return str(meta["version"])


def archive_gets(repo: ChartRepo) -> list[str]:
    return [p for p in repo.requests if p.endswith(".tgz")]


# --- references ------------------------------------------------------------------------------


def rc(ref: str, version: str | None = None, repo_url: str | None = "http://h") -> ChartSource:
    return ChartSource("remote-chart", ref=ref, version=version, repo_url=repo_url)


DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("source", "pull_name", "version", "pinned"),
    [
        (rc("r/c", "1.2.3", "http://h/x/"), "c", "1.2.3", True),
        (rc("r/c", "v1.2.3-rc.1+b.7"), "c", "v1.2.3-rc.1+b.7", True),
        (rc("r/c", "^1.2"), "c", "^1.2", False),
        (rc("r/c", "1.2"), "c", "1.2", False),
        (rc("r/c", "1.2.x"), "c", "1.2.x", False),
        (rc("r/c", "latest"), "c", None, False),
        (rc("r/c"), "c", None, False),
        (rc("oci://h:5000/p/c", "1.0.0", None), "oci://h:5000/p/c", "1.0.0", True),
        (rc("oci://h/p/c", ">=1", None), "oci://h/p/c", ">=1", False),
        (rc("oci://h/p/c:2.0.0", None, None), "oci://h/p/c", "2.0.0", True),
        (rc(f"oci://h/p/c@{DIGEST}", None, None), f"oci://h/p/c@{DIGEST}", None, True),
    ],
)
def test_references_are_normalized(
    source: ChartSource, pull_name: str, version: str | None, pinned: bool
) -> None:
    chart = remote.parse_source(source, ORIGIN)
    assert (chart.pull_name, chart.version, chart.pinned) == (pull_name, version, pinned)


def test_repository_url_is_normalized_and_aliases_share_a_key() -> None:
    a = remote.parse_source(
        ChartSource("remote-chart", ref="one/echo", version="1.0.0", repo_url="http://h/c/"),
        ORIGIN,
    )
    b = remote.parse_source(
        ChartSource("remote-chart", ref="two/echo", version="1.0.0", repo_url="http://h/c"),
        ORIGIN,
    )
    assert a.repo_url == "http://h/c"
    assert a.key("1.0.0") == b.key("1.0.0")
    assert a.key("1.0.0") != a.key("1.0.1")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (ChartSource("remote-chart", ref="stable/echo", version="1.0.0"), "needs repoUrl"),
        (
            ChartSource("remote-chart", ref="stable/echo", repo_url="oci://h/charts"),
            "must be an http(s) URL",
        ),
        (ChartSource("remote-chart", ref="oci://host-only"), "expected oci://host/path/chart"),
        (
            ChartSource("remote-chart", ref="stable/a b", repo_url="http://h"),
            "expected repo/chart",
        ),
    ],
)
def test_bad_references_name_the_declaring_file(source: ChartSource, message: str) -> None:
    with pytest.raises(FleetError) as err:
        remote.fetch(source, ORIGIN)
    assert err.value.path == ORIGIN
    assert message in str(err.value)


def test_cache_dir_defaults_to_the_users_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(remote.CACHE_ENV)
    monkeypatch.setenv("HOME", "/home/someone")
    assert remote.cache_dir() == Path("/home/someone/.cache/rollwright/charts")
    monkeypatch.setenv(remote.CACHE_ENV, "/var/cache/rw")
    assert remote.cache_dir() == Path("/var/cache/rw/charts")


# --- HTTP chart repository -------------------------------------------------------------------


def test_exact_version_is_pulled_once_and_stored_by_digest(
    chart_repo: ChartRepo, chart_cache: Path
) -> None:
    path = remote.fetch(http(chart_repo, "0.1.0"), ORIGIN)
    data = path.read_bytes()
    assert path == chart_cache / "charts" / "blobs" / "sha256" / (
        hashlib.sha256(data).hexdigest() + ".tgz"
    )
    assert chart_version(path) == "0.1.0"
    assert archive_gets(chart_repo) == ["/echo-0.1.0.tgz"]
    entries = [json.loads(p.read_text()) for p in (chart_cache / "charts" / "refs").glob("*.json")]
    assert {"ref": "echo", "repo_url": chart_repo.url, "version": "0.1.0"}.items() <= entries[
        0
    ].items()
    assert entries[0]["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()

    seen = len(chart_repo.requests)
    remote.forget_resolutions()
    assert remote.fetch(http(chart_repo, "0.1.0"), ORIGIN) == path
    # another alias of the same repository is the same chart
    assert remote.fetch(http(chart_repo, "0.1.0", ref="mirror/echo"), ORIGIN) == path
    assert len(chart_repo.requests) == seen, "a pinned version must be served from the cache"
    assert not list((chart_cache / "charts" / "tmp").iterdir())


def test_pinned_version_survives_the_repository_going_away(chart_repo: ChartRepo) -> None:
    path = remote.fetch(http(chart_repo, "0.2.0"), ORIGIN)
    chart_repo.stop()
    assert remote.fetch(http(chart_repo, "0.2.0"), ORIGIN) == path


def test_range_is_resolved_again_when_its_memory_expires(
    chart_repo: ChartRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert chart_version(remote.fetch(http(chart_repo, ">=0.1.0 <1.0.0"), ORIGIN)) == "0.2.0"
    assert chart_version(remote.fetch(http(chart_repo, None), ORIGIN)) == "0.2.0"

    chart_repo.add(ECHO_CHART, version="0.3.0")
    chart_repo.index()
    # within the TTL one process keeps its answer (one render sees one version) ...
    seen = len(chart_repo.requests)
    assert chart_version(remote.fetch(http(chart_repo, ">=0.1.0 <1.0.0"), ORIGIN)) == "0.2.0"
    assert len(chart_repo.requests) == seen
    # ... and after it, asks the repository again
    monkeypatch.setenv(remote.RANGE_TTL_ENV, "0")
    assert chart_version(remote.fetch(http(chart_repo, ">=0.1.0 <1.0.0"), ORIGIN)) == "0.3.0"
    assert chart_version(remote.fetch(http(chart_repo, None), ORIGIN)) == "0.3.0"
    assert chart_version(remote.fetch(http(chart_repo, "~0.1"), ORIGIN)) == "0.1.0"


def test_range_resolution_records_the_exact_version_for_offline_use(
    chart_repo: ChartRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(remote.RANGE_TTL_ENV, "0")
    resolved = remote.fetch(http(chart_repo, "^0.1"), ORIGIN)
    chart_repo.stop()
    assert remote.fetch(http(chart_repo, "0.1.0"), ORIGIN) == resolved
    # a range cannot be answered offline: it fails instead of guessing an old answer
    with pytest.raises(FleetError, match="cannot be reached"):
        remote.fetch(http(chart_repo, "^0.1"), ORIGIN)


@pytest.mark.parametrize(
    ("ref", "version", "detail"),
    [
        ("stable/echo", "9.9.9", 'chart "echo" version "9.9.9" not found'),
        ("stable/echo", "^5", 'chart "echo" version "^5" not found'),
        ("stable/nope", "1.0.0", 'chart "nope" version "1.0.0" not found'),
    ],
)
def test_missing_chart_or_version_names_chart_version_and_repository(
    chart_repo: ChartRepo, ref: str, version: str, detail: str
) -> None:
    with pytest.raises(FleetError) as err:
        remote.fetch(http(chart_repo, version, ref=ref), ORIGIN)
    message = str(err.value)
    assert err.value.path == ORIGIN
    assert f"chart {ref!r} version {version!r} from repository {chart_repo.url}" in message
    assert detail in message


def test_unreachable_repository_is_a_clear_error(chart_repo: ChartRepo) -> None:
    url = chart_repo.url
    chart_repo.stop()
    with pytest.raises(FleetError) as err:
        remote.fetch(http(chart_repo, "0.1.0"), ORIGIN)
    message = str(err.value)
    assert f"chart 'stable/echo' version '0.1.0' from repository {url}" in message
    assert "cannot be reached" in message


def test_damaged_cache_entries_are_pulled_again(chart_repo: ChartRepo, chart_cache: Path) -> None:
    path = remote.fetch(http(chart_repo, "0.1.0"), ORIGIN)
    for entry in (chart_cache / "charts" / "refs").glob("*.json"):
        entry.write_text("{not json")
    assert remote.fetch(http(chart_repo, "0.1.0"), ORIGIN) == path
    assert len(archive_gets(chart_repo)) == 2

    path.unlink()
    assert remote.fetch(http(chart_repo, "0.1.0"), ORIGIN) == path
    assert path.is_file()
    assert len(archive_gets(chart_repo)) == 3


def test_threads_share_one_download(chart_repo: ChartRepo) -> None:
    results: list[Path] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        try:
            results.append(remote.fetch(http(chart_repo, "0.2.0"), ORIGIN))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert len(results) == 8
    assert len(set(results)) == 1
    assert archive_gets(chart_repo) == ["/echo-0.2.0.tgz"]


_FETCH_IN_PROCESS = """
import sys
from shared.engine.charts import remote
from shared.engine.release import ChartSource
source = ChartSource("remote-chart", ref="stable/echo", version=sys.argv[2], repo_url=sys.argv[1])
print(remote.fetch(source, "x.yaml"))
"""


def test_processes_share_one_cache_safely(chart_repo: ChartRepo, chart_cache: Path) -> None:
    env = {**os.environ, remote.CACHE_ENV: str(chart_cache)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _FETCH_IN_PROCESS, chart_repo.url, version],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for version in ("0.1.0", "0.1.0", "0.1.0", "0.2.0")
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    paths = [Path(out.strip()) for out, _ in outputs]
    assert len(set(paths[:3])) == 1
    assert paths[3] != paths[0]
    for path in paths:
        assert path.name == hashlib.sha256(path.read_bytes()).hexdigest() + ".tgz"
    assert not list((chart_cache / "charts" / "tmp").iterdir())
    assert not [p for p in (chart_cache / "charts" / "refs").iterdir() if p.suffix != ".json"]
    # and this process reads what they wrote, without the network
    chart_repo.stop()
    assert remote.fetch(http(chart_repo, "0.1.0"), ORIGIN) == paths[0]


# --- OCI registry ----------------------------------------------------------------------------


def test_oci_exact_version_is_cached(oci_registry: OciRegistry) -> None:
    path = remote.fetch(oci(oci_registry, "0.1.0"), ORIGIN)
    assert chart_version(path) == "0.1.0"
    seen = len(oci_registry.requests)
    # the same chart written with the tag in the reference is the same cache entry
    tagged = ChartSource(kind="remote-chart", ref=f"oci://{oci_registry.host}/charts/echo:0.1.0")
    assert remote.fetch(tagged, ORIGIN) == path
    assert remote.fetch(oci(oci_registry, "0.1.0"), ORIGIN) == path
    assert len(oci_registry.requests) == seen


def test_oci_by_digest(oci_registry: OciRegistry) -> None:
    first = remote.fetch(oci(oci_registry, "0.2.0"), ORIGIN)
    digest = _tag_digest(oci_registry, "charts/echo", "0.2.0")
    by_digest = ChartSource(
        kind="remote-chart", ref=f"oci://{oci_registry.host}/charts/echo@{digest}"
    )
    assert remote.fetch(by_digest, ORIGIN) == first
    seen = len(oci_registry.requests)
    assert remote.fetch(by_digest, ORIGIN) == first
    assert len(oci_registry.requests) == seen


def _tag_digest(registry: OciRegistry, repository: str, tag: str) -> str:
    request = urllib.request.Request(
        f"http://{registry.host}/v2/{repository}/manifests/{tag}", method="HEAD"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.headers["Docker-Content-Digest"])


def test_oci_range_and_latest_are_resolved_from_tags(
    oci_registry: OciRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(remote.RANGE_TTL_ENV, "0")
    assert chart_version(remote.fetch(oci(oci_registry, "~0.1"), ORIGIN)) == "0.1.0"
    assert chart_version(remote.fetch(oci(oci_registry, None), ORIGIN)) == "0.2.0"
    assert ("GET", "/v2/charts/echo/tags/list") in oci_registry.requests


def test_chart_pushed_by_helm_is_pulled_back(oci_registry: OciRegistry, tmp_path: Path) -> None:
    archive = helm_python.package(ECHO_CHART, destination=tmp_path, version="1.4.0")
    helm_python.push(archive, f"oci://{oci_registry.host}/pushed", plain_http=True)
    path = remote.fetch(oci(oci_registry, "1.4.0", ref="pushed/echo"), ORIGIN)
    assert path.read_bytes() == Path(archive).read_bytes()


def test_oci_missing_version_and_unreachable_registry(oci_registry: OciRegistry) -> None:
    with pytest.raises(FleetError) as err:
        remote.fetch(oci(oci_registry, "9.9.9"), ORIGIN)
    message = str(err.value)
    ref = f"oci://{oci_registry.host}/charts/echo"
    assert (
        f"chart {ref!r} version '9.9.9' from repository oci://{oci_registry.host}/charts" in message
    )
    assert "not found" in message
    assert err.value.path == ORIGIN

    oci_registry.stop()
    with pytest.raises(FleetError) as err:
        remote.fetch(oci(oci_registry, "0.1.0"), ORIGIN)
    assert f"chart {ref!r} version '0.1.0'" in str(err.value)
    assert "connection refused" in str(err.value)
