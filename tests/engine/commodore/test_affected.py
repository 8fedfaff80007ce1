"""Which clusters a push to the tenant repository compiles: those whose classes may come from
a changed file, resolved as Commodore's inventory would include them, without compiling."""

from __future__ import annotations

import subprocess
from pathlib import Path

from shared.engine.affected import affected_between
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.commodore_tenant import Tenant
from tests.support.gitrepo import commit_all, git


def affected(tenant: Tenant, *changed: str) -> set[str]:
    return Fleet.open(WorkTree(tenant.checkout)).affected(set(changed))


def test_a_change_to_one_clusters_class_compiles_that_cluster(tenant: Tenant) -> None:
    assert affected(tenant, "c-one.yml") == {"c-one"}
    assert affected(tenant, "c-three.yml") == {"c-three"}


def test_a_class_every_cluster_includes_compiles_every_cluster(tenant: Tenant) -> None:
    assert affected(tenant, "common.yml") == {"c-one", "c-two", "c-three"}


def test_files_no_cluster_includes_compile_nothing(tenant: Tenant) -> None:
    assert affected(tenant, "README.md") == set()
    assert affected(tenant, "unused.yml", "docs/notes.yaml") == set()


def test_rollwright_yaml_compiles_every_cluster(tenant: Tenant) -> None:
    assert affected(tenant, "rollwright.yaml") == {"c-one", "c-two", "c-three"}


def test_a_class_name_only_a_render_resolves_reads_every_file(
    tenant: Tenant, tmp_path: Path
) -> None:
    checkout = tmp_path / "t-acme"
    subprocess.run(["git", "clone", "-q", str(tenant.checkout), str(checkout)], check=True)
    text = (checkout / "c-two.yml").read_text()
    (checkout / "c-two.yml").write_text(
        text.replace("  - .common\n", "  - .common\n  - t-acme.${demo:namespace}\n")
    )
    found = Fleet.open(WorkTree(checkout)).affected({"c-one.yml"})
    assert found == {"c-one", "c-two"}


def test_a_version_bump_in_a_cluster_class_between_revisions(
    tenant: Tenant, tmp_path: Path
) -> None:
    checkout = tmp_path / "t-acme"
    subprocess.run(["git", "clone", "-q", str(tenant.checkout), str(checkout)], check=True)
    git(checkout, "config", "user.email", "test@rollwright.invalid")
    git(checkout, "config", "user.name", "rollwright tests")
    base = git(checkout, "rev-parse", "HEAD")
    path = checkout / "c-three.yml"
    path.write_text(path.read_text() + "  components:\n    demo:\n      version: v2.0.0\n")
    head = commit_all(checkout, "c-three: demo v2.0.0")
    assert affected_between(checkout, base, head) == ["c-three"]
