"""Shadowed pins: values a node sets that an active patch overrides.

The merge order is the design document's: every values level first, then the active patches.
So a patch active at an environment wins over a region's deliberate pin (`targetRevision:
v1.9.9-hotfix` in the region's values.yaml) without a word. That order stays; this module
finds where it happens, for `validate` (a warning naming both files and lines) and `rollout
status` (next to the node).

A pin is shadowed at a root when an applied patch writes a path (replacing, not appending)
that a values file at the patch's node or below it sets — the same path with another value, or
a value above the path that the patch writes into. Levels above the patch's node (base values,
a parent node) are what patches are meant to override, and are not reported.

In the generator's spelling a node's patches apply right after that node's override.yaml, so
a deeper node's override wins over them: only the override of the patch's own node is
shadowed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from shared.engine import yamldoc
from shared.engine.dimensions.merge import Merger, nodes_above, patch_node
from shared.engine.values import escape_pointer_token, get_pointer, parse_pointer

_ABSENT = object()


@dataclass(frozen=True)
class Shadow:
    """One pin a patch overrides at one root."""

    root: str
    patch_id: str
    patch_path: str
    patch_line: int | None
    pointer: str  # what the patch writes, from the components (/app/source/targetRevision)
    pinned: str  # what the values file sets: the same path, or one above it (/app/source)
    values_path: str
    values_line: int | None
    interleaved: bool = False  # the generator's order: after the override of its node

    @property
    def node(self) -> str:
        """The node of the patch copy that overrides the pin."""
        return "/".join(patch_node(self.patch_path))

    def message(self) -> str:
        where = f"{self.patch_path}:{self.patch_line}" if self.patch_line else self.patch_path
        writes = "" if self.pinned == self.pointer else f" (it writes {self.pointer})"
        after = "the values of its node" if self.interleaved else "every values file"
        return (
            f"{self.pinned} set here is overridden by patch {self.patch_id!r} ({where}){writes}, "
            f"which applies after {after}, at"
        )


def shadowed_pins(merger: Merger, root: str) -> Iterator[Shadow]:
    ctype, place = merger.split(root)
    for outcome in merger.state(root).outcomes:
        if not outcome.applied:
            continue
        patch = outcome.patch
        depth = len(patch_node(patch.path))
        comp = merger.component(ctype, patch.path.split("/")[2])
        for pointer in sorted(patch.writes()):
            if patch.merge_strategy.get(pointer) == "append":
                continue  # appends keep what the levels set
            keys = parse_pointer(pointer)[1:]
            wanted = get_pointer(patch.body, pointer)
            for node in nodes_above(place):
                if len(node) < depth or (merger.interleaved and len(node) > depth):
                    continue
                for rel in merger.files.level_files(comp, node):
                    found = _pinned(merger.files.values_file(rel, comp), keys, wanted)
                    if found is None:
                        continue
                    text = merger.files.text(rel)
                    pinned = "".join(f"/{escape_pointer_token(k)}" for k in (comp.name, *found))
                    yield Shadow(
                        root=root,
                        patch_id=patch.id,
                        patch_path=patch.path,
                        patch_line=patch.body_line(pointer),
                        pointer=pointer,
                        pinned=pinned,
                        values_path=rel,
                        values_line=yamldoc.key_line(text, (comp.section, comp.name, *found)),
                        interleaved=merger.interleaved,
                    )


def _pinned(data: dict[str, Any], keys: list[str], wanted: Any) -> list[str] | None:
    """Where a values file sets something the patch's `wanted` at `keys` overrides (the keys
    of what it sets), or None when it sets nothing there or the same value."""
    node: Any = data
    for i, key in enumerate(keys):
        if not isinstance(node, dict):
            return keys[:i]  # a value (or null) above the path: the patch writes into it
        node = node.get(key, _ABSENT)
        if node is _ABSENT:
            return None
    if node == wanted or (wanted == {} and isinstance(node, dict)):
        return None  # the same pin, or an empty mapping merged over it (no change)
    return keys
