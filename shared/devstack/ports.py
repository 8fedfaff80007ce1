"""Loopback ports for the embedded stack: pick free ones, wait until a server listens."""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path

LOOPBACK = "127.0.0.1"


_PICK = random.Random()  # seeded from the OS: processes picking at once pick differently


def free_port(host: str = LOOPBACK) -> int:
    """A port nobody listens on right now, for a server that binds it a moment later.

    Picked outside the kernel's ephemeral range: ports from there (what binding port 0 hands
    out) also go to outgoing connections, and one took a picked port before the gateway bound
    it (seen in the tests). Falls back to the OS's pick when nothing outside is free."""
    low, high = _ephemeral_range()
    spans = [(p, q) for p, q in ((10_000, low - 1), (high + 1, 65_535)) if q - p > 1_000]
    for _ in range(50 if spans else 0):
        first, last = _PICK.choice(spans)
        port = _PICK.randint(first, last)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32_768, 60_999  # Linux's default


def port_in_use(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def wait_for_port(port: int, host: str = LOOPBACK, *, timeout: float = 30.0) -> bool:
    """True once something accepts connections on host:port, False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_in_use(port, host):
            return True
        time.sleep(0.05)
    return False
