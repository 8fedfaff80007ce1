"""git in a seeded repository, for the endpoints and payloads the emulator computes from one:
`git` as the API runs it (a failure answers 500), `git_output` as a question (None: git said no)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from shared.devstack.emulator.model import ApiError

ZERO_SHA = "0" * 40  # a push's `before` for a created ref, its `after` for a deleted one


def git(git_dir: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(git_dir), *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise ApiError(500, f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def git_output(git_dir: Path, *args: str) -> str | None:
    """stdout (stripped) when git succeeds, None when it fails."""
    proc = subprocess.run(
        ["git", "-C", str(git_dir), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else None
