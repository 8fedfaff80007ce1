"""Preview noise: changes reviewers do not need to read, hidden from PR previews.

Some fields change on every chart bump or every render without changing what a cluster
runs: the `helm.sh/chart` and `app.kubernetes.io/version` labels, `checksum/*` annotations
(hashes of other resources, which show up in those resources' own diffs), and webhook
`caBundle`s. A changed resource whose **only** differences are such fields is hidden from
the preview and listed as hidden (with the JSON pointers that changed); a resource with any
other difference shows its whole diff, noise lines included, so what a reviewer reads is
exactly what changes. Added and removed resources are never noise.

Rules (`rollwright.yaml` `preview.noise`, docs/previews.md) match a place in a Kubernetes
document, given as the path of keys from the document's top:

- `label: GLOB` / `annotation: GLOB`: a key of a `labels` / `annotations` mapping under any
  `metadata` (the object's own and embedded ones such as a pod template's);
- `key: GLOB`: any mapping key, at any depth (`caBundle`);
- `pointer: /a/b/*`: a JSON pointer from the document's top, `*` globs per segment;

each optionally limited to `kinds` (globs over the document's `kind`). Everything below a
matching key is noise too. The built-in rules apply unless `preview.defaultNoise: false`.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from shared.engine.values import escape_pointer_token
from shared.review.diff import FileDiff, RenderDiff

RuleKind = Literal["label", "annotation", "key", "pointer"]

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class NoiseRule:
    """One place in a document whose changes are noise."""

    kind: RuleKind
    pattern: str  # a glob (label, annotation, key) or a JSON pointer of globs (pointer)
    kinds: tuple[str, ...] = ("*",)  # globs over the document's `kind`

    def describe(self) -> str:
        where = "" if self.kinds == ("*",) else f" (kinds {', '.join(self.kinds)})"
        return f"{self.kind} {self.pattern}{where}"

    def matches(self, kind: str, path: Sequence[str]) -> bool:
        """Whether the key at `path` (keys from the document's top, list indexes as
        strings) is this rule's noise; its descendants are noise through it."""
        if not path or not any(fnmatch.fnmatchcase(kind, g) for g in self.kinds):
            return False
        last = path[-1]
        if self.kind == "key":
            return fnmatch.fnmatchcase(last, self.pattern)
        if self.kind == "pointer":
            segments = _pointer_segments(self.pattern)
            return len(path) == len(segments) and all(
                fnmatch.fnmatchcase(token, glob) for token, glob in zip(path, segments, strict=True)
            )
        mapping = "labels" if self.kind == "label" else "annotations"
        return (
            len(path) >= 3
            and path[-2] == mapping
            and path[-3] == "metadata"
            and fnmatch.fnmatchcase(last, self.pattern)
        )


DEFAULT_RULES: tuple[NoiseRule, ...] = (
    NoiseRule("label", "helm.sh/chart"),
    NoiseRule("label", "app.kubernetes.io/version"),
    NoiseRule("annotation", "checksum/*"),
    NoiseRule("key", "caBundle"),
)


def _pointer_segments(pointer: str) -> list[str]:
    if pointer in ("", "/"):
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.lstrip("/").split("/")]


@dataclass(frozen=True)
class HiddenChange:
    """A changed resource hidden as noise: its path and the JSON pointers (`/<doc>/...`,
    as in `FileDiff.hidden`) of the noise that changed."""

    path: str
    pointers: tuple[str, ...]


class NoiseFilter:
    """Splits a render diff into what reviewers see and what is hidden as noise."""

    def __init__(self, rules: Iterable[NoiseRule]) -> None:
        self.rules = tuple(rules)

    @classmethod
    def from_settings(cls, settings: Any) -> NoiseFilter:
        """From `FleetConfig.preview` (`shared.engine.config.preview.PreviewSettings`)."""
        rules = list(DEFAULT_RULES) if settings.default_noise else []
        for rule in settings.noise:
            kind, pattern = rule.target()
            rules.append(NoiseRule(kind, pattern, tuple(rule.kinds)))
        return cls(rules)

    def is_noise(self, kind: str, path: Sequence[str]) -> bool:
        """Whether the key at `path` or one of its ancestors is noise."""
        return any(
            rule.matches(kind, path[:depth])
            for depth in range(1, len(path) + 1)
            for rule in self.rules
        )

    def split(
        self, diff: RenderDiff, old: dict[str, bytes], new: dict[str, bytes]
    ) -> tuple[RenderDiff, list[HiddenChange]]:
        """(the diff without noise-only resources, those resources). `old` and `new` are
        the redacted files the diff was made from."""
        if not self.rules:
            return diff, []
        shown: list[FileDiff] = []
        hidden: list[HiddenChange] = []
        for item in diff.files:
            pointers = None
            if item.change == "changed" and item.path in old and item.path in new:
                pointers = self.noise_only(item, old[item.path], new[item.path])
            if pointers is None:
                shown.append(item)
            else:
                hidden.append(HiddenChange(item.path, pointers))
        return RenderDiff(shown), hidden

    def noise_only(self, item: FileDiff, old: bytes, new: bytes) -> tuple[str, ...] | None:
        """The changed noise pointers when every difference of `item` is noise, else None."""
        if not item.path.endswith((".yaml", ".yml")):
            return None
        old_docs, new_docs = _documents(old), _documents(new)
        if old_docs is None or new_docs is None or len(old_docs) != len(new_docs):
            return None
        changed: set[str] = set()
        for index, (a, b) in enumerate(zip(old_docs, new_docs, strict=True)):
            kind_a, kind_b = _kind(a), _kind(b)
            if kind_a != kind_b:
                return None
            kept_a, noise_a = self._strip(kind_a, a, (str(index),))
            kept_b, noise_b = self._strip(kind_b, b, (str(index),))
            if kept_a != kept_b:
                return None
            changed |= {
                p for p in noise_a.keys() | noise_b.keys() if noise_a.get(p) != noise_b.get(p)
            }
        for pointer in item.hidden:
            # A redacted value that changed: noise only when its place is.
            tokens = _pointer_segments(pointer)
            if not tokens or not tokens[0].isdigit() or int(tokens[0]) >= len(new_docs):
                return None
            if not self.is_noise(_kind(new_docs[int(tokens[0])]), tokens[1:]):
                return None
            changed.add(pointer)
        if not changed:
            return None  # the text differs without any value differing (order, style): show it
        return tuple(sorted(changed))

    def _strip(self, kind: str, node: Any, prefix: tuple[str, ...]) -> tuple[Any, dict[str, str]]:
        """`node` without its noise, and the noise leaves (pointer → canonical JSON)."""
        noise: dict[str, str] = {}

        def walk(value: Any, path: tuple[str, ...]) -> Any:
            if isinstance(value, dict):
                out = {}
                for key, child in value.items():
                    child_path = (*path, str(key))
                    if any(rule.matches(kind, child_path[1:]) for rule in self.rules):
                        noise.update(_leaves(child, child_path))
                        continue
                    out[key] = walk(child, child_path)
                return out
            if isinstance(value, list):
                return [walk(child, (*path, str(i))) for i, child in enumerate(value)]
            return value

        return walk(node, prefix), noise


def _documents(data: bytes) -> list[Any] | None:
    try:
        return [d for d in yaml.load_all(data.decode("utf-8"), Loader=_Loader) if d is not None]
    except (UnicodeDecodeError, yaml.YAMLError):
        return None


def _kind(doc: Any) -> str:
    kind = doc.get("kind") if isinstance(doc, dict) else None
    return kind if isinstance(kind, str) else ""


def _leaves(value: Any, path: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from _leaves(child, (*path, str(key)))
    elif isinstance(value, list) and value:
        for i, child in enumerate(value):
            yield from _leaves(child, (*path, str(i)))
    else:
        pointer = "".join("/" + escape_pointer_token(token) for token in path)
        yield pointer, json.dumps(value, sort_keys=True, default=str)
