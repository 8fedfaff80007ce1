"""Rendering on worker processes: the same renders in the same order as the serial path, fleet
errors reported the same way, and no worker left behind (Ctrl-C, a killed worker)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared.engine import parallel
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.secrets.redact import keyed_markers
from shared.engine.tree import WorkTree
from tests.bench import fleetgen
from tests.support.paths import EXAMPLES

BIN = Path(sys.executable).parent

SECRET_MANIFESTS = {
    "templates/creds/manifests/secret.yaml": (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: hunter2\n"
    ),
    "templates/creds/helmfile.yaml": "releases:\n  - name: creds\n    chart: ./manifests\n",
    "deployments/apps/creds/deployment.yaml": "apps:\n  - template: creds\n",
}


def small_fleet(base: Path, *, clusters: int = 33, releases: int = 1) -> Path:
    """A generated atlas fleet (2 groups) plus a release with a `v1` Secret, so that the
    redacted files differ from the plaintext ones."""
    fleetgen.generate(base, groups=2, clusters_per_group=clusters, releases=releases)
    for rel, text in SECRET_MANIFESTS.items():
        fleetgen.write(base / rel, text)
    return base


def rollwright(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "rollwright"), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
        env=env,
    )


def tree(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


@pytest.mark.parametrize("example", ["atlas-fleet", "dimensions-fleet"])
def test_same_renders_in_the_same_order_as_serial(example: str) -> None:
    fleet = Fleet.open(WorkTree(EXAMPLES / example))
    roots = fleet.roots()
    serial = list(fleet.render_all(roots))
    par = list(parallel.render_all(fleet, roots, 2, min_roots_per_worker=1))
    assert [r.root for r in par] == roots
    assert [r.digest for r in par] == [r.digest for r in serial]
    assert [r.files for r in par] == [r.files for r in serial]
    assert [r.reveal() for r in par] == [r.reveal() for r in serial]


def test_redacted_and_plaintext_files_both_survive_the_trip(tmp_path: Path) -> None:
    fleet = Fleet.open(WorkTree(small_fleet(tmp_path / "fleet", clusters=2)))
    roots = fleet.roots()
    serial = list(fleet.render_all(roots))
    par = list(parallel.render_all(fleet, roots, 2, min_roots_per_worker=1))
    assert par == serial
    assert all(r.redacted for r in par)
    assert all(b"hunter2" not in b"".join(r.files.values()) for r in par)
    assert [r.reveal() for r in par] == [r.reveal() for r in serial]


def test_worker_processes_key_their_markers_like_the_parent(tmp_path: Path) -> None:
    fleet = Fleet.open(WorkTree(small_fleet(tmp_path / "fleet", clusters=2)))
    roots = fleet.roots()
    with keyed_markers(b"k" * 32):
        serial = list(fleet.render_all(roots))
        par = list(parallel.render_all(fleet, roots, 2, min_roots_per_worker=1))
    assert par == serial
    shown = b"".join(b"".join(r.files.values()) for r in par)
    assert b"REDACTED:hmac:" in shown and b"REDACTED:sha256:" not in shown


def test_render_into_places_roots_like_the_serial_writer(tmp_path: Path) -> None:
    fleet = Fleet.open(WorkTree(small_fleet(tmp_path / "fleet", clusters=3)))
    roots = fleet.roots()
    for reveal in (False, True):
        serial, par = tmp_path / f"serial-{reveal}", tmp_path / f"par-{reveal}"
        for out in (serial, par):  # stale output: replaced per root, the rest left alone
            fleetgen.write(out / roots[0] / "stale.yaml", "old\n")
            fleetgen.write(out / "unrelated/keep.yaml", "keep\n")
        placed = list(parallel.render_into(fleet, roots, 1, serial, reveal=reveal))
        assert placed == roots
        placed = list(
            parallel.render_into(fleet, roots, 2, par, reveal=reveal, min_roots_per_worker=1)
        )
        assert placed == roots
        assert tree(par) == tree(serial)
        assert (par / "unrelated/keep.yaml").exists() and not (
            par / roots[0] / "stale.yaml"
        ).exists()
        assert not [p for p in par.iterdir() if p.name.startswith(".rollwright")]
        secret = next(par.rglob("Secret_creds.yaml")).read_bytes()
        assert (b"hunter2" in secret) is reveal


def test_render_into_stops_at_the_failing_root(tmp_path: Path) -> None:
    repo = small_fleet(tmp_path / "fleet", clusters=3)
    (repo / "deployments/g000/c000-002/cluster.values.yaml").write_text("a: [\n")
    fleet = Fleet.open(WorkTree(repo))
    out = tmp_path / "out"
    placed: list[str] = []
    with pytest.raises(FleetError, match="g000/c000-002"):
        for root in parallel.render_into(
            fleet, fleet.roots(), 2, out, reveal=False, min_roots_per_worker=1
        ):
            placed.append(root)
    assert placed == ["g000/c000-000", "g000/c000-001"]
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/*")) == placed
    assert [p.name for p in out.iterdir()] == ["g000"]  # no staging left behind


def test_cli_keys_its_markers_with_the_redaction_key(tmp_path: Path) -> None:
    repo = small_fleet(tmp_path / "fleet")
    keyed = {**os.environ, "ROLLWRIGHT_REDACTION_KEY": "team key"}
    unkeyed = {k: v for k, v in os.environ.items() if k != "ROLLWRIGHT_REDACTION_KEY"}
    for name, env, marker in (("keyed", keyed, b"hmac"), ("plain", unkeyed, b"sha256")):
        out = tmp_path / name
        done = rollwright("render", "--repo", str(repo), "--out", str(out), "--jobs", "2", env=env)
        assert done.returncode == 0, done.stderr
        shown = b"".join(tree(out).values())
        assert b"REDACTED:" + marker + b":" in shown and b"hunter2" not in shown
    assert tree(tmp_path / "keyed").keys() == tree(tmp_path / "plain").keys()


def test_worker_count() -> None:
    # processes rendering, this one included: --jobs 2 starts one worker process
    assert parallel.worker_count(1000, 2) == 2
    assert parallel.worker_count(1000, 1) == 0  # serial, in process
    assert parallel.worker_count(40, 4) == 0  # too few roots to pay for processes
    assert parallel.worker_count(64, 4) == 2
    assert parallel.worker_count(3, 4, min_roots_per_worker=1) == 3


def test_cli_jobs_gives_the_same_tree_as_serial(tmp_path: Path) -> None:
    repo = small_fleet(tmp_path / "fleet")
    for jobs in ("1", "2"):
        done = rollwright(
            "render", "--repo", str(repo), "--out", str(tmp_path / jobs), "--jobs", jobs
        )
        assert done.returncode == 0, done.stderr
        [summary] = done.stderr.splitlines()  # only the summary, in a pipe too
        assert summary.startswith("rendered 66 root(s), ")
    one, two = tree(tmp_path / "1"), tree(tmp_path / "2")
    # 66 roots: enough for two workers (parallel.MIN_ROOTS_PER_WORKER)
    assert parallel.worker_count(66, 2) == 2
    assert len(one) == 66 * 3 and one == two


def test_cli_error_in_one_root_is_reported_like_serial(tmp_path: Path) -> None:
    repo = small_fleet(tmp_path / "fleet")
    bad = repo / "deployments/g001/c001-003/cluster.values.yaml"
    bad.write_text("replicas: [1\n")
    results = {}
    for jobs in ("1", "2"):
        out = tmp_path / jobs
        results[jobs] = rollwright("render", "--repo", str(repo), "--out", str(out), "--jobs", jobs)
    assert results["1"].returncode == results["2"].returncode == 1
    problems = {jobs: done.stderr.splitlines()[:-1] for jobs, done in results.items()}
    assert problems["2"] == problems["1"]
    assert "Traceback" not in results["2"].stderr
    # The render refuses with the problem as `validate` prints it (docs/formats/problems.md).
    [problem] = problems["2"]
    assert problem.startswith("deployments/g001/c001-003/cluster.values.yaml:2: YAML syntax error")
    assert problem.endswith(" (in root g001/c001-003)")
    summary = results["2"].stderr.splitlines()[-1]
    assert (
        summary.startswith("rendered 65 of 66 root(s), ") and "1 failed (g001/c001-003)" in summary
    )
    # Every other root is written, the same with and without workers; nothing of the failing one.
    assert tree(tmp_path / "1") == tree(tmp_path / "2")
    written = sorted(p.relative_to(tmp_path / "2").as_posix() for p in (tmp_path / "2").glob("*/*"))
    assert len(written) == 65 and "g001/c001-003" not in written


def test_cli_rejects_a_bad_jobs_value(tmp_path: Path) -> None:
    done = rollwright(
        "render", "--repo", str(tmp_path), "--out", str(tmp_path / "o"), "--jobs", "0"
    )
    assert done.returncode == 2
    assert "expected a positive number of processes" in done.stderr


def children(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text()
        found |= {int(c) for c in text.split()}
    return found


def workers_of(pid: int) -> set[int]:
    out = set()
    for child in children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"worker_main" in cmdline:
            out.add(child)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def start_render(
    repo: Path, out: Path, *, rendering: bool = True
) -> tuple[subprocess.Popen[str], set[int]]:
    """`rollwright render --jobs 3` (the parent and two worker processes) in its own process
    group, returned once both workers exist and, with `rendering`, once the first roots are
    in place."""
    proc = subprocess.Popen(
        [str(BIN / "rollwright"), "render", "--repo", str(repo), "--out", str(out), "--jobs", "3"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, like a shell job
    )
    deadline = time.monotonic() + 60
    workers: set[int] = set()
    while time.monotonic() < deadline:
        workers = workers_of(proc.pid)
        placed = out.is_dir() and any(not p.name.startswith(".") for p in out.iterdir())
        if len(workers) == 2 and (placed or not rendering):
            return proc, workers
        time.sleep(0.01)
    proc.kill()
    pytest.fail("the render did not start two workers")


@pytest.fixture(scope="module")
def big_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("big") / "fleet"
    fleetgen.generate(base, groups=4, clusters_per_group=100, releases=10)
    return base


@pytest.mark.parametrize("rendering", [False, True], ids=["starting", "rendering"])
def test_ctrl_c_stops_the_render_and_its_workers(
    big_fleet: Path, tmp_path: Path, rendering: bool
) -> None:
    proc, workers = start_render(big_fleet, tmp_path / "out", rendering=rendering)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the foreground job
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(w) for w in workers)
    assert not list((tmp_path / "out").glob(".rollwright-render-*"))  # staging removed


def test_a_killed_worker_is_an_error_not_a_hang(big_fleet: Path, tmp_path: Path) -> None:
    proc, workers = start_render(big_fleet, tmp_path / "out")
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"render worker process {victim} was killed by signal 9" in err
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(w) for w in workers)
