"""Fixtures of the commodore layout's tests: the test tenant (tests/support/commodore_tenant.py)
and the catalogs the real Commodore compiles from it; the tenant whose components have
jsonnet-bundler dependencies (tests/support/commodore_jb_tenant.py) and its catalog by the
real Commodore; all built once per session."""

from __future__ import annotations

import pytest

from tests.support import commodore_tenant
from tests.support.commodore_jb_tenant import JbTenant, build_jb_tenant, commodore_jb_catalog
from tests.support.commodore_tenant import VENV, Tenant, build_tenant


@pytest.fixture(scope="session")
def tenant(tmp_path_factory: pytest.TempPathFactory) -> Tenant:
    return build_tenant(tmp_path_factory.mktemp("commodore-tenant"))


@pytest.fixture(scope="session")
def commodore_catalogs(
    tenant: Tenant, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, bytes]]:
    """Each cluster's catalog as Commodore compiles it: manifests/ and refs/ files."""
    return commodore_tenant.commodore_catalogs(tenant, tmp_path_factory.mktemp("commodore-runs"))


@pytest.fixture(scope="session")
def jb_tenant(tmp_path_factory: pytest.TempPathFactory) -> JbTenant:
    return build_jb_tenant(tmp_path_factory.mktemp("commodore-jb-tenant"))


@pytest.fixture(scope="session")
def commodore_jb_run(
    jb_tenant: JbTenant, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, bytes]:
    """c-jb's catalog as Commodore compiles it, vendor/ laid out as jb would."""
    assert VENV is not None
    return commodore_jb_catalog(VENV, jb_tenant, tmp_path_factory.mktemp("commodore-jb-run"))
