"""Shadowed pins: patches still apply after every values file (the design document's merge
order), and `validate` warns, naming both files and lines, where an active patch overrides a
value set at its node or below; `rollout status` shows it next to the node."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from shared.cli import main as cli
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.paths import FIXTURES

ZONES = FIXTURES / "fleets" / "zones-fleet"
HS = "config/management-cluster/hypershift"
COPY = f"{HS}/integration/patches/hypershift-4.18.yaml"
ZONE_B = "integration/int-1/us-central1/us-central1-b"
CANARY = "production/canary/us-east1/us-east1-b"

PIN = """# hotfix build, until the 4.18 rollout gets here
applications:
  hypershift:
    source:
      targetRevision: v4.17.9-hotfix
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    repo = shutil.copytree(ZONES, tmp_path / "fleet")
    for node in (ZONE_B, CANARY):
        (repo / HS / node).mkdir(parents=True, exist_ok=True)
        (repo / HS / node / "values.yaml").write_text(PIN)
    return repo


def warning(node: str, roots: str) -> str:
    return (
        f"{HS}/{node}/values.yaml:5: /hypershift/source/targetRevision set here is overridden "
        f"by patch 'hypershift-v4.18' ({{copy}}:9), which applies after every values file, at "
        f"management-cluster/{roots}"
    )


def test_validate_warns_with_both_files_and_lines(
    fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "validate", "--repo", str(fleet))
    assert code == 0, out
    [line] = out.splitlines()
    assert line == warning(ZONE_B, ZONE_B).replace(
        ": /hypershift", ": warning: /hypershift", 1
    ).format(copy=COPY)
    assert err.endswith(" root(s) checked: 1 warning(s) found\n")
    # the merge order is kept: the patch wins
    values = Fleet.open(WorkTree(fleet)).values(f"management-cluster/{ZONE_B}")
    assert values["applications"]["hypershift"]["source"]["targetRevision"] == "v4.18.0"


def test_rollout_status_shows_it_next_to_the_node(
    fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "rollout", "status", "--repo", str(fleet))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[2] == "  active on:    integration"
    assert lines[3] == "  warning:      integration: " + warning(ZONE_B, ZONE_B).format(copy=COPY)
    # promoting on would override the canary zone's pin too: said before anyone clicks
    assert lines[5] == f"  next:         {CANARY} (gate manual)"
    copy = f"{HS}/{CANARY}/patches/hypershift-4.18.yaml"
    assert lines[6] == f"  would warn:   {CANARY}: " + warning(CANARY, CANARY).format(copy=copy)
    code, out, _ = run(capsys, "rollout", "status", "--repo", str(fleet), "--format", "json")
    [status] = yaml.safe_load(out)
    assert status["shadowed_pins"] == [lines[3].removeprefix("  warning:      ")]


@pytest.mark.parametrize(
    ("where", "text"),
    [
        # base values: what a patch is for
        (f"{HS}/values.yaml", None),
        # the same version pinned below: nothing is lost
        (f"{HS}/{ZONE_B}/values.yaml", PIN.replace("v4.17.9-hotfix", "v4.18.0")),
        # another path at the same node
        (f"{HS}/{ZONE_B}/values.yaml", PIN.replace("targetRevision", "path")),
    ],
)
def test_what_is_not_a_shadowed_pin(tmp_path: Path, where: str, text: str | None) -> None:
    repo = shutil.copytree(ZONES, tmp_path / "fleet")
    if text is not None:
        (repo / where).parent.mkdir(parents=True, exist_ok=True)
        (repo / where).write_text(text)
    assert Fleet.open(WorkTree(repo)).validate() == []


def test_a_removal_below_the_patch_is_a_pin_too(tmp_path: Path) -> None:
    repo = shutil.copytree(ZONES, tmp_path / "fleet")
    (repo / HS / ZONE_B).mkdir(parents=True)
    (repo / HS / ZONE_B / "values.yaml").write_text(
        "applications:\n  hypershift:\n    source: null  # not here\n"
    )
    [problem] = Fleet.open(WorkTree(repo)).validate()
    assert problem.hygiene and (problem.path, problem.line) == (f"{HS}/{ZONE_B}/values.yaml", 3)
    assert problem.message.startswith(
        "/hypershift/source set here is overridden by patch 'hypershift-v4.18' "
        f"({COPY}:9) (it writes /hypershift/source/targetRevision), which applies after every "
        "values file, at management-cluster/integration/int-1/us-central1/us-central1-b"
    )
