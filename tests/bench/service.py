"""`make bench`, deploy service: on the embedded stack, on loopback.

- Gateway acknowledgement latency: signed `push` webhooks (each starts a DispatchWorkflow) sent
  open-loop at 200 per second for a bounded number of requests; latency is measured from each
  request's *scheduled* send time to its answer, so a stalled gateway cannot hide queueing
  (no coordinated omission). The worker is not running, so the two cores serve the gateway and
  Temporal only; what the gateway does per webhook is the same either way.
- Push to check run with diff: a 100-root generated atlas fleet in a real git repository, a
  push that changes one cluster's values, timed from sending the signed webhook until the
  root's check run is `action_required` with the diff in its text — for a root's first
  deployment (everything added) and for a change after a published deployment.

Run alone: `python -m tests.bench.run --only service [--write docs/benchmarks.md]`.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import secrets
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from shared.devstack import fleetrepo
from shared.devstack.stack import DevStack, StackOptions
from shared.github.app import webhook_signature
from tests.bench import fleetgen
from tests.bench.common import machine
from tests.support.fleet import FleetDriver
from tests.support.stack import inherited_env

MARKER = "## Deploy service"
OWNER, NAME = "bench", "fleet"
RATE = 200.0  # webhooks per second
REQUESTS = 2000  # 10 s at RATE
WARMUP = 100
LIGHTER = (50.0, 100.0)  # lower rates, to show where the latency target holds
LIGHT_REQUESTS = 500
CONNECTIONS = 64
SAMPLES = 5
STEP_TIMEOUT = 60.0


def _quiet(line: str) -> None:
    return None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


# --------------------------------------------------------------------------- gateway


def bench_gateway(work: Path) -> dict[str, float]:
    options = StackOptions(data_dir=work / "gateway-stack", worker=False, env=inherited_env())
    stack = DevStack(options.with_free_ports(), out=_quiet)
    stack.start()
    try:
        repo = work / "gateway-fleet"
        base = fleetrepo.create_fleet_repo(_tiny_fleet(work / "tiny"), repo)
        head = fleetrepo.set_value(repo, "deployments/c1/cluster.values.yaml", "x", 1, "edit")
        stack.add_repository(OWNER, NAME, repo)
        assert stack.emulator is not None
        template = stack.emulator.push_payload(OWNER, NAME, base, head)
        url = f"{stack.urls.gateway}/events"
        asyncio.run(_load(url, stack.webhook_secret, template, WARMUP, 50.0))
        lighter = [
            asyncio.run(_load(url, stack.webhook_secret, template, LIGHT_REQUESTS, rate))
            for rate in LIGHTER
        ]
        pids = {child.name: child.pid for child in stack.supervisor.children}
        before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        results = asyncio.run(_load(url, stack.webhook_secret, template, REQUESTS, RATE))
        for name, pid in pids.items():
            results[f"{name}_cpu_ms"] = (_cpu_seconds(pid) - before[name]) / REQUESTS * 1000
        for rate, light in zip(LIGHTER, lighter, strict=True):
            results[f"p50@{rate:.0f}"], results[f"p99@{rate:.0f}"] = light["p50"], light["p99"]
        stack.check()
    finally:
        stack.stop()
    return results


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tiny_fleet(path: Path) -> Path:
    # The gateway never reads the repository: one commit pair makes a real push payload.
    (path / "deployments/c1").mkdir(parents=True)
    (path / "deployments/c1/cluster.values.yaml").write_text("x: 0\n")
    return path


async def _load(
    url: str, secret: str, template: dict[str, Any], count: int, rate: float
) -> dict[str, float]:
    """Send `count` distinct signed pushes open-loop at `rate`/s; latencies in ms."""
    payloads = []
    for _ in range(count):
        payload = dict(template)
        payload["after"] = secrets.token_hex(20)  # a new DispatchWorkflow id each time
        payloads.append(payload)
    sent = await send_open_loop(url, signed_requests(url, secret, "push", payloads), rate)
    accepted = sent.statuses.count(202)
    if accepted != count:
        raise RuntimeError(f"the gateway did not accept every webhook: {sent.statuses}")
    return {
        "count": count,
        "rate": count / sent.elapsed,
        "p50": percentile(sent.latencies, 50),
        "p90": percentile(sent.latencies, 90),
        "p99": percentile(sent.latencies, 99),
        "max": max(sent.latencies),
        "service_p50": percentile(sent.service, 50),
        "service_p99": percentile(sent.service, 99),
    }


def signed_requests(
    url: str, secret: str, event: str, payloads: list[dict[str, Any]]
) -> list[tuple[str, bytes]]:
    """Each payload as a complete signed HTTP/1.1 webhook request (its delivery id, bytes),
    built beforehand so that sending them costs the load generator little."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    requests = []
    for payload in payloads:
        body = json.dumps(payload).encode()
        delivery = str(uuid.uuid4())
        head = (
            f"POST {parts.path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nX-GitHub-Event: {event}\r\n"
            f"X-GitHub-Delivery: {delivery}\r\n"
            f"X-Hub-Signature-256: {webhook_signature(secret, body)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        requests.append((delivery, head.encode() + body))
    return requests


@dataclass
class Sent:
    """What an open-loop run got back, in the order the requests were scheduled."""

    statuses: list[int]
    latencies: list[float]  # ms from the scheduled send time to the whole answer
    service: list[float]  # ms from the actual send to the whole answer
    elapsed: float  # s from the first scheduled send to the last answer


async def send_open_loop(
    url: str, requests: list[tuple[str, bytes]], rate: float, connections: int = CONNECTIONS
) -> Sent:
    """Send prepared requests open-loop at `rate`/s over a pool of keep-alive connections.

    A minimal client keeps the load generator's own CPU use (it shares the two cores with the
    gateway and Temporal) small next to what it measures. Latency counts from each request's
    *scheduled* time, so waiting for a free connection counts (no coordinated omission).
    """
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    pool: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(connections):
        pool.put_nowait(await asyncio.open_connection(host, port))
    statuses = [0] * len(requests)
    latencies = [0.0] * len(requests)
    service = [0.0] * len(requests)
    start = time.perf_counter() + 0.2

    async def send(i: int, request: bytes) -> None:
        scheduled = start + i / rate
        await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
        reader, writer = await pool.get()  # waiting for a free connection counts as latency
        sent = time.perf_counter()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await reader.readexactly(length)
        done = time.perf_counter()
        pool.put_nowait((reader, writer))
        statuses[i] = int(head.split(b" ", 2)[1])
        latencies[i] = (done - scheduled) * 1000
        service[i] = (done - sent) * 1000

    await asyncio.gather(*(send(i, request) for i, (_, request) in enumerate(requests)))
    elapsed = time.perf_counter() - start
    while not pool.empty():
        _, writer = pool.get_nowait()
        writer.close()
    return Sent(statuses, latencies, service, elapsed)


# --------------------------------------------------------------------------- push → check run


def fleet_and_stack(
    work: Path, name: str, *, groups: int, clusters_per_group: int
) -> tuple[Path, int, DevStack]:
    """A generated atlas fleet (10 releases a root) committed in a git repo `work/name`, and a
    started embedded stack (`rollwright dev`'s) for it. Returns the repo, its roots, the stack."""
    repo = work / name
    roots = fleetgen.generate(
        repo, groups=groups, clusters_per_group=clusters_per_group, releases=10
    )
    fleetrepo.git(repo, "init", "-q", "-b", "main")
    fleetrepo.commit_all(repo, "fleet")
    options = StackOptions(data_dir=work / f"{name}-stack", env=inherited_env()).with_free_ports()
    stack = DevStack(options, out=_quiet)
    stack.start()
    return repo, roots, stack


def bench_push_to_check_run(work: Path) -> dict[str, float]:
    repo, roots, stack = fleet_and_stack(work, "fleet-100", groups=10, clusters_per_group=10)
    first: list[float] = []
    changed: list[float] = []
    try:
        stack.add_repository(OWNER, NAME, repo)
        fleet = FleetDriver(stack, OWNER, NAME, repo, timeout=STEP_TIMEOUT)
        # warm-up: the worker's first mirror clone and first render happen here
        head, _ = fleet.push_change("g009/c009-009")
        fleet.approve(fleet.review("g009/c009-009", head))
        for k in range(SAMPLES):
            root = f"g{k:03d}/c{k:03d}-{(3 * k) % 10:03d}"
            head, sent = fleet.push_change(root)
            run = fleet.review(root, head)
            first.append(time.perf_counter() - sent)
            fleet.approve(run)
            head, sent = fleet.push_change(root)
            run = fleet.review(root, head)
            changed.append(time.perf_counter() - sent)
            # the edit reaches every release's Deployment: all changed, nothing added
            if "0 added, 0 removed, 10 changed" not in (run.output.get("title") or ""):
                raise RuntimeError(f"{root}: expected 10 changed resources: {run.output}")
        stack.check()
    finally:
        stack.stop()
    return {
        "roots": roots,
        "first_median": statistics.median(first),
        "first_max": max(first),
        "changed_median": statistics.median(changed),
        "changed_max": max(changed),
    }


# --------------------------------------------------------------------------- report


def report(gateway: dict[str, float], push: dict[str, float]) -> str:
    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    ceiling = 2000 / (gateway["gateway_cpu_ms"] + gateway["temporal_cpu_ms"])
    rows = [
        (
            f"gateway acknowledgement, signed `push` webhooks at {RATE:.0f}/s "
            f"({gateway['count']:.0f} requests, achieved {gateway['rate']:.0f}/s)",
            f"p50 {gateway['p50']:.1f} ms, p90 {gateway['p90']:.1f} ms, "
            f"p99 {gateway['p99']:.1f} ms (max {gateway['max']:.0f} ms)",
            "p99 ≤ 50 ms",
            verdict(gateway["p99"] <= 50),
        ),
        (
            "the same, from send to answer (without waiting for a free connection)",
            f"p50 {gateway['service_p50']:.1f} ms, p99 {gateway['service_p99']:.1f} ms",
            "—",
            "",
        ),
        (
            "CPU per webhook during the run (gateway process, Temporal dev server); read "
            "before the outbox has drained, so the Temporal share is understated",
            f"{gateway['gateway_cpu_ms']:.1f} ms, {gateway['temporal_cpu_ms']:.1f} ms",
            "—",
            "",
        ),
        *(
            (
                f"gateway acknowledgement at {rate:.0f}/s ({LIGHT_REQUESTS} requests)",
                f"p50 {gateway[f'p50@{rate:.0f}']:.1f} ms, p99 {gateway[f'p99@{rate:.0f}']:.1f} ms",
                "(p99 ≤ 50 ms)",
                "holds" if gateway[f"p99@{rate:.0f}"] <= 50 else "does not hold",
            )
            for rate in LIGHTER
        ),
        (
            f"push → check run with diff, {push['roots']:.0f}-root fleet, one affected root, "
            f"change after a published deployment (median of {SAMPLES})",
            f"{push['changed_median']:.2f} s (max {push['changed_max']:.2f} s)",
            "≤ 3 s",
            verdict(push["changed_max"] <= 3),
        ),
        (
            f"the same, the root's first deployment (median of {SAMPLES})",
            f"{push['first_median']:.2f} s (max {push['first_max']:.2f} s)",
            "≤ 3 s",
            verdict(push["first_max"] <= 3),
        ),
    ]
    table = "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows)
    note = ""
    if gateway["rate"] < RATE * 0.95:
        note = (
            f"\nAt {RATE:.0f}/s the gateway did not keep up ({gateway['rate']:.0f}/s achieved), "
            "so requests queued and the latency grew with the run. Each webhook costs "
            f"{gateway['gateway_cpu_ms']:.1f} ms of gateway CPU (signature, parse, a group-"
            f"committed outbox write, then the Temporal start from the outbox) and "
            f"{gateway['temporal_cpu_ms']:.1f} ms of Temporal dev "
            f"server CPU: {RATE:.0f}/s needs {RATE * (2000 / ceiling) / 2000:.0%} of this "
            "machine's two cores before the load generator and anything else running get any. "
            "In production the Temporal server and the database run elsewhere and gateways "
            "scale out (docs/operations.md).\n"
        )
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""{MARKER}

- Date: {now}
- Machine: {machine()}; 1-minute load average {gateway["load_before"]:.1f} before the run,
  {gateway["load_after"]:.1f} after (other work on the machine shows in the gateway figures)
- Command: `make bench` (`python -m tests.bench.run --write docs/benchmarks.md`; this section
  alone: `--only service`)

Everything on one machine over loopback: the Temporal dev server (SQLite), the gateway and the
worker as separate processes (`rollwright dev`'s stack), the GitHub emulator in the benchmark
process. Gateway latency is measured from each webhook's scheduled send time (open loop), with
the worker stopped. The push benchmark uses a generated atlas fleet ({push["roots"]:.0f} roots ×
10 releases) in a real git repository; the clock runs from sending the signed push until the
root's check run is `action_required` with the diff (affected roots from the worker's git
mirror, checkout, render, diff against the last published render, check-run updates).

| measure | result | target | |
|---|---|---|---|
{table}
{note}"""


def run(work: Path) -> str:
    """The section for docs/benchmarks.md (tests/bench/run.py calls this)."""
    load_before = os.getloadavg()[0]
    gateway = bench_gateway(work)
    push = bench_push_to_check_run(work)
    gateway["load_before"], gateway["load_after"] = load_before, os.getloadavg()[0]
    return report(gateway, push)
