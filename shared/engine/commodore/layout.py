"""The commodore layout: a Project Syn tenant repository as rollwright roots, one per cluster
(rollwright.yaml `commodore.clusters`), each rendering the cluster's catalog tree
(`manifests/<component>/…`, `refs/…`) byte for byte as Commodore 1.35 compiles it
(docs/formats/commodore.md)."""

from __future__ import annotations

from typing import Any

from shared.engine import suggest
from shared.engine.commodore.catalog import compile_catalog
from shared.engine.config.commodore import Cluster
from shared.engine.config.fleet import CONFIG_FILE, FleetConfig
from shared.engine.errors import FleetError, Problem
from shared.engine.layout import ReleaseInfo
from shared.engine.secrets.origin import hash_secret_objects
from shared.engine.tree import Tree


class CommodoreLayout:
    name = "commodore"

    def __init__(self, tree: Tree, config: FleetConfig) -> None:
        self.tree = tree
        self.config = config
        self.settings = config.commodore
        self._renders: dict[str, dict[str, bytes]] = {}

    def roots(self) -> list[str]:
        clusters = self._clusters()
        if not clusters:
            raise FleetError(
                "rollwright.yaml commodore.clusters lists no cluster: nothing would render",
                path=CONFIG_FILE,
            )
        return sorted(clusters)

    def _clusters(self) -> dict[str, Cluster]:
        found: dict[str, Cluster] = {}
        for cluster in self.settings.clusters:
            if cluster.id in found:
                raise FleetError(
                    f"commodore.clusters: cluster {cluster.id!r} is listed twice",
                    path=CONFIG_FILE,
                )
            found[cluster.id] = cluster
        return found

    def _cluster(self, root: str) -> Cluster:
        clusters = self._clusters()
        if root not in clusters:
            raise FleetError(f"unknown cluster {root!r}{suggest.hint(root, sorted(clusters))}")
        return clusters[root]

    def releases(self, root: str) -> list[ReleaseInfo]:
        return []

    def values(self, root: str, release: str | None) -> dict[str, Any]:
        cluster = self._cluster(root)
        return {"facts": cluster.facts, "dynamic_facts": cluster.dynamic_facts}

    def redacted_values(self, root: str, release: str | None) -> dict[str, Any]:
        return self.values(root, release)

    def secret_values(self) -> list[Any]:
        return []  # references only: the catalog never holds a Vault secret's value

    def render_files(self, root: str) -> dict[str, bytes]:
        if root not in self._renders:
            files = compile_catalog(self.tree, self.settings, self._cluster(root))
            if not any(path.startswith("manifests/") for path in files):
                raise FleetError(
                    f"cluster {root!r} compiles no manifest: the catalog would be empty"
                )
            self._renders[root] = files
        return dict(self._renders[root])

    def render_redacted(self, root: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
        plain = self.render_files(root)
        return plain, hash_secret_objects(plain)

    def affected(self, changed: set[str]) -> set[str]:
        # Which classes a cluster includes is known only after its inventory renders: every
        # change to the tenant repository compiles every cluster, for now.
        return set(self.roots()) if changed else set()

    def validate(self) -> list[Problem]:
        problems: list[Problem] = []
        try:
            roots = self.roots()
        except FleetError as err:
            return [err.problem]
        for root in roots:
            try:
                self.render_files(root)
            except FleetError as err:
                problems.append(err.within(f'cluster "{root}"').problem)
        return problems

    def unread_values(self, root: str | None) -> list[Problem]:
        return []

    def render_warnings(self, root: str) -> list[Problem]:
        return []

    def refusals(self, root: str) -> list[Problem]:
        return []
