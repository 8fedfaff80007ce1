"""A Helm HTTP chart repository on 127.0.0.1: `index.yaml` plus packaged `.tgz` archives.

Charts are packaged with Helm's own packager and indexed with Helm's own `repo index`
(through helm_python), so the repository is what `helm repo index` would publish. Requests are
recorded so tests can assert that a cached render did not touch the network.
"""

from __future__ import annotations

import base64
import functools
import shutil
import ssl
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import helm_python

from tests.support.loopback import LoopbackServer


class _Handler(SimpleHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        given = self.headers.get("Authorization")
        if given:
            self.server.authorizations.append(given)
        if self.server.expected and given != self.server.expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="charts"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (a TLS probe against plain HTTP, a cancelled pull) are normal
        # here; anything else is a bug in the test server and should be seen.

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    requests: list[str]
    authorizations: list[str]
    expected: str | None


class ChartRepo(LoopbackServer):
    """Serve `directory` over HTTP. Use `add(chart_dir, version=...)` then `index()`.
    With `credentials` (user, password) every request needs that HTTP basic auth."""

    _server: _Server

    def __init__(
        self,
        directory: Path,
        *,
        credentials: tuple[str, str] | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        handler = functools.partial(_Handler, directory=str(directory))
        server = _Server(("127.0.0.1", 0), handler)
        server.requests = []
        server.authorizations = []
        server.expected = None
        if credentials:
            token = base64.b64encode(":".join(credentials).encode()).decode()
            server.expected = f"Basic {token}"
        self.scheme = "http"
        if tls:  # (certificate, key): serve HTTPS
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            server.socket = context.wrap_socket(server.socket, server_side=True)
            self.scheme = "https"
        super().__init__(server)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.address}"

    @property
    def requests(self) -> list[str]:
        """Paths requested so far (index.yaml, archives)."""
        return self._server.requests

    @property
    def authorizations(self) -> list[str]:
        """`Authorization` headers received so far."""
        return self._server.authorizations

    def add(self, chart_dir: Path, *, version: str | None = None) -> Path:
        """Package `chart_dir` (optionally overriding its version) into the repository."""
        archive = helm_python.package(chart_dir, destination=self.directory, version=version)
        return Path(archive)

    def add_archive(self, archive: Path) -> Path:
        target = self.directory / archive.name
        shutil.copyfile(archive, target)
        return target

    def index(self, base_url: str | None = None) -> dict[str, Any]:
        """(Re)write index.yaml for every archive in the directory, with absolute URLs (under
        `base_url`, default this server's)."""
        return helm_python.repo_index_generate(self.directory, base_url=base_url or self.url)
