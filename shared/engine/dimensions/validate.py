"""Validation of the dimensions layout: every problem, classified and scoped.

Each problem is *content* (a render would drop, ignore or change something the fleet asked
for: renders of the roots it touches refuse with it) or *hygiene* (a warning; no render
changes). docs/formats/problems.md is the table. A `Finding` carries the roots a content
problem touches, so `refusals(root)` fails exactly the renders it must:

- structure (computed once per revision): names of directories and files, every file against
  its model, patch files, ids and copies, graduation;
- per root: unmet patch dependencies and overlapping patches (content), shadowed pins
  (hygiene), grouped over roots into one message each as `validate` prints them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from shared.engine import yamldoc
from shared.engine.config.parsing import parse_model
from shared.engine.dimensions import patches
from shared.engine.dimensions.files import is_yaml
from shared.engine.dimensions.merge import Merger, patch_node, touches_secret
from shared.engine.dimensions.models import (
    CONFIG_FILE,
    DEFAULTS_FILES,
    METADATA_FILE,
    OWNERS_FILE,
    PATCHES_DIR,
    SOPS_VALUES_FILE,
    AppMetadata,
    Component,
    Owners,
)
from shared.engine.dimensions.shadows import shadowed_pins
from shared.engine.dimensions.spelling import Reading, is_author_patch
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.tree import join

EVERY_ROOT = None


@dataclass(frozen=True)
class Finding:
    problem: Problem
    roots: frozenset[str] | None  # the roots a content problem touches; None: every root


def _problems_of(err: FleetError) -> list[Problem]:
    return list(err.problems) if isinstance(err, FleetErrors) else [err.problem]


class Validator:
    """The findings of one revision."""

    def __init__(
        self, merger: Merger, reading: Reading, discovered: dict[str, list[Problem]]
    ) -> None:
        """`reading`: the repository's spelling and the files of the other one;
        `discovered`: per cluster type that lists no components, the problems of its
        directories that are none (`discovery`)."""
        self.merger = merger
        self.reading = reading
        self.conflicting = reading.conflicting()
        self.discovered = discovered
        self.files = merger.files
        self.tree = merger.files.tree
        self.sequence = merger.sequence
        self._structure: list[Finding] | None = None
        # Encrypted values files and the roots under them: decrypted only for `validate` and
        # for the renders they touch (each sops run takes a while).
        self._encrypted: list[tuple[str, Component, frozenset[str]]] = []

    # --- what the layout asks ------------------------------------------------------------

    def problems(self) -> list[Problem]:
        """Every problem of the fleet (content and hygiene), as `validate` prints them."""
        found = [f.problem for f in self.structure() + self._decrypted(None)]
        found += self._grouped(self.merger.roots)
        return sorted(set(found))

    def refusals(self, root: str) -> list[Problem]:
        """The content problems that touch `root`: its render must refuse with them."""
        out = [
            f.problem
            for f in self.structure() + self._decrypted(root)
            if not f.problem.hygiene and (f.roots is None or root in f.roots)
        ]
        if out:
            return sorted(set(out))
        try:
            mine = [bare for bare in self._by_root([root]) if not bare.hygiene]
        except FleetError:
            return []  # the render raises the same error itself
        if not mine:
            return []
        # `validate` lists every root a problem holds at: gather the roots under the nodes of
        # the patch files involved, so the message is the one `validate` prints.
        ctype, _ = self.merger.split(root)
        nearby: set[str] = set()
        for bare in mine:
            nearby |= self.merger.roots_under(ctype, patch_node(bare.path))
        table = self._by_root(sorted(nearby), skip_broken=True)
        return sorted(_with_roots(bare, table[bare]) for bare in mine if bare in table)

    # --- structure -------------------------------------------------------------------------

    def structure(self) -> list[Finding]:
        if self._structure is None:
            self.files.prefetch()
            findings: list[Finding] = []
            self._tree(findings)
            staged, copies = self._patch_files(findings)
            self._patch_ids(findings, staged, copies)
            self._graduation(findings, staged, copies)
            self._structure = findings
        return self._structure

    def _decrypted(self, root: str | None) -> list[Finding]:
        """Problems of the encrypted values files over `root` (None: all of them)."""
        self.structure()  # lists them
        findings: list[Finding] = []
        for rel, comp, roots in self._encrypted:
            if root is None or root in roots:
                self._collect(findings, roots, partial(self.files.values_file, rel, comp))
        return findings

    def _under(self, ctype: str, node: tuple[str, ...] = ()) -> frozenset[str]:
        return frozenset(self.merger.roots_under(ctype, node))

    def _collect(
        self, findings: list[Finding], roots: frozenset[str] | None, check: Callable[[], Any]
    ) -> None:
        try:
            check()
        except FleetError as err:
            findings += [Finding(p, roots) for p in _problems_of(err)]

    def _tree(self, findings: list[Finding]) -> None:
        types = self.merger.types
        for conflict in self.reading.conflicts:
            marker = conflict.marker
            roots = self._under(marker.ctype, marker.node)
            findings.append(Finding(Problem(marker.path, None, conflict.message()), roots))
        for ctype, problems in self.discovered.items():
            findings += [Finding(p, self._under(ctype)) for p in problems]
        defaults_names = self.files.defaults_names()
        for entry in self.tree.listdir("config"):
            rel = join("config", entry)
            if self.tree.is_dir(rel) and entry not in types:
                message = (
                    f"directory {entry!r} is not a cluster type listed in {CONFIG_FILE} "
                    "cluster_types"
                )
                findings.append(Finding(Problem(rel, None, message), EVERY_ROOT))
            elif is_yaml(entry) and rel != CONFIG_FILE and self.tree.is_file(rel):
                # The design document's tree shows a config/application-defaults.yaml.
                message = (
                    f"unexpected file (only {CONFIG_FILE} is read here; defaults are per "
                    f"cluster type: config/<type>/{defaults_names[0]})"
                )
                findings.append(Finding(Problem(rel, None, message), EVERY_ROOT))
        for ti, spec in enumerate(types.values()):
            roots = self._under(spec.name)
            names = {c.name for c in spec.components()}
            tdir = join("config", spec.name)
            for entry in self.tree.listdir(tdir):
                rel = join(tdir, entry)
                if rel in self.conflicting:
                    continue  # a file of the other spelling: said above
                if self.tree.is_dir(rel):
                    # In a type that lists none, a directory that is no component is a
                    # problem of its own (`discovery`).
                    if entry not in names and spec.name not in self.discovered:
                        message = (
                            f"application directory {entry!r} is not listed in {CONFIG_FILE} "
                            f"cluster_types[{ti}].applications or .applicationsets"
                        )
                        findings.append(Finding(Problem(rel, None, message), roots))
                elif is_yaml(entry) and entry not in defaults_names:
                    only = " and ".join(defaults_names)
                    verb = "are" if len(defaults_names) > 1 else "is"
                    message = f"unexpected file (only {only} {verb} read here)"
                    findings.append(Finding(Problem(rel, None, message), roots))
            for section in DEFAULTS_FILES:
                self._collect(findings, roots, partial(self.files.defaults, spec.name, section))
            for comp in spec.components():
                if not self.tree.is_dir(comp.dir):
                    self._collect(findings, roots, partial(self.merger.require_dir, comp))
                    continue
                self._component(findings, comp)

    def _component(self, findings: list[Finding], comp: Component) -> None:
        meta_rel = join(comp.dir, METADATA_FILE)
        if not self.tree.is_file(meta_rel):
            message = f"missing: every {comp.kind} needs {METADATA_FILE}"
            findings.append(Finding(Problem(meta_rel, None, message, hygiene=True), None))
        else:
            findings += _hygiene(partial(self._metadata, meta_rel, comp.name))
        owners_rel = join(comp.dir, OWNERS_FILE)
        if self.tree.is_file(owners_rel):

            def owners() -> None:
                text, data = self.files.mapping(owners_rel)
                parse_model(Owners, data, text=text, source=owners_rel)

            findings += _hygiene(owners)
        self._node_dir(findings, comp, ())

    def _metadata(self, rel: str, name: str) -> None:
        text, data = self.files.mapping(rel)
        meta = parse_model(AppMetadata, data, text=text, source=rel)
        if meta.name != name:
            raise FleetError(
                f"name {meta.name!r} does not match the directory {name!r}",
                path=rel,
                line=yamldoc.key_line(text, ("name",)),
            )

    def _node_dir(self, findings: list[Finding], comp: Component, node: tuple[str, ...]) -> None:
        directory = join(comp.dir, *node)
        children = self.sequence.children(node)
        roots = self._under(comp.ctype, node)
        leaf = len(node) == self.sequence.depth
        child = None if leaf else self.sequence.dimension(len(node) + 1)
        names = self.files.level_names(node)
        generator = self.reading.generator
        for entry in self.tree.listdir(directory):
            rel = join(directory, entry)
            if rel in self.conflicting:
                continue  # a file of the other spelling: a problem of its own
            if self.tree.is_dir(rel):
                if entry == PATCHES_DIR:
                    continue  # patch files are checked with the other patches
                if entry in children:
                    self._node_dir(findings, comp, (*node, entry))
                    continue
                if child is not None:
                    where = "/".join(node) or "the sequence"
                    message = f"directory {entry!r} is not {child.a} of {where} in {CONFIG_FILE}"
                else:
                    message = f"unexpected directory below {self.sequence.dimension(len(node)).a}"
                findings.append(Finding(Problem(rel, None, message), roots))
            elif entry == SOPS_VALUES_FILE and entry in names:
                self._encrypted.append((rel, comp, roots))
            elif entry in names:
                self._collect(findings, roots, partial(self.files.values_file, rel, comp))
            elif generator and is_author_patch(entry):
                continue  # checked with the other patches
            elif is_yaml(entry) and not (not node and entry == METADATA_FILE):
                patch_files = "patch-NNN.yaml" if generator else f"{PATCHES_DIR}/"
                expected = ", ".join((*reversed(names), patch_files))  # plain file first
                expected += f" or {child.a} directory" if child is not None else ""
                message = f"unexpected file (expected {expected})"
                findings.append(Finding(Problem(rel, None, message), roots))

    # --- patches ---------------------------------------------------------------------------

    def _patch_files(
        self, findings: list[Finding]
    ) -> tuple[list[patches.Patch], dict[tuple[str, tuple[str, ...]], list[patches.Patch]]]:
        """Load every staged patch and every active copy (by type and node)."""
        staged: list[patches.Patch] = []
        copies: dict[tuple[str, tuple[str, ...]], list[patches.Patch]] = defaultdict(list)
        nodes = [n.path for n in self.sequence.nodes]
        for spec in self.merger.types.values():
            for comp in spec.components():
                if not self.tree.is_dir(comp.dir):
                    continue
                for node in [(), *nodes]:
                    for rel in self.files.patch_files(join(comp.dir, *node)):
                        try:
                            patch = self.files.patch(rel, comp)
                        except FleetError as err:
                            roots = self._under(spec.name, node)
                            findings += [Finding(p, roots) for p in _problems_of(err)]
                            continue
                        if node:
                            copies[(spec.name, node)].append(patch)
                        else:
                            staged.append(patch)
        return staged, copies

    def _patch_ids(
        self,
        findings: list[Finding],
        staged: list[patches.Patch],
        copies: dict[tuple[str, tuple[str, ...]], list[patches.Patch]],
    ) -> None:
        first: dict[str, patches.Patch] = {}
        for patch in staged:
            other = first.setdefault(patch.id, patch)
            if other is not patch:
                message = (
                    f"duplicate patch id {patch.id!r}: {other.path} has it too (ids are unique "
                    "in the fleet)"
                )
                line = patch.line(("metadata", "id"))
                findings.append(Finding(Problem(patch.path, line, message), self._type_of(patch)))
        for (ctype, node), group in sorted(copies.items()):
            roots = self._under(ctype, node)
            seen: dict[str, patches.Patch] = {}
            for patch in group:
                line = patch.line(("metadata", "id"))
                other = seen.setdefault(patch.id, patch)
                if other is not patch:
                    message = (
                        f"duplicate patch id {patch.id!r} at node {'/'.join(node)}: "
                        f"{other.path} has it too"
                    )
                    findings.append(Finding(Problem(patch.path, line, message), roots))
                original = first.get(patch.id)
                if original is not None and original.content != patch.content:
                    message = (
                        f"active copy of patch {patch.id!r} differs from the staged "
                        f"{original.path}; copies must be identical to it"
                    )
                    findings.append(Finding(Problem(patch.path, line, message), roots))

    def _type_of(self, patch: patches.Patch) -> frozenset[str]:
        return self._under(patch.path.split("/")[1])

    def _graduation(
        self,
        findings: list[Finding],
        staged: list[patches.Patch],
        copies: dict[tuple[str, tuple[str, ...]], list[patches.Patch]],
    ) -> None:
        covered: dict[tuple[str, str], set[str]] = defaultdict(set)
        where: dict[tuple[str, str], list[patches.Patch]] = defaultdict(list)
        for (ctype, node), group in copies.items():
            for patch in group:
                covered[(ctype, patch.id)] |= self.merger.roots_under(ctype, node)
                where[(ctype, patch.id)].append(patch)
        staged_by_id = {p.id: p for p in staged}
        for (ctype, pid), roots in sorted(covered.items()):
            if roots != self.merger.roots_under(ctype, ()):
                continue
            original = staged_by_id.get(pid)
            anchor = original or min(where[(ctype, pid)], key=lambda p: p.path)
            names = ", ".join(sorted(p.path for p in where[(ctype, pid)]))
            message = (
                f"patch {pid!r} is active on every root of cluster type {ctype!r} and must "
                f"graduate: fold it into values.yaml and delete its copies ({names})"
            )
            line = anchor.line(("metadata", "id"))
            findings.append(Finding(Problem(anchor.path, line, message, hygiene=True), None))

    # --- per root --------------------------------------------------------------------------

    def _grouped(self, roots: Iterable[str]) -> list[Problem]:
        """Per-root problems of `roots`, one per (file, line, message) with its roots."""
        table = self._by_root(roots, skip_broken=True)
        return [_with_roots(bare, where) for bare, where in table.items()]

    def _by_root(
        self, roots: Iterable[str], *, skip_broken: bool = False
    ) -> dict[Problem, list[str]]:
        """Per-root problems (messages waiting for their roots) → the roots each holds at."""
        table: dict[Problem, list[str]] = defaultdict(list)
        for root in roots:
            try:
                found = list(self._at(root))
            except FleetError:
                if skip_broken:
                    continue  # its file problems are reported by the structure checks
                raise
            for bare in found:
                table[bare].append(root)
        return table

    def _at(self, root: str) -> Iterable[Problem]:
        """Per-root problems at one root, each message waiting for its list of roots."""
        state = self.merger.state(root)
        secret: set[tuple[str | int, ...]] | None = None
        for outcome in state.outcomes:
            p = outcome.patch
            for dep, found in outcome.unmet:
                if secret is None:
                    secret = self.merger.secret_paths(root, None) | self.merger.encrypted_paths(
                        root
                    )
                if touches_secret(secret, dep.pointer):
                    # The found value would be printed: it comes from a secret.
                    found = "found a value that comes from an encrypted file (not shown)"
                yield Problem(
                    p.path,
                    p.line(dep.keys),
                    f"dependency {dep.describe()} of patch {p.id!r} is not met ({found}), so "
                    "the patch is not applied at",
                )
        active = [o.patch for o in state.outcomes]
        for i, a in enumerate(active):
            for b in active[i + 1 :]:
                if a.id == b.id:
                    continue  # copies of one patch at two nodes (the generator's spelling)
                for pointer in patches.overlap(a, b):
                    yield Problem(
                        a.path,
                        a.body_line(pointer),
                        f"patches {a.id!r} and {b.id!r} ({b.path}:{b.body_line(pointer)}) both set "
                        f"{pointer}; overlapping patches are active at",
                    )
        for shadow in shadowed_pins(self.merger, root):
            yield Problem(shadow.values_path, shadow.values_line, shadow.message(), hygiene=True)


def _hygiene(check: Callable[[], Any]) -> list[Finding]:
    try:
        check()
    except FleetError as err:
        return [Finding(replace(p, hygiene=True), None) for p in _problems_of(err)]
    return []


def _with_roots(bare: Problem, roots: list[str]) -> Problem:
    return bare.with_message(f"{bare.message} {_list_roots(roots)}")


def _list_roots(roots: list[str]) -> str:
    shown = ", ".join(sorted(roots)[:3])
    more = len(roots) - 3
    return shown + (f" and {more} more" if more > 0 else "")
