"""examples/dimensions-fleet through the CLI, against golden output."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from shared.cli import main as cli
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.golden import assert_golden
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "dimensions-fleet"
GOLDEN_ROOTS = [
    "management-cluster/integration/int-sector-1/us-central1",
    "regional-cluster/stage/stage-sector-1/europe-west1",
]

PLACES = [
    "integration/int-sector-1/europe-west1",
    "integration/int-sector-1/us-central1",
    "integration/int-sector-2/us-central1",
    "prod/prod-canary/us-east1",
    "prod/prod-sector-1/europe-east1",
    "prod/prod-sector-1/us-east1",
    "stage/stage-sector-1/europe-west1",
    "stage/stage-sector-1/us-east1",
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_roots(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "roots", "--repo", str(EXAMPLE))
    assert code == 0
    assert out.splitlines() == [
        f"{t}/{p}" for t in ("management-cluster", "regional-cluster") for p in PLACES
    ]


def test_validate_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", "--repo", str(EXAMPLE))
    assert (code, out) == (0, "")
    assert err == "16 root(s) checked: no problems found\n"


def test_values_show_the_patch_in_integration_only(capsys: pytest.CaptureFixture[str]) -> None:
    def values(root: str) -> dict[str, object]:
        code, out, err = run(capsys, "values", root, "--repo", str(EXAMPLE))
        assert code == 0, err
        loaded: dict[str, object] = yaml.safe_load(out)
        return loaded

    integration = values("management-cluster/integration/int-sector-2/us-central1")
    stage = values("management-cluster/stage/stage-sector-1/us-east1")
    hypershift = integration["applications"]["hypershift-operator"]  # type: ignore[index]
    assert hypershift["source"]["targetRevision"] == "v4.18.0"
    assert hypershift["syncPolicy"]["syncOptions"] == [
        "CreateNamespace=true",
        "ServerSideApply=true",
        "RespectIgnoreDifferences=true",
    ]
    assert hypershift["source"]["helm"]["valuesObject"]["logLevel"] == "debug"
    staged = stage["applications"]["hypershift-operator"]  # type: ignore[index]
    assert staged["source"]["targetRevision"] == "v4.17.0"
    assert "logLevel" not in staged["source"]["helm"]["valuesObject"]
    assert stage["cluster"] == {
        "type": "management-cluster",
        "environment": "stage",
        "sector": "stage-sector-1",
        "region": "us-east1",
    }


def test_values_of_an_unknown_root_fail_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "values", "nope/a/b/c", "--repo", str(EXAMPLE))
    assert (code, out) == (1, "")
    assert "unknown root 'nope/a/b/c'" in err


def test_render_matches_golden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["render", "--repo", str(EXAMPLE), "--out", str(tmp_path)]
    for root in GOLDEN_ROOTS:
        argv += ["--root", root]
    code, out, err = run(capsys, *argv)
    assert (code, out) == (0, "")
    assert err.startswith(f"rendered {len(GOLDEN_ROOTS)} root(s), ") and err.count("\n") == 1
    assert_golden(tmp_path, "dimensions-fleet", GOLDEN_ROOTS)


def test_render_all_roots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "render", "--repo", str(EXAMPLE), "--out", str(tmp_path))[0] == 0
    charts = sorted(p.parent.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("Chart.yaml"))
    assert charts == Fleet.open(WorkTree(EXAMPLE)).roots()
    apps = sorted(
        p.name for p in (tmp_path / "regional-cluster" / PLACES[0] / "templates").iterdir()
    )
    assert apps == ["log-collector.yaml", "prometheus.yaml"]
    for template in tmp_path.rglob("templates/*.yaml"):
        doc = yaml.safe_load(template.read_text())
        assert doc["kind"] == "Application"
        # every escaped expression lost exactly one level of escaping
        assert "{{`" not in template.read_text()


def test_render_is_byte_identical_across_runs(tmp_path: Path) -> None:
    first = {r.root: r.digest for r in Fleet.open(WorkTree(EXAMPLE)).render_all()}
    copy = shutil.copytree(EXAMPLE, tmp_path / "copy")
    second = {r.root: r.digest for r in Fleet.open(WorkTree(copy)).render_all()}
    assert first == second
    assert len(set(first.values())) == len(first)  # every root differs from the others


def test_validate_reports_a_broken_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = shutil.copytree(EXAMPLE, tmp_path / "fleet")
    app = repo / "config/management-cluster/hypershift-operator"
    copy = app / "integration/patches/patch-001-hypershift-v4.18.yaml"
    copy.write_text(copy.read_text().replace('">=v1.13.0"', '">=v1.16.0"'))
    code, out, err = run(capsys, "validate", "--repo", str(repo))
    assert code == 1
    rel = "config/management-cluster/hypershift-operator/integration/patches/"
    assert out.splitlines() == [
        f"{rel}patch-001-hypershift-v4.18.yaml:2: active copy of patch 'hypershift-v4.18-rollout' "
        "differs from the staged "
        "config/management-cluster/hypershift-operator/patches/patch-001-hypershift-v4.18.yaml; "
        "copies must be identical to it",
        f"{rel}patch-001-hypershift-v4.18.yaml:5: dependency /cert-manager/source/targetRevision "
        ">=v1.16.0 of patch 'hypershift-v4.18-rollout' is not met (found 'v1.15.1'), so the "
        "patch is not applied at management-cluster/integration/int-sector-1/europe-west1, "
        "management-cluster/integration/int-sector-1/us-central1, "
        "management-cluster/integration/int-sector-2/us-central1",
    ]
    assert err == "16 root(s) checked: 2 problem(s) found\n"
