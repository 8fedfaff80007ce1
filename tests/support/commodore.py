"""The real Commodore beside rollwright's commodore layout: git repositories for a tenant, a
fake Lieutenant API on 127.0.0.1, a jsonnet-bundler stand-in, and `commodore catalog compile`
run from the venv `make commodore-venv` builds (syn-commodore 1.35.1, exact pins of its own).

    venv = commodore_venv()                   # None when it was not built
    lieutenant = FakeLieutenant(clusters, tenants)
    with lieutenant:
        result = compile_with_commodore(venv, work, "c-one", lieutenant.url, tmp_path)
    tree_bytes(work / "catalog" / "manifests")
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.paths import REPO_ROOT

VENV_ENV = "ROLLWRIGHT_COMMODORE_VENV"
COMMODORE_VERSION = "1.35.1"


def commodore_venv() -> Path | None:
    """The venv of the real Commodore: `$ROLLWRIGHT_COMMODORE_VENV`, else `.commodore-venv`
    in the checkout (`make commodore-venv`); None when it holds no `commodore`."""
    venv = Path(os.environ.get(VENV_ENV) or REPO_ROOT / ".commodore-venv")
    return venv if (venv / "bin" / "commodore").is_file() else None


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def publish(source: Path, remotes: Path) -> str:
    """A bare clone of `source` (every branch and tag) under `remotes`: its file:// URL."""
    bare = remotes / f"{source.name}.git"
    if bare.exists():
        git(bare, "fetch", "-q", "--prune", str(source), "+refs/*:refs/*")
    else:
        subprocess.run(
            ["git", "clone", "-q", "--mirror", str(source), str(bare)],
            check=True,
            capture_output=True,
        )
    return bare.as_uri()


def repo_with(path: Path, files: dict[str, str], tag: str | None = None) -> Path:
    """A git repository on branch main holding `files` (committed, optionally tagged)."""
    if not (path / ".git").exists():
        init_repo(path)
    write_files(path, files)
    commit_all(path, f"{path.name} {tag or 'change'}")
    if tag:
        git(path, "tag", tag)
    return path


# Commodore runs `jb install` on the jsonnetfile.json it writes, whose dependencies are all
# local directories: linking vendor/<basename> to each is all jsonnet-bundler does for them.
JB_STANDIN = '''\
#!/usr/bin/env python3
"""jsonnet-bundler stand-in for Commodore in tests: local dependencies only."""
import json, os, sys

if sys.argv[1:] == ["--version"]:
    print("v0.0.0-rollwright-tests")
    sys.exit(0)
if sys.argv[1:] != ["install"]:
    sys.exit("jb stand-in: only 'install' is supported")
with open("jsonnetfile.json") as f:
    deps = json.load(f).get("dependencies", [])
os.makedirs("vendor", exist_ok=True)
for dep in deps:
    local = dep["source"].get("local")
    if local is None:
        sys.exit("jb stand-in: only local dependencies are supported")
    directory = local["directory"]
    link = os.path.join("vendor", os.path.basename(os.path.normpath(directory)))
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.relpath(directory, "vendor"), link)
'''


def jb_standin(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    jb = bin_dir / "jb"
    jb.write_text(JB_STANDIN)
    jb.chmod(0o755)
    return bin_dir


class FakeLieutenant:
    """`GET /clusters/<id>`, `GET /clusters?tenant=<id>` and `GET /tenants/<id>` from dicts,
    as the Lieutenant API answers; `requests` records the paths and their Authorization."""

    def __init__(self, clusters: dict[str, Any], tenants: dict[str, Any]) -> None:
        self.clusters = clusters
        self.tenants = tenants
        self.requests: list[str] = []
        bodies = {"clusters": clusters, "tenants": tenants}
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(f"{self.path} {self.headers.get('Authorization')}")
                path, _, query = self.path.partition("?")
                _, kind, ident = [*path.rstrip("/").split("/"), "", ""][:3]
                body: Any = bodies.get(kind, {}).get(ident)
                if kind == "clusters" and not ident:  # GET /clusters?tenant=<id>
                    tenant = dict(p.partition("=")[::2] for p in query.split("&")).get("tenant")
                    body = [c for c in clusters.values() if c.get("tenant") == tenant]
                status = 200 if body is not None else 404
                data = json.dumps(body if body is not None else {"reason": "not found"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeLieutenant:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def compile_with_commodore(
    venv: Path,
    work: Path,
    cluster: str,
    api_url: str,
    home: Path,
    *,
    push: bool = False,
    local: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`commodore catalog compile <cluster>` in `work` against the fake Lieutenant: it clones
    the global, tenant, component and catalog repositories itself; with `push`, it commits
    and pushes the catalog and reports compileMeta (git reads `home`/.gitconfig). With
    `local`, `--local --no-fetch-dependencies`: it compiles the working directory `work` as a
    previous run left it, its vendor/ included, and asks Lieutenant nothing."""
    work.mkdir(parents=True, exist_ok=True)
    bin_dir = jb_standin(home / "bin")
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "GIT_AUTHOR_NAME": "rollwright tests",
        "GIT_AUTHOR_EMAIL": "test@rollwright.invalid",
        "GIT_COMMITTER_NAME": "rollwright tests",
        "GIT_COMMITTER_EMAIL": "test@rollwright.invalid",
        "LC_ALL": "C.UTF-8",
    }
    argv = [
        str(venv / "bin" / "commodore"),
        "catalog",
        "compile",
        cluster,
        *(
            ["--local", "--no-fetch-dependencies"]
            if local
            else ["--api-url", api_url, "--api-token", "test-token"]
        ),
        *(["--push"] if push else []),
    ]
    return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file below `root` (relative path → bytes), .git excluded."""
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }
