"""Reading the dimensions layout's files from a `Tree`: parsed, checked against their models
and cached for the life of one layout (one revision).

Each file kind is read by one method; errors are `FleetError`s naming the file and line, and
are not cached (cheap to reproduce, and they carry their own context). Encrypted values files
are decrypted here (`shared.engine.secrets.sops`); with `taint`, every decrypted leaf is
perturbed (`shared.engine.secrets.origin`), for origin tracking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from shared.engine import yamldoc
from shared.engine.config.parsing import parse_model
from shared.engine.dimensions import argofields, patches
from shared.engine.dimensions.models import (
    DEFAULTS_FILES,
    DEFAULTS_MODELS,
    LEVEL_FILES,
    PATCH_MODELS,
    PATCHES_DIR,
    SOPS_VALUES_FILE,
    Component,
    Section,
    ValuesFile,
)
from shared.engine.dimensions.sequence import require_mapping
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

    def defaults(self, ctype: str, section: Section) -> dict[str, Any]:
        """`defaults:` of the type's defaults file for `section` ({} without the file)."""
        rel = join("config", ctype, DEFAULTS_FILES[section])

        def load() -> dict[str, Any]:
            if not self.tree.is_file(rel):
                return {}
            text, data = self.mapping(rel)
            fields = data.get("defaults")
            with _argo_checked(section, fields, ("defaults",), text, rel):
                parse_model(DEFAULTS_MODELS[section], data, text=text, source=rel)
            return fields or {}

        result: dict[str, Any] = self._cached("defaults", rel, load)
        return result

    def level_files(self, comp: Component, node: tuple[str, ...]) -> list[str]:
        """The values files of one level that exist, encrypted first."""
        base = join(comp.dir, *node)
        return [join(base, n) for n in LEVEL_FILES if self.tree.is_file(join(base, n))]

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
            only = f"a values file under {comp.dir}/ may only define {comp.section}.{comp.name}"
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
            return (data.get(comp.section) or {}).get(comp.name) or {}

        kind = "values~" if taint and secret else "values"
        result: dict[str, Any] = self._cached(kind, rel, load)
        return result

    # --- patches ---------------------------------------------------------------------------

    def patch_files(self, directory: str) -> list[str]:
        """Patch files in `directory/patches/`, by name."""
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
