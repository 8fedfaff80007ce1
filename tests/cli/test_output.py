"""The CLI in pipes and scripts: `render` and `validate` end with a one-line summary on stderr
whether or not stdout is a terminal, and `--format json` gives what each command prints as a
document (roots, values, render, validate; `diff` and `rollout status` have their own tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shared.cli.main import main
from tests.support.files import write_files
from tests.support.preview import CONFIGMAP, web_repo


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_render_summary_in_a_pipe(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    script = Path(sys.executable).parent / "rollwright"
    proc = subprocess.run(
        [str(script), "render", "--repo", str(repo), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"rendered 2 root(s), 6 file(s) into {tmp_path / 'out'} in ")
    assert "\r" not in proc.stderr  # no progress bar outside a terminal


def test_render_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = web_repo(tmp_path / "fleet")
    out_dir = tmp_path / "out"
    code, out, err = run(
        capsys, "render", "--repo", str(repo), "--out", str(out_dir), "--format", "json"
    )
    assert code == 0 and err.startswith("rendered 2 root(s)")
    doc = json.loads(out)
    assert doc["roots"] == ["g/c1", "g/c2"] and doc["files"] == 6
    assert doc["out"] == str(out_dir)
    assert (out_dir / "g/c1" / CONFIGMAP).is_file()


def test_validate_summary_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = web_repo(tmp_path / "fleet")
    code, out, err = run(capsys, "validate", "--repo", str(repo))
    assert code == 0 and len(out.splitlines()) == 2  # the fleet sets `cluster`, read by none
    assert err.splitlines() == ["2 root(s) checked: 2 warning(s) found"]
    code, out, _ = run(capsys, "validate", "--repo", str(repo), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and (doc["ok"], doc["roots"], doc["errors"], doc["warnings"]) == (
        True, 2, 0, 2,
    )  # fmt: skip
    assert doc["problems"][0] == {
        "path": "deployments/g/c1/cluster.values.yaml",
        "line": 1,
        "severity": "warning",
        "message": "values key 'cluster' is not read by any template of release web/web",
    }
    code, out, _ = run(capsys, "validate", "--repo", str(repo), "--strict", "--format", "json")
    assert code == 1 and json.loads(out)["ok"] is False

    write_files(repo, {"templates/web/chart/templates/cluster.yaml": "# {{ .Values.cluster }}\n"})
    code, out, err = run(capsys, "validate", "--repo", str(repo))
    assert (code, out) == (0, "")
    assert err.splitlines() == ["2 root(s) checked: no problems found"]

    write_files(repo, {"deployments/g/c1/cluster.values.yaml": "cluster: [\n"})
    code, out, err = run(capsys, "validate", "--repo", str(repo), "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["ok"] is False and doc["errors"] >= 1
    [problem] = [p for p in doc["problems"] if p["path"].endswith("g/c1/cluster.values.yaml")]
    assert problem["severity"] == "error" and isinstance(problem["line"], int)
    assert "problem(s) found" in err.splitlines()[-1]


def test_roots_and_values_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = web_repo(tmp_path / "fleet")
    code, out, _ = run(capsys, "roots", "--repo", str(repo), "--format", "json")
    assert code == 0 and json.loads(out) == ["g/c1", "g/c2"]
    code, out, _ = run(capsys, "values", "g/c1", "--repo", str(repo), "--format", "json")
    assert code == 0
    values = json.loads(out)
    assert values["cluster"] == "g/c1"
    code, yaml_out, _ = run(capsys, "values", "g/c1", "--repo", str(repo))
    assert code == 0 and "cluster: g/c1" in yaml_out
