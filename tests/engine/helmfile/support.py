"""Fixture repositories of the helmfile layout: a case's input with its source charts."""

from __future__ import annotations

import shutil
from pathlib import Path

from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "helmfile"
CASES = FIXTURES / "cases"


def build(case: str, into: Path) -> Path:
    """The case's repository in `into`: its input plus the sources `sources.txt` lists."""
    repo = into / case
    shutil.copytree(CASES / case / "input", repo)
    listing = CASES / case / "sources.txt"
    for line in listing.read_text().splitlines() if listing.exists() else []:
        source, target = line.split()
        shutil.copytree(FIXTURES / "sources" / source, repo / target)
    return repo


def rendered_tree(repo: Path) -> dict[str, bytes]:
    """Every file of every root, by its path below kube-renderer's TARGET."""
    fleet = Fleet.open(WorkTree(repo))
    out: dict[str, bytes] = {}
    for root in fleet.roots():
        for path, data in fleet.render(root).reveal().items():
            out[f"{root}/{path}"] = data
    return out


def expected_tree(case: str) -> dict[str, bytes]:
    base = CASES / case / "expected"
    return {
        p.relative_to(base).as_posix(): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }
