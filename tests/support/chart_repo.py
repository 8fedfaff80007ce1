"""A Helm HTTP chart repository on 127.0.0.1: `index.yaml` plus packaged `.tgz` archives.

Charts are packaged with Helm's own packager and indexed with Helm's own `repo index`
(through helm_python), so the repository is what `helm repo index` would publish. Requests are
recorded so tests can assert that a cached render did not touch the network.
"""

from __future__ import annotations

import functools
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import helm_python


class _Handler(SimpleHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (a TLS probe against plain HTTP, a cancelled pull) are normal
        # here; anything else is a bug in the test server and should be seen.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    requests: list[str]


class ChartRepo:
    """Serve `directory` over HTTP. Use `add(chart_dir, version=...)` then `index()`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        handler = functools.partial(_Handler, directory=str(directory))
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.requests = []
        # A short poll interval makes stop() quick; tests stop servers to prove cache hits.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._running = False

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[str]:
        """Paths requested so far (index.yaml, archives)."""
        return self._server.requests

    def add(self, chart_dir: Path, *, version: str | None = None) -> Path:
        """Package `chart_dir` (optionally overriding its version) into the repository."""
        archive = helm_python.package(chart_dir, destination=self.directory, version=version)
        return Path(archive)

    def add_archive(self, archive: Path) -> Path:
        target = self.directory / archive.name
        shutil.copyfile(archive, target)
        return target

    def index(self) -> dict[str, Any]:
        """(Re)write index.yaml for every archive in the directory, with absolute URLs."""
        return helm_python.repo_index_generate(self.directory, base_url=self.url)

    def start(self) -> ChartRepo:
        self._thread.start()
        self._running = True
        return self

    def stop(self) -> None:
        if self._running:
            self._server.shutdown()
            self._running = False
        self._server.server_close()

    def __enter__(self) -> ChartRepo:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
