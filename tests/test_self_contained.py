"""The repository needs nothing outside itself and speaks of the project alone.

A user's clone has nothing beside it: no tracked file may point at a folder next to the checkout,
at a developer's machine, or at an issue tracker its readers cannot open. The patterns are built
from pieces so that this file does not match them itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The folders that sit beside a developer's checkout (reference data, tools), reached by `..`,
# and the parent step itself; spelt in pieces so that no line of this file is such a path.
BESIDE = ("sha" + "red", ".library")
UP = "." * 2 + "/"
# Strict on purpose: a link from docs/ to the `shared` package names it from the root instead.
SIBLING = re.compile(
    f"(?:{re.escape(UP)})+(?:" + "|".join(re.escape(name) for name in BESIDE) + r")\b"
)
PARENTS = re.compile(
    r"parents\[\d+\]\s*/\s*[\"']shared[\"']"
    r"|parent\.parent\.parent\s*/\s*[\"']shared"
    r"|[\"']shared[\"']\s*/\s*[\"']fixtures[\"']"
)
# Home and work folders of developers' machines (split so that this line is not one).
HOMES = ("/wo" + "rk/", "/ro" + "ot/", "/Us" + "ers/")
MACHINE = re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, HOMES)) + ")")
TRACKER = re.compile(r"\b" + "iss" + r"ues?\s+#?\d", re.IGNORECASE)
OUTSIDE_DOCS = re.compile(r"\bDESIGN\.md\b")
RULES = {
    "a folder beside the checkout": SIBLING,
    "a path climbing out of the checkout": PARENTS,
    "a developer's machine": MACHINE,
    "an issue number": TRACKER,
    "a document outside the repository": OUTSIDE_DOCS,
}


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    files = []
    for name in filter(None, listed.split("\0")):
        path = REPO / name
        if path.is_file() and b"\0" not in path.read_bytes()[:8192]:
            files.append(path)
    return files


def offences(text: str) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [(number, what) for what, rule in RULES.items() if rule.search(line)]
    return found


def test_no_tracked_file_refers_outside_the_repository() -> None:
    files = tracked_text_files()
    assert len(files) > 100, "git ls-files listed too few files to be this repository"
    bad = [
        f"{path.relative_to(REPO)}:{number}: {what}"
        for path in files
        for number, what in offences(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert bad == []


@pytest.mark.parametrize(
    "line",
    [
        "FIXTURES = Path(__file__).resolve().parents[2] " + "/ 'shared' " + "/ 'fixtures'",
        'WEBHOOKS = ROOT / "shared" ' + '/ "fixtures" / "github"',
        f"payloads in {UP}{BESIDE[0]}/fixtures/github",
        f"see {UP}{UP}{BESIDE[1]}/README.md",
        "cd /work" + "/main && make test",
        "the lock (" + "Iss" + "ue 16 item 2)",
        "see issues #" + "12",
        "Keys (DESIGN" + ".md)",
    ],
)
def test_each_rule_catches_what_it_is_for(line: str) -> None:
    assert offences(line)


@pytest.mark.parametrize(
    "line",
    [
        "[atlas](../formats/atlas.md)",
        "secrets: ../../common.sops.yaml",
        'monkeypatch.setenv("HOME", "/home/someone")',
        "FIXTURES = Path(__file__).parent / 'fixtures'",
        "issues resolved in the review",
    ],
)
def test_ordinary_lines_pass(line: str) -> None:
    assert offences(line) == []
