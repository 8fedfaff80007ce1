"""Affected roots of the dimensions layout never miss a root whose render changed.

Random edits to a real git repository holding examples/dimensions-fleet; the roots that
`rollwright roots --changed` reports must include every root whose full re-render differs.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.cli import main as cli
from shared.engine.affected import affected_between
from shared.engine.config.fleet import FleetConfig
from shared.engine.dimensions.layout import DimensionsLayout
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import GitTree, WorkTree
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.paths import EXAMPLES

TYPES = {
    "management-cluster": ["hypershift-operator", "prometheus", "cert-manager"],
    "regional-cluster": ["prometheus", "log-collector"],
}
STAGED = "config/management-cluster/hypershift-operator/patches/patch-001-hypershift-v4.18.yaml"
NODES = [
    n.id
    for n in DimensionsLayout(
        WorkTree(EXAMPLES / "dimensions-fleet"), FleetConfig()
    ).sequence_nodes()
]

ctype = st.sampled_from(sorted(TYPES))
node = st.sampled_from(["", *NODES])


@st.composite
def app_node(draw: st.DrawFn) -> tuple[str, str, str]:
    t = draw(ctype)
    return t, draw(st.sampled_from(TYPES[t])), draw(node)


def edit_values(repo: Path, where: tuple[str, str, str], value: int) -> None:
    t, app, at = where
    path = repo / "config" / t / app / at / "values.yaml"
    data: dict[str, Any] = {}
    if path.exists():
        data = yaml.safe_load(path.read_text()) or {}
    fields = data.setdefault("applications", {}).setdefault(app, {}) or {}
    data["applications"][app] = fields
    fields.setdefault("source", {}).setdefault("helm", {}).setdefault("valuesObject", {})
    fields["source"]["helm"]["valuesObject"]["marker"] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def cert_manager_version(repo: Path, at: str, version: str) -> None:
    """Changes whether the hypershift patch's dependency holds, from another application."""
    path = repo / "config/management-cluster/cert-manager" / at / "values.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump({"applications": {"cert-manager": {"source": {"targetRevision": version}}}})
    )


def toggle_patch(repo: Path, at: str) -> None:
    target = repo / "config/management-cluster/hypershift-operator" / at / "patches"
    copy = target / "patch-001-hypershift-v4.18.yaml"
    if copy.exists():
        copy.unlink()
    else:
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(repo / STAGED, copy)


def edit_defaults(repo: Path, t: str, value: int) -> None:
    path = repo / "config" / t / "application-defaults.yaml"
    data = yaml.safe_load(path.read_text())
    data["defaults"]["revisionHistoryLimit"] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def edit_unrelated(repo: Path, where: tuple[str, str, str], value: int) -> None:
    t, app, at = where
    for rel in (f"config/{t}/{app}/{at}/NOTES.md", "README.md", f"config/{t}/{app}/OWNERS"):
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"approvers: [someone-{value}]\n")


def edit_staged(repo: Path, value: int) -> None:
    path = repo / STAGED
    path.write_text(path.read_text().replace("Upgrade", f"Upgrade ({value})", 1))


def edit_config(repo: Path, value: int) -> None:
    path = repo / "config/config.yaml"
    data = yaml.safe_load(path.read_text())
    regions = data["sequence"]["environments"][0]["sectors"][1]["regions"]
    if len(regions) > 1:
        regions.pop()
    else:
        regions.append({"name": f"extra-{value}"})
    path.write_text(yaml.safe_dump(data, sort_keys=False))


values_edit = st.builds(lambda w, v: ("values", w, v), app_node(), st.integers(0, 3))
edits = st.one_of(
    values_edit,
    st.builds(lambda at, v: ("cert-manager", at, v), node, st.sampled_from(["v1.12.0", "v1.16.0"])),
    st.builds(lambda at: ("toggle-patch", at, None), st.sampled_from(NODES)),
    st.builds(lambda t, v: ("defaults", t, v), ctype, st.integers(1, 4)),
    st.builds(lambda w, v: ("unrelated", w, v), app_node(), st.integers(0, 3)),
    st.builds(lambda v: ("staged", None, v), st.integers(0, 3)),
    st.builds(lambda v: ("config", None, v), st.integers(0, 3)),
)


def apply(repo: Path, edit: tuple[str, Any, Any]) -> None:
    kind, where, value = edit
    if kind == "values":
        edit_values(repo, where, value)
    elif kind == "cert-manager":
        cert_manager_version(repo, where, value)
    elif kind == "toggle-patch":
        toggle_patch(repo, where)
    elif kind == "defaults":
        edit_defaults(repo, where, value)
    elif kind == "unrelated":
        edit_unrelated(repo, where, value)
    elif kind == "staged":
        edit_staged(repo, value)
    else:
        edit_config(repo, value)


def digests(repo: Path, revision: str) -> dict[str, str]:
    """Each root's render digest, or the problems its render refuses with: a root whose
    render starts or stops refusing changed too."""
    fleet = Fleet.open(GitTree(repo, revision))
    out = {}
    for root in fleet.roots():
        try:
            out[root] = fleet.render(root).digest
        except FleetError as err:
            out[root] = f"refused: {err}"
    return out


@pytest.mark.slow
def test_affected_roots_cover_every_changed_render() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="rollwright-affected-"))
    try:
        repo = init_repo(workdir / "fleet")
        shutil.copytree(EXAMPLES / "dimensions-fleet", repo, dirs_exist_ok=True)
        base = commit_all(repo, "base")
        before = digests(repo, base)
        seen_changes: list[int] = []

        @settings(
            max_examples=25,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(st.lists(edits, min_size=1, max_size=3))
        def check(changes: list[tuple[str, Any, Any]]) -> None:
            git(repo, "reset", "-q", "--hard", base)
            git(repo, "clean", "-q", "-fdx")
            for change in changes:
                apply(repo, change)
            head = commit_all(repo, "edit")
            after = digests(repo, head)
            changed = {
                root for root in before.keys() | after.keys() if before.get(root) != after.get(root)
            }
            affected = set(affected_between(repo, base, head))
            assert changed <= affected, (changes, sorted(changed - affected))
            seen_changes.append(len(changed))

        check()
        # The edits did move renders (the property was not checked on no-ops only), and
        # affected roots are not simply "everything" for a one-node edit.
        assert sum(1 for n in seen_changes if n) >= 10
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_roots_changed_on_the_cli(tmp_path: Path, capsys: Any) -> None:
    repo = init_repo(tmp_path / "fleet")
    shutil.copytree(EXAMPLES / "dimensions-fleet", repo, dirs_exist_ok=True)
    base = commit_all(repo, "base")
    edit_values(repo, ("regional-cluster", "log-collector", "prod/prod-sector-1"), 1)
    toggle_patch(repo, "stage/stage-sector-1/us-east1")
    head = commit_all(repo, "edit")
    assert cli.main(["roots", "--repo", str(repo), "--changed", f"{base}..{head}"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "management-cluster/stage/stage-sector-1/us-east1",
        "regional-cluster/prod/prod-sector-1/europe-east1",
        "regional-cluster/prod/prod-sector-1/us-east1",
    ]
