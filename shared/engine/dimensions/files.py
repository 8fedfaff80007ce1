"""Reading the dimensions layout's files from a `Tree`: parsed, checked against their models
and cached for the life of one layout (one revision).

Each file kind is read by one method, in the spelling the repository is written in
(`spelling`: the design document's, or the generator's); errors are `FleetError`s naming the
file and line, and are not cached (cheap to reproduce, and they carry their own context).
Encrypted values files are decrypted here (`shared.engine.secrets.sops`); with `taint`,
every decrypted leaf is perturbed (`shared.engine.secrets.origin`), for origin tracking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from shared.engine import yamldoc
from shared.engine.config.parsing import parse_model
from shared.engine.dimensions import argofields, patches
from shared.engine.dimensions.models import (
    AUTHOR_DEFAULTS_FILE,
    AUTHOR_DEFAULTS_MODELS,
    DEFAULTS_FILES,
    DEFAULTS_MODELS,
    LEVEL_FILES,
    OVERRIDE_FILE,
    PATCH_MODELS,
    PATCHES_DIR,
    SOPS_VALUES_FILE,
    AuthorDefaults,
    AuthorPatchFile,
    Component,
    Section,
    ValuesFile,
)
from shared.engine.dimensions.sequence import require_mapping
from shared.engine.dimensions.spelling import DOCUMENT, Spelling, is_author_patch
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.secrets import origin, sops
from shared.engine.tree import Tree, join
from shared.engine.values import merge_all, parse_pointer

_MISS = object()


def is_yaml(name: str) -> bool:
    return name.endswith((".yaml", ".yml"))


class FleetFiles:
    """The files of one revision, read once each."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self._cache: dict[tuple[str, str], Any] = {}
        self._decrypted: dict[str, Any] = {}
        self._prefetched = False
        self.spelling: Spelling = DOCUMENT  # the layout sets it once it has read the tree
        # ApplicationSet defaults files that set a `project` (ignored): path → (line, value).
        self.ignored_projects: dict[str, tuple[int | None, Any]] = {}

    def prefetch(self) -> None:
        """On a git revision, list all of config/ in one git call instead of one per
        directory."""
        if not self._prefetched:
            self._prefetched = True
            prefetch = getattr(self.tree, "prefetch", None)
            if prefetch is not None:
                prefetch("config")

    def decrypted(self) -> list[Any]:
        """Every encrypted values file decrypted so far."""
        return list(self._decrypted.values())

    # --- plain reading ---------------------------------------------------------------------

    def text(self, rel: str) -> str:
        try:
            return self.tree.read_text(rel)
        except UnicodeDecodeError:
            raise FleetError("not valid UTF-8 text", path=rel) from None
        except FileNotFoundError:
            raise FleetError("file not found", path=rel) from None

    def read(self, rel: str) -> tuple[str, Any]:
        """(text, data) of a YAML file."""

        def load() -> tuple[str, Any]:
            text = self.text(rel)
            return text, yamldoc.loads(text, rel)

        result: tuple[str, Any] = self._cached("yaml", rel, load)
        return result

    def mapping(self, rel: str) -> tuple[str, dict[str, Any]]:
        text, data = self.read(rel)
        return text, require_mapping(data, rel)

    def _cached(self, kind: str, key: str, load: Callable[[], Any]) -> Any:
        hit = self._cache.get((kind, key), _MISS)
        if hit is _MISS:
            hit = load()
            self._cache[(kind, key)] = hit
        return hit

    # --- values ----------------------------------------------------------------------------

    def defaults_names(self) -> tuple[str, ...]:
        """The names of a cluster type's defaults files in the repository's spelling."""
        if self.spelling == DOCUMENT:
            return tuple(DEFAULTS_FILES.values())
        return (AUTHOR_DEFAULTS_FILE,)

    def defaults_file(self, ctype: str, section: Section) -> str:
        """The file holding the type's defaults for `section`, in the repository's spelling."""
        if self.spelling == DOCUMENT:
            return join("config", ctype, DEFAULTS_FILES[section])
        return join("config", ctype, AUTHOR_DEFAULTS_FILE)

    def defaults(self, ctype: str, section: Section) -> dict[str, Any]:
        """The type's defaults for `section` ({} without the file): `defaults:` of its
        defaults file, or (the generator's spelling) `<section>.default` of defaults.yaml.

        A `project` in the ApplicationSet defaults is remembered (`ignored_projects`, a
        warning): ApplicationSets have no project, and the generator's template renders none
        (the design document's example and the author's repository set one). The document's
        spelling leaves it out; the generator's keeps it in the values, as the generator
        writes values.yaml."""
        rel = self.defaults_file(ctype, section)
        keys: tuple[str, ...] = ("defaults",) if self.spelling == DOCUMENT else (section, "default")

        def load() -> dict[str, Any]:
            if not self.tree.is_file(rel):
                return {}
            text, data = self.mapping(rel)
            fields = _at(data, keys)
            written = fields
            if section == "applicationsets" and isinstance(fields, dict) and "project" in fields:
                self.ignored_projects[rel] = (
                    yamldoc.key_line(text, (*keys, "project")),
                    fields["project"],
                )
                fields = {k: v for k, v in fields.items() if k != "project"}
                data = _with(data, keys, fields)
                if self.spelling != DOCUMENT:
                    # the generator copies it into values.yaml all the same; no object uses it
                    fields = written
            with _argo_checked(section, fields, keys, text, rel):
                if self.spelling == DOCUMENT:
                    parse_model(DEFAULTS_MODELS[section], data, text=text, source=rel)
                else:
                    # Each section on its own: the other's problems are its own defaults'.
                    top = {k: v for k, v in data.items() if k == section}
                    parse_model(AuthorDefaults, top, text=text, source=rel)
                    self._author_sections(data, text, rel)
            return fields or {}

        result: dict[str, Any] = self._cached(f"defaults:{section}", rel, load)
        return result

    def _author_sections(self, data: dict[str, Any], text: str, rel: str) -> None:
        """defaults.yaml holds applications: and applicationsets: only."""
        for key in data:
            if key not in AUTHOR_DEFAULTS_MODELS:
                raise FleetError(
                    f"unknown key {key!r} (expected applications: and applicationsets:, each "
                    "with its default:)",
                    path=rel,
                    line=yamldoc.key_line(text, (key,)),
                )

    def level_names(self, node: tuple[str, ...]) -> tuple[str, ...]:
        """The names of a level's values files: values.sops.yaml and values.yaml, except at a
        node in the generator's spelling (override.yaml)."""
        if node and self.spelling != DOCUMENT:
            return (OVERRIDE_FILE,)
        return LEVEL_FILES

    def level_files(self, comp: Component, node: tuple[str, ...]) -> list[str]:
        """The values files of one level that exist, encrypted first."""
        base = join(comp.dir, *node)
        names = self.level_names(node)
        return [join(base, n) for n in names if self.tree.is_file(join(base, n))]

    def level(self, comp: Component, node: tuple[str, ...], taint: bool = False) -> dict[str, Any]:
        """The component's values at one level (base `()` or a node), encrypted file first.

        Shared by every root under the node, so it is computed once; callers merge it into
        new mappings and never change it.
        """

        def load() -> dict[str, Any]:
            layers = [self.values_file(rel, comp, taint) for rel in self.level_files(comp, node)]
            return merge_all(layers) if len(layers) > 1 else (layers[0] if layers else {})

        kind = "level~" if taint else "level"
        result: dict[str, Any] = self._cached(kind, join(comp.dir, *node), load)
        return result

    def values_file(self, rel: str, comp: Component, taint: bool = False) -> dict[str, Any]:
        """The component's fields in one values file; any other key is an error."""
        secret = rel.endswith(SOPS_VALUES_FILE)

        def load() -> dict[str, Any]:
            if secret:
                data = sops.decrypt_values(self.tree, rel)
                if taint:
                    data = origin.perturb(data)
                else:
                    self._decrypted[rel] = data
                text = self.text(rel)
            else:
                text, data = self.read(rel)
            data = require_mapping(data, rel)
            mine = data.get(comp.section)
            fields = mine.get(comp.name) if isinstance(mine, dict) else None
            with _argo_checked(comp.section, fields, (comp.section, comp.name), text, rel):
                parse_model(ValuesFile, data, text=text, source=rel)
            _only_mine(data, comp, text, rel, "a values file", "define")
            return (data.get(comp.section) or {}).get(comp.name) or {}

        kind = "values~" if taint and secret else "values"
        result: dict[str, Any] = self._cached(kind, rel, load)
        return result

    # --- patches ---------------------------------------------------------------------------

    def patch_files(self, directory: str) -> list[str]:
        """Patch files in `directory/patches/`, by name; in the generator's spelling the
        `patch-NNN.yaml` files of `directory` itself."""
        if self.spelling != DOCUMENT:
            return [
                join(directory, name)
                for name in self.tree.listdir(directory)
                if is_author_patch(name) and self.tree.is_file(join(directory, name))
            ]
        pdir = join(directory, PATCHES_DIR)
        return [
            join(pdir, name)
            for name in self.tree.listdir(pdir)
            if is_yaml(name) and self.tree.is_file(join(pdir, name))
        ]

    def patch(self, rel: str, comp: Component) -> patches.Patch:
        """A patch file of `comp` (staged or a copy), parsed and checked: it may change only
        `comp`."""

        def load() -> patches.Patch:
            if self.spelling != DOCUMENT:
                return self._author_patch(rel, comp)
            text = self.text(rel)
            patch = patches.load_patch(text, rel)
            name = comp.name
            fields = patch.body.get(name)
            with _argo_checked(comp.section, fields, ("patch", name), text, rel):
                parse_model(PATCH_MODELS[comp.section], patch.content, text=text, source=rel)
            problems = []
            for key in patch.body:
                if key != name:
                    problems.append(
                        Problem(
                            rel,
                            patch.line(("patch", key)),
                            f"unknown key 'patch/{key}': a patch under {comp.dir}/ may only "
                            f"change {comp.kind} {name!r}",
                        )
                    )
            for pointer in patch.merge_strategy:
                if parse_pointer(pointer)[0] != name:
                    problems.append(
                        Problem(
                            rel,
                            patch.line(("metadata", "merge_strategy", pointer)),
                            f"merge_strategy {pointer!r} must start with /{name}/ (a patch "
                            f"under {comp.dir}/ only changes {name!r})",
                        )
                    )
            if problems:
                raise FleetErrors(problems)
            return patch

        result: patches.Patch = self._cached("patch", rel, load)
        return result

    def _author_patch(self, rel: str, comp: Component) -> patches.Patch:
        """A `patch-NNN.yaml` (the generator's spelling): `metadata:` (a description) and the
        values it lays over the component, shaped as a values file's. Its id is the file's
        name within the component (`<type>/<name>/patch-NNN`): copies at other nodes carry
        the same name. Copies are compared without `metadata:`, as the generator applies
        them (a copy's description may say where it is)."""
        text, data = self.mapping(rel)
        mine = data.get(comp.section)
        fields = mine.get(comp.name) if isinstance(mine, dict) else None
        with _argo_checked(comp.section, fields, (comp.section, comp.name), text, rel):
            parse_model(AuthorPatchFile, data, text=text, source=rel)
        _only_mine(data, comp, text, rel, "a patch", "change")
        stem = rel.rsplit("/", 1)[-1].removesuffix(".yaml")
        return patches.Patch(
            id=f"{comp.ctype}/{comp.name}/{stem}",
            path=rel,
            text=text,
            content={k: v for k, v in data.items() if k != "metadata"},
            body={comp.name: fields or {}},
            dependencies=(),
            merge_strategy={},
            body_keys=(comp.section,),
        )


def _only_mine(
    data: dict[str, Any], comp: Component, text: str, rel: str, what: str, verb: str
) -> None:
    """A file under a component's directory speaks of that component only."""
    only = f"{what} under {comp.dir}/ may only {verb} {comp.section}.{comp.name}"
    for section in ("applications", "applicationsets"):
        entries = data.get(section) or {}
        if section != comp.section and section in data:
            raise FleetError(
                f"unknown key {section!r}: {only}",
                path=rel,
                line=yamldoc.key_line(text, (section,)),
            )
        for key in entries:
            if key != comp.name:
                raise FleetError(
                    f"unknown key '{section}/{key}': {only}",
                    path=rel,
                    line=yamldoc.key_line(text, (section, key)),
                )


def _at(data: dict[str, Any], keys: tuple[str, ...]) -> Any:
    node: Any = data
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _with(data: dict[str, Any], keys: tuple[str, ...], value: Any) -> dict[str, Any]:
    """`data` with `value` at `keys` (copies along the way; `data` is cached, unchanged)."""
    head, rest = keys[0], keys[1:]
    child = data.get(head)
    out = dict(data)
    out[head] = _with(child if isinstance(child, dict) else {}, rest, value) if rest else value
    return out


@contextmanager
def _argo_checked(
    section: Section, fields: Any, keys: tuple[str, ...], text: str, rel: str
) -> Iterator[None]:
    """Run the model check in the block, then check `fields` against Argo CD's schema
    (`argofields`); raise every problem of both at once, one per line (where the model and
    Argo CD's schema both object to a line, the model's message is kept)."""
    problems: list[Problem] = []
    try:
        yield
    except FleetErrors as err:
        problems = list(err.problems)
    if isinstance(fields, dict):
        seen = {p.line for p in problems}
        found = argofields.problems(section, fields, keys=keys, text=text, source=rel)
        problems += [p for p in found if p.line not in seen]
    if problems:
        raise FleetErrors(problems)
