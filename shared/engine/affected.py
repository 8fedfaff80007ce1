"""Which roots can render differently between two git revisions.

The changed paths come from `git diff`; each side's layout maps them to roots, so a root that
only exists on one side (added or removed) is still reported. A fleet that cannot be read at
`base` (it was broken there) falls back to every root at `head`: over-rendering is safe,
missing a root is not.
"""

from __future__ import annotations

from pathlib import Path

from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import GitTree, changed_files


def affected_between(repo: Path, base: str, head: str) -> list[str]:
    changed = changed_files(repo, base, head)
    if not changed:
        return []
    head_fleet = Fleet.open(GitTree(repo, head))
    roots = head_fleet.affected(changed)
    try:
        base_fleet = Fleet.open(GitTree(repo, base))
        roots |= base_fleet.affected(changed)
    except FleetError:
        roots |= set(head_fleet.roots())
    return sorted(roots)
