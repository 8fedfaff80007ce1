"""The files `helm template --output-dir` writes (Helm 3.10, kube-renderer's CI version).

Helm splits each rendered template into manifests, sorts them by kind in its install order
(stably, so manifests of one kind keep their order), and writes each as
`---\\n# Source: <template>\\n<manifest>\\n` into a file named after its template, appending
when the file was written before. CRDs from `crds/` are written whole, one Source header per
file. Hooks are written afterwards through a fresh "written" set, so a hook truncates a
template file that also holds ordinary manifests: Helm 3.12 changed that to an append, and
as the output depends on the Helm version, such a chart is refused (`HelmOutputError`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# releaseutil.SplitManifests: Go's \s is [\t\n\f\r ].
_SEPARATOR = re.compile(r"(?:^|[\t\n\f\r ]*\n)---[\t\n\f\r ]*")
_GO_SPACE = "\t\n\f\r "
INSTALL_ORDER = [
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
]
_RANK = {kind: i for i, kind in enumerate(INSTALL_ORDER)}
HOOK_ANNOTATION = "helm.sh/hook"


class HelmOutputError(Exception):
    def __init__(self, message: str, template: str) -> None:
        super().__init__(message)
        self.message = message
        self.template = template


@dataclass(frozen=True)
class Manifest:
    path: str  # the template it came from: `<chart>/templates/x.yaml`
    content: str
    kind: str
    hook_events: tuple[str, ...] | None  # None: not a hook

    @property
    def is_test(self) -> bool:
        return self.hook_events is not None and "test" in self.hook_events


@dataclass(frozen=True)
class Flags:
    crds: bool = True
    hooks: bool = False
    tests: bool = False


def split_manifests(text: str) -> list[str]:
    docs = _SEPARATOR.split(text.strip(_GO_SPACE))
    return [d.strip(_GO_SPACE) for d in docs if d != "" and d.strip(_GO_SPACE) != ""]


def _manifest(path: str, content: str) -> Manifest:
    try:
        head = yaml.load(content, Loader=_Loader)
    except yaml.YAMLError as err:
        raise HelmOutputError(f"YAML parse error on {path}: {err}", path) from None
    if not isinstance(head, dict):
        head = {}
    kind = head.get("kind")
    metadata = head.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    events: tuple[str, ...] | None = None
    if isinstance(annotations, dict) and HOOK_ANNOTATION in annotations:
        names = [e.strip() for e in str(annotations[HOOK_ANNOTATION] or "").split(",")]
        # Helm 2's `test-success` is Helm 3's `test`.
        events = tuple("test" if e == "test-success" else e for e in names)
    return Manifest(path, content, kind if isinstance(kind, str) else "", events)


def _sort_key(manifest: Manifest) -> tuple[int, str]:
    rank = _RANK.get(manifest.kind)
    # Unknown kinds go last, sorted by kind name (equal kinds keep their order).
    return (rank, "") if rank is not None else (len(_RANK), manifest.kind)


def sorted_manifests(templates: dict[str, str]) -> tuple[list[Manifest], list[Manifest]]:
    """(ordinary manifests, hooks) as Helm's SortManifests orders them."""
    generic: list[Manifest] = []
    hooks: list[Manifest] = []
    for path in sorted(templates):
        text = templates[path]
        if path.rsplit("/", 1)[-1].startswith("_") or path.endswith("NOTES.txt"):
            continue
        if not text.strip(_GO_SPACE):
            continue
        for content in split_manifests(text):
            manifest = _manifest(path, content)
            (generic if manifest.hook_events is None else hooks).append(manifest)
    return sorted(generic, key=_sort_key), sorted(hooks, key=_sort_key)


def output_files(templates: dict[str, str], crds: dict[str, str], flags: Flags) -> dict[str, str]:
    """Path (below the release's output dir) → text, as `helm template --output-dir` writes
    them with `--include-crds`, `--no-hooks` and `--skip-tests` set from `flags`."""
    files: dict[str, str] = {}
    if flags.crds:
        for name, data in crds.items():
            files[name] = files.get(name, "") + f"---\n# Source: {name}\n{data}\n"
    generic, hooks = sorted_manifests(templates)
    for m in generic:
        files[m.path] = files.get(m.path, "") + f"---\n# Source: {m.path}\n{m.content}\n"
    if flags.hooks:
        written: set[str] = set()
        for m in hooks:
            if flags.tests is False and m.is_test:
                continue
            if m.path in files and m.path not in written:
                raise HelmOutputError(
                    f"{m.path} holds both hooks and other manifests: Helm 3.10 (kube-renderer's) "
                    "writes the hooks over the others, Helm 3.12 and later append them; the "
                    "output depends on the Helm version, so it is not rendered (move the hooks "
                    "to a template file of their own)",
                    m.path,
                )
            entry = f"---\n# Source: {m.path}\n{m.content}\n"
            files[m.path] = files.get(m.path, "") + entry if m.path in written else entry
            written.add(m.path)
    return files
