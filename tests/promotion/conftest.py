"""Fixtures of the promotion tests: a git repository of examples/dimensions-fleet."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.files import copy_example
from tests.support.gitrepo import commit_all, init_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = copy_example("dimensions-fleet", tmp_path / "fleet")
    init_repo(path)
    commit_all(path, "fleet")
    return path
