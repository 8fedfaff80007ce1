"""The package map's rules (docs/architecture.md) hold, and the checks that hold them can fail.

`make lint` runs import-linter on the tree; here the same contracts run on a copy of the tree
with a cycle or a forbidden import added on purpose, and must break. Lazy imports must say why.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("shared", "gateway", "worker", "workflows", "activities")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env={"PATH": str(LINT_IMPORTS.parent), "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    for name in PACKAGES:
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_the_tree_keeps_every_contract(tree_copy: Path) -> None:
    result = lint_imports(tree_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_cycle_added_on_purpose_breaks_the_acyclic_contract(tree_copy: Path) -> None:
    # yamldoc is imported by half the engine; making it import the fleet closes a loop.
    append(tree_copy / "shared/engine/yamldoc.py", "\nfrom shared.engine import fleet  # noqa\n")
    result = lint_imports(tree_copy)
    assert result.returncode != 0
    assert "No import cycles between modules or packages BROKEN" in result.stdout


def test_a_lazy_import_still_counts_as_an_import(tree_copy: Path) -> None:
    append(
        tree_copy / "shared/engine/helm/engine.py",
        "\n\ndef _late() -> None:\n    from shared.stores import blob  # noqa\n",
    )
    result = lint_imports(tree_copy)
    assert result.returncode != 0
    assert "The engine knows no Temporal, stores, GitHub or service BROKEN" in result.stdout


def test_the_engine_may_not_import_temporal(tree_copy: Path) -> None:
    append(tree_copy / "shared/engine/render.py", "\nimport temporalio.client  # noqa\n")
    result = lint_imports(tree_copy)
    assert result.returncode != 0
    assert "shared.engine.render -> temporalio" in result.stdout


def test_workflows_may_not_import_activities(tree_copy: Path) -> None:
    append(tree_copy / "workflows/calls.py", "\nimport activities.errors  # noqa\n")
    result = lint_imports(tree_copy)
    assert result.returncode != 0
    assert "Workflows import contracts only" in result.stdout


PROCESSES_CONTRACT = (
    "Processes reach workflows only through workflows.registry, never the dev stack or commands"
)


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("gateway/dispatcher.py", "import workflows.dispatch"),
        ("gateway/app.py", "import workflows.registry"),
        ("worker/main.py", "from workflows.rootqueue.workflow import RootQueueWorkflow"),
        ("worker/logs.py", "import shared.devstack.stack"),
        ("gateway/webhooks.py", "import shared.cli.main"),
    ],
    ids=[
        "gateway-workflow-module",
        "gateway-registry",
        "worker-workflow-module",
        "devstack",
        "cli",
    ],
)
def test_processes_import_no_workflow_internals_dev_stack_or_commands(
    tree_copy: Path, module: str, line: str
) -> None:
    """The worker registers workflows through workflows.registry; the gateway starts them by
    name and needs nothing from `workflows`; neither runs the dev stack or the commands."""
    append(tree_copy / module, f"\n{line}  # noqa\n")
    result = lint_imports(tree_copy)
    assert result.returncode != 0
    # import-linter wraps long names: compare without the line breaks
    assert f"{PROCESSES_CONTRACT} BROKEN" in " ".join(result.stdout.split())


def test_every_lazy_import_says_why() -> None:
    """A `noqa: PLC0415` (an import inside a function) is allowed only for start-up time, and
    the line above it or the import itself says so."""
    unexplained = []
    for name in PACKAGES:
        for path in sorted((REPO / name).rglob("*.py")):
            lines = path.read_text().splitlines()
            for i, line in enumerate(lines):
                if "noqa: PLC0415" not in line:
                    continue
                # The line itself, or the comment above its block of imports, says why.
                j = i
                while j > 0 and re.match(r"\s*(from \S+ import|import |$)", lines[j - 1]):
                    j -= 1
                context = "\n".join(lines[max(0, j - 1) : i + 1])
                if not re.search(r"start-up time", context, re.IGNORECASE):
                    unexplained.append(f"{path.relative_to(REPO)}:{i + 1}")
    assert unexplained == []
