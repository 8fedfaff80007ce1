"""kube-renderer's own test cases, on rollwright's fixtures: each case's repository renders
exactly the tree kube-renderer v0.1.20 writes (a `diff -r` of every path and byte)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.helmfile.support import CASES, build, expected_tree, rendered_tree

OUTPUT_CASES = sorted(p.name for p in CASES.iterdir() if (p / "expected").is_dir())


@pytest.mark.parametrize("case", OUTPUT_CASES)
def test_the_case_renders_kube_renderers_tree(case: str, tmp_path: Path) -> None:
    got = rendered_tree(build(case, tmp_path))
    want = expected_tree(case)
    assert sorted(got) == sorted(want)
    for path, data in want.items():
        assert got[path].decode() == data.decode(), path
