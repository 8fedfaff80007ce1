"""A stateful fake of the slice of Argo CD's REST API that delivery verification reads.

Used by the tests and the embedded stack, like the GitHub emulator beside it: an HTTP server
(stdlib `ThreadingHTTPServer` in a background thread, or its own process) that serves

- `GET /api/v1/applications` (query `selector`: a label selector, `name`, `repo`, `project`)
  and `GET /api/v1/applications/{name}`, with bodies shaped like Argo CD's `v1alpha1Application`
  and `v1alpha1ApplicationList` (tests validate them against `swagger.json`);
- bearer-token authentication: without the configured token Argo CD answers 401 with a
  `runtimeError` body, and so does this fake.

Each application has a git source. Every read of an application is one reconciliation (the
fake has no clock of its own, so tests move it by polling, as the verifier does):

1. the source revision moved (the branch of a local git repository, read with `git rev-parse`,
   or a revision the test gave with `set_revision`) → `OutOfSync`, health unchanged;
2. next read: the sync operation runs → `Synced` at the new revision, health `Progressing`,
   `operationState.phase` `Succeeded`; or, by behaviour, the sync fails (`phase: Failed`, a
   `SyncError` condition, still `OutOfSync`) or never happens (`OutOfSync` for ever);
3. next read: `Healthy`, or `Degraded` with a message when the behaviour says so.

Control endpoints under `/_argocd/…` (no auth; bind to loopback) add applications, set a
revision or a behaviour and read the state back; the same operations are methods.

Run standalone: `python -m shared.devstack.argocd --port 9200 --token t --git-dir /tmp/pub.git`.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import threading
import urllib.parse
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from shared.devstack.background import BackgroundHTTPServer, FakeRequestHandler

Behaviour = Literal["healthy", "degraded", "never_sync", "sync_fails"]
BEHAVIOURS: tuple[str, ...] = get_args(Behaviour)
# gRPC status codes Argo CD's gateway puts in `runtimeError.code`.
_UNAUTHENTICATED, _NOT_FOUND, _INVALID = 16, 5, 3


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ArgoError(Exception):
    """An answer other than 200, with Argo CD's `runtimeError` body."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": message, "code": code, "message": message}


@dataclass
class FakeApplication:
    """One Application: its spec, and where its reconciliation stands."""

    name: str
    path: str
    repo_url: str = ""
    target_revision: str = "HEAD"
    labels: dict[str, str] = field(default_factory=dict)
    project: str = "default"
    destination_namespace: str = "default"
    behaviour: Behaviour = "healthy"
    told_revision: str = ""  # set_revision(): wins over reading the git branch
    # Reconciliation state.
    synced_revision: str = ""
    sync_status: str = "Unknown"
    health_status: str = "Missing"
    health_message: str = ""
    stage: Literal["idle", "out_of_sync", "progressing"] = "idle"
    operation: dict[str, Any] | None = None
    conditions: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    failed_revision: str = ""  # the revision whose sync failed (not tried again)
    reads: int = 0
    uid: str = ""


class _Handler(FakeRequestHandler):
    owner: FakeArgoCD
    server_version = "argocd-server"

    def _serve(self) -> None:
        headers, raw = self.read_request()
        status, body = self.owner.dispatch(self.command, self.path, headers, raw)
        self.write_answer(status, "application/json", json.dumps(body).encode())

    do_GET = do_POST = _serve


class FakeArgoCD(BackgroundHTTPServer):
    """The fake Argo CD. `start()` it (or use it as a context manager); `url` is its base.

    `git_dir`: a git repository whose branches are the applications' sources (their
    `target_revision`); without it (or for an application given a revision), `set_revision`
    says what the source holds."""

    handler = _Handler

    def __init__(
        self,
        *,
        token: str,
        git_dir: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__("fake Argo CD", host, port)
        self.token = token  # what clients must send (the stack hands it to its worker)
        self.git_dir = git_dir
        self._lock = threading.RLock()
        self._apps: dict[str, FakeApplication] = {}
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status)

    # ------------------------------------------------------------------ control

    def add_application(
        self,
        name: str,
        *,
        path: str,
        repo_url: str = "",
        target_revision: str = "HEAD",
        labels: dict[str, str] | None = None,
        behaviour: Behaviour = "healthy",
        revision: str = "",
    ) -> None:
        """An Application whose source is `path` at `target_revision`. With `revision`, it
        starts Synced and Healthy there (what the cluster already ran)."""
        with self._lock:
            app = FakeApplication(
                name=name,
                path=path,
                repo_url=repo_url or (str(self.git_dir) if self.git_dir else ""),
                target_revision=target_revision,
                labels=dict(labels or {}),
                behaviour=behaviour,
                uid=f"00000000-0000-4000-8000-{len(self._apps) + 1:012d}",
            )
            if revision:
                app.synced_revision = revision
                if not Path(app.repo_url).is_dir():  # no branch to read: the source holds it
                    app.told_revision = revision
                app.sync_status, app.health_status = "Synced", "Healthy"
            self._apps[name] = app

    def set_behaviour(self, name: str, behaviour: Behaviour) -> None:
        """How the application's next syncs go (and, for `degraded`, its health now if it
        is idle: a healthy application can fall over without a new revision)."""
        with self._lock:
            app = self._app(name)
            app.behaviour = behaviour
            app.failed_revision = ""  # a changed behaviour lets a failed revision sync again
            if behaviour == "degraded" and app.stage == "idle" and app.synced_revision:
                app.health_status, app.health_message = "Degraded", _DEGRADED_MESSAGE
            if behaviour == "healthy" and app.health_status == "Degraded":
                app.health_status, app.health_message = "Healthy", ""

    def set_revision(self, name: str, revision: str) -> None:
        """What the application's source holds now (instead of reading the git branch)."""
        with self._lock:
            self._app(name).told_revision = revision

    def application(self, name: str) -> dict[str, Any]:
        """The application's body as the API serves it, without reconciling."""
        with self._lock:
            return self._body(self._app(name))

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._apps)

    # ------------------------------------------------------------------ reconciliation

    def _source_revision(self, app: FakeApplication) -> str:
        if app.told_revision or not app.repo_url:
            return app.told_revision
        ref = app.target_revision
        spec = f"{ref}^{{commit}}" if ref != "HEAD" else "HEAD^{commit}"
        proc = subprocess.run(
            ["git", "-C", app.repo_url, "rev-parse", "--verify", "--quiet", spec],
            capture_output=True,
            text=True,
            check=False,
        )
        return proc.stdout.strip() if proc.returncode == 0 else ""

    def _reconcile(self, app: FakeApplication) -> None:
        app.reads += 1
        wanted = self._source_revision(app)
        if app.stage == "idle":
            if not wanted:
                app.sync_status = "Unknown"
                app.conditions = [
                    _condition(
                        "ComparisonError",
                        f"Unable to resolve '{app.target_revision}' to a commit SHA",
                    )
                ]
                return
            if wanted not in (app.synced_revision, app.failed_revision):
                app.sync_status, app.stage = "OutOfSync", "out_of_sync"
                app.conditions = []
            return
        if app.stage == "out_of_sync":
            if app.behaviour == "never_sync":
                return
            started = _now()
            if app.behaviour == "sync_fails":
                message = "one or more objects failed to apply, reason: admission webhook denied"
                app.operation = _operation(wanted, "Failed", message, started)
                app.conditions = [_condition("SyncError", message)]
                # Automated sync does not try the same revision again: the failure stays.
                app.failed_revision, app.stage = wanted, "idle"
                return
            app.operation = _operation(wanted, "Succeeded", "successfully synced", started)
            app.synced_revision = wanted
            app.sync_status, app.health_status, app.health_message = "Synced", "Progressing", ""
            app.conditions = []
            app.history.append(
                {
                    "id": len(app.history),
                    "revision": wanted,
                    "deployStartedAt": started,
                    "deployedAt": _now(),
                    "source": _source(app),
                }
            )
            app.stage = "progressing"
            return
        # progressing → settled
        if app.behaviour == "degraded":
            app.health_status, app.health_message = "Degraded", _DEGRADED_MESSAGE
        else:
            app.health_status, app.health_message = "Healthy", ""
        app.stage = "idle"

    # ------------------------------------------------------------------ bodies

    def _body(self, app: FakeApplication) -> dict[str, Any]:
        status: dict[str, Any] = {
            "sync": {
                "status": app.sync_status,
                "comparedTo": {"source": _source(app), "destination": _destination(app)},
            },
            "health": {"status": app.health_status},
            "conditions": app.conditions,
            "history": app.history,
            "reconciledAt": _now(),
            "sourceType": "Directory",
        }
        if app.synced_revision:
            status["sync"]["revision"] = app.synced_revision
        if app.health_message:
            status["health"]["message"] = app.health_message
        if app.operation is not None:
            status["operationState"] = app.operation
        return {
            "metadata": {
                "name": app.name,
                "namespace": "argocd",
                "uid": app.uid,
                "labels": app.labels,
                "resourceVersion": str(app.reads),
            },
            "spec": {
                "project": app.project,
                "source": _source(app),
                "destination": _destination(app),
                "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
            },
            "status": status,
        }

    # ------------------------------------------------------------------ HTTP

    def dispatch(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> Any:
        parsed = urllib.parse.urlsplit(target)
        path = parsed.path.rstrip("/") or "/"
        query = urllib.parse.parse_qs(parsed.query)
        try:
            status, body = self._answer(method, path, query, headers, raw)
        except ArgoError as err:
            status, body = err.status, err.body
        except (KeyError, TypeError, ValueError) as err:
            status, body = 400, ArgoError(400, _INVALID, f"bad request: {err}").body
        with self._lock:
            self.requests.append((method, path, status))
        return status, body

    def _answer(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        raw: bytes,
    ) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        if parts[:1] == ["_argocd"]:
            return self._control(method, parts[1:], json.loads(raw) if raw else {})
        if parts[:3] != ["api", "v1", "applications"] or method != "GET" or len(parts) > 4:
            raise ArgoError(404, _NOT_FOUND, "Not Found")
        if headers.get("authorization", "") != f"Bearer {self.token}":
            # Argo CD's answer to a missing or wrong token; the token itself is never echoed.
            raise ArgoError(401, _UNAUTHENTICATED, "invalid session: token signature is invalid")
        with self._lock:
            if len(parts) == 4:
                app = self._app(urllib.parse.unquote(parts[3]))
                self._reconcile(app)
                return 200, self._body(app)
            chosen = [a for a in self._apps.values() if _listed(a, query)]
            for app in chosen:
                self._reconcile(app)
            return 200, {
                "metadata": {"resourceVersion": str(sum(a.reads for a in self._apps.values()))},
                "items": [self._body(a) for a in sorted(chosen, key=lambda a: a.name)],
            }

    def _control(self, method: str, parts: list[str], body: dict[str, Any]) -> tuple[int, Any]:
        if method == "GET" and parts == ["state"]:
            with self._lock:
                return 200, {"applications": [self._body(a) for a in self._apps.values()]}
        if method == "POST" and parts == ["applications"]:
            self.add_application(
                body["name"],
                path=body["path"],
                repo_url=body.get("repoURL", ""),
                target_revision=body.get("targetRevision", "HEAD"),
                labels=body.get("labels") or {},
                behaviour=_behaviour(body.get("behaviour", "healthy")),
                revision=body.get("revision", ""),
            )
            return 201, self.application(body["name"])
        if method == "POST" and len(parts) == 3 and parts[0] == "applications":
            name = urllib.parse.unquote(parts[1])
            if parts[2] == "behaviour":
                self.set_behaviour(name, _behaviour(body["behaviour"]))
                return 200, self.application(name)
            if parts[2] == "revision":
                self.set_revision(name, str(body["revision"]))
                return 200, self.application(name)
        raise ArgoError(404, _NOT_FOUND, "Not Found")

    def _app(self, name: str) -> FakeApplication:
        app = self._apps.get(name)
        if app is None:
            raise ArgoError(404, _NOT_FOUND, f'applications.argoproj.io "{name}" not found')
        return app


_DEGRADED_MESSAGE = 'Deployment "web" exceeded its progress deadline'


def _behaviour(value: Any) -> Behaviour:
    if value not in BEHAVIOURS:
        raise ValueError(f"behaviour must be one of {', '.join(BEHAVIOURS)}, not {value!r}")
    return value  # type: ignore[no-any-return]


def _condition(kind: str, message: str) -> dict[str, Any]:
    return {"type": kind, "message": message, "lastTransitionTime": _now()}


def _operation(revision: str, phase: str, message: str, started: str) -> dict[str, Any]:
    return {
        "operation": {"sync": {"revision": revision}, "initiatedBy": {"automated": True}},
        "phase": phase,
        "message": message,
        "startedAt": started,
        "finishedAt": _now(),
        "syncResult": {"revision": revision, "resources": []},
    }


def _source(app: FakeApplication) -> dict[str, Any]:
    return {"repoURL": app.repo_url, "path": app.path, "targetRevision": app.target_revision}


def _destination(app: FakeApplication) -> dict[str, Any]:
    return {"server": "https://kubernetes.default.svc", "namespace": app.destination_namespace}


def matches_selector(labels: dict[str, str], selector: str) -> bool:
    """Kubernetes equality-based label selectors: `a=b`, `a==b`, `a!=b`, `a`, `!a`, joined
    by commas (all must hold)."""
    for raw in selector.split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            key, _, value = term.partition("!=")
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, _, value = term.replace("==", "=").partition("=")
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _listed(app: FakeApplication, query: dict[str, list[str]]) -> bool:
    selector = (query.get("selector") or [""])[0]
    names = query.get("name") or []
    repo = (query.get("repo") or [""])[0]
    projects = (query.get("projects") or []) + (query.get("project") or [])
    return (
        matches_selector(app.labels, selector)
        and (not names or any(fnmatch.fnmatchcase(app.name, n) for n in names))
        and (not repo or repo == app.repo_url)
        and (not projects or app.project in projects)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shared.devstack.argocd", description="Run the fake Argo CD API."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9200)
    parser.add_argument("--token", required=True, help="the bearer token clients must send")
    parser.add_argument("--git-dir", type=Path, help="git repository the sources live in")
    args = parser.parse_args(argv)
    fake = FakeArgoCD(token=args.token, git_dir=args.git_dir, host=args.host, port=args.port)
    fake.start()
    print(json.dumps({"event": "fake argocd started", "url": fake.url}), flush=True)
    fake.serve_until_signalled()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
