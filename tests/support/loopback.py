"""The life cycle shared by the tests' HTTP servers on 127.0.0.1: a thread, start, stop."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Self


class LoopbackServer:
    """Serve `server` on a daemon thread; usable as a context manager."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self._server = server
        # A short poll interval makes stop() quick; tests stop servers to prove cache hits.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._running = False

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> Self:
        self._thread.start()
        self._running = True
        return self

    def stop(self) -> None:
        if self._running:
            self._server.shutdown()
            self._running = False
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
