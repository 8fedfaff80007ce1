"""The Kubernetes objects of a rendered root as policies see them, and what policies find."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shared.engine import yamldoc

Level = Literal["deny", "warn"]
# A policy's message is cut here: a check run shows many of them.
MAX_MESSAGE = 500


@dataclass(frozen=True)
class Manifest:
    """One rendered object and the output file it is in (relative to the root)."""

    file: str
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind") or "")

    @property
    def name(self) -> str:
        return str((self.body.get("metadata") or {}).get("name") or "")

    @property
    def namespace(self) -> str:
        return str((self.body.get("metadata") or {}).get("namespace") or "")

    @property
    def labels(self) -> dict[str, str]:
        labels = (self.body.get("metadata") or {}).get("labels") or {}
        return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}

    @property
    def group_version(self) -> tuple[str, str]:
        """(API group, version): `apps/v1` → ("apps", "v1"), `v1` → ("", "v1")."""
        api = str(self.body.get("apiVersion") or "")
        group, _, version = api.rpartition("/")
        return group, version


@dataclass(frozen=True)
class Finding:
    """One failing rule on one object: `policy` names the rule (`policies/x/pods.rego:
    data.main.deny`, `ValidatingAdmissionPolicy max-replicas: validations[0]`)."""

    policy_set: str
    level: Level
    message: str
    policy: str
    kind: str = ""
    namespace: str = ""
    name: str = ""
    file: str = ""

    @classmethod
    def on(
        cls, manifest: Manifest | None, policy_set: str, level: Level, message: str, policy: str
    ) -> Finding:
        text = " ".join(message.split()) or "(no message)"
        if len(text) > MAX_MESSAGE:
            text = text[: MAX_MESSAGE - 1] + "…"
        if manifest is None:
            return cls(policy_set, level, text, policy)
        return cls(
            policy_set,
            level,
            text,
            policy,
            kind=manifest.kind,
            namespace=manifest.namespace,
            name=manifest.name,
            file=manifest.file,
        )

    @property
    def subject(self) -> str:
        """`Deployment web-1/web (apps/web.yaml)`, or the policy's own when no object."""
        if not self.kind:
            return "(the policy itself)"
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where} ({self.file})"


def manifests(files: Mapping[str, bytes]) -> Iterator[Manifest]:
    """Every object of the rendered (redacted) files, `List` kinds unfolded, in file order."""
    for path in sorted(files):
        if not path.endswith((".yaml", ".yml")):
            continue
        for doc in yamldoc.loads_all(files[path].decode("utf-8"), path):
            yield from _unfold(path, doc)


def _unfold(path: str, doc: Any) -> Iterator[Manifest]:
    if not isinstance(doc, dict):
        return
    if str(doc.get("kind") or "").endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from _unfold(path, item)
        return
    yield Manifest(path, doc)
