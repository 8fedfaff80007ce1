"""The package map's rules (docs/architecture.md) hold, and the checks that hold them can fail.

`make lint` runs import-linter on the tree; here the same contracts run on a copy of the tree
with a cycle or a forbidden import added on purpose, and must break. Lazy imports must say why.
The tests keep their own map: no module of tests/ imports a test module or a conftest (what
tests share is in tests/support), and every folder of test modules is a package holding test
modules, conftest.py and __init__.py only.
"""

from __future__ import annotations

import ast
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


# --- the tests' own map (docs/architecture.md, "Tests") ----------------------------------------

TESTS = REPO / "tests"
# where the lines of the examples below stand (relative imports start from its folder)
EXAMPLE_TEST = TESTS / "gateway" / "test_example.py"


def imported_modules(source: str, path: Path) -> list[str]:
    """The dotted name of every module the imports of `source` (the file at `path`) name: the
    module of `import m` and `from m import x`, and `m.x` where m is a package (`from tests.gateway
    import test_app` imports a module too, `from tests.support.pages import World` does not)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                folder = path.parents[node.level - 1].relative_to(REPO)
                base = ".".join([*folder.parts, *(node.module or "").split(".")]).strip(".")
            else:
                base = node.module or ""
            names.append(base)
            if (REPO / base.replace(".", "/")).is_dir():
                names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def is_a_test_module(module: str) -> bool:
    """A test module (`test_*`) of tests/, or any conftest."""
    parts = module.split(".")
    return "conftest" in parts or (parts[0] == "tests" and parts[-1].startswith("test_"))


def imports_of_test_modules(source: str, path: Path) -> list[str]:
    return [m for m in imported_modules(source, path) if is_a_test_module(m)]


def test_no_module_of_the_tests_imports_a_test_module_or_a_conftest() -> None:
    """Test modules and conftests are pytest's to import; what tests share is in tests/support."""
    offences = [
        f"{path.relative_to(REPO)}: {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in imports_of_test_modules(path.read_text(), path)
    ]
    assert offences == []


@pytest.mark.parametrize(
    "line",
    [
        "from tests.test_job_pages import QueueRecorder",
        "from tests.gateway.test_app import post",
        "import tests.engine.test_atlas",
        "from tests.engine import test_atlas",
        "from tests.conftest import git",
        "from tests.gateway.conftest import emulator",
        "from tests.gateway import conftest",
        "from .test_job_pages import World",
        "from . import test_job_pages",
        "from .conftest import world",
        "from .. import conftest",
        "from ..engine.test_atlas import echo",
        "def f():\n    from tests.review.test_markdown import assert_valid",
    ],
)
def test_the_test_import_check_catches(line: str) -> None:
    assert imports_of_test_modules(line, EXAMPLE_TEST)


@pytest.mark.parametrize(
    "line",
    [
        "from tests.support.pages import QueueRecorder, World",
        "from tests.support import histories",
        "from tests.bench import fleetgen",
        "import pytest",
        "from shared.engine import templates",
        "from tests.support.deploy_world import test_server_path",
        "from ..support.pages import World",
    ],
)
def test_the_test_import_check_lets_support_imports_pass(line: str) -> None:
    assert imports_of_test_modules(line, EXAMPLE_TEST) == []


def test_every_folder_of_test_modules_is_a_package() -> None:
    """With an `__init__.py` in each folder pytest imports `tests/gateway/test_app.py` as
    `tests.gateway.test_app`, so two folders may hold modules of the same name."""
    folders = {path.parent for path in TESTS.rglob("test_*.py")}
    assert TESTS in folders
    missing = [folder for folder in folders if not (folder / "__init__.py").exists()]
    assert sorted(str(folder.relative_to(REPO)) for folder in missing) == []


def test_folders_of_test_modules_hold_tests_and_fixtures_only() -> None:
    """Helpers are in tests/support/: beside test modules stand only conftest.py and
    __init__.py."""
    folders = {path.parent for path in TESTS.rglob("test_*.py")}
    others = [
        path
        for folder in folders
        for path in folder.glob("*.py")
        if not path.name.startswith("test_") and path.name not in ("conftest.py", "__init__.py")
    ]
    assert sorted(str(path.relative_to(REPO)) for path in others) == []
