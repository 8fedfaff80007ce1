"""Which spelling a dimensions repository is written in: the design document's, or the
generator's (the document's author's own repository, whose generator reads other file names).

The two spellings share `config/config.yaml`, the directories of the cluster types, their
components and nodes, and each component's `values.yaml` and `metadata.yaml`. They differ in
the files below, the *markers* of a spelling:

    the design document's                       the generator's
    config/<type>/application-defaults.yaml,    config/<type>/defaults.yaml (applications.
      applicationset-defaults.yaml                default, applicationsets.default)
    <name>/<node>/values.yaml, values.sops.yaml <name>/<node>/override.yaml
    <name>/patches/, <name>/<node>/patches/     <name>/patch-NNN.yaml, <name>/<node>/patch-NNN.yaml

and in when a node's patches apply (after every values level, or right after the override of
their node). A repository is read in one spelling: the one its markers use. When both appear,
the spelling more of its markers use is read, and each marker of the other is a problem naming
the file, what it is and a file of the spelling read, refusing the roots it would reach. A
repository without markers reads the same either way (the document's, then).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from shared.engine.dimensions.models import (
    AUTHOR_DEFAULTS_FILE,
    AUTHOR_PATCH_PREFIX,
    AUTHOR_PATCH_SUFFIX,
    DEFAULTS_FILES,
    OVERRIDE_FILE,
    PATCHES_DIR,
    SOPS_VALUES_FILE,
    VALUES_FILE,
)
from shared.engine.dimensions.sequence import Sequence
from shared.engine.tree import Tree, join

Spelling = Literal["document", "generator"]
DOCUMENT: Spelling = "document"
GENERATOR: Spelling = "generator"

NAMES: dict[Spelling, str] = {
    DOCUMENT: "the design document's spelling",
    GENERATOR: "the generator's spelling",
}


def is_author_patch(name: str) -> bool:
    """`patch-NNN.yaml`: a patch file in the generator's spelling."""
    return name.startswith(AUTHOR_PATCH_PREFIX) and name.endswith(AUTHOR_PATCH_SUFFIX)


@dataclass(frozen=True)
class Marker:
    """A file (or directory) only one spelling has."""

    path: str
    spelling: Spelling
    kind: str  # "defaults", "values", "patch"
    ctype: str
    node: tuple[str, ...]  # the node whose roots it reaches (() for the whole type)

    def what(self) -> str:
        return _WHAT[(self.spelling, self.kind)]


_WHAT: dict[tuple[Spelling, str], str] = {
    (DOCUMENT, "defaults"): "the design document's defaults file",
    (DOCUMENT, "values"): "the design document's spelling of a node's values (values.yaml)",
    (DOCUMENT, "patch"): "the design document's patches directory",
    (GENERATOR, "defaults"): "the generator's defaults file (applications.default, "
    "applicationsets.default)",
    (GENERATOR, "values"): "the generator's spelling of a node's values (override.yaml)",
    (GENERATOR, "patch"): "the generator's spelling of a patch (patch-NNN.yaml)",
}
# What a marker is written as in the other spelling, for the message.
_INSTEAD: dict[tuple[Spelling, str], str] = {
    (DOCUMENT, "defaults"): f"its sections in {AUTHOR_DEFAULTS_FILE} (applications.default, "
    "applicationsets.default)",
    (DOCUMENT, "values"): f"{OVERRIDE_FILE} at the node",
    (DOCUMENT, "patch"): f"{AUTHOR_PATCH_PREFIX}NNN.yaml files in the directory itself",
    (GENERATOR, "defaults"): " and ".join(DEFAULTS_FILES.values()),
    (GENERATOR, "values"): f"{VALUES_FILE} at the node",
    (GENERATOR, "patch"): f"a {PATCHES_DIR}/ directory with metadata.id and patch:",
}


@dataclass(frozen=True)
class Conflict:
    """A marker of the spelling not read, and a file of the spelling read."""

    marker: Marker
    example: Marker
    read: Spelling

    def message(self) -> str:
        m = self.marker
        return (
            f"both spellings in one repository: this is {m.what()}, while {self.example.path} "
            f"is {self.example.what()}; the repository is read in {NAMES[self.read]} (more "
            f"of its files use it), so this is never read: write it as "
            f"{_INSTEAD[(m.spelling, m.kind)]}, or the whole repository in one spelling"
        )


@dataclass(frozen=True)
class Reading:
    """The spelling a repository is read in, and the markers of the other one."""

    spelling: Spelling
    conflicts: tuple[Conflict, ...]

    @property
    def generator(self) -> bool:
        return self.spelling == GENERATOR

    def conflicting(self) -> set[str]:
        return {c.marker.path for c in self.conflicts}


def markers(tree: Tree, types: list[str], sequence: Sequence) -> list[Marker]:
    """Every marker under the cluster types' directories, sorted by path."""
    found: list[Marker] = []
    for ctype in types:
        tdir = join("config", ctype)
        for entry in tree.listdir(tdir):
            rel = join(tdir, entry)
            if tree.is_dir(rel):
                _walk(tree, sequence, found, ctype, rel, ())
            elif entry == AUTHOR_DEFAULTS_FILE:
                found.append(Marker(rel, GENERATOR, "defaults", ctype, ()))
            elif entry in DEFAULTS_FILES.values():
                found.append(Marker(rel, DOCUMENT, "defaults", ctype, ()))
    return sorted(found, key=lambda m: m.path)


def _walk(
    tree: Tree,
    sequence: Sequence,
    found: list[Marker],
    ctype: str,
    directory: str,
    node: tuple[str, ...],
) -> None:
    children = sequence.children(node)
    for entry in tree.listdir(directory):
        rel = join(directory, entry)
        if tree.is_dir(rel):
            if entry == PATCHES_DIR:
                found.append(Marker(rel, DOCUMENT, "patch", ctype, node))
            elif entry in children:
                _walk(tree, sequence, found, ctype, rel, (*node, entry))
        elif is_author_patch(entry):
            found.append(Marker(rel, GENERATOR, "patch", ctype, node))
        elif node and entry == OVERRIDE_FILE:
            found.append(Marker(rel, GENERATOR, "values", ctype, node))
        elif node and entry in (VALUES_FILE, SOPS_VALUES_FILE):
            found.append(Marker(rel, DOCUMENT, "values", ctype, node))


def read(tree: Tree, types: list[str], sequence: Sequence) -> Reading:
    """The spelling of the repository: its markers', the majority's when both appear (the
    design document's on a tie)."""
    found = markers(tree, types, sequence)
    counts = {s: sum(1 for m in found if m.spelling == s) for s in (DOCUMENT, GENERATOR)}
    spelling = GENERATOR if counts[GENERATOR] > counts[DOCUMENT] else DOCUMENT
    ours = [m for m in found if m.spelling == spelling]
    conflicts = tuple(
        Conflict(m, _nearest(m, ours), spelling) for m in found if m.spelling != spelling and ours
    )
    return Reading(spelling, conflicts)


def _nearest(marker: Marker, candidates: list[Marker]) -> Marker:
    """The file a reader compares `marker` with: a candidate of the same kind (its spelling of
    the same thing) if there is one, sharing the longest leading path with it (the first by
    path on a tie)."""

    def shared(other: Marker) -> int:
        n = 0
        for a, b in zip(marker.path.split("/"), other.path.split("/"), strict=False):
            if a != b:
                break
            n += 1
        return n

    return min(candidates, key=lambda m: (m.kind != marker.kind, -shared(m), m.path))
