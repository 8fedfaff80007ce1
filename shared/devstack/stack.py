"""The embedded stack: a Temporal dev server, the worker, the gateway and — when no GitHub App
is configured — the GitHub emulator, all on loopback with state under one data directory.

`rollwright dev`, `rollwright demo`, the end-to-end test and the service benchmark all start it
through `DevStack`. The worker and the gateway are the production entry points
(`python -m worker`, `python -m gateway`) configured only through `ROLLWRIGHT_*` variables, so
the stack exercises exactly what a deployment runs. The emulator lives in this process (a
thread), so callers can seed repositories, push and click buttons on it directly.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from temporalio.client import Client

from shared.contracts.deploy import TASK_QUEUE
from shared.devstack import credentials, temporal
from shared.devstack.argocd import FakeArgoCD
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.gitremotes import write_gitconfig
from shared.devstack.lieutenant import FakeLieutenant
from shared.devstack.ports import LOOPBACK, free_port, free_ports, port_in_use, wait_for_port
from shared.devstack.processes import Child, Supervisor
from shared.devstack.sink import NotificationSink

EMULATOR_APP_ID = 1
EMULATOR_OAUTH_CLIENT_ID = "Iv1.rollwright-dev"
# With the GitHub emulator the stack also runs the fake Argo CD; the worker finds its token
# here (a fleet's `verify.argocd.tokenEnv` names it: see the demo's rollwright.yaml).
DEV_ARGOCD_TOKEN_VAR = "ROLLWRIGHT_DEV_ARGOCD_TOKEN"
# Variables the stack sets for its children; inherited values of these are replaced.
_STACK_VARS = (
    "ROLLWRIGHT_DATA_DIR",
    "ROLLWRIGHT_TEMPORAL_ADDRESS",
    "ROLLWRIGHT_TEMPORAL_NAMESPACE",
    "ROLLWRIGHT_TEMPORAL_UI_URL",
    "ROLLWRIGHT_DEV_MODE",
    DEV_ARGOCD_TOKEN_VAR,
    # the fake Lieutenant's, as Commodore reads them (commodore tenants)
    "COMMODORE_API_URL",
    "COMMODORE_API_TOKEN",
)
_GITHUB_VARS = (
    "ROLLWRIGHT_GITHUB_API_URL",
    "ROLLWRIGHT_GITHUB_APP_ID",
    "ROLLWRIGHT_GITHUB_PRIVATE_KEY",
    "ROLLWRIGHT_GITHUB_PRIVATE_KEY_FILE",
    "ROLLWRIGHT_GITHUB_OAUTH_CLIENT_ID",
    "ROLLWRIGHT_GITHUB_OAUTH_CLIENT_SECRET",
)


class StackError(RuntimeError):
    """The stack could not start (a port in use, a piece that never became ready)."""


@dataclass(frozen=True)
class StackOptions:
    data_dir: Path = Path(".rollwright")
    host: str = LOOPBACK
    temporal_port: int = 7233
    ui_port: int = 8233
    gateway_port: int = 8000
    emulator_port: int = 9100
    namespace: str = "default"
    # An external Temporal (host:port) instead of the dev server; None starts the dev server.
    temporal_address: str | None = None
    worker: bool = True
    gateway: bool = True
    # None: run the emulator exactly when no GitHub App is configured in `env`.
    emulator: bool | None = None
    headless_ui: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    ready_timeout: float = 90.0

    def with_free_ports(self) -> StackOptions:
        """The same options on ports the OS says are free (tests, the demo, benchmarks)."""
        temporal, ui, gateway, emulator = free_ports(4, self.host)
        return replace(
            self,
            temporal_port=temporal,
            ui_port=ui,
            gateway_port=gateway,
            emulator_port=emulator,
        )

    @property
    def local_host(self) -> str:
        """Where this machine reaches what binds to `host` (a wildcard means loopback)."""
        return LOOPBACK if self.host in ("0.0.0.0", "::", "") else self.host

    @property
    def use_emulator(self) -> bool:
        if self.emulator is not None:
            return self.emulator
        configured = self.env.get("ROLLWRIGHT_GITHUB_APP_ID") and (
            self.env.get("ROLLWRIGHT_GITHUB_PRIVATE_KEY")
            or self.env.get("ROLLWRIGHT_GITHUB_PRIVATE_KEY_FILE")
        )
        return not configured


@dataclass(frozen=True)
class StackURLs:
    temporal_address: str
    temporal_ui: str | None
    gateway: str
    emulator: str | None
    argocd: str | None = None  # the fake Argo CD (with the emulator)

    def workflow_url(self, workflow_id: str, namespace: str = "default") -> str | None:
        """The Temporal UI page of a workflow (its latest run)."""
        if self.temporal_ui is None:
            return None
        quoted = urllib.parse.quote(workflow_id, safe="")
        return f"{self.temporal_ui}/namespaces/{namespace}/workflows/{quoted}"


Printer = Callable[[str], None]


def _print(line: str) -> None:
    print(line, flush=True)


class DevStack:
    """Start with `start()` (or `with DevStack(...) as stack:`), stop with `stop()`."""

    def __init__(self, options: StackOptions, *, out: Printer = _print) -> None:
        self.options = options
        self.out = out
        self.data_dir = options.data_dir.resolve()
        self.supervisor = Supervisor(self.data_dir / "logs")
        self.emulator: GitHubEmulator | None = None
        self.argocd: FakeArgoCD | None = None
        self.lieutenant: FakeLieutenant | None = None
        self.sink: NotificationSink | None = None
        self.env: dict[str, str] = {}
        self.webhook_secret = ""
        self.api_token = ""
        self.app_key_file: Path | None = None
        self.repositories: dict[str, Path] = {}  # owner/name → local git repository
        self._urls: StackURLs | None = None
        # worker child name → (its /metrics URL, its Temporal SDK metrics URL)
        self.worker_metrics: dict[str, tuple[str, str]] = {}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> StackURLs:
        opts = self.options
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._check_ports()
            address = self.start_temporal()
            ui = None
            if opts.temporal_address is None and not opts.headless_ui:
                ui = f"http://{opts.local_host}:{opts.ui_port}"
            gateway = f"http://{opts.local_host}:{opts.gateway_port}"
            self._credentials()
            if opts.use_emulator:
                self._start_emulator(gateway)
                # Applications are added by whoever publishes to git (the demo does).
                self.argocd = FakeArgoCD(token=secrets.token_urlsafe(24), host=LOOPBACK).start()
                # Clusters and tenants are added by whoever serves a commodore tenant (the demo).
                self.lieutenant = FakeLieutenant(
                    token=secrets.token_urlsafe(24), host=LOOPBACK
                ).start()
                # where the worker's notifications go (both sinks: Slack's format and signed)
                self.sink = NotificationSink(secret=secrets.token_urlsafe(24), host=LOOPBACK)
                self.sink.start()
            self.env = self._child_env(address, ui, gateway)
            self._urls = StackURLs(
                address,
                ui,
                gateway,
                self.emulator.url if self.emulator else None,
                self.argocd.url if self.argocd else None,
            )
            if opts.gateway:
                self._start_gateway()
            if opts.worker:
                self.start_worker()
        except BaseException:
            self.stop()
            raise
        return self._urls

    def stop(self) -> None:
        self.supervisor.stop()
        if self.emulator is not None:
            self.emulator.stop()
            self.emulator = None
        if self.argocd is not None:
            self.argocd.stop()
            self.argocd = None
        if self.lieutenant is not None:
            self.lieutenant.stop()
            self.lieutenant = None
        if self.sink is not None:
            self.sink.stop()
            self.sink = None

    def __enter__(self) -> DevStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def urls(self) -> StackURLs:
        if self._urls is None:
            raise RuntimeError("the stack is not started")
        return self._urls

    def check(self) -> None:
        """Raise ChildExited when a child process stopped."""
        self.supervisor.check()

    def wait(self) -> None:
        """Block until a child exits (ChildExited) or the caller is interrupted."""
        self.supervisor.wait_any()

    def add_repository(
        self,
        owner: str,
        name: str,
        git_dir: Path,
        *,
        installation_id: int = 1,
        default_branch: str = "main",
    ) -> None:
        """Install the emulated App on `owner/name`, backed by the local repo at `git_dir`.

        The emulator's webhooks name the repository by its (emulated) HTTP clone URL, which
        serves no git. The worker's git reads a config file written here that rewrites that
        URL to the local path (`url.<path>.insteadOf`), so the mirror code runs unchanged.
        """
        if self.emulator is None:
            raise StackError("repositories can only be added to the GitHub emulator")
        git_dir = git_dir.resolve()
        self.emulator.seed_repository(owner, name, installation_id, default_branch, git_dir=git_dir)
        self.repositories[f"{owner}/{name}"] = git_dir
        self._write_gitconfig()

    def clone_url(self, owner: str, name: str) -> str:
        """The clone URL the emulator's payloads carry for `owner/name`."""
        if self.emulator is None:
            raise StackError("no GitHub emulator")
        return f"{self.emulator.url}/{owner}/{name}.git"

    def _write_gitconfig(self) -> None:
        urls = {}
        for full_name, git_dir in self.repositories.items():
            owner, _, name = full_name.partition("/")
            urls[self.clone_url(owner, name)] = git_dir
        write_gitconfig(self._gitconfig, urls)

    @property
    def _gitconfig(self) -> Path:
        return self.data_dir / "gitconfig"

    def client(self) -> Client:
        """A Temporal client (pydantic data converter), connected from synchronous code."""
        return asyncio.run(self.async_client())

    async def async_client(self) -> Client:
        return await temporal.connect(self.urls.temporal_address, self.options.namespace)

    # ------------------------------------------------------------------ pieces

    def _check_ports(self) -> None:
        opts = self.options
        wanted: list[tuple[str, str, int]] = []
        if opts.temporal_address is None:
            wanted.append(("Temporal", opts.local_host, opts.temporal_port))
            if not opts.headless_ui:
                wanted.append(("Temporal UI", opts.local_host, opts.ui_port))
        if opts.gateway:
            wanted.append(("gateway", opts.local_host, opts.gateway_port))
        if opts.use_emulator:
            wanted.append(("GitHub emulator", LOOPBACK, opts.emulator_port))
        for name, host, port in wanted:
            if port_in_use(port, host):
                raise StackError(
                    f"{name} port {host}:{port} is already in use "
                    "(another `rollwright dev`?); pick another port with the command's options"
                )

    def start_temporal(self) -> str:
        """Start the dev server (unless an external Temporal is configured) and wait until it
        serves; its address. Called by `start`, and again after the server was killed: it
        comes back on the same port with the state in its database file."""
        opts = self.options
        if opts.temporal_address is not None:
            address = opts.temporal_address
            self.out(f"  Temporal         using {address} (not starting a dev server)")
        else:
            address = f"{opts.local_host}:{opts.temporal_port}"
            argv = temporal.dev_server_argv(
                temporal.temporal_binary(),
                ip=opts.host,
                port=opts.temporal_port,
                ui_port=opts.ui_port,
                db_file=self.data_dir / "temporal.db",
                namespace=opts.namespace,
                headless=opts.headless_ui,
            )
            # first: the gateway and workers talk to it, so it is stopped after them
            child = self.supervisor.start("temporal", argv, env=dict(opts.env), first=True)
            self.out(f"  starting         Temporal dev server (pid {child.pid})")
        asyncio.run(self._temporal_ready(address))
        return address

    async def _temporal_ready(self, address: str) -> None:
        deadline = time.monotonic() + self.options.ready_timeout
        while True:
            self.supervisor.check()
            try:
                client = await temporal.wait_until_serving(
                    address, self.options.namespace, timeout=2.0
                )
                break
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise StackError(f"Temporal at {address} never became ready") from None
        added = await temporal.ensure_search_attributes(client, self.options.namespace)
        if added:
            self.out(f"  registered       search attributes {', '.join(added)}")

    def _credentials(self) -> None:
        env = self.options.env
        self.webhook_secret = env.get("ROLLWRIGHT_WEBHOOK_SECRET") or credentials.ensure_token(
            self.data_dir / "webhook-secret"
        )
        self.api_token = env.get("ROLLWRIGHT_API_TOKEN") or credentials.ensure_token(
            self.data_dir / "api-token"
        )
        if self.options.use_emulator:
            self.app_key_file = self.data_dir / "github-app.pem"
            credentials.ensure_app_key(self.app_key_file)

    def _start_emulator(self, gateway: str) -> None:
        assert self.app_key_file is not None
        self.emulator = GitHubEmulator(
            app_id=EMULATOR_APP_ID,
            app_key=self.app_key_file.read_text(),
            webhook_url=f"{gateway}/events",
            webhook_secret=self.webhook_secret,
            # the control API has no authentication: loopback only, whatever --host says
            host=LOOPBACK,
            port=self.options.emulator_port,
            # A sandbox: whoever one clicks as has write access (the control API sets less).
            default_permission="write",
            # The pages' sign-in goes through the emulator's OAuth flow; a secret kept in the
            # data directory keeps sessions valid across restarts of the stack.
            oauth_client_id=EMULATOR_OAUTH_CLIENT_ID,
            oauth_client_secret=credentials.ensure_token(self.data_dir / "oauth-client-secret"),
        ).start()

    def _child_env(self, address: str, ui: str | None, gateway: str) -> dict[str, str]:
        opts = self.options
        env = {k: v for k, v in opts.env.items() if k not in _STACK_VARS}
        env.update(
            {
                "ROLLWRIGHT_DATA_DIR": str(self.data_dir),
                "ROLLWRIGHT_TEMPORAL_ADDRESS": address,
                "ROLLWRIGHT_TEMPORAL_NAMESPACE": opts.namespace,
                # yours wins (a tunnel for a real App's webhooks); else the local gateway
                "ROLLWRIGHT_PUBLIC_URL": opts.env.get("ROLLWRIGHT_PUBLIC_URL") or gateway,
                "ROLLWRIGHT_WEBHOOK_SECRET": self.webhook_secret,
                "ROLLWRIGHT_API_TOKEN": self.api_token,
                "PYTHONUNBUFFERED": "1",
            }
        )
        if ui is not None:
            env["ROLLWRIGHT_TEMPORAL_UI_URL"] = ui
        if self.emulator is not None:
            assert self.app_key_file is not None
            for name in _GITHUB_VARS:
                env.pop(name, None)
            self._write_gitconfig()
            env["GIT_CONFIG_GLOBAL"] = str(self._gitconfig)
            env.update(
                {
                    # job pages offer the check runs' buttons, clicked on the emulator
                    "ROLLWRIGHT_DEV_MODE": "true",
                    "ROLLWRIGHT_GITHUB_API_URL": self.emulator.url,
                    "ROLLWRIGHT_GITHUB_APP_ID": str(EMULATOR_APP_ID),
                    "ROLLWRIGHT_GITHUB_PRIVATE_KEY_FILE": str(self.app_key_file),
                    "ROLLWRIGHT_GITHUB_OAUTH_CLIENT_ID": self.emulator.oauth_client_id,
                    "ROLLWRIGHT_GITHUB_OAUTH_CLIENT_SECRET": self.emulator.oauth_client_secret,
                }
            )
        if self.argocd is not None:
            env[DEV_ARGOCD_TOKEN_VAR] = self.argocd.token
        if self.lieutenant is not None:
            env["COMMODORE_API_URL"] = self.lieutenant.url
            env["COMMODORE_API_TOKEN"] = self.lieutenant.token
        if self.sink is not None:
            env["ROLLWRIGHT_NOTIFY_WEBHOOK_URL"] = self.sink.webhook_url
            env["ROLLWRIGHT_NOTIFY_WEBHOOK_SECRET"] = self.sink.secret
            env["ROLLWRIGHT_NOTIFY_SLACK_URL"] = self.sink.slack_url
        return env

    def _start_gateway(self) -> None:
        opts = self.options
        argv = [
            sys.executable,
            "-m",
            "gateway",
            "--host",
            opts.host,
            "--port",
            str(opts.gateway_port),
        ]
        child = self.supervisor.start("gateway", argv, env=self.env)
        self.out(f"  starting         gateway (pid {child.pid})")
        self._wait(
            "gateway",
            lambda: _http_ok(f"{self.urls.gateway}/healthz"),
        )

    def start_worker(
        self, worker_id: str | None = None, *, env: Mapping[str, str] | None = None
    ) -> Child:
        """Start a worker process and wait until it polls. `worker_id` names it (child
        `worker-<id>`, `ROLLWRIGHT_WORKER_ID`, its own task queue) and gives it a git cache of
        its own, as separate hosts have: several workers, or one started again after a crash.
        Without it: the stack's one worker, `<hostname>-<pid>`, the data directory's cache.
        `env`: variables for this worker on top of the stack's."""
        env = {**self.env, **(env or {})}
        name = "worker"
        if worker_id is not None:
            name = f"worker-{worker_id}"
            env["ROLLWRIGHT_WORKER_ID"] = worker_id
            env["ROLLWRIGHT_GIT_CACHE_DIR"] = str(self.data_dir / "workers" / worker_id / "git")
        # each worker's metrics on ports of its own (several may run, as on separate hosts)
        ours, sdk = free_ports(2, LOOPBACK)
        env["ROLLWRIGHT_WORKER_METRICS_ADDRESS"] = f"{LOOPBACK}:{ours}"
        env["ROLLWRIGHT_TEMPORAL_METRICS_ADDRESS"] = f"{LOOPBACK}:{sdk}"
        self.worker_metrics[name] = (
            f"http://{LOOPBACK}:{ours}/metrics",
            f"http://{LOOPBACK}:{sdk}/metrics",
        )
        child = self.supervisor.start(name, [sys.executable, "-m", "worker"], env=env)
        self.out(f"  starting         {name} (pid {child.pid})")

        queue = self.env.get("ROLLWRIGHT_TASK_QUEUE") or TASK_QUEUE

        def polling() -> bool:
            async def check() -> bool:
                client = await temporal.connect(self.urls.temporal_address, self.options.namespace)
                # the SDK's default identity is `<pid>@<host>`: this worker, not one of a
                # previous run that Temporal still remembers polling
                return await temporal.has_pollers(client, queue, identity=f"{child.pid}@")

            return asyncio.run(check())

        self._wait(name, polling)
        return child

    def _wait(self, name: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.options.ready_timeout
        while time.monotonic() < deadline:
            self.supervisor.check()
            if ready():
                return
            time.sleep(0.2)
        raise StackError(
            f"{name} did not become ready within {self.options.ready_timeout:.0f}s "
            f"(log: {self.supervisor.log_dir / (name + '.log')})"
        )

    # ------------------------------------------------------------------ output

    def banner(self) -> str:
        urls = self.urls
        opts = self.options
        lines = [
            f"rollwright dev stack is up · data in {_display(self.data_dir)}",
            f"  Temporal         {urls.temporal_address} (namespace {opts.namespace})",
        ]
        if urls.temporal_ui:
            lines.append(f"  Temporal UI      {urls.temporal_ui}")
        if opts.gateway:
            lines.append(f"  gateway          {urls.gateway}  (webhooks: POST /events)")
        if self.emulator is not None and self.app_key_file is not None:
            lines.append(
                f"  GitHub emulator  {self.emulator.url}  (App id {EMULATOR_APP_ID}, key "
                f"{_display(self.app_key_file)}; control API under /_emulator/)"
            )
        else:
            lines.append(
                f"  GitHub           {self.env.get('ROLLWRIGHT_GITHUB_API_URL', 'api.github.com')}"
            )
        if self.argocd is not None:
            lines.append(
                f"  fake Argo CD     {self.argocd.url}  (token in the worker's "
                f"{DEV_ARGOCD_TOKEN_VAR}; control API under /_argocd/)"
            )
        lines += [
            f"  SQL              {self._database_url()}",
            f"  blob store       {_display(self.data_dir / 'blobs')}",
            f"  webhook secret   {_display(self.data_dir / 'webhook-secret')}"
            if "ROLLWRIGHT_WEBHOOK_SECRET" not in opts.env
            else "  webhook secret   from ROLLWRIGHT_WEBHOOK_SECRET",
            f"  API token        {_display(self.data_dir / 'api-token')}"
            if "ROLLWRIGHT_API_TOKEN" not in opts.env
            else "  API token        from ROLLWRIGHT_API_TOKEN",
            f"  logs             {_display(self.supervisor.log_dir)}/",
        ]
        return "\n".join(lines)

    def _database_url(self) -> str:
        return self.env.get("ROLLWRIGHT_DATABASE_URL") or (
            f"sqlite:///{_display(self.data_dir / 'rollwright.db')}"
        )


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(200 <= response.status < 300)
    except (urllib.error.URLError, OSError):
        return False


def _display(path: Path) -> str:
    """A path relative to the working directory when it is inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


__all__ = ["DevStack", "StackError", "StackOptions", "StackURLs", "wait_for_port"]


def options_from_args(args: argparse.Namespace, data_dir: Path) -> StackOptions:
    """The stack `rollwright dev` / `demo` start: ports given or free ones, this environment."""
    given = [args.temporal_port, args.ui_port, args.port, args.emulator_port]
    chosen = [p for p in given if p]

    def port(value: int) -> int:
        if not value:
            value = free_port(args.host, avoid=chosen)
            chosen.append(value)
        return value

    temporal, ui, gateway, emulator = (port(p) for p in given)
    return StackOptions(
        data_dir=data_dir,
        host=args.host,
        temporal_port=temporal,
        ui_port=ui,
        gateway_port=gateway,
        emulator_port=emulator,
        temporal_address=getattr(args, "temporal_address", None),
        env=dict(os.environ),
    )
