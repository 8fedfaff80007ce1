"""Atlas rendering beyond values: remote charts, patches, output collisions, git revisions."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.engine.atlas.layout import AtlasLayout
from shared.engine.config.fleet import FleetConfig
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import GitTree, WorkTree
from tests.support.atlas import echo, layout, make_fleet, one_app, render
from tests.support.chart_repo import ChartRepo
from tests.support.gitrepo import commit_all, init_repo
from tests.support.oci_registry import OciRegistry

DEP = "deployments/g/c/apps/d"
HELMFILE = "templates/echo/helmfile.yaml.gotmpl"


def test_chart_from_an_http_repository(tmp_path: Path, chart_repo: ChartRepo) -> None:
    helmfile = (
        f"repositories:\n  - name: test\n    url: {chart_repo.url}\n"
        "releases:\n  - name: echo\n    chart: test/echo\n    version: 0.2.0\n"
        "    values:\n      - level: template\n"
    )
    base = make_fleet(tmp_path, {f"{DEP}/deployment.yaml": one_app(), HELMFILE: helmfile})
    lay = layout(base)
    assert [r.id for r in lay.releases("g/c")] == ["d/echo"]
    assert chart_repo.requests == []  # listing releases never fetches charts
    values = echo(base, "g/c")
    # chart defaults come from the pulled chart (level 1), template values beat them
    assert (values["chartDefault"], values["level"]) == ("from-chart", "template")
    assert lay.layers("g/c", None)[0].level == "chart"


def test_chart_from_an_oci_registry(tmp_path: Path, oci_registry: OciRegistry) -> None:
    helmfile = (
        f"repositories:\n  - name: reg\n    url: {oci_registry.host}/charts\n    oci: true\n"
        "releases:\n  - name: viarepo\n    chart: reg/echo\n    version: 0.1.0\n"
        f"  - name: direct\n    chart: oci://{oci_registry.host}/charts/echo\n"
        "    version: 0.2.0\n"
    )
    base = make_fleet(tmp_path, {f"{DEP}/deployment.yaml": one_app(), HELMFILE: helmfile})
    files = render(base, "g/c")
    assert sorted(files) == [
        "d/direct/d/ConfigMap_direct-values.yaml",
        "d/viarepo/d/ConfigMap_viarepo-values.yaml",
    ]


def test_patch_files_and_instance_patches_across_releases(tmp_path: Path) -> None:
    helmfile = """releases:
  - name: api
    chart: ./chart
    jsonPatches:
      - patches/label.yaml
  - name: worker
    chart: ./chart
"""
    deployment = {
        "apps": [
            {
                "template": "echo",
                # matches a ConfigMap of each release of the instance (names are regexes)
                "jsonPatches": [
                    {
                        "target": {"kind": "ConfigMap", "name": ".*-values"},
                        "patch": [{"op": "add", "path": "/data/extra", "value": "x"}],
                    }
                ],
                # matches one release only: fine, it has to match somewhere in the instance
                "strategicMergePatches": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": "worker-values", "annotations": {"w": "1"}},
                    }
                ],
            }
        ]
    }
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": deployment,
            HELMFILE: helmfile,
            "templates/echo/patches/label.yaml": {
                "target": {"kind": "ConfigMap"},
                "patch": [{"op": "add", "path": "/metadata/labels", "value": {"p": "file"}}],
            },
        },
    )
    files = {k: yaml.safe_load(v) for k, v in render(base, "g/c").items()}
    api = files["d/api/d/ConfigMap_api-values.yaml"]
    worker = files["d/worker/d/ConfigMap_worker-values.yaml"]
    assert api["metadata"]["labels"] == {"p": "file"}
    assert "labels" not in worker["metadata"]
    assert api["data"]["extra"] == worker["data"]["extra"] == "x"
    assert worker["metadata"]["annotations"] == {"w": "1"}
    assert "annotations" not in api["metadata"]


def test_releases_writing_the_same_file_are_an_error(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            # an output pattern without {release}: two instances produce the same path
            "rollwright.yaml": {"output": {"pattern": "{deployment}/{kind}_{name}.yaml"}},
            "templates/echo/chart/templates/static.yaml": (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: static\n"
            ),
            f"{DEP}/deployment.yaml": {
                "apps": [{"template": "echo", "name": "a"}, {"template": "echo", "name": "b"}]
            },
        },
    )
    with pytest.raises(FleetError, match=r"releases 'd/a-echo' and 'd/b-echo' both write "):
        render(base, "g/c")


def test_layout_reads_a_git_revision_in_place(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "fleet")
    make_fleet(
        repo,
        {
            f"{DEP}/deployment.yaml": one_app(),
            "deployments/g/c/cluster.values.yaml": {"level": "committed"},
            "deployments/g/c/cluster.values.yaml.gotmpl": "seen: {{ .Values.level }}\n",
        },
    )
    commit_all(repo)
    (repo / "deployments/g/c/cluster.values.yaml").write_text("level: uncommitted\n")
    lay = AtlasLayout(GitTree(repo, "HEAD"), FleetConfig())
    assert lay.roots() == ["g/c"]
    values = lay.values("g/c", None)
    # the revision's files, without a checkout (chart defaults too)
    assert (values["level"], values["seen"]) == ("committed", "committed")
    assert values["chartDefault"] == "from-chart"
    assert lay.affected({"deployments/g/c/cluster.values.yaml"}) == {"g/c"}


def test_render_is_byte_identical_across_runs(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": {
                "apps": [{"template": "echo", "name": n} for n in ("c", "a", "b")]
            },
            "deployments/global.values.yaml": {"z": 1, "a": {"y": 2, "b": 3}},
        },
    )
    first = Fleet.open(WorkTree(base)).render("g/c")
    second = Fleet.open(WorkTree(base)).render("g/c")
    assert first.files == second.files and first.digest == second.digest
    assert list(first.files) == sorted(first.files)
