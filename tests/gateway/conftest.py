"""Fixtures of the gateway's tests: one Temporal dev server with the recording workflows per
module, the GitHub emulator with a receiver for the webhooks it sends, and the pages' world
(the gateway app over SQLite and a file blob store)."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from shared.devstack import credentials
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.ports import free_port
from tests.support.loopback import LoopbackServer
from tests.support.pages import Hooks, World
from tests.support.recording import Temporal


@pytest.fixture(scope="module")
def temporal() -> Iterator[Temporal]:
    harness = Temporal()
    try:
        harness.run(harness.boot(), timeout=120)
        yield harness
    finally:
        harness.close()


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[tuple[GitHubEmulator, list[tuple[str, dict[str, Any]]]]]:
    key_file = tmp_path / "app.pem"
    credentials.ensure_app_key(key_file)
    Hooks.received = []
    with LoopbackServer(ThreadingHTTPServer(("127.0.0.1", 0), Hooks)) as hooks:
        emu = GitHubEmulator(
            app_id=1,
            app_key=key_file.read_text(),
            webhook_url=f"http://{hooks.address}/events",
            webhook_secret="s3cret",
            port=free_port("127.0.0.1"),
        ).start()
        emu.seed_repository("acme", "fleet", 1)
        try:
            yield emu, Hooks.received
        finally:
            emu.stop()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    with w.client:
        yield w
    w.close()
