"""rollwright's catalogs against the real Commodore 1.35.1's, byte for byte in `manifests/`
and `refs/`, for every cluster of the fixture tenant (tests/engine/commodore/conftest.py).

Commodore runs in the venv `make commodore-venv` builds (`make test` builds it first), against
a fake Lieutenant on 127.0.0.1 answering with the same facts the tenant's rollwright.yaml
gives, and fetches every repository itself from file:// remotes. Without that venv these
tests skip, saying so; with it they always run."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.cli.main import main
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.commodore import tree_bytes
from tests.support.commodore_tenant import CLUSTERS, Tenant, needs_commodore


@needs_commodore
@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
def test_catalog_equals_commodores(
    cluster: str, tenant: Tenant, commodore_catalogs: dict[str, dict[str, bytes]]
) -> None:
    ours = Fleet.open(WorkTree(tenant.checkout)).layout.render_files(cluster)
    theirs = commodore_catalogs[cluster]
    assert sorted(ours) == sorted(theirs)
    differing = [path for path in theirs if ours[path] != theirs[path]]
    assert not differing, "\n".join(
        f"--- {p}\ncommodore:\n{theirs[p].decode()}\nrollwright:\n{ours[p].decode()}"
        for p in differing
    )


@needs_commodore
def test_the_clusters_differ_where_the_fixture_says(
    commodore_catalogs: dict[str, dict[str, bytes]],
) -> None:
    """The cases the fixture is built for show in Commodore's own output, so the equality
    above covers them rather than an output where they happen to agree."""
    one, two, three = (commodore_catalogs[c] for c in ("c-one", "c-two", "c-three"))
    # version pin v1.0.0 in global, v2.0.0 for c-two only
    assert "manifests/demo/40_version.yaml" in two and "manifests/demo/40_version.yaml" not in one
    # `~extra` removes the component from c-two
    assert not any(p.startswith("manifests/extra/") for p in two)
    # the Jsonnet filter is off on c-two only
    assert b"postprocessed" in one["manifests/demo/00_namespace.yaml"]
    assert b"postprocessed" not in two["manifests/demo/00_namespace.yaml"]
    # the builtin helm_namespace filter is on for c-one, off for c-three
    assert b"namespace: syn-extra" in one["manifests/extra/chart/deployment.yaml"]
    assert b"namespace:" not in three["manifests/extra/chart/deployment.yaml"]
    assert "manifests/extra/chart/00_namespace.yaml" in one
    # list outputs are multi-document files
    assert one["manifests/demo/20_configmaps.yaml"].count(b"\n---\n") == 1
    # escaped reference, precedence, list append and `~` override
    configmaps = one["manifests/demo/20_configmaps.yaml"].decode()
    assert "literal: ${escaped:reference}" in configmaps
    assert "level: cluster" in configmaps
    assert "args: --from-defaults --from-global --k3s" in configmaps
    assert "args: --only-openshift" in two["manifests/demo/20_configmaps.yaml"].decode()
    # instances: their own output directories, parameters, references and versions
    assert b"name: second-demo" in one["manifests/demo-two/00_namespace.yaml"]
    assert b"postprocessed" not in one["manifests/demo-two/00_namespace.yaml"]
    assert "refs/t-acme/c-one/demo-two/password" in one
    assert "manifests/demo-next/40_version.yaml" in three
    assert "manifests/demo/40_version.yaml" not in three
    assert three["manifests/demo-next/20_configmaps.yaml"].count(b"\n---\n") == 2
    # the configuration package c-three's class includes (before the class's own parameters)
    assert b"--k3s --from-package --three" in three["manifests/demo/20_configmaps.yaml"]
    assert b"package: monitoring" in three["manifests/demo/20_configmaps.yaml"]
    # vaultkv references and their files
    assert "refs/t-acme/c-one/demo/password" in one
    assert b"?{vaultkv:t-acme/c-one/demo/password:" in one["manifests/demo/10_secret.yaml"]


@needs_commodore
def test_render_command_writes_the_catalog_trees(
    tenant: Tenant, commodore_catalogs: dict[str, dict[str, bytes]], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    code = main(["render", "--repo", str(tenant.checkout), "--out", str(out), "--reveal=force"])
    assert code == 0
    for cluster, theirs in commodore_catalogs.items():
        assert tree_bytes(out / cluster) == theirs
