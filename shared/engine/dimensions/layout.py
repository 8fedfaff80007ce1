"""The dimensions layout (the fleet design document, gcp-hcp-apps style): the `Layout` the
engine sees.

A root is `<type>/<n1>/…/<nk>`, one name per dimension of config/config.yaml; it renders into a
Helm chart of Argo CD Applications and ApplicationSets. The contract is
docs/formats/dimensions.md. The modules of this package, in import order: `models` (the file
formats), `patches` (patch mechanics), `sequence` (dimensions, sequence, cluster types), `files`
(reading each file kind), `merge` (a root's values), `shadows` (pins patches override),
`validate` (classified, scoped problems) and `chart` (the output), with `spelling` (the
design document's file names or the generator's) and `discovery` (the components of a type
that lists none); this module puts them together.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

from shared.engine import yamldoc
from shared.engine.config.fleet import FleetConfig
from shared.engine.dimensions import argopass, patches, sequence, spelling
from shared.engine.dimensions.chart import chart_files
from shared.engine.dimensions.discovery import discover
from shared.engine.dimensions.files import FleetFiles, is_yaml
from shared.engine.dimensions.merge import Merger, RootState, narrow
from shared.engine.dimensions.models import (
    AUTHOR_DEFAULTS_FILE,
    CONFIG_FILE,
    DEFAULTS_FILES,
    OVERRIDE_FILE,
    PATCHES_DIR,
    SOPS_VALUES_FILE,
    VALUES_FILE,
)
from shared.engine.dimensions.sequence import Node
from shared.engine.dimensions.shadows import Shadow, shadowed_pins
from shared.engine.dimensions.validate import Validator
from shared.engine.errors import FleetError, Problem
from shared.engine.layout import ReleaseInfo
from shared.engine.secrets import origin
from shared.engine.secrets.redact import Redactor, redact_tree
from shared.engine.tree import Tree, join

__all__ = ["CONFIG_FILE", "DimensionsLayout", "Node", "RootState"]


class DimensionsLayout:
    name = "dimensions"

    def __init__(self, tree: Tree, config: FleetConfig) -> None:
        self.tree = tree
        self.config = config
        self.files = FleetFiles(tree)
        if not tree.is_file(CONFIG_FILE):
            raise FleetError("missing: the dimensions layout needs it", path=CONFIG_FILE)
        self.config_text, data = self.files.mapping(CONFIG_FILE)
        self.spec, self.sequence = sequence.parse(data, self.config_text)
        self.files.prefetch()
        names = [t.name for t in self.spec.cluster_types]
        self.reading = spelling.read(tree, names, self.sequence)
        self.files.spelling = self.reading.spelling
        self.types = {}
        discovered: dict[str, list[Problem]] = {}
        for index, spec in enumerate(self.spec.cluster_types):
            self.types[spec.name], found = discover(self.files, spec, index)
            if not spec.lists:
                discovered[spec.name] = found
        self.places = self.sequence.places
        self.merger = Merger(self.files, self.sequence, self.types)
        self.validator = Validator(self.merger, self.reading, discovered)

    # --- the Layout protocol ---------------------------------------------------------------

    def roots(self) -> list[str]:
        return list(self.merger.roots)

    def releases(self, root: str) -> list[ReleaseInfo]:
        ctype, _ = self.merger.split(root)
        values = self.state(root).values
        out = []
        for comp in self.merger.components(ctype):
            merged = values[comp.section][comp.name]
            labels = merged.get("additionalLabels") or {}
            out.append(
                ReleaseInfo(
                    id=comp.name,
                    template=comp.dir,
                    namespace=str(merged.get("namespace") or "argocd"),
                    labels={str(k): str(v) for k, v in labels.items()},
                )
            )
        return out

    def values(self, root: str, release: str | None) -> dict[str, Any]:
        values = copy.deepcopy(self.state(root).values)  # callers may change their copy
        if release is None:
            return values
        ctype, _ = self.merger.split(root)
        names = [c.name for c in self.merger.components(ctype)]
        if release not in names:
            raise FleetError(
                f"root {root!r} has no application {release!r}; it has " + ", ".join(names)
            )
        return narrow(values, release)

    def render_files(self, root: str) -> dict[str, bytes]:
        return self._checked(root, self._files(root, self.state(root).values))

    def render_redacted(self, root: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """(plaintext, redacted) chart files. A root with encrypted values is rendered a
        second time from perturbed secrets; what differs is secret-derived
        (shared.engine.secrets.origin)."""
        values = self.state(root).values
        plain = self._checked(root, self._files(root, values))
        if not self.has_secrets(root):
            return plain, origin.hash_secret_objects(plain)
        paths = self.secret_paths(root, None)
        redactor = Redactor(origin.leaves_at(values, paths))
        fake_state = self.merger.taint_state(root)
        fake: dict[str, bytes] | None = None
        if fake_state is not None:
            try:
                fake = self._files(root, fake_state.values)
            except FleetError:
                fake = None  # never shown: it would quote perturbed secrets
        return plain, origin.redact_release_files(plain, fake, redactor, label=root)

    def has_secrets(self, root: str) -> bool:
        """True when any values level of the root's components is encrypted."""
        return self.merger.has_secrets(root)

    def secret_paths(self, root: str, release: str | None) -> set[tuple[str | int, ...]]:
        return self.merger.secret_paths(root, release)

    def encrypted_paths(self, root: str) -> set[tuple[str | int, ...]]:
        return self.merger.encrypted_paths(root)

    def redacted_values(self, root: str, release: str | None) -> dict[str, Any]:
        """`values()` with secrets and secret-derived leaves redacted."""
        values = self.values(root, release)
        if not self.has_secrets(root):
            return values
        fake = self.merger.taint_state(root)
        paths = self.secret_paths(root, release)
        if fake is None:
            shown: dict[str, Any] = redact_tree(values, paths)
            return shown
        redactor = Redactor(origin.leaves_at(values, paths))
        fake_values = fake.values if release is None else narrow(fake.values, release)
        shown = origin.redact_values(values, fake_values, set(), redactor)
        return shown

    def secret_values(self) -> list[Any]:
        """Every encrypted values file decrypted so far."""
        return self.files.decrypted()

    def _checked(self, root: str, files: dict[str, bytes]) -> dict[str, bytes]:
        """`files` once Argo CD's pass over the published chart works
        (shared.engine.dimensions.argopass)."""
        ctype, place = self.merger.split(root)
        argopass.check(self.files, self.merger.components(ctype), place, files, root)
        return files

    def _files(self, root: str, values: dict[str, Any]) -> dict[str, bytes]:
        ctype, place = self.merger.split(root)
        return chart_files(
            self.types[ctype], place, values, partial(self.files.defaults_file, ctype)
        )

    def affected(self, changed: set[str]) -> set[str]:
        """Roots whose render (or refusal) a change to `changed` may change: what their
        renders read, and the files whose problems refuse them (docs/formats/problems.md)."""
        out: set[str] = set()
        for path in changed:
            if path == CONFIG_FILE:
                return set(self.merger.roots)
            parts = path.split("/")
            if parts[0] != "config" or len(parts) < 2:
                continue
            marks = _marks(parts)
            if marks is not None and (marks != self.reading.spelling or self.reading.conflicts):
                # A file of the other spelling, or of either while both appear: it may make
                # the repository read in the other one (docs/formats/dimensions.md).
                return set(self.merger.roots)
            if len(parts) == 2:
                if is_yaml(parts[1]):  # a file never read: a problem of every root
                    return set(self.merger.roots)
                continue
            if parts[1] not in self.types:
                return set(self.merger.roots)  # not a cluster type: a problem of every root
            ctype = parts[1]
            if len(parts) == 3:
                if is_yaml(parts[2]):  # the defaults files, or one that is never read
                    out |= self.merger.roots_under(ctype, ())
                continue
            if parts[2] not in {c.name for c in self.merger.components(ctype)}:
                out |= self.merger.roots_under(ctype, ())  # a directory that is not listed
                continue
            out |= self._affected_below(ctype, parts[3:])
        return out

    def _affected_below(self, ctype: str, rest: list[str]) -> set[str]:
        """Roots affected by `rest`, a path below a component's directory."""
        node: tuple[str, ...] = ()
        while True:
            head, rest = rest[0], rest[1:]
            if not rest:  # a file of this level: values, metadata, or never read (a problem)
                return self.merger.roots_under(ctype, node) if is_yaml(head) else set()
            if head == PATCHES_DIR:
                return self.merger.roots_under(ctype, node)
            if not self.sequence.is_node((*node, head)):
                # A directory that is not a node: a problem of the roots under this one.
                return self.merger.roots_under(ctype, node)
            node = (*node, head)

    def validate(self) -> list[Problem]:
        return self.validator.problems()

    def unread_values(self, root: str | None) -> list[Problem]:
        """None: every field of an application or ApplicationSet is checked against the
        models and Argo CD's schema (an unknown key is a content problem), and the chart's
        templates read every field the models allow."""
        return []

    def render_warnings(self, root: str) -> list[Problem]:
        """Warnings of a root's render: a `project` in its type's ApplicationSet defaults,
        which is ignored (ApplicationSets have no project); and a cluster type without
        application or ApplicationSet, whose roots render a chart with no object (every
        release here renders exactly one object)."""
        ctype, _ = self.merger.split(root)
        found = self._ignored_project(ctype)
        if self.merger.components(ctype):
            return found
        index = [t.name for t in self.spec.cluster_types].index(ctype)
        return [
            *found,
            Problem(
                CONFIG_FILE,
                yamldoc.key_line(self.config_text, ("cluster_types", index)),
                f"cluster type {ctype!r} lists no application or ApplicationSet: its roots "
                "render a chart with no object",
                hygiene=True,
            ),
        ]

    def _ignored_project(self, ctype: str) -> list[Problem]:
        rel = self.files.defaults_file(ctype, "applicationsets")
        try:
            self.files.defaults(ctype, "applicationsets")
        except FleetError:
            return []  # the file's problems are content problems, reported as such
        if rel not in self.files.ignored_projects:
            return []
        line, _ = self.files.ignored_projects[rel]
        return [
            Problem(
                rel,
                line,
                "project in the ApplicationSet defaults is ignored: an ApplicationSet has no "
                "project (the Applications it generates take theirs from template.spec.project)",
                hygiene=True,
            )
        ]

    def refusals(self, root: str) -> list[Problem]:
        """Content problems that touch `root` (docs/formats/problems.md)."""
        return self.validator.refusals(root)

    # --- public helpers for promotion ------------------------------------------------------

    def sequence_nodes(self) -> list[Node]:
        """Every node of the sequence in promotion order (each node, then its children)."""
        return list(self.sequence.nodes)

    def patch_paths(self, ctype: str, app: str, node: tuple[str, ...] = ()) -> list[str]:
        """Patch files in `<app>/<node>/patches/` (node (): the staged ones), by name."""
        return self.files.patch_files(join("config", ctype, app, *node))

    def load_patch(self, rel: str) -> patches.Patch:
        """The patch file at `rel` (under config/<type>/<name>/), parsed and checked."""
        parts = rel.split("/")
        return self.files.patch(rel, self.merger.component(parts[1], parts[2]))

    def state(self, root: str) -> RootState:
        """Merged values of `root` and the outcome of each of its active patches."""
        return self.merger.state(root)

    def shadowed_pins(self, root: str) -> list[Shadow]:
        """Values set at or below a patch's node that the patch overrides at `root`."""
        return list(shadowed_pins(self.merger, root))


def _marks(parts: list[str]) -> spelling.Spelling | None:
    """The spelling a path under config/ is a marker of (`spelling`), from its name alone (the
    file may be gone): None for the files both spellings share."""
    name = parts[-1]
    if len(parts) == 3:
        if name in DEFAULTS_FILES.values():
            return spelling.DOCUMENT
        return spelling.GENERATOR if name == AUTHOR_DEFAULTS_FILE else None
    if len(parts) < 4:
        return None
    if PATCHES_DIR in parts[3:]:
        return spelling.DOCUMENT
    if spelling.is_author_patch(name):
        return spelling.GENERATOR
    if len(parts) > 4 and name == OVERRIDE_FILE:
        return spelling.GENERATOR
    if len(parts) > 4 and name in (VALUES_FILE, SOPS_VALUES_FILE):
        return spelling.DOCUMENT
    return None
