"""Affected roots of the atlas layout, on real git repositories.

Example-based tests pin each rule; a hypothesis property test applies random edits and checks
`affected_between` never misses a root whose render digest changed.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.cli import main as cli
from shared.engine.affected import affected_between
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.atlas import ECHO_HELMFILE
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.paths import ECHO_CHART

ROOTS = ["g1/c1", "g1/c2", "g2/c3", "solo"]

BASE: dict[str, Any] = {
    "README.md": "a fleet\n",
    "deployments/global.values.yaml": {"level": "global"},
    "deployments/apps/web/deployment.yaml": {"apps": [{"template": "web"}]},
    "deployments/g1/group.values.yaml": {"level": "g1"},
    "deployments/g1/apps/tools/deployment.yaml": {"apps": [{"template": "tools"}]},
    "deployments/g1/c1/cluster.values.yaml": {"level": "c1"},
    "deployments/g1/c1/apps/app1/deployment.yaml": {"apps": [{"template": "echo"}]},
    "deployments/g1/c1/apps/app1/values.yaml": {"level": "app1"},
    "deployments/g1/c2/apps/.keep": "",
    "deployments/g2/c3/cluster.values.yaml": {"level": "c3"},
    "deployments/g2/c3/apps/.keep": "",
    "deployments/solo/cluster.values.yaml.gotmpl": "solo: {{ .atlas.cluster.name }}\n",
    "deployments/solo/apps/.keep": "",
    "templates/echo/helmfile.yaml.gotmpl": ECHO_HELMFILE,
    "templates/web/helmfile.yaml.gotmpl": (
        "releases:\n  - name: web\n    chart: ../../charts/echo2\n    values:\n"
        "      - values.yaml\n"
    ),
    "templates/web/values.yaml": {"fromTemplate": 1},
    "templates/tools/helmfile.yaml": "releases:\n  - name: tools\n    chart: ./manifests\n",
    "templates/tools/manifests/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tools\ndata:\n  a: '1'\n"
    ),
}


def build(base: Path, files: dict[str, Any] | None = None) -> Path:
    init_repo(base)
    shutil.copytree(ECHO_CHART, base / "templates/echo/chart")
    shutil.copytree(ECHO_CHART, base / "charts/echo2")
    write_files(base, {**BASE, **(files or {})})
    commit_all(base, "base")
    return base


def change(repo: Path, files: dict[str, Any] | None = None, remove: tuple[str, ...] = ()) -> None:
    write_files(repo, files or {})
    for rel in remove:
        path = repo / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    commit_all(repo, "edit")


def affected(repo: Path) -> set[str]:
    return set(affected_between(repo, "HEAD~1", "HEAD"))


@pytest.mark.parametrize(
    ("files", "remove", "expected"),
    [
        ({"deployments/g1/c1/cluster.values.yaml": {"x": 1}}, (), {"g1/c1"}),
        ({"deployments/g1/c1/apps/app1/values.yaml.gotmpl": "x: 1\n"}, (), {"g1/c1"}),
        ({"deployments/g1/group.values.yaml": {"x": 1}}, (), {"g1/c1", "g1/c2"}),
        ({"deployments/g1/apps/tools/values.yaml": {"x": 1}}, (), {"g1/c1", "g1/c2"}),
        ({"deployments/global.values.yaml.gotmpl": "x: 1\n"}, (), set(ROOTS)),
        ({"deployments/apps/web/values.yaml": {"x": 1}}, (), set(ROOTS)),
        # templates: only the roots instantiating them
        ({"templates/echo/helmfile.yaml.gotmpl": ECHO_HELMFILE + "# c\n"}, (), {"g1/c1"}),
        ({"templates/tools/manifests/cm.yaml": "# moved\n"}, (), {"g1/c1", "g1/c2"}),
        # a chart reached through `../` from the web template: its roots (all), but other
        # templates' changes do not reach web
        ({"charts/echo2/values.yaml": "level: x\n"}, (), set(ROOTS)),
        # files the engine never reads
        ({"README.md": "x"}, (), set()),
        ({"deployments/NOTES.md": "x", "deployments/g1/notes.txt": "x"}, (), set()),
        ({"docs/x.md": "x", "templates/README.md": "x"}, (), set()),
        # clusters appearing and disappearing, a leaf turning into a group
        ({"deployments/g2/c4/apps/.keep": ""}, (), {"g2/c4"}),
        ({}, ("deployments/g1/c2",), {"g1/c2"}),
        ({"deployments/solo/eu/apps/.keep": ""}, (), {"solo", "solo/eu"}),
    ],
)
def test_rules(
    tmp_path: Path, files: dict[str, Any], remove: tuple[str, ...], expected: set[str]
) -> None:
    repo = build(tmp_path / "fleet")
    change(repo, files, remove)
    assert affected(repo) == expected


def test_template_with_dynamic_reference_is_affected_by_anything(tmp_path: Path) -> None:
    helmfile = (
        "releases:\n  - name: web\n"
        '    chart: {{ .Values.chartsDir | default ".." }}/../charts/echo2\n'
    )
    repo = build(tmp_path / "fleet", {"templates/web/helmfile.yaml.gotmpl": helmfile})
    change(repo, {"anything/else.yaml": "a: 1\n"})
    assert affected(repo) == set(ROOTS)  # web is a global app


def test_template_reading_files_is_affected_by_anything(tmp_path: Path) -> None:
    files = {
        "templates/web/values.yaml.gotmpl": 'motd: {{ readFile "lib/motd.txt" | quote }}\n',
        "templates/web/helmfile.yaml.gotmpl": (
            "releases:\n  - name: web\n    chart: ../../charts/echo2\n"
            "    values: [values.yaml.gotmpl]\n"
        ),
        "lib/motd.txt": "hello\n",
    }
    repo = build(tmp_path / "fleet", files)
    change(repo, {"lib/motd.txt": "changed\n"})
    assert affected(repo) == set(ROOTS)


def test_hierarchy_template_reading_files_is_affected_by_changes_outside(tmp_path: Path) -> None:
    files = {
        "deployments/g2/c3/cluster.values.yaml.gotmpl": 'ca: {{ readFile "lib/ca.pem" | quote }}\n',
        "lib/ca.pem": "x\n",
    }
    repo = build(tmp_path / "fleet", files)
    change(repo, {"lib/ca.pem": "y\n"})
    assert affected(repo) == {"g2/c3"}


def test_file_dependency_of_a_chart_is_followed(tmp_path: Path) -> None:
    chart = (
        "apiVersion: v2\nname: echo2\nversion: 0.1.0\ndependencies:\n"
        "  - name: sub\n    version: 0.1.0\n    repository: file://../../lib/sub\n"
    )
    repo = build(
        tmp_path / "fleet",
        {
            "charts/echo2/Chart.yaml": chart,
            "lib/sub/Chart.yaml": "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
        },
    )
    change(repo, {"lib/sub/values.yaml": {"x": 1}})
    assert affected(repo) == set(ROOTS)  # web (global) reaches lib/ through charts/echo2


def test_a_cluster_edit_reads_nothing_but_that_cluster(tmp_path: Path) -> None:
    """A broken deployment.yaml elsewhere is not read when only one cluster changed."""
    repo = build(
        tmp_path / "fleet",
        {"deployments/g2/c3/apps/broken/deployment.yaml": "apps: [\n"},
    )
    change(repo, {"deployments/g1/c2/cluster.values.yaml": {"x": 1}})
    assert affected(repo) == {"g1/c2"}


def test_unreadable_deployment_counts_as_using_every_template(tmp_path: Path) -> None:
    repo = build(
        tmp_path / "fleet",
        {"deployments/g2/c3/apps/broken/deployment.yaml": "apps: [\n"},
    )
    change(repo, {"templates/echo/values.yaml": {"x": 1}})
    assert affected(repo) == {"g1/c1", "g2/c3"}


# --- the property: never miss a root whose render changed -----------------------------------

VALUE_FILES = [
    "deployments/global.values.yaml",
    "deployments/global.values.yaml.gotmpl",
    "deployments/g1/group.values.yaml",
    "deployments/g2/group.values.yaml.gotmpl",
    "deployments/g1/c1/cluster.values.yaml",
    "deployments/g1/c2/cluster.values.yaml.gotmpl",
    "deployments/g2/c3/cluster.values.yaml",
    "deployments/solo/cluster.values.yaml",
    "deployments/apps/web/values.yaml",
    "deployments/g1/apps/tools/values.yaml",
    "deployments/g1/c1/apps/app1/values.yaml",
    "templates/web/values.yaml",
    "templates/echo/chart/values.yaml",
    "charts/echo2/values.yaml",
]
DEPLOYMENTS = [
    "deployments/apps/web",
    "deployments/apps/extra",
    "deployments/g1/apps/tools",
    "deployments/g2/apps/web",
    "deployments/g1/c1/apps/app1",
    "deployments/g2/c3/apps/web",
    "deployments/solo/apps/tools",
]
TEMPLATE_FILES: dict[str, str] = {
    "templates/echo/helmfile.yaml.gotmpl": (
        "releases:\n  - name: echo\n    chart: ./chart\n    namespace: ns{n}\n"
    ),
    "templates/web/helmfile.yaml.gotmpl": (
        "releases:\n  - name: web{n}\n    chart: ../../charts/echo2\n"
    ),
    "templates/tools/manifests/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tools\ndata:\n  a: '{n}'\n"
    ),
    "charts/echo2/templates/extra.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra{n}\n"
    ),
    "templates/echo/chart/templates/configmap.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ .Release.Name }}}}-v{n}\n"
    ),
}
UNRELATED = ["README.md", "docs/notes.md", "deployments/g1/NOTES.md", "templates/README.md"]
CLUSTERS_ADDED = [
    "deployments/g2/c4/apps/.keep",
    "deployments/new/apps/.keep",
    "deployments/solo/sub/apps/.keep",
    "deployments/g1/c1/inner/apps/.keep",
]
CLUSTERS_REMOVED = ["deployments/g1/c2", "deployments/g2/c3", "deployments/solo"]

# Every (edit kind, path) pair is equally likely, so rare-but-important ones (a shared chart
# reached through `../`) come up in a modest number of examples.
EDITS: list[tuple[str, str]] = [
    *[("value", p) for p in VALUE_FILES],
    *[("delete", p) for p in VALUE_FILES],
    *[("deployment", p) for p in DEPLOYMENTS],
    *[("undeploy", p) for p in DEPLOYMENTS],
    *[("template", p) for p in sorted(TEMPLATE_FILES)],
    *[("unrelated", p) for p in UNRELATED],
    *[("add-cluster", p) for p in CLUSTERS_ADDED],
    *[("remove-cluster", p) for p in CLUSTERS_REMOVED],
]
edits = st.tuples(st.sampled_from(EDITS), st.integers(min_value=0, max_value=3)).map(
    lambda e: (e[0][0], e[0][1], e[1])
)


def apply(repo: Path, edit: tuple[str, str, int]) -> None:
    kind, rel, value = edit
    path = repo / rel
    if kind == "value":
        write_files(repo, {rel: f"level: {value}\nk{value}: {value}\n"})
    elif kind in ("delete", "undeploy", "remove-cluster"):
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    elif kind == "deployment":
        template = ["echo", "web", "tools", "echo"][value]
        app: dict[str, Any] = {"template": template}
        if value == 3:
            app["name"] = "named"
        write_files(repo, {f"{rel}/deployment.yaml": {"apps": [app]}})
    elif kind == "template":
        write_files(repo, {rel: TEMPLATE_FILES[rel].format(n=value)})
    else:  # unrelated, add-cluster
        write_files(repo, {rel: f"# {value}\n"})


def digests(repo: Path, revision: str, workdir: Path) -> dict[str, str]:
    """Root → render digest (or the error) of a `git archive` checkout of `revision`."""
    checkout = workdir / revision[:12]
    checkout.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", revision], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(checkout)], input=archive, check=True)
    fleet = Fleet.open(WorkTree(checkout))
    out = {}
    for root in fleet.roots():
        try:
            out[root] = fleet.render(root).digest
        except FleetError as err:
            out[root] = f"error: {err}"
    return out


_base_digests: dict[str, str] = {}


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(edits, min_size=1, max_size=3))
def test_affected_covers_every_root_whose_render_changed(
    edit_list: list[tuple[str, str, int]],
) -> None:
    with tempfile.TemporaryDirectory(prefix="atlas-affected-") as tmp:
        work = Path(tmp)
        repo = build(work / "fleet")
        base = git(repo, "rev-parse", "HEAD")
        for edit in edit_list:
            apply(repo, edit)
        head = commit_all(repo, "edits")
        if not _base_digests:
            _base_digests.update(digests(repo, base, work))
        before = _base_digests
        after = digests(repo, head, work)
        changed = {root for root in set(before) | set(after) if before.get(root) != after.get(root)}
        reported = set(affected_between(repo, base, head))
        assert changed <= reported, f"missed {sorted(changed - reported)} after {edit_list}"


def test_cli_roots_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = build(tmp_path / "fleet")
    change(repo, {"deployments/g1/group.values.yaml": {"x": 2}})
    assert cli.main(["roots", "--repo", str(repo), "--changed", "HEAD~1..HEAD"]) == 0
    assert capsys.readouterr().out == "g1/c1\ng1/c2\n"
