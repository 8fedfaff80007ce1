"""Promotion of version patches through the dimensions layout's sequence, as git changes.

Git is the source of truth (docs/promotion.md): a patch file in `config/<type>/<app>/patches/`
is staged; a copy in `config/<type>/<app>/<node>/patches/` makes it active on every root under
that node. This module reads that state from a `Tree` (a checkout or a git revision) and plans
the next change as a `FileChange`: `rollwright promote` commits it on a checkout, the
PromotionWorkflow's activities through the GitHub API.

The model, in terms of the sequence of config/config.yaml:

- The sequence's **places** (env, sector, region) in promotion order are the leaves; a copy at
  a node covers that node's places, which are contiguous in the order.
- A **step** moves a patch onto one more node. The default step is the first uncovered place
  at the granularity of `rollout.step` (`region` by default: region by region; `sector` or
  `environment` for coarser steps); `--to` may name any node whose places start right after
  the covered ones. Anything else skips places: a **gap**, refused unless forced.
- A step's **gate** is `manual` when any node it enters (whose first place it covers, not
  covered before) says `promotion: manual`; its **soak** is the longest soak among the nodes
  it completes (whose last place it covers), `rollout.soak` for nodes without their own.
- A patch is ready to **graduate** when every place is covered, i.e. it is active on every
  root of its cluster type (the rule of the layout's graduation validation).

What a step would meet at its roots (dependencies, overlaps, overridden pins) is
`shared.promotion.checks`, on the fleet as the step would leave it (`shared.promotion.overlay`);
graduation's edits of values files are `shared.promotion.folding`.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from shared.engine import yamldoc
from shared.engine.config.durations import duration_seconds
from shared.engine.config.fleet import CONFIG_FILE, FleetConfig
from shared.engine.config.rollout import RolloutSettings
from shared.engine.config.windows import window_state
from shared.engine.dimensions import models
from shared.engine.dimensions.layout import DimensionsLayout
from shared.engine.dimensions.models import VALUES_FILE, Section
from shared.engine.errors import FleetError
from shared.engine.fleet import detect_layout
from shared.engine.tree import GitTree, Tree, join
from shared.engine.values import deep_merge
from shared.promotion.checks import listed, overlaps, overridden_pins, unmet_dependencies
from shared.promotion.folding import (
    app_defaults,
    application_values,
    dump_values_file,
    fold,
    load_values_file,
)
from shared.promotion.overlay import Overlay

Gate = Literal["automated", "manual"]
TRAILER_PATCH = "Rollwright-Patch"
TRAILER_NODE = "Rollwright-Node"
TRAILER_BY = "Rollwright-Promoted-By"
TRAILER_FORCED = "Rollwright-Forced"
TRAILER_GRADUATION = "Rollwright-Graduation"


class PatchNotFound(FleetError):
    """No patch file (staged or copy) has this id at the revision read."""

    def __init__(self, patch_id: str, known: Iterable[str]) -> None:
        self.patch_id = patch_id
        names = ", ".join(sorted(known)) or "none"
        super().__init__(f"no patch with id {patch_id!r} in this fleet (patches: {names})")


class PromotionError(Exception):
    """A promotion refused: a gap, unmet dependencies, a conflict, a closed window, nothing
    left to promote. The message says why and what would make it possible."""


@dataclass(frozen=True)
class Node:
    """A node of the sequence as a promotion step.

    `path`: "integration", "integration/int-sector-1", "integration/int-sector-1/us-central1".
    `gate`: how the patch enters it (manual when any node it enters is manual).
    `soak_seconds`: how long the patch stays healthy on it before moving on (the longest soak
    of the nodes it completes).
    """

    path: str
    gate: Gate
    soak_seconds: int

    @property
    def depth(self) -> int:
        return self.path.count("/") + 1


@dataclass(frozen=True)
class PatchRollout:
    """Where one patch stands (`rollwright rollout status`, the workflow's evaluation)."""

    patch_id: str
    cluster_type: str
    app: str
    staged_path: str | None  # None when only copies are left
    active_nodes: list[str]  # nodes holding a copy, in sequence order
    next_node: Node | None  # None: graduation is due
    unmet_dependencies: list[str]  # at the next node, on its merged values
    graduated_ready: bool  # active on every root of its cluster type
    conflicts: list[str]  # overlaps with other patches (now, or at the next node)
    current_node: Node | None = None  # the furthest node holding a copy
    description: str = ""
    copies: list[str] = field(default_factory=list)  # copy files, in sequence order
    skipped_nodes: list[str] = field(default_factory=list)  # gaps left by forced steps
    # "<node>: <values file>:<line>: …" for each pin the patch overrides from that
    # node (shared.engine.dimensions.shadows); at the next node, what promoting would override
    shadowed_pins: list[str] = field(default_factory=list)
    next_shadowed_pins: list[str] = field(default_factory=list)
    # Active nodes where the patch is not applied (an unmet dependency): their roots refuse
    # to render until it is met, like a blocked stage. One entry per node and reason.
    blocked: list[Blocked] = field(default_factory=list)


@dataclass(frozen=True)
class Blocked:
    """An active node whose roots the patch cannot be applied to, and why."""

    node: str
    reason: str  # "dependency /x >=v1 is not met at <roots> (found 'v0')"


@dataclass(frozen=True)
class FileChange:
    """One commit's content: files to write, files to delete, and the commit message (its
    first line is the title of a commit or pull request)."""

    writes: dict[str, bytes]
    deletes: list[str]
    message: str

    @property
    def title(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def paths(self) -> list[str]:
        return sorted({*self.writes, *self.deletes})


# --- reading the fleet ---------------------------------------------------------------------


@dataclass(frozen=True)
class _SeqNode:
    path: str
    gate: Gate
    soak_seconds: int
    lo: int  # first place index
    hi: int  # one past the last place index


@dataclass(frozen=True)
class _Found:
    """A patch's files: (cluster type, application or ApplicationSet), the staged file,
    copies by node."""

    patch_id: str
    ctype: str
    app: str
    section: Section
    staged: str | None
    copies: dict[str, str]  # node path → file


class _Fleet:
    """The dimensions layout of a tree, with the sequence as place ranges."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.config: FleetConfig = FleetConfig.load(tree)
        if detect_layout(tree, self.config) != "dimensions":
            raise FleetError(
                "promotion needs the dimensions layout (config/config.yaml); this fleet uses "
                "another layout",
                path=CONFIG_FILE,
            )
        self.layout = DimensionsLayout(tree, self.config)
        if self.layout.reading.generator:
            # Promotion copies patches into <node>/patches/ (the design document's spelling);
            # in the generator's spelling that would be a file of the other spelling.
            raise FleetError(
                "promotion writes the design document's spelling (patch copies in "
                "<node>/patches/); this repository is written in the generator's spelling "
                "(patch-NNN.yaml beside a node's override.yaml), which rollwright reads and "
                "renders but does not promote",
                path=CONFIG_FILE,
            )
        self.settings: RolloutSettings = self.config.rollout
        default_soak = self.settings.soak_seconds
        self.places = list(self.layout.places)
        index = {p: i for i, p in enumerate(self.places)}
        self.nodes: list[_SeqNode] = []
        for n in self.layout.sequence_nodes():
            covered = [i for p, i in index.items() if p[: len(n.path)] == n.path]
            soak = duration_seconds(n.soak) if n.soak else default_soak
            self.nodes.append(_SeqNode(n.id, n.promotion, soak, min(covered), max(covered) + 1))
        self.by_path = {n.path: n for n in self.nodes}
        self.step_depth = self._step_depth(tree)
        self._found: dict[str, _Found] | None = None

    def _step_depth(self, tree: Tree) -> int:
        """The depth `rollout.step` names (a dimension, singular or as written); the finest
        by default."""
        step = self.settings.step
        sequence = self.layout.sequence
        if step is None:
            return sequence.depth
        depth = sequence.level_depth(step)
        if depth is None:
            names = ", ".join(d.key for d in sequence.dimensions)
            text = tree.read_text(CONFIG_FILE)
            raise FleetError(
                f"rollout.step {step!r} is not a dimension of {models.CONFIG_FILE} ({names})",
                path=CONFIG_FILE,
                line=yamldoc.key_line(text, ("rollout", "step")),
            )
        return depth

    # patches ------------------------------------------------------------------------------

    def found(self) -> dict[str, _Found]:
        if self._found is None:
            staged: dict[str, list[tuple[str, str, Section, str]]] = defaultdict(list)
            copies: dict[tuple[str, str, str, Section], dict[str, str]] = defaultdict(dict)
            for spec in self.layout.types.values():  # discovered components included
                for comp in spec.components():
                    app, section = comp.name, comp.section
                    for rel in self.layout.patch_paths(spec.name, app):
                        pid = self.layout.load_patch(rel).id
                        staged[pid].append((spec.name, app, section, rel))
                    for node in self.nodes:
                        for rel in self.layout.patch_paths(
                            spec.name, app, tuple(node.path.split("/"))
                        ):
                            pid = self.layout.load_patch(rel).id
                            copies[(pid, spec.name, app, section)].setdefault(node.path, rel)
            out: dict[str, _Found] = {}
            for pid, places in staged.items():
                if len(places) > 1:
                    raise FleetError(
                        f"patch id {pid!r} is staged more than once: "
                        + ", ".join(rel for *_, rel in places)
                        + " (ids are unique in the fleet)",
                        path=places[1][3],
                    )
                ctype, app, section, rel = places[0]
                by_node = copies.pop((pid, ctype, app, section), {})
                out[pid] = _Found(pid, ctype, app, section, rel, by_node)
            for (pid, ctype, app, section), by_node in sorted(copies.items()):
                if pid not in out:  # copies whose staged original is gone
                    out[pid] = _Found(pid, ctype, app, section, None, by_node)
            self._found = out
        return self._found

    def patch(self, patch_id: str) -> _Found:
        found = self.found().get(patch_id)
        if found is None:
            raise PatchNotFound(patch_id, self.found())
        return found

    def source(self, found: _Found) -> str:
        """The file every copy is made from: the staged one, else the first copy."""
        return found.staged or next(iter(found.copies.values()))

    def covered(self, found: _Found) -> set[int]:
        out: set[int] = set()
        for path in found.copies:
            n = self.by_path[path]
            out |= set(range(n.lo, n.hi))
        return out

    # nodes --------------------------------------------------------------------------------

    def node(self, path: str) -> _SeqNode:
        n = self.by_path.get(path.strip("/"))
        if n is None:
            raise PromotionError(
                f"unknown node {path!r}; nodes of the sequence in {models.CONFIG_FILE}: "
                + ", ".join(x.path for x in self.nodes)
            )
        return n

    def step(self, n: _SeqNode, covered: AbstractSet[int]) -> Node:
        """`n` as a step after `covered` places: its gate and its soak."""
        fresh = set(range(n.lo, n.hi)) - covered
        entered = [m for m in self.nodes if m.lo in fresh]
        completed = [m for m in self.nodes if n.lo < m.hi <= n.hi]
        gate: Gate = "manual" if any(m.gate == "manual" for m in entered) else "automated"
        return Node(n.path, gate, max((m.soak_seconds for m in completed), default=0))

    def roots(self, ctype: str, n: _SeqNode) -> list[str]:
        return sorted(f"{ctype}/{'/'.join(self.places[i])}" for i in range(n.lo, n.hi))

    def cover_nodes(self, leaves: Iterable[int]) -> list[str]:
        """The fewest nodes whose places are exactly `leaves` (largest first, in order)."""
        want = set(leaves)
        out = []
        for n in self.nodes:
            span = set(range(n.lo, n.hi))
            if span <= want:
                out.append(n.path)
                want -= span
        return out

    def next_node(self, covered: set[int]) -> _SeqNode | None:
        first = next((i for i in range(len(self.places)) if i not in covered), None)
        if first is None:
            return None
        fresh = [n for n in self.nodes if n.lo == first and not covered & set(range(n.lo, n.hi))]
        depth = max(self.step_depth, min(_depth(n) for n in fresh))
        return next(n for n in fresh if _depth(n) == depth)


# A git revision never changes, so its reading is kept while the GitTree lives (the workflow's
# activities ask about every root of a node); a checkout may change between calls.
_AT_REVISION: weakref.WeakKeyDictionary[GitTree, _Fleet] = weakref.WeakKeyDictionary()


def _fleet(tree: Tree) -> _Fleet:
    if not isinstance(tree, GitTree):
        return _Fleet(tree)
    fleet = _AT_REVISION.get(tree)
    if fleet is None:
        fleet = _Fleet(tree)
        _AT_REVISION[tree] = fleet
    return fleet


def _depth(n: _SeqNode) -> int:
    return n.path.count("/") + 1


def _copy_change(fleet: _Fleet, found: _Found, n: _SeqNode) -> dict[str, bytes]:
    source = fleet.source(found)
    name = source.rsplit("/", 1)[-1]
    target = join("config", found.ctype, found.app, n.path, "patches", name)
    return {target: fleet.tree.read_text(source).encode()}


def _simulate(fleet: _Fleet, found: _Found, n: _SeqNode) -> DimensionsLayout:
    """The layout with the patch copied to `n`."""
    overlay = Overlay(fleet.tree, _copy_change(fleet, found, n))
    return DimensionsLayout(overlay, fleet.config)


# --- the public API ------------------------------------------------------------------------


def rollout_plan(tree: Tree) -> list[Node]:
    """Every node of the sequence in promotion order (each environment, its sectors, each
    followed by its regions), as a step from nothing covered before it: its gate (manual
    when it or a node it enters says so) and soak (the longest of the nodes it completes)."""
    fleet = _fleet(tree)
    return [fleet.step(n, set(range(n.lo))) for n in fleet.nodes]


def rollout_status(tree: Tree, patch_id: str | None = None) -> list[PatchRollout]:
    """Where each patch (or the one `patch_id`) stands, sorted by id."""
    fleet = _fleet(tree)
    ids = [patch_id] if patch_id is not None else sorted(fleet.found())
    return [_status(fleet, fleet.patch(pid)) for pid in ids]


def _status(fleet: _Fleet, found: _Found) -> PatchRollout:
    covered = fleet.covered(found)
    order = sorted(found.copies, key=lambda p: (fleet.by_path[p].lo, _depth(fleet.by_path[p])))
    nxt = fleet.next_node(covered)
    furthest = max(covered, default=-1)
    skipped = fleet.cover_nodes(i for i in range(furthest) if i not in covered)
    active_roots = [f"{found.ctype}/{'/'.join(fleet.places[i])}" for i in sorted(covered)]
    conflicts = overlaps(fleet.layout, found.patch_id, active_roots)
    unmet: list[str] = []
    next_step: Node | None = None
    next_shadows: list[str] = []
    if nxt is not None:
        next_step = fleet.step(nxt, covered)
        simulated = _simulate(fleet, found, nxt)
        roots = fleet.roots(found.ctype, nxt)
        unmet = unmet_dependencies(simulated, found.patch_id, roots)
        conflicts += [c for c in overlaps(simulated, found.patch_id, roots) if c not in conflicts]
        next_shadows = overridden_pins(simulated, found.patch_id, roots)
    blocked = [
        Blocked(node, reason)
        for node in order
        for reason in unmet_dependencies(
            fleet.layout, found.patch_id, fleet.roots(found.ctype, fleet.by_path[node])
        )
    ]
    patch = fleet.layout.load_patch(fleet.source(found))
    return PatchRollout(
        patch_id=found.patch_id,
        cluster_type=found.ctype,
        app=found.app,
        staged_path=found.staged,
        active_nodes=order,
        next_node=next_step,
        unmet_dependencies=unmet,
        graduated_ready=len(covered) == len(fleet.places),
        conflicts=conflicts,
        current_node=_current(fleet, found),
        description=str(patch.content.get("metadata", {}).get("description") or ""),
        copies=[found.copies[p] for p in order],
        skipped_nodes=skipped,
        shadowed_pins=overridden_pins(fleet.layout, found.patch_id, active_roots),
        next_shadowed_pins=next_shadows,
        blocked=blocked,
    )


def _current(fleet: _Fleet, found: _Found) -> Node | None:
    if not found.copies:
        return None
    # The furthest copy: the one reaching furthest; of several, the one starting last
    # (the smallest, usually the latest step).
    path = max(found.copies, key=lambda p: (fleet.by_path[p].hi, fleet.by_path[p].lo))
    return fleet.step(fleet.by_path[path], set(range(fleet.by_path[path].lo)))


def current_node(tree: Tree, patch_id: str) -> Node | None:
    """The furthest node holding a copy of the patch (None: only staged)."""
    fleet = _fleet(tree)
    return _current(fleet, fleet.patch(patch_id))


def roots_under(tree: Tree, patch_id: str, node_path: str) -> list[str]:
    """Roots of the patch's cluster type under `node_path`, sorted."""
    fleet = _fleet(tree)
    return fleet.roots(fleet.patch(patch_id).ctype, fleet.node(node_path))


def patch_active_at_root(tree: Tree, patch_id: str, root: str) -> bool:
    """Whether this revision has the patch active at `root` (a copy at a node above it), so a
    deployment of the revision there "contains the patch". Unknown patch: False."""
    fleet = _fleet(tree)
    found = fleet.found().get(patch_id)
    ctype, _, place = root.partition("/")
    if found is None or ctype != found.ctype:
        return False
    return any(place == p or place.startswith(f"{p}/") for p in found.copies)


def check_dependencies(tree: Tree, patch_id: str, node_path: str) -> list[str]:
    """Unmet dependency messages of the patch were it active at `node_path`: evaluated at
    every root under the node on its merged values (values levels and the other patches
    active there, in dependency order). [] when all hold."""
    fleet = _fleet(tree)
    found = fleet.patch(patch_id)
    n = fleet.node(node_path)
    return unmet_dependencies(_simulate(fleet, found, n), patch_id, fleet.roots(found.ctype, n))


def plan_promotion(
    tree: Tree,
    patch_id: str,
    *,
    to: str | None = None,
    force: bool = False,
    actor: str | None = None,
    now: datetime | None = None,
) -> FileChange:
    """The commit that promotes the patch one step (or to the node `to`).

    Copies the staged file into `config/<type>/<app>/<node>/patches/` (same file name).
    Refused (PromotionError) when: the patch is active everywhere (graduate it); `to` is
    already covered; `to` would skip places before it (unless `force`, recorded in the message
    as "Forced: skips …"); its dependencies do not hold at every root under the node; it
    would overlap another patch there; or, when `now` is given, the node's promotion window is
    closed (unless `force`). The workflow checks windows itself and passes no `now`.
    """
    fleet = _fleet(tree)
    found = fleet.patch(patch_id)
    covered = fleet.covered(found)
    if len(covered) == len(fleet.places):
        raise PromotionError(
            f"patch {patch_id!r} is active on every node; nothing left to promote. Graduate "
            f"it: fold it into config/{found.ctype}/{found.app}/values.yaml "
            f"(`rollwright promote {patch_id} --graduate`)"
        )
    nxt = fleet.next_node(covered)
    assert nxt is not None  # some place is uncovered
    target = fleet.node(to) if to is not None else nxt
    fresh = set(range(target.lo, target.hi)) - covered
    if not fresh:
        raise PromotionError(
            f"patch {patch_id!r} is already active on every root under {target.path}; the "
            f"next node is {nxt.path}"
        )
    forced = _forced_gap(fleet, patch_id, target, nxt, covered, fresh, force=force)
    _check_at_target(fleet, found, target)
    step = fleet.step(target, covered)
    if now is not None:
        forced += _forced_window(fleet, target, now, force=force)
    return FileChange(
        _copy_change(fleet, found, target),
        [],
        _promotion_message(fleet, found, target, step, fresh, forced, actor),
    )


def _forced_gap(
    fleet: _Fleet,
    patch_id: str,
    target: _SeqNode,
    nxt: _SeqNode,
    covered: set[int],
    fresh: set[int],
    *,
    force: bool,
) -> list[str]:
    """The commit message's "Forced:" line for places the step skips ([] for none); refused
    unless `force`."""
    gap = [i for i in range(min(fresh)) if i not in covered]
    skipped = fleet.cover_nodes(gap)
    if not skipped:
        return []
    if not force:
        raise PromotionError(
            f"promoting {patch_id!r} to {target.path} would skip {', '.join(skipped)}; "
            f"the next node is {nxt.path} (--force skips, and the commit records it)"
        )
    return [f"Forced: skips {', '.join(skipped)}"]


def _check_at_target(fleet: _Fleet, found: _Found, target: _SeqNode) -> None:
    """Refuse a step whose dependencies are unmet, or that makes patches overlap, at a root
    under `target`."""
    patch_id = found.patch_id
    unmet = unmet_dependencies(
        _simulate(fleet, found, target), patch_id, fleet.roots(found.ctype, target)
    )
    if unmet:
        raise PromotionError(
            f"dependencies of patch {patch_id!r} are not met under {target.path}: "
            + "; ".join(unmet)
        )
    simulated = _simulate(fleet, found, target)
    conflicts = overlaps(simulated, patch_id, fleet.roots(found.ctype, target))
    if conflicts:
        raise PromotionError(
            f"promoting {patch_id!r} to {target.path} would make patches overlap: "
            + "; ".join(conflicts)
        )


def _forced_window(fleet: _Fleet, target: _SeqNode, now: datetime, *, force: bool) -> list[str]:
    """The "Forced:" line for a step outside the node's promotion window ([] when it is open);
    refused unless `force`."""
    window = window_state(fleet.settings, target.path, now)
    if window.open:
        return []
    if not force:
        raise PromotionError(
            f"the promotion window of {target.path} is {window.reason} (--force "
            "promotes anyway, and the commit records it)"
        )
    return [f"Forced: outside the promotion window ({window.reason})"]


def _promotion_message(
    fleet: _Fleet,
    found: _Found,
    target: _SeqNode,
    step: Node,
    fresh: set[int],
    forced: list[str],
    actor: str | None,
) -> str:
    """The commit message of a promotion, with its trailers."""
    patch_id = found.patch_id
    roots = fleet.roots(found.ctype, target)
    fresh_roots = [f"{found.ctype}/{'/'.join(fleet.places[i])}" for i in sorted(fresh)]
    lines = [
        f"promote {patch_id} to {target.path}",
        "",
        f"Patch {patch_id!r} ({found.ctype}/{found.app}) becomes active on "
        f"{len(fresh_roots)} more root(s): {listed(fresh_roots, 5)}.",
        f"Gate: {step.gate}. Soak before the next step: {duration_text(step.soak_seconds)}.",
        f"Dependencies: met at all {len(roots)} root(s) under {target.path}.",
        *forced,
        "",
        f"{TRAILER_PATCH}: {patch_id}",
        f"{TRAILER_NODE}: {target.path}",
    ]
    if forced:
        lines.append(f"{TRAILER_FORCED}: {'; '.join(f.removeprefix('Forced: ') for f in forced)}")
    if actor:
        lines.append(f"{TRAILER_BY}: {actor}")
    return "\n".join(lines) + "\n"


def duration_text(seconds: int) -> str:
    if seconds == 0:
        return "none"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


# --- graduation ----------------------------------------------------------------------------


def plan_graduation(tree: Tree, patch_id: str) -> FileChange:
    """The change that graduates a patch active on every root of its cluster type.

    The body is folded into `config/<type>/<app>/values.yaml` (lists with `merge_strategy:
    append` get the patch's items after the list in force there), and into any node
    `values.yaml` of the application that overrides a path the patch sets, so each root
    merges to what it had with the patch active. The staged file and every copy are deleted.
    Each root's merged values are compared before and after; differences (a dependency that
    was unmet somewhere, an encrypted override) are listed in the message for review.
    """
    fleet = _fleet(tree)
    found = fleet.patch(patch_id)
    covered = fleet.covered(found)
    if len(covered) != len(fleet.places):
        missing = fleet.cover_nodes(i for i in range(len(fleet.places)) if i not in covered)
        raise PromotionError(
            f"patch {patch_id!r} is not active on every node yet; it still needs "
            + ", ".join(missing)
        )
    patch = fleet.layout.load_patch(fleet.source(found))
    adir = join("config", found.ctype, found.app)
    section = found.section
    defaults = app_defaults(tree, found.ctype, section)
    writes: dict[str, bytes] = {}
    base_rel = join(adir, VALUES_FILE)
    base_text, base = load_values_file(tree, base_rel)
    base_values = application_values(base, section, found.app)
    under = {found.app: deep_merge(defaults, base_values)}
    base_app = fold(base_values, patch, found.app, lower=under, everywhere=True)
    writes[base_rel] = dump_values_file(base_text, base_rel, base, section, found.app, base_app)
    for n in fleet.nodes:
        rel = join(adir, n.path, VALUES_FILE)
        if not tree.is_file(rel):
            continue
        text, data = load_values_file(tree, rel)
        app_values = application_values(data, section, found.app)
        folded = fold(app_values, patch, found.app, lower={}, everywhere=False)
        if folded != app_values:
            writes[rel] = dump_values_file(text, rel, data, section, found.app, folded)
    deletes = sorted({*found.copies.values(), *([found.staged] if found.staged else [])})
    roots = sorted(f"{found.ctype}/{'/'.join(p)}" for p in fleet.places)
    after = DimensionsLayout(Overlay(tree, writes, deletes), fleet.config)
    changed = [
        root for root in roots if fleet.layout.state(root).values != after.state(root).values
    ]
    description = str(patch.content.get("metadata", {}).get("description") or "")
    lines = [
        f"graduate {patch_id}: fold it into {base_rel}",
        "",
        f"Patch {patch_id!r} is active on every root of cluster type {found.ctype!r}, so its "
        f"rollout is complete.{' ' + description if description else ''}",
        "",
        "Folded into: " + ", ".join(sorted(writes)),
        "Deleted: " + ", ".join(deletes),
    ]
    if changed:
        lines += [
            "",
            f"Review: the merged values change at {listed(changed, 5)} (the patch was not "
            "applied the same way there, e.g. a dependency was unmet or an encrypted file "
            "overrides a path it sets).",
        ]
    else:
        lines += ["", f"Every root of {found.ctype!r} merges to the same values as before."]
    lines += ["", f"{TRAILER_PATCH}: {patch_id}", f"{TRAILER_GRADUATION}: yes"]
    return FileChange(writes, deletes, "\n".join(lines) + "\n")
