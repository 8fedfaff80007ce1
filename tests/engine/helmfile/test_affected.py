"""Affected roots of helmfile fleets (shared/engine/helmfile/inputs.py): a root is affected by
what it reads (its state files and their parents, values files, files its templates read, its
chart, the kubeversion files), the bootstrap root by every state; anything else by no root.
Every root whose render changes is reported (`affected_between` over two commits)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from shared.engine.affected import affected_between
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.gitrepo import commit_all, init_repo
from tests.support.helmfile import build
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "helmfile-fleet"


@pytest.mark.parametrize(
    ("changed", "roots"),
    [
        ({"README.md", "docs/x.md"}, set()),
        ({"charts/web/values.yaml"}, {"apps/web"}),
        ({"manifests/cache/redis.yaml"}, {"platform/cache"}),
        ({"helmfiles/platform.yaml"}, {"platform/cache"}),
        ({"helmfiles/new.yaml"}, set()),  # a new state: its own roots, at the other side
        ({"kubeversion-web"}, {"apps/web"}),
        ({"kubeversion"}, {"apps/web", "platform/cache"}),
        ({"helmfile.yaml"}, {"apps/web", "platform/cache"}),
        ({"helmfile.yaml.gotmpl"}, {"apps/web", "platform/cache"}),
        ({"rollwright.yaml"}, {"apps/web", "platform/cache"}),
    ],
)
def test_the_example_fleet(changed: set[str], roots: set[str]) -> None:
    assert Fleet.open(WorkTree(EXAMPLE)).affected(changed) == roots


def test_the_bootstrap_root_reads_every_state_and_no_chart(tmp_path: Path) -> None:
    fleet = Fleet.open(WorkTree(build("bootstrap", tmp_path)))
    assert fleet.affected({"states/two.yaml"}) == {"fleet/two/svc-three", "seeds"}
    assert fleet.affected({"source/shop-bare/templates/first.yaml"}) == {
        "fleet/one/svc-one",
        "fleet/one/svc-two",
    }
    # the top-level helmfile reads the template: every state lies below it
    assert fleet.affected({"seeds/template"}) == set(fleet.roots())
    assert fleet.affected({"kubeversion-svc-three"}) == {"fleet/two/svc-three"}


def test_a_chart_that_reaches_outside_its_directory_reads_everything(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "kust").mkdir(parents=True)
    (repo / "kust" / "kustomization.yaml").write_text("resources: [../common/cm.yaml]\n")
    (repo / "plain").mkdir()
    (repo / "plain" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
    )
    (repo / "helmfile.yaml").write_text(
        "releases:\n  - name: k\n    chart: ./kust\n  - name: p\n    chart: ./plain\n"
    )
    assert Fleet.open(WorkTree(repo)).affected({"anything/else.txt"}) == {"k"}


def test_a_broken_fleet_says_why_rather_than_guess(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "helmfile.yaml").write_text(
        "releases:\n  - name: a\n    chart: ./x\n  - name: a\n    chart: ./x\n"
    )
    with pytest.raises(FleetError, match="declared twice"):
        Fleet.open(WorkTree(repo)).affected({"README.md"})


def _edit(path: str, old: str, new: str) -> Callable[[Path], None]:
    def apply(repo: Path) -> None:
        target = repo / path
        text = target.read_text() if target.exists() else ""
        assert old in text, (path, old)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace(old, new, 1) if old else new)

    return apply


EDITS = {
    "template": _edit("seeds/template", "colour: {{", "hue: {{"),
    "values": _edit("states/one.yaml", "colour: red", "colour: green"),
    "chart": _edit("source/shop-bare/templates/first.yaml", "  name: alpha-one", "  name: alpha-1"),
    "gap-values": _edit("source/shop-gap/values.yaml", "namespace: shop", "namespace: other"),
    "target-dir": _edit("states/two.yaml", "target_dir: two/svc-three", "target_dir: two/three"),
    "helmfile-dir": _edit("states/two.yaml", "helmfile_dir: fleet", "helmfile_dir: other"),
    "top": _edit("helmfile.yaml", "helmfile_dir: fleet", "helmfile_dir: top"),
    "kubeversion": _edit("kubeversion-svc-one", "", "v1.30.0\n"),
    "unrelated": _edit("docs/notes.md", "", "notes\n"),
}


def _digests(repo: Path) -> dict[str, str]:
    fleet = Fleet.open(WorkTree(repo))
    return {root: fleet.render(root).digest for root in fleet.roots()}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_every_root_whose_render_changes_is_affected(edit: str, tmp_path: Path) -> None:
    repo = build("bootstrap", tmp_path)
    init_repo(repo)
    base = commit_all(repo, "base")
    before = _digests(repo)
    EDITS[edit](repo)
    head = commit_all(repo, edit)
    after = _digests(repo)
    changed = {r for r in before.keys() | after.keys() if before.get(r) != after.get(r)}
    affected = set(affected_between(repo, base, head))
    assert changed <= affected, sorted(changed - affected)
    if edit == "unrelated":
        assert affected == set()
    if edit == "chart":
        assert affected == {"fleet/one/svc-one", "fleet/one/svc-two"} == changed
