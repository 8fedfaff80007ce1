"""An HTTP server on a daemon thread: the life cycle the dev stack's fakes (the GitHub
emulator, the fake Argo CD) share."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class BackgroundHTTPServer:
    def __init__(self, name: str, host: str, port: int) -> None:
        self.name = name  # the thread's, and what errors call the server
        self._address = (host, port)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self, handler: type[BaseHTTPRequestHandler]) -> None:
        if self._server is not None:
            return
        self._server = ThreadingHTTPServer(self._address, handler)
        self._server.daemon_threads = True
        # a short poll interval makes stop() quick (tests start one server per test)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=self.name,
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError(f"the {self.name} is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def configured_url(self) -> str:
        """The URL asked for (port 0 until started: the real one is `url`)."""
        host, port = self._address
        return f"http://{host}:{port}"
