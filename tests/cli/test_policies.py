"""`rollwright policies` on a checkout: the fleet's policy sets (regopy, CEL) on each root's
redacted render, findings printed, exit 2 on a failing deny, 1 on a fleet mistake."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shared.cli.main import main
from tests.support.files import write_files
from tests.support.paths import EXAMPLES

RULES = """package main

import rego.v1

deny contains msg if {
  input.kind == "Deployment"
  input.metadata.namespace == "debug"
  msg := sprintf("debug deployment %s", [input.metadata.name])
}

warn contains "a ClusterRole" if input.kind == "ClusterRole"
"""


def fleet(tmp_path: Path, rules: str = RULES) -> Path:
    repo = tmp_path / "fleet"
    shutil.copytree(EXAMPLES / "atlas-fleet", repo)
    write_files(
        repo,
        {
            "rollwright.yaml": "policies:\n  - name: sec\n    path: policies/sec\n"
            "    owners: [sec-lead]\n    roots: ['staging/*']\n",
            "policies/sec/rules.rego": rules,
        },
    )
    return repo


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_findings_and_exit_codes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo = str(fleet(tmp_path))
    code, out, err = run(capsys, "policies", "--repo", repo)
    assert code == 2
    lines = out.splitlines()
    assert (
        "staging/cluster-a: deny sec Deployment debug/netshoot "
        "(debug-tools/debug-tools/debug/Deployment.apps_netshoot.yaml): debug deployment "
        "netshoot (data.main.deny)"
    ) in lines
    assert sum(1 for line in lines if line.startswith("staging/cluster-b: deny")) == 1
    assert not any(line.startswith("prod/") for line in lines)  # the set checks staging only
    assert err.strip().endswith("2 root(s) checked: 2 denied, 3 warning(s)")
    code, out, _ = run(capsys, "policies", "--repo", repo, "prod/eu-1")
    assert code == 1
    code, out, _ = run(capsys, "policies", "--repo", repo, "--format", "json", "staging/cluster-b")
    document = json.loads(out)
    assert (document["denies"], document["warnings"]) == (1, 1)
    assert document["roots"]["staging/cluster-b"][0]["file"].endswith(
        "Deployment.apps_netshoot.yaml"
    )


def test_a_policy_file_that_does_not_compile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = RULES.replace('namespace == "debug"', 'namespace == == "debug"')
    code, _, err = run(capsys, "policies", "--repo", str(fleet(tmp_path, broken)))
    assert code == 1
    assert err.startswith("error: policies/sec/rules.rego:7: policy set 'sec': Rego:")
