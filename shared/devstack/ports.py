"""Loopback ports for the embedded stack: pick free ones, wait until a server listens."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Collection
from pathlib import Path

LOOPBACK = "127.0.0.1"


_PICK = random.Random()  # seeded from the OS: processes picking at once pick differently


def free_port(host: str = LOOPBACK, *, avoid: Collection[int] = ()) -> int:
    """A port nobody listens on right now, for a server that binds it a moment later; never
    one of `avoid` (ports already picked for other servers, which nobody binds yet either).

    Picked outside the kernel's ephemeral range: ports from there (what binding port 0 hands
    out) also go to outgoing connections, and one took a picked port before the gateway bound
    it (seen in the tests). Falls back to the OS's pick when nothing outside is free."""
    low, high = _ephemeral_range()
    spans = [(p, q) for p, q in ((10_000, low - 1), (high + 1, 65_535)) if q - p > 1_000]
    for _ in range(50 if spans else 0):
        # uniform over all the ports outside (a span's share is its size), so picks coincide
        # as rarely as possible
        ((first, last),) = _PICK.choices(spans, weights=[q - p for p, q in spans])
        port = _PICK.randint(first, last)
        if port not in avoid and _bindable(host, port):
            return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in avoid:
            return port


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """`count` distinct free ports for servers started together (picked one by one, two
    could coincide: none is bound until the servers start; seen with SeaweedFS's eight)."""
    picked: list[int] = []
    while len(picked) < count:
        picked.append(free_port(host, avoid=picked))
    return picked


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


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
