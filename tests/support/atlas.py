"""Small atlas fleets for tests: the echo chart as template `echo`, plus files per test."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from shared.engine.atlas.layout import AtlasLayout
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.files import echo_values, write_files
from tests.support.golden import tree_of
from tests.support.paths import ECHO_CHART

ECHO_HELMFILE = """releases:
  - name: echo
    chart: ./chart
"""


def make_fleet(base: Path, files: dict[str, Any], *, echo: bool = True) -> Path:
    """Write an atlas fleet under `base`: template `echo` (the echo chart) unless `echo` is
    False, then `files` (path → text, or a mapping/list dumped as YAML)."""
    if echo:
        shutil.copytree(ECHO_CHART, base / "templates/echo/chart", dirs_exist_ok=True)
        if "templates/echo/helmfile.yaml.gotmpl" not in files:
            write_files(base, {"templates/echo/helmfile.yaml.gotmpl": ECHO_HELMFILE})
    write_files(base, files)
    (base / "deployments").mkdir(parents=True, exist_ok=True)
    return base


def layout(base: Path) -> AtlasLayout:
    fleet = Fleet.open(WorkTree(base))
    assert isinstance(fleet.layout, AtlasLayout)
    return fleet.layout


def render(base: Path, root: str) -> dict[str, bytes]:
    """The root's plaintext files (what the charts saw; `Render.files` is redacted)."""
    return Fleet.open(WorkTree(base)).render(root).reveal()


def echo(base: Path, root: str, suffix: str = "") -> dict[str, Any]:
    """The .Values the echo chart saw in `root` (the ConfigMap whose path ends in `suffix`)."""
    return echo_values(render(base, root), suffix)


def one_app(template: str = "echo", **instance: Any) -> dict[str, Any]:
    """A deployment.yaml with one instance."""
    return {"apps": [{"template": template, **instance}]}


def assert_matches_golden(out: Path, golden: Path) -> None:
    """The rendered tree `out` equals the golden tree byte for byte; with
    ROLLWRIGHT_UPDATE_GOLDEN=1 the golden tree is replaced by `out` first."""
    if os.environ.get("ROLLWRIGHT_UPDATE_GOLDEN") == "1":
        shutil.rmtree(golden, ignore_errors=True)
        shutil.copytree(out, golden)
    rendered, expected = tree_of(out), tree_of(golden)
    assert sorted(rendered) == sorted(expected)
    for path, data in rendered.items():
        assert data == expected[path], f"{path} differs from the golden file"
