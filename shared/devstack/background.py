"""An HTTP server on a daemon thread: the base the dev stack's fakes (the GitHub emulator, the
fake Argo CD) share, with its life cycle and the request handler plumbing they have in common."""

from __future__ import annotations

import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self


class FakeRequestHandler(BaseHTTPRequestHandler):
    """What the fakes' request handlers share: HTTP/1.1, no access log, reading a request's
    headers and body and writing an answer. `owner` is the fake that serves it."""

    owner: Any  # set on the class `BackgroundHTTPServer.start` binds to its fake
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read state instead
        return

    def read_request(self) -> tuple[dict[str, str], bytes]:
        """The headers (lower-case names) and the raw body."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return {k.lower(): v for k, v in self.headers.items()}, raw

    def write_answer(
        self, status: int, content_type: str, data: bytes, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class BackgroundHTTPServer:
    """A fake served over HTTP on a daemon thread. `start()` it (or use it as a context
    manager); `url` is its base. Subclasses name their request handler (`handler`)."""

    handler: ClassVar[type[FakeRequestHandler]]

    def __init__(self, name: str, host: str, port: int) -> None:
        self._name = name  # the thread's, and what errors call the server
        self._address = (host, port)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> Self:
        if self._server is not None:
            return self
        # the handler class the server instantiates per request, bound to this fake
        bound: type[FakeRequestHandler] = type(
            self.handler.__name__, (self.handler,), {"owner": self}
        )
        self._server = ThreadingHTTPServer(self._address, bound)
        self._server.daemon_threads = True
        # a short poll interval makes stop() quick (tests start one server per test)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=self._name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError(f"the {self._name} is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def configured_url(self) -> str:
        """The URL asked for (port 0 until started: the real one is `url`)."""
        host, port = self._address
        return f"http://{host}:{port}"

    def serve_until_signalled(self) -> None:
        """Serve (started) until SIGINT or SIGTERM, then stop: a fake run as its own process."""
        stopping = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stopping.set())
        stopping.wait()
        self.stop()
