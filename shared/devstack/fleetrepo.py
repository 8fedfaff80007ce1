"""A real git fleet repository for the demo, the end-to-end test and the benchmarks: copied from
an example fleet, committed on `main`, then changed one commit at a time."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.engine import yamldoc

_IDENTITY = (
    "-c",
    "user.name=rollwright demo",
    "-c",
    "user.email=demo@rollwright.invalid",
    "-c",
    "commit.gpgsign=false",
)


class GitFailed(RuntimeError):
    pass


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *_IDENTITY, *args],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise GitFailed(f"git {' '.join(args)} in {repo}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def create_fleet_repo(source: Path, dest: Path, *, message: str = "Fleet") -> str:
    """Copy `source` to `dest` (which must not exist), commit it on `main`; return the sha."""
    if dest.exists():
        raise FileExistsError(f"{dest} already exists")
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".git"))
    git(dest, "init", "-q", "-b", "main")
    return commit_all(dest, message)


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return head(repo)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def edit_yaml(repo: Path, rel: str, change: Callable[[dict[str, Any]], None], message: str) -> str:
    """Load `rel` as a YAML mapping, let `change` modify it, write and commit; return the sha."""
    path = repo / rel
    data = yamldoc.load_mapping(path, rel) if path.exists() else {}
    change(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yamldoc.dumps(data))
    return commit_all(repo, message)


def set_value(repo: Path, rel: str, dotted: str, value: Any, message: str) -> str:
    """Set `a.b.c` in the YAML file `rel` (creating mappings on the way) and commit."""

    def change(data: dict[str, Any]) -> None:
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        node[last] = value

    return edit_yaml(repo, rel, change, message)
