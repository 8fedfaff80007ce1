"""A bare HTTP/1.1 client over one socket, for requests no well-behaved client sends: bodies
streamed far past any limit, and several requests on one keep-alive connection whose fate
(kept or closed by the server) is what is being tested."""

from __future__ import annotations

import select
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from shared.github.app import webhook_signature

CHUNK = 1 << 20


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Streamed:
    """How a request with an oversized body ended."""

    answer: Answer | None  # None: the connection went away without an answer
    body_bytes_sent: int
    seconds: float


class Connection:
    def __init__(self, host: str, port: int, timeout: float = 30.0) -> None:
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._buffer = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> Answer:
        self.sock.sendall(self.head(method, path, {**headers, "Content-Length": str(len(body))}))
        self.sock.sendall(body)
        return self.answer()

    def head(self, method: str, path: str, headers: dict[str, str]) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def stream(
        self,
        path: str,
        headers: dict[str, str],
        *,
        total: int,
        chunked: bool,
        deadline: float,
        sample: Callable[[], None] = lambda: None,
    ) -> Streamed:
        """POST a body of `total` zero bytes (declared with Content-Length, or chunked with
        no length at all), 1 MiB at a time, until the server answers, the connection breaks,
        everything was sent or `deadline` seconds passed; `sample()` after each MiB."""
        framing = {"Transfer-Encoding": "chunked"} if chunked else {"Content-Length": str(total)}
        started = time.monotonic()
        sent = 0
        piece = b"\0" * CHUNK
        if chunked:
            piece = f"{CHUNK:x}\r\n".encode() + piece + b"\r\n"
        try:
            self.sock.sendall(self.head("POST", path, {**headers, **framing}))
            while sent < total and time.monotonic() - started < deadline:
                readable, _, _ = select.select([self.sock], [], [], 0)
                if readable:
                    break
                self.sock.sendall(piece)
                sent += CHUNK
                sample()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading: its answer may still be there
        try:
            answer: Answer | None = self.answer()
        except (ConnectionError, OSError, ValueError):
            answer = None
        return Streamed(answer, sent, time.monotonic() - started)

    def answer(self) -> Answer:
        head = self._read_until(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self._read_until(b"\r\n").split(b";")[0], 16)
                body += self._read_exactly(size + 2)[:size]
                if size == 0:
                    break
        else:
            body = self._read_exactly(int(headers.get("content-length", "0")))
        return Answer(status, headers, body)

    def alive(self) -> bool:
        """Whether the server has left the connection open (no EOF waiting to be read)."""
        readable, _, _ = select.select([self.sock], [], [], 0.2)
        if not readable:
            return True
        try:
            return bool(self.sock.recv(1, socket.MSG_PEEK))
        except OSError:
            return False

    def _read_until(self, marker: bytes) -> bytes:
        while marker not in self._buffer:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            self._buffer += data
        found, _, self._buffer = self._buffer.partition(marker)
        return found

    def _read_exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            self._buffer += data
        found, self._buffer = self._buffer[:size], self._buffer[size:]
        return found


def webhook_headers(event: str, secret: str | None, body: bytes) -> dict[str, str]:
    """GitHub's webhook headers for `body` (signed when `secret` is given)."""
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": str(uuid.uuid4()),
    }
    if secret is not None:
        headers["X-Hub-Signature-256"] = webhook_signature(secret, body)
    return headers
