"""Kubernetes manifests after rendering: documents, scope, namespaces, hooks and file names.

A rendered release becomes one file per resource (kube-renderer style). The default name is
`<deployment>/<release>/<namespace or _cluster>[/crds|/hooks|/tests]/<Kind>[.<group>]_<name>.yaml`
under the root; `rollwright.yaml` may set another pattern (see `OutputPattern`).
"""

from __future__ import annotations

import functools
import pickle
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from shared.engine import yamldoc
from shared.engine.errors import FleetError

# Built-in cluster-scoped kinds (Kubernetes core groups); CRDs in the same render add theirs.
CLUSTER_SCOPED_KINDS = frozenset(
    {
        "APIService",
        "CertificateSigningRequest",
        "ClusterRole",
        "ClusterRoleBinding",
        "ComponentStatus",
        "CSIDriver",
        "CSINode",
        "CustomResourceDefinition",
        "FlowSchema",
        "IngressClass",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
        "MutatingWebhookConfiguration",
        "Namespace",
        "Node",
        "PersistentVolume",
        "PodSecurityPolicy",
        "PriorityClass",
        "PriorityLevelConfiguration",
        "RuntimeClass",
        "StorageClass",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
        "VolumeAttachment",
    }
)

HOOK_ANNOTATION = "helm.sh/hook"
TEST_HOOKS = frozenset({"test", "test-success", "test-failure"})

DEFAULT_PATTERN = "{deployment}/{release}/{namespace}/{section}{kind}{group}_{name}.yaml"
PATTERN_FIELDS = frozenset(
    {"root", "deployment", "release", "namespace", "section", "kind", "group", "name"}
)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass
class Resource:
    """One Kubernetes object and where it came from."""

    doc: dict[str, Any]
    source: str  # e.g. "chart/templates/deployment.yaml", for error messages
    section: str = ""  # "", "crds", "hooks" or "tests"

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind") or "")

    @property
    def api_version(self) -> str:
        return str(self.doc.get("apiVersion") or "")

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0] if "/" in self.api_version else ""

    @property
    def metadata(self) -> dict[str, Any]:
        meta = self.doc.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
            self.doc["metadata"] = meta
        return meta

    @property
    def name(self) -> str:
        return str(self.metadata.get("name") or "")

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace") or "")

    def identity(self) -> tuple[str, str, str, str]:
        return (self.group, self.kind, self.namespace, self.name)


K = TypeVar("K", str, bytes)
V = TypeVar("V", str, bytes)


class _LRU(Generic[K, V]):
    """A least-recently-used map of texts, bounded by their total length."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        found = self.items.get(key)
        if found is not None:
            self.items.move_to_end(key)
        return found

    def put(self, key: K, value: V) -> None:
        cost = len(key) + len(value)
        if key in self.items or cost > self.max_bytes // 8:
            return  # one huge document would evict everything else
        self.items[key] = value
        self.size += cost
        while self.size > self.max_bytes:
            old_key, old_value = self.items.popitem(last=False)
            self.size -= len(old_key) + len(old_value)

    def clear(self) -> None:
        self.items.clear()
        self.size = 0


# Across the roots of a fleet many rendered documents are the same text (RBAC, CRDs,
# services, anything without cluster-specific values), so both halves of the YAML round
# trip are kept per process:
# - rendered text -> its documents, pickled: a hit unpickles a fresh, private copy (the
#   objects are post-processed in place) in a few microseconds instead of a YAML parse;
# - final document -> its YAML, keyed by the pickle of the document. Equal pickles mean
#   equal trees (same types, key order and shared containers), hence the same YAML.
# Errors are never cached: bad input fails the same way every time.
_parsed: _LRU[str, bytes] = _LRU(64 * 2**20)
_dumped: _LRU[bytes, str] = _LRU(64 * 2**20)


# A template renders alike for most releases but for a few values (names, replicas, a
# cluster's domain): the previous text of each template is kept too, and a text that differs
# from it only in one-word scalars is built from it (see yamldoc.Similar).
_similar = yamldoc.Similar()


def _load_docs(text: str, source: str) -> list[Any]:
    blob = _parsed.get(text)
    if blob is not None:
        docs: list[Any] = pickle.loads(blob)  # our own bytes, from this process
        return docs
    docs = _similar.loads_all(text, source, key=source)
    _parsed.put(text, pickle.dumps(docs, protocol=pickle.HIGHEST_PROTOCOL))
    return docs


def parse(text: str, source: str, section: str = "") -> list[Resource]:
    """Documents of a rendered template; empty ones dropped, `List` kinds flattened."""
    out: list[Resource] = []
    for doc in _load_docs(text, source):
        if not isinstance(doc, dict):
            raise FleetError(
                f"rendered document is {yamldoc.type_name(doc)}, expected a Kubernetes object",
                path=source,
            )
        if _is_list(doc):
            for item in doc["items"]:
                if item is None:
                    continue
                if not isinstance(item, dict):
                    raise FleetError(
                        f"item of {doc.get('kind')} is {yamldoc.type_name(item)}, "
                        "expected a Kubernetes object",
                        path=source,
                    )
                out.append(Resource(item, source, section))
            continue
        out.append(Resource(doc, source, section))
    for res in out:
        if not res.kind or not res.api_version or not res.name:
            raise FleetError(
                "rendered object lacks apiVersion, kind or metadata.name "
                f"(kind={res.kind!r}, name={res.name!r})",
                path=source,
            )
    return out


def _is_list(doc: dict[str, Any]) -> bool:
    """`v1/List` and typed lists (`ConfigMapList`, ...), as kubectl and kustomize see them."""
    kind = doc.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list)


def hook_section(res: Resource) -> str:
    """'hooks' or 'tests' for Helm hooks, '' for ordinary resources."""
    annotations = res.metadata.get("annotations") or {}
    hook = annotations.get(HOOK_ANNOTATION) if isinstance(annotations, dict) else None
    if not hook:
        return ""
    kinds = {h.strip() for h in str(hook).split(",")}
    return "tests" if kinds & TEST_HOOKS else "hooks"


def cluster_scoped_kinds(resources: list[Resource], extra: frozenset[str]) -> frozenset[str]:
    """Built-in kinds, configured ones, and kinds of cluster-scoped CRDs in this render."""
    if not any(res.kind == "CustomResourceDefinition" for res in resources):
        return _known_kinds(extra)  # the common case, asked twice for every release
    kinds = set(CLUSTER_SCOPED_KINDS) | set(extra)
    for res in resources:
        if res.kind == "CustomResourceDefinition":
            spec = res.doc.get("spec") or {}
            if isinstance(spec, dict) and spec.get("scope") == "Cluster":
                names = spec.get("names") or {}
                if isinstance(names, dict) and names.get("kind"):
                    kinds.add(str(names["kind"]))
    return frozenset(kinds)


@functools.lru_cache(maxsize=64)
def _known_kinds(extra: frozenset[str]) -> frozenset[str]:
    return CLUSTER_SCOPED_KINDS | extra


def apply_namespace(res: Resource, namespace: str, cluster_kinds: frozenset[str]) -> None:
    """Give namespaced objects without a namespace the release namespace; strip it from
    cluster-scoped ones (Commodore's helm_namespace behaviour)."""
    if res.kind in cluster_kinds:
        res.metadata.pop("namespace", None)
    elif not res.namespace and namespace:
        # Right after `name`, where charts and kubectl put it, so diffs read naturally.
        meta = res.metadata
        items = list(meta.items())
        at = next((i + 1 for i, (k, _) in enumerate(items) if k == "name"), len(items))
        items = [(k, v) for k, v in items if k != "namespace"]
        items.insert(min(at, len(items)), ("namespace", namespace))
        meta.clear()
        meta.update(items)


def remove_labels(res: Resource, keys: list[str]) -> None:
    labels = res.metadata.get("labels")
    if isinstance(labels, dict):
        for key in keys:
            labels.pop(key, None)
        if not labels:
            res.metadata.pop("labels")


def file_name(
    res: Resource,
    *,
    pattern: str,
    root: str,
    deployment: str,
    release: str,
    cluster_kinds: frozenset[str],
) -> str:
    namespace = "_cluster" if res.kind in cluster_kinds else (res.namespace or "_cluster")
    fields = {
        "root": root,
        "deployment": deployment,
        "release": release,
        "namespace": _safe(namespace),
        "section": f"{res.section}/" if res.section else "",
        "kind": _safe(res.kind),
        "group": f".{_safe(res.group)}" if res.group else "",
        "name": _safe(res.name),
    }
    path = pattern.format(**fields)
    if "//" in path:
        path = re.sub(r"/{2,}", "/", path)
    return path.lstrip("/")


@functools.lru_cache(maxsize=4096)  # kinds, namespaces and names recur across releases
def _safe(part: str) -> str:
    return _UNSAFE.sub("_", part)


def validate_pattern(pattern: str) -> str | None:
    """An error message when `pattern` uses unknown fields or cannot give unique names."""
    used = set(re.findall(r"{(\w+)}", pattern))
    unknown = used - PATTERN_FIELDS
    if unknown:
        return (
            f"unknown field(s) {sorted(unknown)} in output pattern; known: {sorted(PATTERN_FIELDS)}"
        )
    if not {"kind", "name"} <= used:
        return "output pattern must contain {kind} and {name} so that every resource gets a file"
    try:
        sample = pattern.format(**{name: "x" for name in PATTERN_FIELDS})
    except (ValueError, IndexError, KeyError, AttributeError) as err:
        return f"output pattern is not a valid format string: {err}"
    if any(part == ".." for part in sample.split("/")):
        return "output pattern must not leave the root directory ('..')"
    if not sample.endswith((".yaml", ".yml")):
        return "output pattern must end with .yaml or .yml"
    return None


def dump(res: Resource) -> str:
    """The document as YAML, keeping the chart's key order; files end with a newline."""
    try:
        key = pickle.dumps(res.doc, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return yamldoc.dumps(res.doc)
    text = _dumped.get(key)
    if text is None:
        text = yamldoc.dumps(res.doc)
        _dumped.put(key, text)
    return text


def clear_caches() -> None:
    _parsed.clear()
    _dumped.clear()
    _similar.clear()
