"""The threat model (docs/security.md) names tests that exist: every `path::name` it cites is
a test function in that file, and every row of its tables of what is shown names one."""

from __future__ import annotations

import ast
import re

from tests.support.paths import REPO_ROOT

SECURITY = REPO_ROOT / "docs" / "security.md"
CITED = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def test_every_test_the_threat_model_names_exists() -> None:
    cited = set(CITED.findall(SECURITY.read_text()))
    assert len(cited) > 40
    for path, name in sorted(cited):
        source = REPO_ROOT / path
        assert source.is_file(), path
        tests = {
            node.name
            for node in ast.walk(ast.parse(source.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test_")
        }
        assert name in tests, f"{path}::{name}"


def section_rows(heading: str) -> list[str]:
    """The table rows (without the header and its rule) of the section under `heading`."""
    text = SECURITY.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return rows[2:]


def test_every_row_of_what_is_shown_names_a_test() -> None:
    for heading in ("What each can do, and the test that shows it", "The assets, one by one"):
        rows = section_rows(heading)
        assert len(rows) >= 6, heading
        for row in rows:
            assert CITED.search(row.rstrip(" |").rsplit(" | ", 1)[-1]), row
