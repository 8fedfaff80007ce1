"""A root's merged values: the values levels of each application and ApplicationSet, then the
active patches, and which of those values come from encrypted files.

For each component of a root `<type>/<n1>/…/<nk>`, lowest precedence first: the type's
defaults for its section, its base values, the values of each node on the way down
(`<n1>`, `<n1>/<n2>`, …), then the patches active at the root in dependency order. Patch bodies
and pointers are relative to the root's components by name (applications and ApplicationSets
of a type have distinct names), so a dependency can look at any of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from shared.engine import suggest, yamldoc
from shared.engine.dimensions import patches
from shared.engine.dimensions.files import FleetFiles
from shared.engine.dimensions.models import (
    CONFIG_FILE,
    PATCHES_DIR,
    SOPS_VALUES_FILE,
    ClusterTypeSpec,
    Component,
)
from shared.engine.dimensions.sequence import Place, Sequence
from shared.engine.dimensions.spelling import GENERATOR
from shared.engine.errors import FleetError
from shared.engine.secrets import origin
from shared.engine.secrets.redact import Redactor
from shared.engine.tree import join
from shared.engine.values import merge_all, parse_pointer

SECTIONS = ("applications", "applicationsets")
KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class RootState:
    """A root's merged values and what each active patch did there."""

    values: dict[str, Any]
    outcomes: tuple[patches.Outcome, ...]


def nodes_above(place: Place) -> Iterator[tuple[str, ...]]:
    """The nodes above (and at) a place, outermost first."""
    for depth in range(1, len(place) + 1):
        yield place[:depth]


def patch_node(rel: str) -> tuple[str, ...]:
    """The node of a patch file `config/<type>/<name>/<node…>/patches/<file>`, or in the
    generator's spelling `config/<type>/<name>/<node…>/patch-NNN.yaml` (() staged). No node
    is named `patches`, so the two cannot be confused."""
    parts = rel.split("/")
    return tuple(parts[3:-2] if parts[-2] == PATCHES_DIR and len(parts) > 4 else parts[3:-1])


def narrow(values: dict[str, Any], release: str) -> dict[str, Any]:
    """A root's values with only the component `release` (and `cluster`)."""
    out: dict[str, Any] = {"cluster": values["cluster"]}
    for section in SECTIONS:
        if release in values.get(section, {}):
            out[section] = {release: values[section][release]}
    return out


class Merger:
    """Merged values of the roots of one revision, computed once per root."""

    def __init__(
        self, files: FleetFiles, sequence: Sequence, types: dict[str, ClusterTypeSpec]
    ) -> None:
        self.files = files
        self.sequence = sequence
        self.types = types
        self.roots = sorted(f"{t}/{'/'.join(p)}" for t in types for p in sequence.places)
        self._root_set = set(self.roots)
        self._states: dict[str, RootState] = {}
        self._fake_states: dict[str, RootState | None] = {}

    def split(self, root: str) -> tuple[str, Place]:
        if root not in self._root_set:
            hint = suggest.hint(root, self._root_set)
            raise FleetError(f"unknown root {root!r}{hint}; `rollwright roots` lists them")
        ctype, _, rest = root.partition("/")
        return ctype, tuple(rest.split("/"))

    def components(self, ctype: str) -> list[Component]:
        return self.types[ctype].components()

    def component(self, ctype: str, name: str) -> Component:
        spec = self.types.get(ctype)
        for comp in spec.components() if spec is not None else []:
            if comp.name == name:
                return comp
        raise FleetError(f"{name!r} is not an application or ApplicationSet of {ctype!r}")

    def roots_under(self, ctype: str, node: tuple[str, ...]) -> set[str]:
        return {f"{ctype}/{'/'.join(p)}" for p in self.sequence.places_under(node)}

    # --- merging ---------------------------------------------------------------------------

    def state(self, root: str) -> RootState:
        """Merged values of `root` and the outcome of each of its active patches."""
        state = self._states.get(root)
        if state is None:
            self.files.prefetch()
            state = self._compute(root, taint=False)
            self._states[root] = state
        return state

    def taint_state(self, root: str) -> RootState | None:
        """The state with every decrypted leaf perturbed; None when that merge fails (a
        dependency on a secret, say)."""
        if root not in self._fake_states:
            try:
                self._fake_states[root] = self._compute(root, taint=True)
            except FleetError:
                self._fake_states[root] = None
        return self._fake_states[root]

    @property
    def interleaved(self) -> bool:
        """True in the generator's spelling: a node's patches apply right after its values
        (override.yaml), before the next node's; else after every values level."""
        return self.files.spelling == GENERATOR

    def _compute(self, root: str, *, taint: bool) -> RootState:
        ctype, place = self.split(root)
        if self.interleaved:
            merged, outcomes = self._interleaved(ctype, place, taint)
        else:
            merged = {}
            for comp in self.components(ctype):
                self.require_dir(comp)
                layers = [
                    self.files.defaults(ctype, comp.section),
                    self.files.level(comp, (), taint),
                ]
                layers += [self.files.level(comp, node, taint) for node in nodes_above(place)]
                merged[comp.name] = merge_all(layers)
            active = patches.order(self.active_patches(ctype, place))
            merged, outcomes = patches.apply_all(merged, active)
        cluster = self.sequence.cluster(ctype, place)
        if self.interleaved:  # the generator puts the dimensions alone under `cluster`
            del cluster["type"]
        values: dict[str, Any] = {"cluster": cluster}
        spec = self.types[ctype]
        values["applications"] = {name: merged[name] for name in spec.applications}
        if spec.applicationsets:  # absent otherwise: fleets without them keep their output
            values["applicationsets"] = {name: merged[name] for name in spec.applicationsets}
        return RootState(values, tuple(outcomes))

    def _interleaved(
        self, ctype: str, place: Place, taint: bool
    ) -> tuple[dict[str, Any], list[patches.Outcome]]:
        """The generator's merge (hack/generate.py): for each component, its defaults, its
        values.yaml, then node by node from the top the node's override.yaml and then the
        node's patch-NNN.yaml files by name. A patch has no dependencies there, so each one
        applies."""
        merged: dict[str, Any] = {}
        outcomes: list[patches.Outcome] = []
        for comp in self.components(ctype):
            self.require_dir(comp)
            fields = merge_all(
                [self.files.defaults(ctype, comp.section), self.files.level(comp, (), taint)]
            )
            for node in nodes_above(place):
                fields = merge_all([fields, self.files.level(comp, node, taint)])
                for rel in self.files.patch_files(join(comp.dir, *node)):
                    patch = self.files.patch(rel, comp)
                    fields = patch.apply({comp.name: fields})[comp.name]
                    outcomes.append(patches.Outcome(patch, ()))
            merged[comp.name] = fields
        return merged, outcomes

    def active_patches(self, ctype: str, place: Place) -> list[patches.Patch]:
        """Patches active at a root: file-name order; one copy per id (the deepest wins). In
        the generator's spelling: every patch file of the nodes above the root, in the order
        they apply."""
        if self.interleaved:
            return [
                self.files.patch(rel, comp)
                for comp in self.components(ctype)
                for node in nodes_above(place)
                for rel in self.files.patch_files(join(comp.dir, *node))
            ]
        entries = []
        for index, comp in enumerate(self.components(ctype)):
            for depth, node in enumerate(nodes_above(place)):
                for rel in self.files.patch_files(join(comp.dir, *node)):
                    entries.append((rel.rsplit("/", 1)[-1], index, depth, rel, comp))
        by_id: dict[str, tuple[int, patches.Patch]] = {}
        for _name, _index, depth, rel, comp in sorted(entries, key=lambda e: e[:4]):
            patch = self.files.patch(rel, comp)
            seen = by_id.get(patch.id)
            if seen is None or depth >= seen[0]:
                by_id[patch.id] = (depth, patch)
        return [p for _, p in by_id.values()]

    def require_dir(self, comp: Component) -> None:
        if not self.files.tree.is_dir(comp.dir):
            raise FleetError(
                f"{comp.kind} {comp.name!r} of cluster type {comp.ctype!r} has no directory "
                f"{comp.dir}/",
                path=CONFIG_FILE,
                line=self.listed_line(comp),
            )

    def listed_line(self, comp: Component) -> int | None:
        """The line of config.yaml that lists the component."""
        names = [t.name for t in self.types.values()]
        spec = self.types[comp.ctype]
        index = getattr(spec, comp.section).index(comp.name)
        text = self.files.read(CONFIG_FILE)[0]
        keys = ("cluster_types", names.index(comp.ctype), comp.section, index)
        return yamldoc.key_line(text, keys)

    # --- secrets ---------------------------------------------------------------------------

    def has_secrets(self, root: str) -> bool:
        """True when any values level of the root's components is encrypted."""
        ctype, place = self.split(root)
        return any(
            self.files.tree.is_file(join(comp.dir, *node, SOPS_VALUES_FILE))
            for comp in self.components(ctype)
            for node in [(), *nodes_above(place)]
        )

    def secret_paths(self, root: str, release: str | None) -> set[KeyPath]:
        """Leaf paths of the root's values that hold or derive from a secret: those that
        change when every decrypted leaf is perturbed (patches included)."""
        if not self.has_secrets(root):
            return set()
        values = self.state(root).values
        fake = self.taint_state(root)
        if fake is not None:
            paths = set(origin.changed_paths(values, fake.values))
        else:
            # The perturbed merge failed (a patch dependency on a secret, say): by value.
            redactor = Redactor(self.files.decrypted())
            paths = {
                path
                for path, leaf in yamldoc.walk_leaves(values)
                if isinstance(leaf, str) and redactor.redact_text(leaf) != leaf
            }
        if release is not None:
            paths = {p for p in paths if p[:2] in _release_keys(release) or p[0] not in SECTIONS}
        return paths

    def encrypted_paths(self, root: str) -> set[KeyPath]:
        """Every leaf path (section, name, …) an encrypted values file of the root sets,
        whatever its type. `secret_paths` keeps booleans and short numbers (a perturbation
        cannot track them); a message quoting a value looked up by path hides these too."""
        ctype, place = self.split(root)
        paths: set[KeyPath] = set()
        for comp in self.components(ctype):
            for node in [(), *nodes_above(place)]:
                for rel in self.files.level_files(comp, node):
                    if rel.endswith(SOPS_VALUES_FILE):
                        data = self.files.values_file(rel, comp)
                        prefix = (comp.section, comp.name)
                        paths |= {p for p, _ in yamldoc.walk_leaves(data, prefix)}
        return paths


def touches_secret(paths: set[KeyPath], pointer: str) -> bool:
    """True when the component pointer (`/<name>/…`, as patches write them) is, is inside or
    holds one of the secret `paths` (section, name, …) of a root's values."""
    tokens = parse_pointer(pointer)
    for path in paths:
        rest = path[1:]
        n = min(len(rest), len(tokens))
        if tuple(rest[:n]) == tuple(tokens[:n]):
            return True
    return False


def _release_keys(release: str) -> set[KeyPath]:
    return {(section, release) for section in SECTIONS}
