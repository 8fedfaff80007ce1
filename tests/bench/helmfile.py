"""`--only helmfile`: the helmfile layout (kube-renderer repositories) on a generated fleet of
1,000 releases, against the raw Helm engine rendering the same chart with the same values.

The fleet: a top-level helmfile.yaml listing `states/*.yaml`, ten states of 100 releases each
(one chart with a Deployment and a Service, per-release values, each state with its own
`helmfile_dir`, the `yq` file name generator and a label removed): 1,000 roots of two files.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.bench import fleetgen
from tests.bench.common import RawEngine, RenderRun, run_render, section_header

MARKER = "## helmfile layout"
STATES = 10
RELEASES_PER_STATE = 100

STATE = """environments:
  default:
    values:
      - region: region-{s:02d}
      - .kube-renderer:
          helmfile_dir: s{s:02d}
          render_filename_generator: yq
          remove_labels: [app.kubernetes.io/name]

releases:
"""

RELEASE = """  - name: svc-{s:02d}-{r:03d}
    chart: ../charts/svc
    namespace: ns-{s:02d}
    values:
      - replicas: {replicas}
        env:
          REGION: {{{{ .Values.region }}}}
          RELEASE: svc-{s:02d}-{r:03d}
"""


def generate(base: Path) -> int:
    """Write the fleet; returns the number of releases."""
    chart = base / "charts/svc"
    fleetgen.write(chart / "Chart.yaml", fleetgen.CHART_YAML)
    fleetgen.write(chart / "values.yaml", fleetgen.CHART_VALUES)
    fleetgen.write(chart / "templates/deployment.yaml", fleetgen.DEPLOYMENT_TEMPLATE)
    fleetgen.write(chart / "templates/service.yaml", fleetgen.SERVICE_TEMPLATE)
    fleetgen.write(base / "helmfile.yaml", "helmfiles:\n  - states/*.yaml\n")
    for s in range(STATES):
        releases = "".join(
            RELEASE.format(s=s, r=r, replicas=1 + r % 3) for r in range(RELEASES_PER_STATE)
        )
        fleetgen.write(base / f"states/s{s:02d}.yaml", STATE.format(s=s) + releases)
    return STATES * RELEASES_PER_STATE


def _affected_ms(fleet_dir: Path) -> tuple[float, int]:
    """In-process `affected` for one edited state file (the fleet planned from scratch)."""
    timings = []
    found: set[str] = set()
    for _ in range(3):
        start = time.perf_counter()
        found = Fleet.open(WorkTree(fleet_dir)).affected({"states/s03.yaml"})
        timings.append(time.perf_counter() - start)
    assert len(found) == RELEASES_PER_STATE, len(found)
    return statistics.median(timings) * 1000, len(found)


def measure(work: Path) -> dict[str, Any]:
    fleet_dir = work / "fleet"
    releases = generate(fleet_dir)
    load_before = os.getloadavg()[0]
    raw = RawEngine(fleet_dir, fleet_dir / "charts/svc")
    raw_rates = [raw.rate()]
    jobs = os.cpu_count() or 1
    runs = {
        "default": run_render(fleet_dir, work / "out", jobs),
        "one": run_render(fleet_dir, work / "out-1", 1),
    }
    raw_rates.append(raw.rate())
    files = sorted(p for p in (work / "out").rglob("*") if p.is_file())
    assert len(files) == 2 * releases, len(files)
    affected_ms, affected = _affected_ms(fleet_dir)
    return {
        "releases": releases,
        "files": len(files),
        "jobs": jobs,
        "runs": runs,
        "raw_rate": max(raw_rates),
        "raw_rates": raw_rates,
        "load": (load_before, os.getloadavg()[0]),
        "affected_ms": affected_ms,
        "affected": affected,
    }


def report(found: dict[str, Any]) -> str:
    releases, jobs, raw = found["releases"], found["jobs"], found["raw_rate"]
    runs: dict[str, RenderRun] = found["runs"]
    where = {"default": f"`--jobs {jobs}` (the default)", "one": "`--jobs 1`"}
    rows = []
    for name, run in runs.items():
        rate = releases / run.seconds
        rows.append(
            (
                f"full-fleet render rate, {where[name]}",
                f"{rate:.0f} releases/s ({releases} in {run.seconds:.1f} s; CPU {run.user:.1f} s "
                f"user, {run.system:.1f} s system; peak RSS {run.peak_rss_mib:.0f} MiB)",
            )
        )
    rows.append(
        (
            "raw Helm engine: the same chart and final values in a bare loop on one process "
            "(pass before / after the renders)",
            f"{raw:.0f} releases/s ({found['raw_rates'][0]:.0f} / {found['raw_rates'][1]:.0f})",
        )
    )
    for name, run in runs.items():
        processes = "one process against one" if name == "one" else f"{jobs} against one"
        rows.append(
            (
                f"ratio to the raw engine, {where[name]} ({processes})",
                f"{releases / run.seconds / raw:.3f}",
            )
        )
    rows.append(
        (
            f"affected roots of one edited state file ({found['affected']} of {releases} roots; "
            "in process, states loaded from scratch, median of 3)",
            f"{found['affected_ms']:.0f} ms",
        )
    )
    table = "\n".join(f"| {a} | {b} |" for a, b in rows)
    load = found["load"]
    header = section_header("helmfile")
    return f"""{MARKER}

{header}- Load: 1-minute load average {load[0]:.1f} before, {load[1]:.1f} after (the machine
  is shared: other processes' work lowers every rate measured here)

Generated kube-renderer fleet: a top-level helmfile.yaml listing ten states of 100 releases
(one Deployment + Service chart, per-release values templated from the state's values, the
`yq` file name generator, a label removed), {releases} roots rendered by `rollwright render`
into {found["files"]} files, byte for byte as kube-renderer writes them. Wall clock for the
whole command from a cold start (process start, loading the states, rendering, yq's
re-serialisation, writing). The raw engine loop is Helm alone on one process: it does not
load helmfile states, split documents or emit yq's bytes, which is the layout's own cost.

| measure | result |
|---|---|
{table}
"""


def run(work: Path) -> str:
    return report(measure(work))
