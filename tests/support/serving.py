"""The gateway app served by uvicorn on loopback, in a thread, for tests that need real HTTP
(browsers, CLI commands, cookies across redirects)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from shared.devstack.ports import free_port


@contextmanager
def serving(app: Any, port: int | None = None) -> Iterator[str]:
    """Serve `app` on `port` (default: a free one) until the block ends; yields its URL."""
    port = port or free_port("127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
