"""What every benchmark section shares: git, the machine line, the section header and RSS."""

from __future__ import annotations

import datetime
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import helm_python
import yaml

from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree

BIN = Path(sys.executable).parent


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def machine() -> str:
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem_gib:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def section_header(only: str) -> str:
    """The Date / Machine / Command lines every section of docs/benchmarks.md starts with."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    return (
        f"- Date: {now}\n"
        f"- Machine: {machine()}; 1-minute load average {load:.1f} at the end\n"
        f"- Command: `make bench` (`python -m tests.bench.run --write docs/benchmarks.md`; "
        f"this section alone: `--only {only}`)\n"
    )


def process_tree(pid: int) -> set[int]:
    """`pid` and all its descendants, from /proc."""
    found = {pid}
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                children = {int(c) for c in (task / "children").read_text().split()}
            except (FileNotFoundError, ProcessLookupError):
                continue
            todo.extend(children - found)
            found |= children
    return found


def peak_rss_kib(pid: int) -> int:
    """VmHWM: the process's own peak resident set size so far."""
    return _status_kib(pid, "VmHWM")


def rss_kib(pid: int) -> int:
    """VmRSS: the process's resident set size now."""
    return _status_kib(pid, "VmRSS")


def _status_kib(pid: int, field: str) -> int:
    """A KiB figure of /proc/<pid>/status (0 when the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def write_section(path: Path, marker: str, section: str) -> None:
    """Replace the section headed `marker` in `path` (or append it)."""
    header = (
        "# Benchmarks\n\nResults of `make bench`; each section is rewritten by its own run.\n\n"
    )
    text = path.read_text() if path.exists() else header
    if marker in text:
        start = text.index(marker)
        rest = text[start + len(marker) :]
        end = rest.find("\n## ")
        tail = rest[end + 1 :] if end >= 0 else ""
        text = text[:start] + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


@dataclass
class RenderRun:
    seconds: float  # wall clock of the whole command
    peak_rss_mib: float
    user: float  # CPU seconds of the command and its workers
    system: float


def run_render(fleet_dir: Path, out: Path, jobs: int) -> RenderRun:
    """`rollwright render --jobs N`: wall seconds (process start, discovery and writing the
    files included), CPU seconds, and the peak RSS of its processes in MiB: the sum of each
    process's own peak (parent, workers, multiprocessing's helper), sampled every 50 ms.
    With one process this is what getrusage reports; the sum is the honest figure for
    several."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [str(BIN / "rollwright"), "render", "--repo", str(fleet_dir), "--out", str(out)]
    start = time.perf_counter()
    proc = subprocess.Popen([*cmd, "--jobs", str(jobs)], stdin=subprocess.DEVNULL)
    peaks: dict[int, int] = {}
    while proc.poll() is None:
        for pid in process_tree(proc.pid):
            peaks[pid] = max(peaks.get(pid, 0), peak_rss_kib(pid))
        time.sleep(0.05)
    elapsed = time.perf_counter() - start
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    largest = after.ru_maxrss if after.ru_maxrss > before.ru_maxrss else 0
    return RenderRun(
        seconds=elapsed,
        peak_rss_mib=max(sum(peaks.values()), largest) / 1024,
        user=after.ru_utime - before.ru_utime,
        system=after.ru_stime - before.ru_stime,
    )


class RawEngine:
    """helm_python rendering what `rollwright render` renders, nothing else: the same chart
    with the same final values (`Fleet.values`) for every release of the fleet, in a bare
    loop on one process. A pass takes seconds, like the render it is compared with."""

    def __init__(self, fleet_dir: Path, chart: Path) -> None:
        fleet = Fleet.open(WorkTree(fleet_dir))
        self.jobs = [
            (info.id.split("/")[-1], info.namespace, fleet.values(root, info.id))
            for root in fleet.roots()
            for info in fleet.releases(root)
        ]
        self.chart = helm_python.Chart.load(str(chart))

    def rate(self) -> float:
        start = time.perf_counter()
        for name, namespace, values in self.jobs:
            self.chart.render(values, name=name, namespace=namespace)
        return len(self.jobs) / (time.perf_counter() - start)

    def round_trip_rate(self) -> float:
        """The same loop, each rendered document then parsed and dumped once by PyYAML with
        libyaml (its C loader and dumper, the settings of rollwright's output), nothing
        written: what PyYAML alone adds to the engine for files that are PyYAML's bytes, the
        reference the render's ratio is read against."""
        loader = yaml.CSafeLoader
        dumper = yaml.CSafeDumper
        start = time.perf_counter()
        for name, namespace, values in self.jobs:
            for text in self.chart.render(values, name=name, namespace=namespace).values():
                for doc in yaml.load_all(text, Loader=loader):
                    if doc is not None:
                        yaml.dump(
                            doc,
                            Dumper=dumper,
                            sort_keys=False,
                            default_flow_style=False,
                            allow_unicode=True,
                        )
        return len(self.jobs) / (time.perf_counter() - start)
