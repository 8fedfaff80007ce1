"""The resource name (`deployments`, `gateways`) of a rendered object's kind, as admission
rules (`resourceRules[].resources`) name it.

A custom kind's is the `spec.names.plural` of the CustomResourceDefinition the render carries:
Kubernetes' guess from the kind is wrong for many (`Gateway` → `gatewaies`, served as
`gateways`). A built-in kind (one of the kinds of the newest schema set `kubernetes-validate`
ships) is named by the API server's own rule, which every built-in resource follows
(`Endpoints` aside; tests compare it with the plurals of Kubernetes' API in
`lightkube-models`). Any other kind's is unknown (None): callers say so, never guess.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.engine.manifests.schema import builtin_kinds, is_crd
from shared.engine.policies.objects import Manifest


class ResourceNames:
    """The resource names of one render's kinds."""

    def __init__(self, custom: dict[tuple[str, str], str]) -> None:
        self.custom = custom  # (group, kind) → plural, from the render's CRDs

    @classmethod
    def of(cls, manifests: Iterable[Manifest]) -> ResourceNames:
        custom = {}
        for manifest in manifests:
            if not is_crd(manifest.body):
                continue
            spec = manifest.body.get("spec") or {}
            names = spec.get("names") if isinstance(spec, dict) else None
            if not isinstance(names, dict):
                continue
            group, kind, plural = spec.get("group"), names.get("kind"), names.get("plural")
            if isinstance(group, str) and isinstance(kind, str) and isinstance(plural, str):
                custom[(group, kind)] = plural
        return cls(custom)

    def plural(self, group: str, kind: str) -> str | None:
        """The resource name of `kind` in API group `group`, None when nothing says it."""
        custom = self.custom.get((group, kind))
        if custom is not None:
            return custom
        if (group, kind) in builtin_kinds():
            return builtin_plural(kind)
        return None


def builtin_plural(kind: str) -> str:
    """The API server's name for a built-in kind's resource (meta.UnsafeGuessKindToResource:
    lowercase, `s` → `ses`, `y` → `ies`, else `s`; `endpoints` stays)."""
    name = kind.lower()
    if name == "endpoints":
        return name
    if name.endswith("s"):
        return name + "es"
    if name.endswith("y"):
        return name[:-1] + "ies"
    return name + "s"
