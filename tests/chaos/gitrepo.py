"""Git on the fleet repositories of the chaos cases: many commits at once, server-side hooks
that hold a push at a chosen moment, and reading back what a publish branch went through."""

from __future__ import annotations

import subprocess
from pathlib import Path

from shared.devstack import fleetrepo

TRAILER = "Rollwright-Deployment"


def commit_edits(repo: Path, edits: list[tuple[str, str]]) -> list[str]:
    """One commit on `main` per (path, new content), in order, through a single
    `git fast-import` (a thousand commits take a second, not a minute); the work tree follows.
    Returns the commits' shas."""
    tip = fleetrepo.head(repo)
    stream: list[bytes] = []
    for number, (path, content) in enumerate(edits, start=1):
        message = f"chaos: edit {number} of {path}".encode()
        data = content.encode()
        stream += [
            b"commit refs/heads/main\n",
            f"mark :{number}\n".encode(),
            f"committer chaos <chaos@rollwright.invalid> {1_700_000_000 + number} +0000\n".encode(),
            f"data {len(message)}\n".encode() + message + b"\n",
        ]
        if number == 1:
            stream.append(f"from {tip}\n".encode())
        stream += [f"M 100644 inline {path}\n".encode(), f"data {len(data)}\n".encode(), data]
        stream.append(b"\n")
    marks = repo / ".git" / "chaos-marks"
    subprocess.run(
        ["git", "-C", str(repo), "fast-import", "--quiet", f"--export-marks={marks}"],
        input=b"".join(stream),
        check=True,
        capture_output=True,
    )
    shas = dict(line.split() for line in marks.read_text().splitlines())
    fleetrepo.git(repo, "reset", "-q", "--hard", "main")
    return [shas[f":{n}"] for n in range(1, len(edits) + 1)]


def install_hook(repo: Path, name: str, body: str) -> None:
    """A server-side hook of the repository the workers push to (`.git/hooks/<name>`)."""
    hook = repo / ".git" / "hooks" / name
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\n" + body)
    hook.chmod(0o755)


def published_deployments(repo: Path, branch: str = "rendered") -> list[str]:
    """The `Rollwright-Deployment` trailer of every commit on the publish branch, newest
    first (one commit per deployment published)."""
    log = fleetrepo.git(repo, "log", branch, f"--format=%(trailers:key={TRAILER},valueonly)")
    return [line.strip() for line in log.splitlines() if line.strip()]


def ref_updates(repo: Path, branch: str = "rendered") -> list[tuple[str, str]]:
    """(old, new) of every update of the branch, oldest first, from its reflog."""
    log = repo / ".git" / "logs" / "refs" / "heads" / branch
    updates = []
    for line in log.read_text().splitlines():
        old, new = line.split()[:2]
        updates.append((old, new))
    return updates


def is_ancestor(repo: Path, old: str, new: str) -> bool:
    proc = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", old, new], check=False
    )
    return proc.returncode == 0
