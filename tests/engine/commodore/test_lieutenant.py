"""Clusters, facts and the global repository from the Lieutenant API, as Commodore reads them:
the catalogs equal Commodore's compiled from the same Lieutenant, and an API that does not
answer is a retryable error, never a partial render."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.commodore import FakeLieutenant
from tests.support.commodore_tenant import CLUSTERS, Tenant, needs_commodore


def with_lieutenant(tenant: Tenant, tmp_path: Path, commodore: dict[str, object]) -> Path:
    checkout = tmp_path / "t-acme"
    shutil.copytree(tenant.checkout, checkout, ignore=shutil.ignore_patterns(".git"))
    config = {"layout": "commodore", "commodore": commodore}
    (checkout / "rollwright.yaml").write_text(yaml.safe_dump(config))
    return checkout


@pytest.fixture
def lieutenant(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> object:
    with FakeLieutenant(tenant.clusters, tenant.tenants) as api:
        monkeypatch.setenv("COMMODORE_API_URL", api.url)
        monkeypatch.setenv("COMMODORE_API_TOKEN", "lieutenant-test-token")
        yield api


@needs_commodore
def test_every_cluster_of_the_tenant_compiles_as_commodore_compiles_it(
    tenant: Tenant,
    tmp_path: Path,
    lieutenant: FakeLieutenant,
    commodore_catalogs: dict[str, dict[str, bytes]],
) -> None:
    checkout = with_lieutenant(tenant, tmp_path, {"lieutenant": {}, "tenant": {"id": "t-acme"}})
    fleet = Fleet.open(WorkTree(checkout))
    assert fleet.roots() == sorted(CLUSTERS)
    for cluster in CLUSTERS:
        assert fleet.layout.render_files(cluster) == commodore_catalogs[cluster]
    assert all(r.endswith("Bearer lieutenant-test-token") for r in lieutenant.requests)
    assert any(r.startswith("/clusters?tenant=t-acme ") for r in lieutenant.requests)
    assert any(r.startswith("/tenants/t-acme ") for r in lieutenant.requests)


def test_listed_cluster_ids_are_read_from_lieutenant(
    tenant: Tenant, tmp_path: Path, lieutenant: FakeLieutenant
) -> None:
    checkout = with_lieutenant(
        tenant, tmp_path, {"lieutenant": {}, "tenant": {"id": "t-acme"}, "clusters": ["c-two"]}
    )
    fleet = Fleet.open(WorkTree(checkout))
    assert fleet.roots() == ["c-two"]
    assert fleet.values("c-two") == {
        "cluster": {
            "name": "c-two",
            "display_name": "Cluster c-two",
            "catalog_url": tenant.urls["catalog-c-two"],
            "tenant": "t-acme",
            "tenant_display_name": "Acme Corp",
        },
        "facts": CLUSTERS["c-two"]["facts"],
        "dynamic_facts": CLUSTERS["c-two"]["dynamicFacts"],
    }
    assert "manifests/demo/40_version.yaml" in fleet.layout.render_files("c-two")


def test_an_unknown_cluster_names_lieutenants_reason(
    tenant: Tenant, tmp_path: Path, lieutenant: FakeLieutenant
) -> None:
    checkout = with_lieutenant(
        tenant, tmp_path, {"lieutenant": {}, "tenant": {"id": "t-acme"}, "clusters": ["c-nope"]}
    )
    with pytest.raises(FleetError) as caught:
        Fleet.open(WorkTree(checkout)).render("c-nope")
    assert "answered 404: not found" in str(caught.value)
    assert not caught.value.retryable


def test_an_unreachable_lieutenant_is_retryable_and_keeps_the_token_out(
    tenant: Tenant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMMODORE_API_TOKEN", "lieutenant-test-token")
    checkout = with_lieutenant(
        tenant,
        tmp_path,
        {"lieutenant": {"url": "http://127.0.0.1:9"}, "tenant": {"id": "t-acme"}},
    )
    with pytest.raises(FleetError) as caught:
        Fleet.open(WorkTree(checkout)).roots()
    assert caught.value.retryable
    assert "unreachable" in str(caught.value)
    assert "lieutenant-test-token" not in str(caught.value)


def test_without_a_token_nothing_is_asked(
    tenant: Tenant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMMODORE_API_TOKEN", raising=False)
    monkeypatch.setenv("COMMODORE_API_URL", "http://127.0.0.1:9")
    checkout = with_lieutenant(tenant, tmp_path, {"lieutenant": {}, "tenant": {"id": "t-acme"}})
    with pytest.raises(FleetError) as caught:
        Fleet.open(WorkTree(checkout)).roots()
    assert "COMMODORE_API_TOKEN is not set" in str(caught.value)


def test_the_token_never_goes_to_a_url_rollwright_yaml_chooses(
    tenant: Tenant, tmp_path: Path, lieutenant: FakeLieutenant
) -> None:
    with FakeLieutenant(tenant.clusters, tenant.tenants) as elsewhere:
        checkout = with_lieutenant(
            tenant, tmp_path, {"lieutenant": {"url": elsewhere.url}, "tenant": {"id": "t-acme"}}
        )
        with pytest.raises(FleetError) as caught:
            Fleet.open(WorkTree(checkout)).roots()
        assert elsewhere.requests == []
    assert lieutenant.requests == []
    assert caught.value.path == "rollwright.yaml"
    assert caught.value.line == 3  # yaml.safe_dump: commodore, lieutenant, url
    assert "is not the operator's COMMODORE_API_URL" in str(caught.value)
    assert "lieutenant-test-token" not in str(caught.value)


def test_the_operators_url_may_be_repeated_in_rollwright_yaml(
    tenant: Tenant, tmp_path: Path, lieutenant: FakeLieutenant
) -> None:
    same = lieutenant.url.replace("http://", "HTTP://") + "/"
    checkout = with_lieutenant(
        tenant, tmp_path, {"lieutenant": {"url": same}, "tenant": {"id": "t-acme"}}
    )
    assert Fleet.open(WorkTree(checkout)).roots() == sorted(CLUSTERS)
    assert all(r.endswith("Bearer lieutenant-test-token") for r in lieutenant.requests)


def test_without_the_operators_url_rollwright_yamls_is_asked_without_the_token(
    tenant: Tenant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMMODORE_API_URL", raising=False)
    monkeypatch.setenv("COMMODORE_API_TOKEN", "lieutenant-test-token")
    with FakeLieutenant(tenant.clusters, tenant.tenants) as api:
        checkout = with_lieutenant(
            tenant, tmp_path, {"lieutenant": {"url": api.url}, "tenant": {"id": "t-acme"}}
        )
        assert Fleet.open(WorkTree(checkout)).roots() == sorted(CLUSTERS)
    assert api.requests
    assert all(r.endswith(" None") for r in api.requests)


def test_a_cluster_id_without_lieutenant_is_refused(tenant: Tenant, tmp_path: Path) -> None:
    checkout = with_lieutenant(
        tenant, tmp_path, {"tenant": {"id": "t-acme"}, "clusters": ["c-one"]}
    )
    with pytest.raises(FleetError) as caught:
        Fleet.open(WorkTree(checkout)).roots()
    assert "needs commodore.lieutenant" in str(caught.value)
