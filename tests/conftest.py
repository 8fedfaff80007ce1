"""Shared fixtures: real git repositories and the echo chart."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = Path(__file__).parent.parent / "examples"
ECHO_CHART = FIXTURES / "charts" / "echo"


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


def write_files(base: Path, files: dict[str, Any]) -> None:
    """Write `files` (path → str, or a dict/list dumped as YAML) under `base`."""
    for rel, content in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not isinstance(content, str):
            content = yaml.safe_dump(content, sort_keys=False)
        path.write_text(content)


def echo_values(files: dict[str, bytes], suffix: str = "") -> dict[str, Any]:
    """The .Values the echo chart saw, from the one (or the `suffix`-matching) ConfigMap."""
    hits = [p for p in files if p.endswith(".yaml") and "ConfigMap_" in p and p.endswith(suffix)]
    assert hits, f"no echo ConfigMap among {sorted(files)}"
    assert len(hits) == 1, f"several echo ConfigMaps match {suffix!r}: {hits}"
    doc = yaml.safe_load(files[hits[0]])
    return json.loads(doc["data"]["values.json"])  # type: ignore[no-any-return]


@pytest.fixture
def repo_factory(tmp_path: Path) -> Callable[[str], Path]:
    def make(name: str = "fleet") -> Path:
        return init_repo(tmp_path / name)

    return make


@pytest.fixture
def echo_chart() -> Path:
    return ECHO_CHART


def copy_example(name: str, dest: Path) -> Path:
    shutil.copytree(EXAMPLES / name, dest)
    return dest
