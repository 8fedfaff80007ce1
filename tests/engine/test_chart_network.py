"""Chart repositories behind a custom CA and behind a proxy, through the real CLI.

Go reads `SSL_CERT_FILE` and the proxy variables once per process, so each case runs
`rollwright render` in its own process with its own environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from shared.engine.charts import access
from tests.support.atlas import make_fleet, one_app
from tests.support.chart_repo import ChartRepo
from tests.support.loopback import LoopbackServer
from tests.support.paths import FIXTURES
from tests.support.tls import make_ca_and_server

CHARTS = FIXTURES / "charts"
STABLE = "https://charts.example.test/stable"
ROLLWRIGHT = Path(sys.executable).parent / "rollwright"


def umbrella_fleet(base: Path) -> Path:
    fleet = make_fleet(
        base,
        {
            "deployments/g/c/apps/d/deployment.yaml": one_app("t"),
            "templates/t/helmfile.yaml.gotmpl": (
                "releases:\n  - name: r\n    chart: ../../charts/umbrella\n"
            ),
        },
        echo=False,
    )
    for name in ("umbrella", "sidecar"):
        shutil.copytree(CHARTS / name, fleet / "charts" / name)
    return fleet


def render(fleet: Path, out: Path, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_PROXY")}
    clean.pop("SSL_CERT_FILE", None)
    return subprocess.run(
        [str(ROLLWRIGHT), "render", "--repo", str(fleet), "--out", str(out)],
        env={**clean, "ROLLWRIGHT_CACHE_DIR": str(cache), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_custom_ca_bundle_is_honoured(tmp_path: Path) -> None:
    ca, cert, key = make_ca_and_server(tmp_path)
    repo = ChartRepo(tmp_path / "repo", tls=(cert, key))
    repo.add(CHARTS / "cache-lite")
    fleet = umbrella_fleet(tmp_path / "fleet")
    with repo:
        repo.index()
        mirrors = {access.MIRRORS_ENV: json.dumps({STABLE: repo.url})}
        untrusted = render(fleet, tmp_path / "out1", tmp_path / "cache1", **mirrors)
        assert untrusted.returncode != 0
        assert "certificate" in untrusted.stderr and "will be retried" in untrusted.stderr
        trusted = render(
            fleet, tmp_path / "out2", tmp_path / "cache2", **mirrors, SSL_CERT_FILE=str(ca)
        )
    assert trusted.returncode == 0, trusted.stderr
    assert (tmp_path / "out2/g/c/d/r/d/StatefulSet.apps_r-cache.yaml").is_file()


class _Proxy(BaseHTTPRequestHandler):
    """A forward proxy for plain HTTP: answers `GET http://host/path` from a directory."""

    server: Any

    def do_GET(self) -> None:
        self.server.seen.append(self.path)
        target = urlsplit(self.path)
        file = self.server.root / target.path.removeprefix("/stable/")
        if not target.scheme or not file.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = file.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_proxy_is_honoured(tmp_path: Path) -> None:
    # The mirror's host does not resolve: only the proxy can reach it.
    mirror = "http://charts.mirror.test/stable"
    directory = tmp_path / "repo"
    repo = ChartRepo(directory)
    repo.add(CHARTS / "cache-lite")
    repo.index(base_url=mirror)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    server.seen = []
    server.root = directory
    fleet = umbrella_fleet(tmp_path / "fleet")
    mirrors = {access.MIRRORS_ENV: json.dumps({STABLE: mirror})}
    with LoopbackServer(server) as proxy:
        result = render(
            fleet,
            tmp_path / "out",
            tmp_path / "cache",
            **mirrors,
            HTTP_PROXY=f"http://{proxy.address}",
        )
    assert result.returncode == 0, result.stderr
    assert f"{mirror}/index.yaml" in server.seen
    assert f"{mirror}/cache-lite-1.2.0.tgz" in server.seen
