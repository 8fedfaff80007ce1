"""kube-renderer's own test cases, on rollwright's fixtures: each case's repository renders
exactly the tree kube-renderer v0.1.20 writes (a `diff -r` of every path and byte)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.helmfile import CASES, build, expected_tree, local_charts, rendered_tree

OUTPUT_CASES = sorted(p.name for p in CASES.iterdir() if (p / "expected").is_dir())


@pytest.mark.parametrize("case", OUTPUT_CASES)
def test_the_case_renders_kube_renderers_tree(case: str, tmp_path: Path) -> None:
    got = rendered_tree(build(case, tmp_path))
    want = expected_tree(case)
    assert sorted(got) == sorted(want)
    for path, data in want.items():
        assert got[path].decode() == data.decode(), path


# bad-helmbinary's helmfile is refused before any release is read.
LOADABLE = sorted(p.name for p in CASES.iterdir() if p.name != "bad-helmbinary")


@pytest.mark.parametrize("case", LOADABLE)
def test_every_local_chart_of_a_case_is_in_its_repository(case: str, tmp_path: Path) -> None:
    """A case whose chart folder is missing would prove nothing (or only an error): every
    local chart a release names is a directory (or archive) of the built repository."""
    repo = build(case, tmp_path)
    charts = local_charts(repo)
    missing = [(name, chart) for name, chart in charts if not (repo / chart).exists()]
    assert not missing, f"{case}: releases name charts that are not there: {missing}"
