"""Real git repositories for tests: `git` in a repository, a fresh one on branch main with a
deterministic identity, and a commit of everything in it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from shared.contracts.deploy import RepoRef


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def init_repo(path: Path) -> Path:
    """A real git repo with a deterministic identity, on branch main."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@rollwright.invalid")
    git(path, "config", "user.name", "rollwright tests")
    git(path, "config", "commit.gpgsign", "false")
    return path


def commit_all(repo: Path, message: str = "change") -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def local_remote(repo: RepoRef) -> str:
    """Where the mirror of a test clones from: the local repository the test's RepoRef names.
    The worker itself clones from the configured GitHub (`activities.github_remotes`)."""
    return repo.clone_url
