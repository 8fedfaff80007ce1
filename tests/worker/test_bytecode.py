"""The worker writes the workflow modules' bytecode at start, also under
PYTHONDONTWRITEBYTECODE=1, and an import then reads it instead of compiling the source (the
Temporal sandbox imports them for every workflow instance)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.support.paths import REPO_ROOT
from worker.bytecode import precompile

WORKFLOWS = REPO_ROOT / "workflows"


def test_the_workflow_modules_bytecode_is_written_and_read() -> None:
    for cache in WORKFLOWS.rglob("__pycache__"):
        shutil.rmtree(cache)
    assert precompile() is True
    modules = sorted(WORKFLOWS.rglob("*.py"))
    cached = {p.name.split(".")[0] for p in WORKFLOWS.rglob("__pycache__/*.pyc")}
    assert {m.stem for m in modules} <= cached
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    trace = subprocess.run(
        [sys.executable, "-v", "-c", "import workflows.registry"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        check=True,
    ).stderr
    read = [line for line in trace.splitlines() if "/workflows/" in line and " matches " in line]
    compiled = [
        line
        for line in trace.splitlines()
        if "code object from" in line and "/workflows/" in line and ".py'" in line
    ]
    assert len(read) >= len(modules) - 1, trace[-2000:]  # every module imported, from its cache
    assert compiled == [], compiled
