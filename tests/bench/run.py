"""`make bench`: render-engine benchmarks, written to docs/benchmarks.md.

Measures, on a generated atlas fleet of 1,000 roots × 10 releases:
- full-fleet render rate through the real CLI (`rollwright render`, output on disk and on
  tmpfs, default `--jobs` and `--jobs 1`) and the peak RSS of its processes;
- the raw Helm engine rendering the same chart with the same final values in a bare loop
  (every release of the fleet, one pass before and one after the renders);
and on a 10,000-root git repo, `roots --changed` for a one-file edit (in process and CLI).
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shared.engine.affected import affected_between
from tests.bench import (
    commodore,
    fleetgen,
    fleetwide,
    helmfile,
    jobpage,
    longqueue,
    preview,
    publish,
    service,
)
from tests.bench.common import (
    BIN,
    RawEngine,
    RenderRun,
    git,
    machine,
    run_render,
    write_section,
)

REPO = Path(__file__).resolve().parents[2]


def same_tree(a: Path, b: Path) -> bool:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    return files_a == files_b and all((a / f).read_bytes() == (b / f).read_bytes() for f in files_a)


MEMORY_FS = Path("/dev/shm")


def bench_render(work: Path) -> dict[str, Any]:
    """The fleet rendered three times from a cold start: with the default `--jobs` into a
    directory on disk (as a user would), then into tmpfs with the default `--jobs` and with
    `--jobs 1`. Creating 20,000 files and 31,000 directories is the one part whose cost is
    the machine's file system rather than rollwright's, so both are reported."""
    load_before = os.getloadavg()[0]
    fleet_dir = work / "fleet-1000"
    roots = fleetgen.generate(fleet_dir, groups=10, clusters_per_group=100, releases=10)
    jobs = os.cpu_count() or 1
    raw = RawEngine(fleet_dir, fleet_dir / "templates/svc/chart")
    # One raw pass before the renders and one after; the faster one counts, so that a busy
    # moment can only lower the ratio, never raise it.
    raw_rates = [raw.rate()]
    runs: dict[str, RenderRun] = {"disk": run_render(fleet_dir, work / "out", jobs)}
    if MEMORY_FS.is_dir() and os.access(MEMORY_FS, os.W_OK):
        with tempfile.TemporaryDirectory(prefix="rollwright-bench-", dir=MEMORY_FS) as tmp:
            runs["memory"] = run_render(fleet_dir, Path(tmp) / "out", jobs)
            shutil.rmtree(Path(tmp) / "out")
            runs["memory-1"] = run_render(fleet_dir, Path(tmp) / "out", 1)
            if not same_tree(work / "out", Path(tmp) / "out"):
                raise SystemExit("bench: --jobs 1 and the default wrote different files")
            # The same render without the schema checks: what they cost.
            config = fleet_dir / "rollwright.yaml"
            if config.exists():
                raise SystemExit("bench: the generated fleet has a rollwright.yaml already")
            config.write_text("schemas:\n  mode: 'off'\n")
            try:
                shutil.rmtree(Path(tmp) / "out")
                runs["memory-1-unchecked"] = run_render(fleet_dir, Path(tmp) / "out", 1)
            finally:
                config.unlink()
    raw_rates.append(raw.rate())
    floor = raw.round_trip_rate()
    entries = list((work / "out").rglob("*"))
    return {
        "roots": roots,
        "releases": roots * 10,
        "files": sum(1 for p in entries if p.is_file()),
        "dirs": sum(1 for p in entries if p.is_dir()),
        "jobs": jobs,
        "runs": runs,
        "load": (load_before, os.getloadavg()[0]),
        "raw_rate": max(raw_rates),
        "raw_rates": raw_rates,
        "floor_rate": floor,
        "raw_renders": len(raw.jobs),
    }


def bench_changed(work: Path) -> dict[str, Any]:
    repo = work / "fleet-10000"
    roots = fleetgen.generate(repo, groups=100, clusters_per_group=100, releases=2)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.email=b@x", "-c", "user.name=b", "add", "-A")
    git(repo, "-c", "user.email=b@x", "-c", "user.name=b", "commit", "-qm", "fleet")
    edited = repo / "deployments/g042/c042-017/cluster.values.yaml"
    edited.write_text("replicas: 7\n")
    git(repo, "-c", "user.email=b@x", "-c", "user.name=b", "commit", "-qam", "edit")

    timings = []
    for _ in range(7):
        start = time.perf_counter()
        affected = affected_between(repo, "HEAD~1", "HEAD")
        timings.append(time.perf_counter() - start)
    assert affected == ["g042/c042-017"], affected
    cli = []
    for _ in range(3):
        start = time.perf_counter()
        proc = subprocess.run(
            [str(BIN / "rollwright"), "roots", "--repo", str(repo), "--changed", "HEAD~1..HEAD"],
            check=True,
            capture_output=True,
            text=True,
        )
        cli.append(time.perf_counter() - start)
        assert proc.stdout.split() == ["g042/c042-017"], proc.stdout
    return {
        "roots": roots,
        "median_ms": statistics.median(timings) * 1000,
        "max_ms": max(timings) * 1000,
        "cli_median_ms": statistics.median(cli) * 1000,
        # PYTHONDONTWRITEBYTECODE: every module compiled on every start, unlike an install
        "no_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
    }


def report(render: dict[str, Any], changed: dict[str, Any]) -> str:
    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    releases = render["releases"]
    raw = render["raw_rate"]
    jobs = render["jobs"]
    runs: dict[str, RenderRun] = render["runs"]
    where = {
        "disk": f"output on disk, `--jobs {jobs}` (the default)",
        "memory": f"output on tmpfs, `--jobs {jobs}`",
        "memory-1": "output on tmpfs, `--jobs 1`",
        "memory-1-unchecked": "output on tmpfs, `--jobs 1`, schema checks off",
    }
    measured = ("disk", "memory")  # the rows with targets; the others explain them
    # Ratio targets: the default `--jobs` against the raw engine's one process, and one
    # process against one.
    ratio_targets = {"disk": 0.7, "memory": 0.7, "memory-1": 0.5}
    rows: list[tuple[str, str, str, str]] = []
    for name, run in runs.items():
        rate = releases / run.seconds
        target = name in measured
        rows.append(
            (
                f"full-fleet render rate, {where[name]}",
                f"{rate:.0f} releases/s ({releases:.0f} in {run.seconds:.1f} s; "
                f"CPU {run.user:.1f} s user, {run.system:.1f} s system)",
                "≥ 300 releases/s" if target else "—",
                verdict(rate >= 300) if target else "",
            )
        )
    rows.append(
        (
            "raw Helm engine: the same renders (chart, final values) in a bare loop on one "
            f"process, {render['raw_renders']:.0f} per pass (pass before / after the renders)",
            f"{raw:.0f} releases/s ({render['raw_rates'][0]:.0f} / {render['raw_rates'][1]:.0f})",
            "—",
            "",
        )
    )
    floor = render["floor_rate"]
    rows.append(
        (
            "the raw engine plus PyYAML's own round trip: each rendered document parsed and "
            "dumped once with libyaml (C loader and dumper, rollwright's output settings), "
            "nothing written, one process",
            f"{floor:.0f} releases/s, ratio {floor / raw:.3f} to the raw engine",
            "—",
            "",
        )
    )
    for name, run in runs.items():
        ratio = releases / run.seconds / raw
        wanted = ratio_targets.get(name)
        processes = f"{jobs} against one" if name in measured else "one process against one"
        rows.append(
            (
                f"ratio to the raw engine, {where[name]} ({processes})",
                f"{ratio:.3f}",
                f"≥ {wanted}" if wanted else "—",
                verdict(ratio >= wanted) if wanted else "",
            )
        )
    if "memory-1-unchecked" in runs:
        checked, unchecked = runs["memory-1"], runs["memory-1-unchecked"]
        per = (checked.user - unchecked.user) / releases * 1000
        rows.append(
            (
                "cost of the schema checks (every object against the Kubernetes OpenAPI "
                "schemas; `schemas.mode` strict against off, `--jobs 1` on tmpfs)",
                f"{per:+.3f} ms user CPU per release (user CPU {checked.user:.1f} s against "
                f"{unchecked.user:.1f} s, wall {checked.seconds:.1f} s against "
                f"{unchecked.seconds:.1f} s; differences this small are the machine's noise)",
                "—",
                "",
            )
        )
    for name, run in runs.items():
        if name == "memory-1-unchecked":
            continue  # run for its time only
        rows.append(
            (
                f"peak RSS of `rollwright render`, {where[name]} (sum over its processes)",
                f"{run.peak_rss_mib:.0f} MiB",
                "≤ 1024 MiB",
                verdict(run.peak_rss_mib <= 1024),
            )
        )
    rows += [
        (
            f"`roots --changed`, one cluster file, {changed['roots']:.0f} roots "
            "(in process, median of 7)",
            f"{changed['median_ms']:.1f} ms (max {changed['max_ms']:.1f} ms)",
            "≤ 100 ms",
            verdict(changed["median_ms"] <= 100),
        ),
        (
            "the same through the CLI (`rollwright roots --changed`), process start included "
            f"(median of 3; bytecode cached: {'no' if changed['no_bytecode'] else 'yes'})",
            f"{changed['cli_median_ms']:.0f} ms",
            "≤ 250 ms",
            verdict(changed["cli_median_ms"] <= 250),
        ),
    ]
    table = "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""## Render engine

- Date: {now}
- Machine: {machine()}
- Load: 1-minute load average {render["load"][0]:.1f} before the run, {render["load"][1]:.1f}
  after (other processes share the cores: rates drop when it is high)
- Command: `make bench` (`python -m tests.bench.run --write docs/benchmarks.md`)

Generated atlas fleet: {render["roots"]:.0f} roots × 10 releases (a Deployment + Service chart,
values from chart defaults, template values, global, group and cluster files; each cluster has
a value of its own, so its Deployments differ from every other cluster's), rendered with
`rollwright render` into {render["files"]:.0f} files, the same bytes every run. Times are wall
clock for the whole command from a cold start: process start, discovery, rendering and
writing the files. The raw engine loop runs on one process and writes nothing; `rollwright
render` uses one process per CPU by default, so the required ratio compares {jobs}
processes with one (the `--jobs 1` row is the per-process ratio). The output tree has
{render["files"]:.0f} files in {render["dirs"]:.0f} directories: creating them is file system
work whose cost depends on the machine (compare the *system* CPU of the disk and the tmpfs
runs), so the same render is also measured with its output on tmpfs. Every render checks each
object against the Kubernetes schemas (`schemas.mode: strict`, the default); one more
`--jobs 1` run with `mode: off` gives what the checks cost. The round-trip row is a reference
for the ratios: the raw engine with nothing added but PyYAML's own parse and dump of each
rendered document through libyaml (rollwright's files are PyYAML's bytes; its faster paths
reproduce them, tests/engine/test_yamldoc.py), before any values layering, post-processing,
checks or files.

| measure | result | target | |
|---|---|---|---|
{table}
"""


# Benchmarks of later issues, each in its own module: `MARKER` (its section heading) and
# `run(work_dir) -> str` (the section). `--only NAME` runs one of them (or `render`).
SECTIONS: dict[str, Any] = {
    "service": service,
    "publish": publish,
    "jobpage": jobpage,
    "preview": preview,
    "fleetwide": fleetwide,
    "longqueue": longqueue,
    "helmfile": helmfile,
    "commodore": commodore,
}
RENDER_MARKER = "## Render engine"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.run")
    parser.add_argument("--write", metavar="FILE", help="replace the measured sections of FILE")
    parser.add_argument("--only", choices=["render", *SECTIONS], help="run one benchmark")
    args = parser.parse_args()
    if args.only in (None, "render"):
        with tempfile.TemporaryDirectory(prefix="rollwright-bench-") as tmp:
            work = Path(tmp)
            render = bench_render(work)
            changed = bench_changed(work)
        section = report(render, changed)
        print(section)
        if args.write:
            write_section(Path(args.write), RENDER_MARKER, section)
    for name, module in SECTIONS.items():
        if args.only not in (None, name):
            continue
        with tempfile.TemporaryDirectory(prefix=f"rollwright-bench-{name}-") as tmp:
            section = module.run(Path(tmp))
        print(section)
        if args.write:
            write_section(Path(args.write), module.MARKER, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
