"""A throwaway PostgreSQL server for tests (Debian's `postgresql` package), on 127.0.0.1.

initdb into a fresh directory, start with pg_ctl on a free port, stop and remove afterwards.
As root the server runs as the `postgres` user (PostgreSQL refuses to run as root). Tests
skip, saying why, where no server can run.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.devstack.ports import free_port


@dataclass(frozen=True)
class PostgresServer:
    data_dir: str
    port: int
    user: str

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    # Debian keeps the server tools out of PATH, under the major version's directory.
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _as_postgres(argv: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextmanager
def postgres_server(user: str = "postgres") -> Iterator[PostgresServer]:
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL (Debian package `postgresql`) is not installed")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root without a `postgres` user to run the server as")
        if not shutil.which("runuser"):
            pytest.skip("running as root without runuser")
    # outside pytest's tmp_path: its parents are private to root, the server runs as postgres
    base = Path(tempfile.mkdtemp(prefix="rollwright-pg-"))
    os.chmod(base, 0o755)
    data = base / "pg"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
    try:
        subprocess.run(
            _as_postgres([initdb, "-D", str(data), "-U", user, "--auth=trust", "-E", "UTF8"]),
            check=True,
            capture_output=True,
        )
        port = free_port()
        options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1"
        # -l: the server must not inherit our pipes, or waiting for pg_ctl never ends
        subprocess.run(
            _as_postgres(
                [pg_ctl, "-D", str(data), "-o", options, "-l", f"{data}/log", "-w", "start"]
            ),
            check=True,
            capture_output=True,
            timeout=60,
        )
        try:
            yield PostgresServer(str(data), port, user)
        finally:
            subprocess.run(
                _as_postgres([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"]),
                capture_output=True,
                timeout=60,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
