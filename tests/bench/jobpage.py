"""`make bench`, job pages: time to first byte of a job page whose diff is 5 MB.

The gateway app (`create_app`) served by uvicorn on loopback, real SQLite and a file blob
store, filled like the worker fills them: a deployment recorded state by state, a job log,
and the `diff.json` that diff_render stores — here for 1,500 changed ConfigMaps whose unified
diff is about 5 MB. Each request is a fresh HTTP/1.1 connection (`http.client`); measured:
the response headers, the first byte of the body (the page above the diff), and the whole
page read to the end, for the unified and the side-by-side views. Median and max of 15.

Run alone: `python -m tests.bench.run --only jobpage [--write docs/benchmarks.md]`.
"""

from __future__ import annotations

import datetime
import http.client
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any, cast

import uvicorn

from activities.joblog import JobLog
from gateway.app import create_app
from gateway.dispatcher import Dispatched, Dispatcher, DispatchError
from shared.contracts.deploy import DeploymentRecord
from shared.devstack.ports import free_port
from shared.review.diff import diff_renders
from shared.review.diffdoc import diff_document, document_key
from shared.settings import Settings
from shared.stores.blob import FileBlobStore, job_log_key
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from shared.stores.sql.jobs import JobStore
from tests.bench.common import section_header
from tests.support.machine import MACHINE_HEADERS, MACHINE_SECRET

MARKER = "## Job pages"
DEPLOYMENT = "bench-5mb-diff"
RESOURCES = 1600
SAMPLES = 15
TARGET_MB = 5.0


class NoTemporal:
    """The pages never dispatch; the app only needs something to hold."""

    async def check_health(self) -> None:
        raise DispatchError("no Temporal in this benchmark")

    def __getattr__(self, name: str) -> Any:
        async def refuse(*args: Any, **kwargs: Any) -> Dispatched:
            raise DispatchError("no Temporal in this benchmark")

        return refuse


def configmap(n: int, version: int) -> bytes:
    lines = [
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        f"  name: settings-{n:04d}",
        f"  namespace: team-{n % 40:02d}",
        "data:",
    ]
    lines += [f"  key{k:02d}: value-{k}-of-{n}-v{version}-{'x' * 24}" for k in range(28)]
    return ("\n".join(lines) + "\n").encode()


def fill(settings: Settings, database: Database) -> dict[str, float]:
    blobs = FileBlobStore(settings.data_dir / "blobs")
    old = {f"r/team/ConfigMap_settings-{n:04d}.yaml": configmap(n, 1) for n in range(RESOURCES)}
    new = {path: configmap(int(path[-9:-5]), 2) for path in old}
    diff = diff_renders(old, new)
    unified_bytes = sum(len(f.unified.encode()) for f in diff.files)
    document = diff_document(diff, old, new).to_json()
    blobs.put(document_key(DEPLOYMENT), document)
    jobs = JobLog(blobs)
    at = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    for i, state in enumerate(["rendering", "awaiting_review"]):
        DeploymentStore(database).record(
            DeploymentRecord(
                deployment_id=DEPLOYMENT,
                repo="bench/fleet",
                root="bench/root",
                revision="b" * 40,
                trigger="merge",
                state=state,  # type: ignore[arg-type]
                check_run_id=1,
                added=0,
                removed=0,
                changed=RESOURCES,
                at=at + datetime.timedelta(seconds=i),
            )
        )
        jobs.write(DEPLOYMENT, f"state: {state}", state=state)
    JobStore(database).start(DEPLOYMENT, DEPLOYMENT, "deployment", job_log_key(DEPLOYMENT))
    return {"unified_mb": unified_bytes / 1e6, "json_mb": len(document) / 1e6}


def fetch(port: int, path: str) -> tuple[float, float, float, int]:
    """(headers, first body byte, whole body) in seconds since the request was sent, size."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    start = time.perf_counter()
    connection.request("GET", path, headers=MACHINE_HEADERS)  # read as a machine does
    response = connection.getresponse()
    headers = time.perf_counter() - start
    first = response.read(1)
    first_byte = time.perf_counter() - start
    rest = response.read()
    total = time.perf_counter() - start
    connection.close()
    if response.status != 200 or not first:
        raise SystemExit(f"bench: GET {path} answered {response.status}")
    return headers, first_byte, total, len(first) + len(rest)


def measure(port: int, path: str) -> dict[str, float]:
    fetch(port, path)  # warm: templates compiled, the blob in the page cache
    runs = [fetch(port, path) for _ in range(SAMPLES)]
    return {
        "headers_ms": statistics.median(r[0] for r in runs) * 1000,
        "first_ms": statistics.median(r[1] for r in runs) * 1000,
        "first_max_ms": max(r[1] for r in runs) * 1000,
        "total_ms": statistics.median(r[2] for r in runs) * 1000,
        "size_mb": runs[0][3] / 1e6,
    }


def run(work: Path) -> str:
    load_before = os.getloadavg()[0]
    settings = Settings(
        data_dir=work / "state", public_url="http://127.0.0.1", api_token=MACHINE_SECRET
    )
    settings.data_dir.mkdir(parents=True)
    database = Database(settings.database)
    sizes = fill(settings, database)
    port = free_port("127.0.0.1")
    app = create_app(settings, dispatcher=cast(Dispatcher, NoTemporal()), database=database)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        results = {
            "unified": measure(port, f"/jobs/{DEPLOYMENT}"),
            "side by side": measure(port, f"/jobs/{DEPLOYMENT}?view=split"),
        }
    finally:
        server.should_exit = True
        thread.join(10)
        database.close()
    return report(sizes, results, (load_before, os.getloadavg()[0]))


def report(
    sizes: dict[str, float], results: dict[str, dict[str, float]], load: tuple[float, float]
) -> str:
    rows = []
    for view, r in results.items():
        rows.append(
            f"| {view} | {r['headers_ms']:.1f} ms | {r['first_ms']:.1f} ms "
            f"(max {r['first_max_ms']:.1f}) | {r['total_ms']:.0f} ms | {r['size_mb']:.1f} MB |"
        )
    table = "\n".join(rows)
    return f"""{MARKER}

{section_header("jobpage")}- Load: 1-minute load average {load[0]:.1f} before the run

A job page (`GET /jobs/<id>`) served by the gateway app under uvicorn on loopback, real SQLite
and a file blob store, for a deployment of {RESOURCES:,} changed ConfigMaps: a
{sizes["unified_mb"]:.1f} MB unified diff ({sizes["json_mb"]:.1f} MB of `diff.json`). Each request
opens a new connection; median of {SAMPLES} after one warm-up. *First byte* is the start of the
page (everything above the diff is sent before the diff is loaded); *whole page* reads the
streamed HTML to its end (every resource's table, collapsed in the browser).

| view | response headers | first byte of the page | whole page | page size |
|---|---|---|---|---|
{table}
"""
