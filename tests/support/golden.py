"""Golden render trees: compare `rollwright render` output with tests/golden/<fleet>/, or
rewrite them with `ROLLWRIGHT_UPDATE_GOLDEN=1`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.support.paths import GOLDEN

UPDATE = os.environ.get("ROLLWRIGHT_UPDATE_GOLDEN") == "1"


def tree_of(base: Path) -> dict[str, bytes]:
    return {
        p.relative_to(base).as_posix(): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }


def assert_golden(rendered: Path, fleet: str, roots: list[str]) -> None:
    """`rendered` (a render of `roots`) equals tests/golden/<fleet>/, file by file."""
    golden = GOLDEN / fleet
    if UPDATE:
        for root in roots:
            shutil.rmtree(golden / root, ignore_errors=True)
            shutil.copytree(rendered / root, golden / root)
    got, want = tree_of(rendered), tree_of(golden)
    assert sorted(got) == sorted(want)
    for rel in want:
        assert got[rel] == want[rel], f"{rel} differs from tests/golden/{fleet}/{rel}"
