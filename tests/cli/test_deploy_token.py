"""`rollwright deploy` sends its bearer token to the gateway's URL and nowhere else: a redirect
is answered as an error, never followed with the token (it may be a person's GitHub token);
and the API token is taken before a GitHub token when both are set."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from tests.support.paths import REPO_ROOT

SHA = "d4" * 20


class Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str | None]]] = []
    redirect_to: ClassVar[str | None] = None

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        if type(self).redirect_to:
            self.send_response(307)
            self.send_header("Location", str(type(self).redirect_to))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b'{"detail": "nobody here"}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(handler: type[Recorder]) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def servers() -> Iterator[tuple[type[Recorder], type[Recorder], str]]:
    elsewhere = type("Elsewhere", (Recorder,), {"seen": [], "redirect_to": None})
    gateway = type("Gateway", (Recorder,), {"seen": [], "redirect_to": None})
    other, other_url = serve(elsewhere)
    gate, gate_url = serve(gateway)
    gateway.redirect_to = f"{other_url}/api/deploy"
    yield gateway, elsewhere, gate_url
    other.shutdown()
    gate.shutdown()


def deploy(url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "shared.cli", "deploy", "prod/eu-1", "--revision", SHA),
            *("--repo", "acme/fleet", "--url", url),
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **env},
        cwd=REPO_ROOT,
        check=False,
        timeout=60,
    )


def test_a_redirect_is_not_followed_with_the_token(
    servers: tuple[type[Recorder], type[Recorder], str],
) -> None:
    gateway, elsewhere, url = servers
    done = deploy(url, GH_TOKEN="ghp_persons-own-token")
    assert done.returncode == 1, done.stderr
    assert "307" in done.stderr
    assert gateway.seen == [("/api/deploy", "Bearer ghp_persons-own-token")]
    assert elsewhere.seen == []  # never reached, so never given the token


def test_the_api_token_is_taken_before_a_github_token(
    servers: tuple[type[Recorder], type[Recorder], str],
) -> None:
    gateway, _, url = servers
    gateway.redirect_to = None
    deploy(url, ROLLWRIGHT_API_TOKEN="machine", GITHUB_TOKEN="ghs_actions-installation")
    deploy(url, GITHUB_TOKEN="ghs_actions-installation")
    assert [auth for _, auth in gateway.seen] == [
        "Bearer machine",
        "Bearer ghs_actions-installation",
    ]
