"""What a patch meets at some roots of a dimensions layout (the fleet as it is, or as a planned
promotion would leave it): unmet dependencies, overlaps with other patches, pins it overrides.
Each finding is a message naming a few of the roots (`listed`), grouped by what was found."""

from __future__ import annotations

from collections import defaultdict

from shared.engine.dimensions import patches
from shared.engine.dimensions.layout import DimensionsLayout
from shared.engine.dimensions.merge import touches_secret
from shared.engine.errors import Problem


def unmet_dependencies(layout: DimensionsLayout, patch_id: str, roots: list[str]) -> list[str]:
    """Unmet dependencies of the patch at `roots` of `layout`, grouped by what was found."""
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for root in roots:
        state = layout.state(root)
        secret: set[tuple[str | int, ...]] | None = None
        for outcome in state.outcomes:
            if outcome.patch.id != patch_id:
                continue
            for dep, found in outcome.unmet:
                if secret is None:
                    # Leaves derived from a secret, and whatever an encrypted file sets
                    # (booleans and short numbers included): never quoted.
                    secret = layout.secret_paths(root, None) | layout.encrypted_paths(root)
                if touches_secret(secret, dep.pointer):
                    found = "found a value that comes from an encrypted file (not shown)"
                grouped[(dep.describe(), found)].append(root)
    return [
        f"dependency {what} is not met at {listed(roots)} ({found})"
        for (what, found), roots in grouped.items()
    ]


def overlaps(layout: DimensionsLayout, patch_id: str, roots: list[str]) -> list[str]:
    """Other patches active with this one at `roots` that set the same paths."""
    grouped: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    for root in roots:
        active = [o.patch for o in layout.state(root).outcomes]
        mine = next((p for p in active if p.id == patch_id), None)
        if mine is None:
            continue
        for other in active:
            if other.id == patch_id:
                continue
            for pointer in patches.overlap(mine, other):
                grouped[(other.id, pointer, mine.path, other.path)].append(root)
    return [
        f"patch {patch_id!r} ({mine_path}) and patch {other!r} ({other_path}) both set "
        f"{pointer} at {listed(roots)}"
        for (other, pointer, mine_path, other_path), roots in grouped.items()
    ]


def listed(items: list[str], shown: int = 3) -> str:
    items = sorted(items)
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")


def overridden_pins(layout: DimensionsLayout, patch_id: str, roots: list[str]) -> list[str]:
    """The pins the patch overrides at `roots`, as `validate` warns of them, each after the
    node of the copy that overrides it."""
    grouped: dict[tuple[str, str, int | None, str], list[str]] = defaultdict(list)
    for root in roots:
        for shadow in layout.shadowed_pins(root):
            if shadow.patch_id == patch_id:
                key = (shadow.node, shadow.values_path, shadow.values_line, shadow.message())
                grouped[key].append(root)
    return [
        f"{node}: {Problem(path, line, f'{message} {listed(where)}')}"
        for (node, path, line, message), where in grouped.items()
    ]
