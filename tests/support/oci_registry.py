"""A minimal OCI distribution registry on 127.0.0.1, enough for `helm pull` and `helm push`.

Implements the read side of the distribution spec (`/v2/`, manifests by tag or digest, blobs,
HEAD for both, tag listing) and the monolithic/chunked upload side. Charts can be pushed with
Helm itself or added directly with `add_chart`, which builds the manifest Helm would push
(config `application/vnd.cncf.helm.config.v1+json`, one layer
`application/vnd.cncf.helm.chart.content.v1.tar+gzip`). Everything lives in memory.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
import tarfile
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.support.loopback import LoopbackServer

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
HELM_CONFIG_TYPE = "application/vnd.cncf.helm.config.v1+json"
HELM_CHART_TYPE = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

_NAME = r"(?P<name>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
_ROUTES = [
    ("manifest", re.compile(rf"^/v2/{_NAME}/manifests/(?P<ref>[^/]+)$")),
    ("blob", re.compile(rf"^/v2/{_NAME}/blobs/(?P<digest>sha256:[0-9a-f]{{64}})$")),
    ("upload", re.compile(rf"^/v2/{_NAME}/blobs/uploads/(?P<session>[^/]*)$")),
    ("tags", re.compile(rf"^/v2/{_NAME}/tags/list$")),
]


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class _Repository:
    blobs: dict[str, bytes] = field(default_factory=dict)
    manifests: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # digest → (type, body)
    tags: dict[str, str] = field(default_factory=dict)  # tag → digest


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.expected: str | None = None  # the `Authorization` every request needs, if any
        self.repos: dict[str, _Repository] = {}
        self.uploads: dict[str, bytearray] = {}
        self.requests: list[tuple[str, str]] = []

    def repo(self, name: str) -> _Repository:
        return self.repos.setdefault(name, _Repository())


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    # -- plumbing ------------------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes = b"",
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        head: bool = False,
    ) -> None:
        self.send_response(status)
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if body and not head:
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str, head: bool = False) -> None:
        body = json.dumps({"errors": [{"code": code, "message": message}]}).encode()
        self._send(status, body, head=head)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _route(self) -> tuple[str, dict[str, str], dict[str, list[str]]]:
        parts = urlsplit(self.path)
        self.server.state.requests.append((self.command, parts.path))
        expected = self.server.state.expected
        if expected and self.headers.get("Authorization") != expected:
            return "unauthorized", {}, {}
        if parts.path in ("/v2", "/v2/"):
            return "base", {}, {}
        for kind, pattern in _ROUTES:
            match = pattern.match(parts.path)
            if match:
                return kind, match.groupdict(), parse_qs(parts.query)
        return "", {}, {}

    # -- read side -----------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self._read(head=True)

    def do_GET(self) -> None:
        self._read(head=False)

    def _read(self, head: bool) -> None:
        kind, args, _query = self._route()
        state = self.server.state
        if kind == "unauthorized":
            self._send(
                401, b"{}", headers={"WWW-Authenticate": 'Basic realm="registry"'}, head=head
            )
            return
        with state.lock:
            repo = state.repos.get(args.get("name", ""))
            if kind == "base":
                self._send(200, b"{}", head=head)
            elif repo is None:
                self._error(404, "NAME_UNKNOWN", "repository name not known to registry", head)
            elif kind == "manifest":
                ref = args["ref"]
                digest = ref if ref.startswith("sha256:") else repo.tags.get(ref, "")
                if digest not in repo.manifests:
                    self._error(404, "MANIFEST_UNKNOWN", f"manifest unknown: {ref}", head)
                    return
                media_type, body = repo.manifests[digest]
                self._send(
                    200,
                    body,
                    content_type=media_type,
                    headers={"Docker-Content-Digest": digest},
                    head=head,
                )
            elif kind == "blob":
                digest = args["digest"]
                if digest not in repo.blobs:
                    self._error(404, "BLOB_UNKNOWN", f"blob unknown: {digest}", head)
                    return
                self._send(
                    200,
                    repo.blobs[digest],
                    content_type="application/octet-stream",
                    headers={"Docker-Content-Digest": digest},
                    head=head,
                )
            elif kind == "tags":
                body = json.dumps({"name": args["name"], "tags": sorted(repo.tags)}).encode()
                self._send(200, body, head=head)
            else:
                self._error(404, "UNSUPPORTED", f"not found: {self.path}", head)

    # -- write side ----------------------------------------------------------------------

    def do_POST(self) -> None:
        kind, args, _query = self._route()
        self._body()
        if kind != "upload" or args["session"]:
            self._error(404, "UNSUPPORTED", f"not found: {self.path}")
            return
        session = uuid.uuid4().hex
        with self.server.state.lock:
            self.server.state.uploads[session] = bytearray()
        location = f"/v2/{args['name']}/blobs/uploads/{session}"
        self._send(202, headers={"Location": location, "Range": "0-0"})

    def do_PATCH(self) -> None:
        kind, args, _query = self._route()
        data = self._body()
        state = self.server.state
        with state.lock:
            buffer = state.uploads.get(args.get("session", "")) if kind == "upload" else None
            if buffer is None:
                self._error(404, "BLOB_UPLOAD_UNKNOWN", "upload unknown")
                return
            buffer.extend(data)
            size = len(buffer)
        location = f"/v2/{args['name']}/blobs/uploads/{args['session']}"
        self._send(202, headers={"Location": location, "Range": f"0-{max(size - 1, 0)}"})

    def do_PUT(self) -> None:
        kind, args, query = self._route()
        data = self._body()
        state = self.server.state
        if kind == "upload":
            with state.lock:
                buffer = state.uploads.pop(args["session"], None)
                if buffer is None:
                    self._error(404, "BLOB_UPLOAD_UNKNOWN", "upload unknown")
                    return
                buffer.extend(data)
                digest = (query.get("digest") or [""])[0]
                if sha256_digest(bytes(buffer)) != digest:
                    self._error(400, "DIGEST_INVALID", "digest does not match content")
                    return
                state.repo(args["name"]).blobs[digest] = bytes(buffer)
            location = f"/v2/{args['name']}/blobs/{digest}"
            self._send(201, headers={"Location": location, "Docker-Content-Digest": digest})
        elif kind == "manifest":
            media_type = self.headers.get("Content-Type") or MANIFEST_TYPE
            digest = sha256_digest(data)
            with state.lock:
                repo = state.repo(args["name"])
                repo.manifests[digest] = (media_type, data)
                if not args["ref"].startswith("sha256:"):
                    repo.tags[args["ref"]] = digest
            location = f"/v2/{args['name']}/manifests/{digest}"
            self._send(201, headers={"Location": location, "Docker-Content-Digest": digest})
        else:
            self._error(404, "UNSUPPORTED", f"not found: {self.path}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (a TLS probe against plain HTTP, a cancelled pull) are normal
        # here; anything else is a bug in the test server and should be seen.

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    state: _State


class OciRegistry(LoopbackServer):
    """An in-memory registry served on 127.0.0.1 (plain HTTP)."""

    _server: _Server

    def __init__(self, *, credentials: tuple[str, str] | None = None) -> None:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.state = _State()
        if credentials:
            token = base64.b64encode(":".join(credentials).encode()).decode()
            server.state.expected = f"Basic {token}"  # reads need it (pushes: tests add charts)
        super().__init__(server)

    @property
    def host(self) -> str:
        return self.address

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request so far."""
        return self._server.state.requests

    def add_chart(self, archive: Path, repository: str = "charts") -> str:
        """Store a packaged chart as Helm would push it, under `<repository>/<chart name>`
        tagged with its version; returns the `oci://` reference of the chart."""
        data = archive.read_bytes()
        meta = _chart_metadata(archive)
        name, version = str(meta["name"]), str(meta["version"])
        config = json.dumps(meta, separators=(",", ":"), sort_keys=True).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {
                "mediaType": HELM_CONFIG_TYPE,
                "digest": sha256_digest(config),
                "size": len(config),
            },
            "layers": [
                {"mediaType": HELM_CHART_TYPE, "digest": sha256_digest(data), "size": len(data)}
            ],
            "annotations": {
                "org.opencontainers.image.title": name,
                "org.opencontainers.image.version": version,
            },
        }
        body = json.dumps(manifest, separators=(",", ":")).encode()
        state = self._server.state
        with state.lock:
            repo = state.repo(f"{repository}/{name}")
            repo.blobs[sha256_digest(config)] = config
            repo.blobs[sha256_digest(data)] = data
            repo.manifests[sha256_digest(body)] = (MANIFEST_TYPE, body)
            # OCI tags cannot hold '+'; Helm writes build metadata as '_'.
            repo.tags[version.replace("+", "_")] = sha256_digest(body)
        return f"oci://{self.host}/{repository}/{name}"


def _chart_metadata(archive: Path) -> dict[str, Any]:
    """Chart.yaml of a packaged chart (`<name>/Chart.yaml` inside the archive)."""
    with tarfile.open(archive, "r:gz") as tf:
        for member in tf.getmembers():
            parts = member.name.split("/")
            if len(parts) == 2 and parts[1] == "Chart.yaml":
                handle = tf.extractfile(member)
                if handle is not None:
                    meta: dict[str, Any] = yaml.safe_load(handle.read())
                    return meta
    raise ValueError(f"{archive}: no Chart.yaml in archive")
