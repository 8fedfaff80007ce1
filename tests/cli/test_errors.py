"""The CLI turns every kind of bad input into a message and a non-zero exit, never a traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shared.cli.main import main
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, init_repo
from tests.support.paths import EXAMPLES


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_missing_repo_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "roots", "--repo", str(tmp_path / "nope"))
    assert code == 1
    assert "is not a directory" in err


def test_undetectable_layout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "roots", "--repo", str(tmp_path))
    assert code == 1
    assert "cannot tell the fleet layout" in err


def test_rollwright_yaml_syntax_error_has_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_files(tmp_path, {"rollwright.yaml": "layout: atlas\noutput:\n  pattern: [unclosed\n"})
    code, _, err = run(capsys, "roots", "--repo", str(tmp_path))
    assert code == 1
    assert err.startswith("error: rollwright.yaml:")
    assert "YAML syntax error" in err


def test_rollwright_yaml_unknown_key_names_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_files(tmp_path, {"rollwright.yaml": "layout: atlas\nrender:\n  hookz: true\n"})
    code, out, _ = run(capsys, "validate", "--repo", str(tmp_path))
    assert code == 1
    assert "rollwright.yaml:3: unknown key 'render/hookz'" in out


def test_bad_output_pattern_is_rejected(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"rollwright.yaml": "output:\n  pattern: '{kind}.yaml'\n"})
    code, out, _ = run(capsys, "validate", "--repo", str(tmp_path))
    assert code == 1
    assert "rollwright.yaml:2:" in out
    assert "{name}" in out


def test_changed_needs_two_revisions(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "roots", "--repo", str(tmp_path), "--changed", "HEAD")
    assert code == 1
    assert "BASE..HEAD" in err


def test_changed_with_unknown_revision(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    write_files(repo, {"README.md": "x\n"})
    commit_all(repo)
    code, _, err = run(capsys, "roots", "--repo", str(repo), "--changed", "nope..HEAD")
    assert code == 1
    assert "error: git" in err


def test_console_script_prints_no_traceback(tmp_path: Path) -> None:
    write_files(tmp_path, {"rollwright.yaml": "layout: [\n"})
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "rollwright"), "render", "--repo", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr


def test_bad_explicit_tag_is_a_fleet_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_files(tmp_path, {"rollwright.yaml": "layout: atlas\nrender:\n  crds: !!int abc\n"})
    code, _, err = run(capsys, "roots", "--repo", str(tmp_path))
    assert code == 1
    assert "rollwright.yaml: YAML value error" in err


def test_validate_reports_a_policy_file_that_does_not_compile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copytree(EXAMPLES / "atlas-fleet", tmp_path / "fleet")
    write_files(
        tmp_path / "fleet",
        {
            "rollwright.yaml": "policies:\n  - name: sec\n    path: policies/sec\n"
            "    owners: [sec-lead]\n",
            "policies/sec/ok.rego": 'package main\n\ndeny contains "x" if input.kind == "Nope"\n',
            "policies/sec/bad.rego": "package main\n\ndeny contains msg if {\n  input.x == ==\n}\n",
        },
    )
    code, out, _ = run(capsys, "validate", "--repo", str(tmp_path / "fleet"))
    assert code == 1
    assert "policies/sec/bad.rego:4: policy set 'sec': Rego: " in out
