"""Remote Helm charts: pulled once, kept in a content-addressed cache.

A remote chart is `repo/chart` with `repoUrl` (an HTTP chart repository: `index.yaml` plus
archives) or `oci://host/path/chart`, each with a `version` that is an exact version or a
semver range as Helm accepts it (`^1.2`, `>=1.0 <2`, `1.2.x`); no version means the newest.

Cache layout under `$ROLLWRIGHT_CACHE_DIR/charts` (default `~/.cache/rollwright/charts`):

    blobs/sha256/<hex>.tgz   chart archives, named by the sha256 of their bytes
    refs/<hex>.json          (chart, repository, version) → archive digest
    tmp/                     downloads in progress (same filesystem, so renames are atomic)

Exact versions (and `@sha256:` OCI references) are immutable: once resolved they are served
from the cache forever and never touch the network again. A range or "latest" means "the
newest match right now", so it is resolved again with the repository — at most once per
`ROLLWRIGHT_CHART_RANGE_TTL` seconds (default 60) per process, so that one render of many
releases sees one answer and does not pull the same chart a thousand times. When the
repository cannot be reached a range fails rather than silently using an older answer: pin
an exact version to render offline.

Every write goes to a temporary file first and is moved into place with `os.replace`, so
concurrent threads and processes sharing a cache never see partial files; the worst case is
two identical downloads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.engine import yamldoc
from shared.engine.charts import access
from shared.engine.errors import FleetError
from shared.engine.helm.engine import pull_chart
from shared.engine.release import ChartSource

CACHE_ENV = "ROLLWRIGHT_CACHE_DIR"
RANGE_TTL_ENV = "ROLLWRIGHT_CHART_RANGE_TTL"
DEFAULT_RANGE_TTL = 60.0

# A full semver version (Helm tolerates a leading "v"): `1.2.3`, `v1.2.3-rc.1+build.5`.
_EXACT = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$"
)
_CHART_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def cache_dir() -> Path:
    """Root of the chart cache (created on first write)."""
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.path.expanduser("~"), ".cache", "rollwright"
    )
    return Path(base) / "charts"


@dataclass(frozen=True)
class RemoteChart:
    """A remote chart reference, normalized: what to pull and how to name it in messages."""

    ref: str  # as written in the fleet repo
    pull_name: str  # what Helm pulls: a chart name (with repo_url) or an oci:// reference
    repo_url: str | None  # HTTP repository, normalized without a trailing slash
    version: str | None  # None: the newest version
    pinned: bool  # an exact version or digest: immutable, cached forever
    plain_http: bool = False

    @property
    def where(self) -> str:
        return self.repo_url or self.pull_name.rsplit("/", 1)[0]

    def describe(self) -> str:
        return (
            f"chart {self.ref!r} version {self.version or 'latest'!r} from repository {self.where}"
        )

    def key(self, version: str | None) -> str:
        """Cache key of this chart at `version`; the repo alias in `repo/chart` is not part of
        it, so two aliases of one repository share entries."""
        identity = {"chart": self.pull_name, "repo_url": self.repo_url, "version": version}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def parse_source(source: ChartSource, origin: str) -> RemoteChart:
    """Check a remote chart reference; errors name the file that declared it."""
    ref = source.ref.strip()
    version = (source.version or "").strip() or None
    if version == "latest":
        version = None
    if ref.startswith("oci://"):
        rest = ref.removeprefix("oci://")
        if "/" not in rest or not rest.split("/", 1)[1]:
            raise FleetError(f"chart {ref!r}: expected oci://host/path/chart", path=origin)
        last = rest.rsplit("/", 1)[1]
        pinned = version is not None and bool(_EXACT.match(version))
        if "@sha256:" in last:
            pinned = True  # a digest names one immutable artifact whatever the version says
        elif ":" in last and version is None:
            # A tag in the reference is the version, as with `helm pull oci://x/chart:1.2.3`.
            name, _, tag = last.partition(":")
            ref_no_tag = ref[: len(ref) - len(last)] + name
            pinned = bool(_EXACT.match(tag))
            return RemoteChart(ref, ref_no_tag, None, tag, pinned, source.plain_http)
        return RemoteChart(ref, ref, None, version, pinned, source.plain_http)

    repo_url = (source.repo_url or "").strip().rstrip("/") or None
    chart = ref.split("/", 1)[1] if "/" in ref else ref
    if not repo_url:
        raise FleetError(
            f"chart {ref!r}: a repository chart needs repoUrl (the chart repository's URL), "
            "or use an oci:// reference",
            path=origin,
        )
    if not repo_url.startswith(("http://", "https://")):
        raise FleetError(
            f"chart {ref!r}: repoUrl {repo_url!r} must be an http(s) URL "
            "(for OCI registries write the chart as oci://host/path/chart)",
            path=origin,
        )
    if not _CHART_NAME.match(chart):
        raise FleetError(f"chart {ref!r}: expected repo/chart", path=origin)
    pinned = version is not None and bool(_EXACT.match(version))
    return RemoteChart(ref, chart, repo_url, version, pinned)


class _KeyLocks:
    """One lock per cache key, so threads of one process pull a chart once."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def get(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


_locks = _KeyLocks()
_resolved: dict[str, tuple[float, str]] = {}  # range key → (monotonic time, blob digest)
_resolved_lock = threading.Lock()


def forget_resolutions() -> None:
    """Drop this process's memory of resolved ranges (the on-disk cache stays)."""
    with _resolved_lock:
        _resolved.clear()


def fetch(source: ChartSource, origin: str) -> Path:
    """A local archive of the remote chart `source`, pulled once and cached by digest."""
    chart = parse_source(source, origin)
    root = cache_dir()
    key = chart.key(chart.version)
    with _locks.get(key):
        if chart.pinned:
            cached = _lookup(root, key)
            if cached is not None:
                return cached
        else:
            cached = _recent_resolution(root, key)
            if cached is not None:
                return cached
        blob, resolved_version = _pull(root, chart, origin)
        digest = blob.stem
        entry = {
            "ref": chart.pull_name,
            "repo_url": chart.repo_url,
            "version": resolved_version,
            "digest": f"sha256:{digest}",
        }
        # The exact version a pull resolved to is immutable too: record it so a later pin of
        # that version is served offline.
        _write_ref(root, chart.key(resolved_version), entry)
        if chart.pinned:
            _write_ref(root, key, {**entry, "requested": chart.version})
        else:
            with _resolved_lock:
                _resolved[key] = (time.monotonic(), digest)
        return blob


def _blob_path(root: Path, hexdigest: str) -> Path:
    return root / "blobs" / "sha256" / f"{hexdigest}.tgz"


def _lookup(root: Path, key: str) -> Path | None:
    try:
        entry = json.loads((root / "refs" / f"{key}.json").read_text(encoding="utf-8"))
        digest = str(entry["digest"]).removeprefix("sha256:")
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or unreadable entry: pull again and rewrite it
    blob = _blob_path(root, digest)
    return blob if blob.is_file() else None


def _recent_resolution(root: Path, key: str) -> Path | None:
    ttl = _range_ttl()
    with _resolved_lock:
        hit = _resolved.get(key)
    if hit is None or time.monotonic() - hit[0] >= ttl:
        return None
    blob = _blob_path(root, hit[1])
    return blob if blob.is_file() else None


def _range_ttl() -> float:
    raw = os.environ.get(RANGE_TTL_ENV, "")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_RANGE_TTL
    except ValueError:
        return DEFAULT_RANGE_TTL


def _pull(root: Path, chart: RemoteChart, origin: str) -> tuple[Path, str]:
    """Download into a private temp dir, then move the archive to its digest name."""
    tmp_root = root / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="pull-", dir=tmp_root))
    try:
        # Mirrors and credentials are the worker's (`access`); the cache keys stay the
        # canonical URLs.
        if chart.repo_url:
            where = access.route(chart.repo_url)
            name, repo_url = chart.pull_name, where.url
        else:
            where = access.route(chart.pull_name)
            name, repo_url = where.url, None
        archive = pull_chart(
            name,
            version=chart.version,
            repo_url=repo_url,
            destination=workdir,
            source=origin,
            display=chart.describe(),
            username=where.username,
            password=where.password,
            plain_http=chart.plain_http,
        )
        data = archive.read_bytes()
        hexdigest = hashlib.sha256(data).hexdigest()
        resolved_version = _archive_version(archive, chart, origin)
        blob = _blob_path(root, hexdigest)
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.is_file():
            os.replace(archive, blob)  # atomic; a concurrent writer puts identical bytes
        return blob, resolved_version
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _archive_version(archive: Path, chart: RemoteChart, origin: str) -> str:
    """The version in the pulled archive's Chart.yaml (what a range resolved to)."""
    try:
        with tarfile.open(archive, "r:gz") as tf:
            for member in tf.getmembers():
                parts = member.name.split("/")
                if len(parts) == 2 and parts[1] == "Chart.yaml" and member.isfile():
                    handle = tf.extractfile(member)
                    if handle is None:
                        break
                    meta: Any = yamldoc.loads(handle.read().decode("utf-8"), member.name)
                    if isinstance(meta, dict) and meta.get("version"):
                        return str(meta["version"])
    except (OSError, tarfile.TarError, UnicodeDecodeError):
        pass
    raise FleetError(f"{chart.describe()}: pulled archive has no readable Chart.yaml", path=origin)


def _write_ref(root: Path, key: str, entry: dict[str, Any]) -> None:
    refs = root / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=refs)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, refs / f"{key}.json")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
