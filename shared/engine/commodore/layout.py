"""The commodore layout: a Project Syn tenant repository as rollwright roots, one per cluster
(rollwright.yaml `commodore.clusters`), each rendering the cluster's catalog tree
(`manifests/<component>/…`, `refs/…`) byte for byte as Commodore 1.35 compiles it
(docs/formats/commodore.md)."""

from __future__ import annotations

from typing import Any

from shared.engine.commodore.affected import ClassReader
from shared.engine.commodore.catalog import compile_catalog
from shared.engine.commodore.clusters import Clusters, ClusterSpec
from shared.engine.commodore.compilemeta import CompileRecord
from shared.engine.commodore.refs import references_only
from shared.engine.config.fleet import CONFIG_FILE, FleetConfig
from shared.engine.errors import FleetError, Problem
from shared.engine.layout import ReleaseInfo, render_problems
from shared.engine.secrets.origin import hash_secret_objects
from shared.engine.tree import Tree
from shared.engine.yamldoc import key_line


class CommodoreLayout:
    name = "commodore"

    def __init__(self, tree: Tree, config: FleetConfig) -> None:
        self.tree = tree
        self.config = config
        self.clusters = Clusters(config.commodore, _lieutenant_url_line(tree))
        self._renders: dict[str, dict[str, bytes]] = {}
        self._records: dict[str, CompileRecord] = {}
        self._reader = ClassReader(tree)

    def roots(self) -> list[str]:
        ids = self.clusters.ids()
        if not ids:
            raise FleetError(
                "rollwright.yaml commodore.clusters lists no cluster (and Lieutenant none for "
                "the tenant): nothing would render",
                path=CONFIG_FILE,
            )
        return ids

    def releases(self, root: str) -> list[ReleaseInfo]:
        return []

    def values(self, root: str, release: str | None) -> dict[str, Any]:
        """What the cluster's `params.cluster` class holds."""
        spec = self.clusters.spec(root)
        return {
            "cluster": spec.parameters(),
            "facts": spec.facts,
            "dynamic_facts": spec.dynamic_facts,
        }

    def redacted_values(self, root: str, release: str | None) -> dict[str, Any]:
        return self.values(root, release)

    def secret_values(self) -> list[Any]:
        return []  # references only: the catalog never holds a Vault secret's value

    def render_files(self, root: str) -> dict[str, bytes]:
        if root not in self._renders:
            record = CompileRecord()
            files = compile_catalog(self.tree, self.clusters.spec(root), record=record)
            if not any(path.startswith("manifests/") for path in files):
                raise FleetError(
                    f"cluster {root!r} compiles no manifest: the catalog would be empty"
                )
            self._renders[root] = files
            self._records[root] = record
        return dict(self._renders[root])

    def compiled_from(self, root: str) -> tuple[ClusterSpec, CompileRecord]:
        """The cluster and the commits its catalog was compiled from (compiled first if it
        was not yet): what publishing the catalog commits and reports to Lieutenant."""
        self.render_files(root)
        return self.clusters.spec(root), self._records[root]

    def render_redacted(self, root: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
        plain = self.render_files(root)
        hashed = hash_secret_objects(plain)
        # A Secret whose every value is a secret reference (`?{vaultkv:path:hash}`) holds no
        # secret: shown as it is, and publishable where plaintext is refused. One literal
        # value hashes the whole file, as in every layout.
        redacted = {
            path: plain[path] if references_only(plain[path]) else data
            for path, data in hashed.items()
        }
        return plain, redacted

    def affected(self, changed: set[str]) -> set[str]:
        """The clusters whose classes may come from a changed tenant file
        (`shared.engine.commodore.affected`): a change to one cluster's class compiles that
        cluster, a class many include compiles those, a component version set in a class
        compiles the clusters including it. Files that are no class (not YAML) affect none;
        rollwright.yaml affects every cluster (`Fleet.affected`)."""
        classes = {path for path in changed if path.endswith((".yml", ".yaml"))}
        if not classes:
            return set()
        out = set()
        for root in self.roots():
            reads = self._reader.tenant_files(self.clusters.spec(root))
            if reads is None or reads & classes:
                out.add(root)
        return out

    def validate(self) -> list[Problem]:
        return render_problems(self, lambda root: f'cluster "{root}"')

    def unread_values(self, root: str | None) -> list[Problem]:
        return []

    def render_warnings(self, root: str) -> list[Problem]:
        return []

    def refusals(self, root: str) -> list[Problem]:
        return []


def _lieutenant_url_line(tree: Tree) -> int | None:
    """rollwright.yaml's line of `commodore.lieutenant.url`, to place a refused URL."""
    if not tree.is_file(CONFIG_FILE):
        return None
    return key_line(tree.read_text(CONFIG_FILE), ("commodore", "lieutenant", "url"))
