"""`make bench`, the long queue: 10,000 revisions queued for one root.

The DeployWorkflow of one root, on Temporal's dev server (real time, real history limits),
with the test doubles of `tests/support/deploy_world.py` for its activities (GitHub, SQL and
the deployment's render are in-process records: the benchmark measures the workflow and
Temporal, not the emulator). The root starts locked by a manual deployment, so every push
queues; 10,000 signals are sent (8 at a time, as a burst of dispatches would), then the root
is unlocked and the first deployments are approved one after the other.

Run alone: `python -m tests.bench.run --only longqueue [--write docs/benchmarks.md]`.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from tests.bench.common import section_header
from tests.support.deploy_world import World, harness, latest, revisions, sha, until

MARKER = "## Long queue"
ROOT = "prod/eu-west"
QUEUED = 10_000
CONCURRENCY = 8
TRANSITIONS = 5
# Temporal's defaults warn at 10,240 events or 10 MiB of history and terminate at 51,200 or
# 50 MiB; the DeployWorkflow must stay under the warning in every run.
EVENTS_WARN = 10_240
BYTES_WARN = 10 << 20
NEXT_TARGET = 10.0  # s from one deployment's end to the next awaiting review


async def _measure() -> dict[str, Any]:
    world = World(latest={ROOT: latest(sha("1"), trigger="manual")})
    merged = [sha(f"q{n}") for n in range(QUEUED)]
    async with harness(world, dev_server=True) as h:
        first = await h.push(ROOT, merged[0])
        started = time.monotonic()
        gate = asyncio.Semaphore(CONCURRENCY)

        async def push(revision: str) -> None:
            async with gate:
                await h.push(ROOT, revision)

        await asyncio.gather(*(push(r) for r in merged[1:]))
        signalled = time.monotonic() - started
        await until(lambda: all(world.runs_for(r, ROOT) for r in merged), "every check run", 1800)
        written = time.monotonic() - started
        state = await h.state(ROOT)
        queue = revisions(state.queue)
        await h.unlock(ROOT)
        gaps: list[float] = []
        for revision in queue[:TRANSITIONS]:
            ended = time.monotonic()
            deployment = await h.awaiting_review(ROOT, revision)
            gaps.append(time.monotonic() - ended)
            await h.review(deployment, "approve")
        runs = await h.run_chain(first.id, first.result_run_id or "")
        sizes = [sum(e.ByteSize() for e in run.events) for run in runs]
        return {
            "queued": state.queue_length,
            "signalled": signalled,
            "written": written,
            "gaps": gaps,
            "runs": len(runs),
            "max_events": max(len(run.events) for run in runs),
            "max_bytes": max(sizes),
            "total_bytes": sum(sizes),
        }


def run(work: Path) -> str:
    del work  # the dev server keeps its state in memory
    m = asyncio.run(_measure())

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    rows = [
        (
            "revisions in the queue after the burst",
            f"{m['queued']:,}",
            f"{QUEUED:,}",
            verdict(m["queued"] == QUEUED),
        ),
        (f"{QUEUED:,} signals, {CONCURRENCY} at a time", f"{m['signalled']:.1f} s", "", ""),
        ("every queued check run written", f"{m['written']:.1f} s after the first signal", "", ""),
        (
            "next deployment awaiting review after the previous one ended (after the Unlock)",
            " / ".join(f"{g:.2f}" for g in m["gaps"]) + " s",
            f"< {NEXT_TARGET:.0f} s",
            verdict(max(m["gaps"]) < NEXT_TARGET),
        ),
        ("DeployWorkflow runs (continue-as-new)", str(m["runs"]), "", ""),
        (
            "largest run: events",
            f"{m['max_events']:,}",
            f"< {EVENTS_WARN:,}",
            verdict(m["max_events"] < EVENTS_WARN),
        ),
        (
            "largest run: history bytes",
            f"{m['max_bytes'] / 1e6:.2f} MB",
            f"< {BYTES_WARN / (1 << 20):.0f} MiB",
            verdict(m["max_bytes"] < BYTES_WARN),
        ),
        ("all runs: history bytes", f"{m['total_bytes'] / 1e6:.1f} MB", "", ""),
    ]
    table = "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows)
    return f"""{MARKER}

{section_header("longqueue")}
{QUEUED:,} revisions queued for one locked root's DeployWorkflow on Temporal's dev server
(activities are the in-process doubles of the workflow tests, so this measures the workflow and
Temporal), then unlocked and the first {TRANSITIONS} deployments approved in turn. Targets are
Temporal's warning limits for one run's history and "within seconds" for the next deployment.
The continue-as-new input carries the packed queue: at 10,000 items it is about 0.7 MB, over
the SDK's 512 KiB payload warning (logged) and under its 2 MB limit, so about 25,000 queued
items is the ceiling of one root's queue (see docs/operations.md, "Long queues").

| measure | result | target | |
|---|---|---|---|
{table}
"""
