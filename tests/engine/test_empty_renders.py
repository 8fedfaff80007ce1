"""No silent empty render, in every layout: a release that renders no object is a warning
(it can be intended) that `validate` and the check run show with its file and line; a fleet
with no root is an error."""

from __future__ import annotations

import shutil
from pathlib import Path

from activities.render import render_with_warnings
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from shared.engine.validate import check_fleet, validate_fleet
from tests.support.atlas import make_fleet
from tests.support.paths import EXAMPLES

QUIET = {
    "templates/quiet/helmfile.yaml.gotmpl": "releases:\n  - name: quiet\n    chart: ./chart\n",
    "templates/quiet/chart/Chart.yaml": "apiVersion: v2\nname: quiet\nversion: 0.1.0\n",
    "templates/quiet/chart/values.yaml": "enabled: false\n",
    "templates/quiet/chart/templates/cm.yaml": (
        "{{- if .Values.enabled }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: q\n"
        "{{- end }}\n"
    ),
}
WARNING = (
    "templates/quiet/helmfile.yaml.gotmpl:2: warning: release 'd/quiet' renders no object (its "
    "chart, values or flags leave every template empty)"
)


def _atlas(tmp_path: Path) -> Path:
    deployment = "apps:\n  - template: echo\n  - template: quiet\n"
    files = {
        **QUIET,
        "deployments/g/a/apps/d/deployment.yaml": deployment,
        "deployments/g/b/apps/d/deployment.yaml": deployment,
    }
    return make_fleet(tmp_path / "fleet", files)


def test_atlas_an_empty_release_is_a_warning_with_its_roots(tmp_path: Path) -> None:
    base = _atlas(tmp_path)
    found = check_fleet(WorkTree(base))
    assert [str(p) for p in found.problems] == [WARNING + " (in 2 roots: g/a, g/b)"]
    assert all(p.hygiene for p in found.problems)
    fleet = Fleet.open(WorkTree(base))
    assert fleet.render_warnings("g/a") == []  # not rendered yet
    assert sorted(fleet.render("g/a").files) == ["d/echo/d/ConfigMap_echo-values.yaml"]
    assert [str(p) for p in fleet.render_warnings("g/a")] == [WARNING]


def test_atlas_the_check_run_shows_it(tmp_path: Path) -> None:
    base = _atlas(tmp_path)
    render, warnings = render_with_warnings(base, "g/b")
    assert render.files and warnings == [WARNING]
    _, shared = render_with_warnings(base, "g/b", key=("acme/fleet", "0" * 40))
    assert shared == [WARNING]


def test_dimensions_a_cluster_type_without_applications_is_a_warning(tmp_path: Path) -> None:
    fleet = Path(shutil.copytree(EXAMPLES / "dimensions-fleet", tmp_path / "fleet"))
    config = fleet / "config/config.yaml"
    text = config.read_text()
    listed = "    applications:\n      - prometheus\n      - log-collector\n"
    assert listed in text
    config.write_text(text.replace(listed, "    applications: []\n", 1))
    for name in ("prometheus", "log-collector"):
        shutil.rmtree(fleet / "config/regional-cluster" / name)
    problems = [str(p) for p in validate_fleet(WorkTree(fleet))]
    assert len(problems) == 1
    assert problems[0].startswith(
        "config/config.yaml:52: warning: cluster type 'regional-cluster' lists no application "
        "or ApplicationSet: its roots render a chart with no object (in "
    )
    root = next(r for r in Fleet.open(WorkTree(fleet)).roots() if r.startswith("regional"))
    assert render_with_warnings(fleet, root)[1] == [problems[0].split(" (in ")[0]]


def test_a_fleet_without_roots_is_an_error_in_atlas_and_dimensions(tmp_path: Path) -> None:
    atlas = make_fleet(tmp_path / "atlas", {})
    found = check_fleet(WorkTree(atlas))
    assert found.roots == 0 and not found.problems[0].hygiene
    assert "the atlas layout finds no root in this repository" in str(found.problems[0])
