"""Fixtures of the commodore layout's tests: the test tenant (tests/support/commodore_tenant.py)
and the catalogs the real Commodore compiles from it, both built once per session."""

from __future__ import annotations

import pytest

from tests.support import commodore_tenant
from tests.support.commodore_tenant import Tenant, build_tenant


@pytest.fixture(scope="session")
def tenant(tmp_path_factory: pytest.TempPathFactory) -> Tenant:
    return build_tenant(tmp_path_factory.mktemp("commodore-tenant"))


@pytest.fixture(scope="session")
def commodore_catalogs(
    tenant: Tenant, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, bytes]]:
    """Each cluster's catalog as Commodore compiles it: manifests/ and refs/ files."""
    return commodore_tenant.commodore_catalogs(tenant, tmp_path_factory.mktemp("commodore-runs"))
