"""What Commodore knows of a cluster before it compiles (its `Cluster` of a Lieutenant cluster
and tenant): from rollwright.yaml, or from the Lieutenant API.

    source = Clusters(settings)
    source.ids()                # ['c-demo', 'c-prod']
    source.spec("c-demo")       # ClusterSpec: facts, tenant, catalog URL, global repository
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.engine import suggest
from shared.engine.commodore.lieutenant import Lieutenant
from shared.engine.config.commodore import Cluster, CommodoreSettings
from shared.engine.config.fleet import CONFIG_FILE
from shared.engine.errors import FleetError


@dataclass(frozen=True)
class ClusterSpec:
    id: str
    display_name: str
    catalog_url: str
    tenant_id: str
    tenant_display_name: str
    facts: dict[str, Any]
    dynamic_facts: dict[str, Any]
    global_url: str
    global_revision: str | None
    # The tenant repository as Lieutenant names it (`gitRepo.url`); "" without Lieutenant.
    tenant_url: str = ""

    def parameters(self) -> dict[str, Any]:
        """`parameters.cluster`, as Commodore's `render_params` writes it."""
        return {
            "name": self.id,
            "display_name": self.display_name,
            "catalog_url": self.catalog_url,
            "tenant": self.tenant_id,
            "tenant_display_name": self.tenant_display_name,
        }


class Clusters:
    def __init__(self, settings: CommodoreSettings, url_line: int | None = None) -> None:
        self.settings = settings
        self._url_line = url_line  # rollwright.yaml's commodore.lieutenant.url, for messages
        self._api: Lieutenant | None = None
        self._tenant: dict[str, Any] | None = None
        self._answers: dict[str, dict[str, Any]] = {}
        self._ids: list[str] | None = None

    @property
    def api(self) -> Lieutenant | None:
        if self._api is None and self.settings.lieutenant is not None:
            self._api = Lieutenant.from_settings(self.settings.lieutenant, self._url_line)
        return self._api

    def _tenant_id(self) -> str:
        if self.settings.tenant is None:
            raise FleetError(
                "rollwright.yaml commodore: 'tenant' (its id) is required", path=CONFIG_FILE
            )
        return self.settings.tenant.id

    def ids(self) -> list[str]:
        if self._ids is None:
            self._ids = self._list()
        return self._ids

    def _list(self) -> list[str]:
        ids: list[str] = []
        for entry in self.settings.clusters:
            if isinstance(entry, str) and self.settings.lieutenant is None:
                raise FleetError(
                    f"commodore.clusters: {entry!r} is a cluster id, which needs "
                    "commodore.lieutenant; without it give the cluster's facts",
                    path=CONFIG_FILE,
                )
            ids.append(entry if isinstance(entry, str) else entry.id)
        api = self.api
        if not ids and api is not None:
            for body in api.clusters(self._tenant_id()):
                cluster_id = str(body.get("id", ""))
                if cluster_id:
                    ids.append(cluster_id)
                    self._answers[cluster_id] = body
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise FleetError(
                f"commodore.clusters: {duplicates[0]!r} is listed twice", path=CONFIG_FILE
            )
        return sorted(ids)

    def spec(self, cluster_id: str) -> ClusterSpec:
        ids = self.ids()
        if cluster_id not in ids:
            raise FleetError(f"unknown cluster {cluster_id!r}{suggest.hint(cluster_id, ids)}")
        given = next(
            (c for c in self.settings.clusters if isinstance(c, Cluster) and c.id == cluster_id),
            None,
        )
        if given is not None:
            return self._given(given)
        return self._from_lieutenant(cluster_id)

    def _given(self, cluster: Cluster) -> ClusterSpec:
        tenant = self.settings.tenant
        repo = self.settings.global_repo
        if tenant is None or repo is None:
            if self.api is None:
                raise FleetError(
                    "rollwright.yaml commodore: 'global' (the global repository) and 'tenant' "
                    "are required without commodore.lieutenant",
                    path=CONFIG_FILE,
                )
            return self._from_lieutenant(cluster.id, cluster)
        return ClusterSpec(
            id=cluster.id,
            display_name=cluster.display_name,
            catalog_url=cluster.catalog_url,
            tenant_id=tenant.id,
            tenant_display_name=tenant.display_name,
            facts=cluster.facts,
            dynamic_facts=cluster.dynamic_facts,
            global_url=repo.url,
            global_revision=cluster.global_revision or repo.revision,
        )

    def _from_lieutenant(self, cluster_id: str, given: Cluster | None = None) -> ClusterSpec:
        """Commodore's `Cluster` over Lieutenant's answers: the cluster's fields over the
        tenant's; `global` in rollwright.yaml over the tenant's repository."""
        api = self.api
        assert api is not None
        tenant_id = self._tenant_id()
        body = self._answers.get(cluster_id) or api.cluster(cluster_id)
        if body.get("tenant") != tenant_id:
            raise FleetError(
                f"Lieutenant: cluster {cluster_id!r} belongs to tenant {body.get('tenant')!r}, "
                f"not {tenant_id!r} (rollwright.yaml commodore.tenant.id)"
            )
        if self._tenant is None:
            self._tenant = api.tenant(tenant_id)
        tenant = self._tenant
        if tenant.get("id") != tenant_id:
            raise FleetError(f"Lieutenant: tenant ID mismatch for {tenant_id!r}")
        facts = given.facts if given is not None else dict(body.get("facts") or {})
        for fact in ("distribution", "cloud"):
            if not facts.get(fact):
                raise FleetError(
                    f"Lieutenant: cluster {cluster_id!r}: required fact {fact!r} not set"
                )
        repo = self.settings.global_repo
        global_url = repo.url if repo is not None else tenant.get("globalGitRepoURL")
        if not global_url:
            raise FleetError(f"Lieutenant: tenant {tenant_id!r} has no globalGitRepoURL")
        revision = body.get("globalGitRepoRevision", tenant.get("globalGitRepoRevision"))
        if repo is not None and repo.revision:
            revision = repo.revision
        catalog = (body.get("gitRepo") or {}).get("url")
        if not catalog:
            raise FleetError(
                f"Lieutenant: cluster {cluster_id!r} has no catalog repository (gitRepo.url)"
            )
        return ClusterSpec(
            id=cluster_id,
            display_name=str(body.get("displayName", "")),
            catalog_url=str(catalog),
            tenant_id=tenant_id,
            tenant_display_name=str(tenant.get("displayName", "")),
            facts=facts,
            dynamic_facts=(
                given.dynamic_facts if given is not None else dict(body.get("dynamicFacts") or {})
            ),
            global_url=str(global_url),
            global_revision=revision,
            tenant_url=str((tenant.get("gitRepo") or {}).get("url") or ""),
        )
