"""Where things are: the repository, the tests' fixtures and golden trees, the examples and the
echo chart (a chart that writes the `.Values` it saw into a ConfigMap)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO_ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
GOLDEN = TESTS / "golden"
EXAMPLES = REPO_ROOT / "examples"
ECHO_CHART = FIXTURES / "charts" / "echo"
