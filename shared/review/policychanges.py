"""Policy sets a deployed revision changes (docs/governance.md, "Policy sets"): a change that
edits a set's files or its rollwright.yaml entry, or removes the set, could switch off the
very checks that would hold it, so such a set's owners approve it whatever it finds.

The sets are compared with those of the revision the review compares against (the root's
last published render; on a root's first deployment, the deployed commit's parent); their
owners are the base's: a change cannot name its own approvers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shared.engine.config.fleet import CONFIG_FILE, FleetConfig
from shared.engine.errors import FleetError
from shared.engine.policies.sets import sets_for
from shared.engine.tree import GitError, GitTree, changed_files


@dataclass(frozen=True)
class SetChange:
    """A policy set the revision changes, the owners (as of the base) who must approve, and
    what changed, in words."""

    policy_set: str
    owners: list[str]
    what: str


def set_changes(
    root: str, config: FleetConfig, checkout: Path, base: str | None
) -> list[SetChange]:
    """The policy sets that apply to `root` (at the base or at the checkout's revision) and
    that the checkout's revision changes against revision `base`; None: the root was never
    published, and the sets are compared with the deployed commit's first parent (what the
    commit itself changes). A base the repository does not have, or whose rollwright.yaml
    cannot be read, leaves nothing known: every set that applies counts as changed (the safe
    side)."""
    against = base if base is not None else "HEAD^"
    try:
        changed = changed_files(checkout, against, "HEAD")
        before = FleetConfig.load(GitTree(checkout, against)) if CONFIG_FILE in changed else config
    except (GitError, FleetError):
        where = (
            f"the compared revision {base[:12]}"
            if base is not None
            else "the deployed commit's parent (the root's first deployment)"
        )
        unknown = f"its state at {where} cannot be read"
        return [SetChange(s.name, list(s.owners), unknown) for s in sets_for(config, root)]
    return compare(root, before, config, changed)


def compare(
    root: str, before: FleetConfig, after: FleetConfig, changed: set[str]
) -> list[SetChange]:
    """The sets of `before` that apply to `root` on either side and that `after` removes, or
    whose entry or folder files (`changed`: paths that differ) it changes. A set only `after`
    has adds checks and takes none away."""
    now = {s.name: s for s in after.policies}
    found = []
    for old in before.policies:
        new = now.get(old.name)
        if not (old.applies_to(root) or (new is not None and new.applies_to(root))):
            continue
        what = []
        if new is None:
            what.append("it is removed from rollwright.yaml")
        elif new.model_dump() != old.model_dump():
            what.append("its rollwright.yaml entry changed")
        folders = sorted({s.path for s in (old, new) if s is not None and s.path is not None})
        for folder in folders:
            if any(p.startswith(folder + "/") for p in changed):
                what.append(f"files in {folder}/ changed")
        if what:
            found.append(SetChange(old.name, list(old.owners), "; ".join(what)))
    return found
