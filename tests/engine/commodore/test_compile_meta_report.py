"""Reporting compile metadata to Lieutenant as Commodore does: `POST /clusters/<id>/compileMeta`
with the bearer token, a redirect POSTed again (to Lieutenant's own host only), 5xx and
unreachable retryable, a 4xx with Lieutenant's reason; the token never in a message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from shared.engine.commodore.lieutenant import Lieutenant, LieutenantUnreachable
from shared.engine.errors import FleetError
from tests.support.loopback import LoopbackServer

TOKEN = "secret-lieutenant-token"
BODY = {"lastCompile": "2026-11-28T13:59:40.969+00:00", "instances": {}}


class Recorder:
    """An HTTP server answering POSTs with the statuses queued in `answers` (status, headers,
    body) and recording what it received."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict[str, str], dict[str, Any] | None]] = []
        self.received: list[tuple[str, str, str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.received.append(
                    (
                        self.path,
                        self.headers.get("Authorization") or "",
                        self.headers.get("Content-Type") or "",
                        json.loads(raw),
                    )
                )
                status, headers, body = owner.answers.pop(0) if owner.answers else (204, {}, None)
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = LoopbackServer(ThreadingHTTPServer(("127.0.0.1", 0), Handler))

    @property
    def url(self) -> str:
        return f"http://{self.server.address}"


@pytest.fixture
def api() -> Iterator[Recorder]:
    recorder = Recorder()
    with recorder.server:
        yield recorder


def test_the_body_is_posted_with_the_token(api: Recorder) -> None:
    Lieutenant(api.url, TOKEN).post_compile_meta("c-one", BODY)
    assert api.received == [
        ("/clusters/c-one/compileMeta", f"Bearer {TOKEN}", "application/json", BODY)
    ]


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_posted_again(api: Recorder, status: int) -> None:
    api.answers.append((status, {"Location": "/v2/clusters/c-one/compileMeta"}, None))
    Lieutenant(api.url, TOKEN).post_compile_meta("c-one", BODY)
    assert [(path, body) for path, _, _, body in api.received] == [
        ("/clusters/c-one/compileMeta", BODY),
        ("/v2/clusters/c-one/compileMeta", BODY),
    ]


def test_a_redirect_to_another_host_is_refused(api: Recorder) -> None:
    api.answers.append((307, {"Location": "http://elsewhere.invalid/compileMeta"}, None))
    with pytest.raises(FleetError, match="redirected to another host") as caught:
        Lieutenant(api.url, TOKEN).post_compile_meta("c-one", BODY)
    assert TOKEN not in str(caught.value)
    assert len(api.received) == 1


def test_failures_say_what_lieutenant_said(api: Recorder) -> None:
    api.answers.append((400, {"Content-Type": "application/json"}, {"reason": "bad body"}))
    with pytest.raises(FleetError, match="answered 400: bad body") as refused:
        Lieutenant(api.url, TOKEN).post_compile_meta("c-one", BODY)
    assert not refused.value.retryable
    api.answers.append((503, {}, None))
    with pytest.raises(LieutenantUnreachable, match="answered 503") as down:
        Lieutenant(api.url, TOKEN).post_compile_meta("c-one", BODY)
    assert down.value.retryable
    for err in (refused.value, down.value):
        assert TOKEN not in str(err)


def test_an_unreachable_lieutenant_is_retryable() -> None:
    with pytest.raises(LieutenantUnreachable, match="unreachable") as caught:
        Lieutenant("http://127.0.0.1:9", TOKEN).post_compile_meta("c-one", BODY)
    assert TOKEN not in str(caught.value)
