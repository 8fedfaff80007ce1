"""What a component's Jsonnet may read while its catalog compiles: the cluster's
working directory and the checkouts it links (the global repository, the components, the
packages), and, for imports only, the Jsonnet libraries Kapitan and Commodore ship. Anything
else, an absolute import or a `..` or symlink leading out, is refused by component and path:
a branch names the components, and the worker's environment and files hold its secrets.

    confined = Confinement(workdir, "demo")
    callbacks = confined.natives(kapitan.resources.resource_callbacks(paths), paths)
    confined.check("file_read", name, path)   # raises, the reason in confined.refused

gojsonnet turns a native's exception into "failed to execute native callback": `refused`
keeps the reason, for the message."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import commodore
import kapitan

from shared.engine.commodore.workdir import Workdir

# What Kapitan's and Commodore's own Jsonnet imports (`lib/kube.libjsonnet`,
# `lib/commodore.libjsonnet`, the `helm_namespace` filter).
LIBRARIES = (
    Path(os.path.dirname(kapitan.__file__)) / "lib",
    Path(commodore.__install_dir__) / "lib",
    Path(commodore.__install_dir__) / "filters",
)
# Kapitan's natives that read the file (or directory) named by their first argument.
KAPITAN_READERS = (
    "file_read",
    "file_exists",
    "dir_files_list",
    "dir_files_read",
    "yaml_load",
    "yaml_load_stream",
    "jinja2_render_file",
)


class Confinement:
    def __init__(self, workdir: Workdir, component: str) -> None:
        self.workdir = workdir
        self.component = component
        self.refused: str | None = None
        self._roots = _roots(workdir)
        self._libraries = [p.resolve() for p in LIBRARIES]

    def allows(self, path: str | Path, *, libraries: bool = False) -> bool:
        real = Path(os.path.realpath(path))
        roots = self._roots + (self._libraries if libraries else [])
        return any(real.is_relative_to(root) for root in roots)

    def refuse(self, what: str, name: str) -> PermissionError:
        """The refusal, kept in `refused`; the exception's own text is short, as gojsonnet
        mangles a long error of an import callback."""
        self.refused = (
            f"{what} {name!r} refused: it is outside the component's working directory "
            "(the cluster's inventory and the checkouts of its repositories)"
        )
        return PermissionError("refused")

    def check(self, what: str, name: str, found: str | Path, *, libraries: bool = False) -> None:
        """Refuse `found` (what `name` resolved to) when it leads out."""
        if not self.allows(found, libraries=libraries):
            raise self.refuse(what, name)

    def imports(self, search: Callable[[str, str], tuple[str, bytes]], paths: list[str]) -> Any:
        """Kapitan's import search (`search_imports`), refusing an absolute import and a file
        it would open outside, before it opens it (a `/dev/zero` would never end)."""

        def imports(cwd: str, name: str) -> tuple[str, bytes]:
            if os.path.isabs(name):
                raise self.refuse("import", name)
            candidates = [
                os.path.normpath(os.path.join(cwd, name)),
                os.path.join(os.path.dirname(kapitan.__file__), name),
                *(os.path.join(p, name) for p in paths),
            ]
            # The file Kapitan would open; none: where it would look first (whether a file
            # outside exists is not for the component to learn either).
            found = next((c for c in candidates if os.path.exists(c)), candidates[0])
            self.check("import", name, found, libraries=True)
            return search(cwd, name)

        return imports

    def natives(self, callbacks: dict[str, Any], paths: list[str]) -> dict[str, Any]:
        """Kapitan's natives, those reading files refusing a file or directory outside (the
        first search path holding `name` is the one Kapitan reads)."""
        out = dict(callbacks)
        for what in KAPITAN_READERS:
            params, function = callbacks[what]
            out[what] = (params, self._kapitan_reader(what, function, paths))
        return out

    def _kapitan_reader(self, what: str, function: Any, paths: list[str]) -> Any:
        def reader(name: str, *rest: Any) -> Any:
            candidates = [os.path.join(p, name) for p in paths]
            found = next((c for c in candidates if os.path.exists(c)), candidates[0])
            self.check(what, name, found)
            if os.path.isdir(found):  # its files, maybe links leading out
                for entry in os.listdir(found):
                    self.check(what, os.path.join(name, entry), os.path.join(found, entry))
            return function(name, *rest)

        return reader

    def reader(self, what: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """A Commodore filter native reading the file or directory `name`: relative to the
        working directory (Commodore runs there), refused outside it."""

        def reader(name: str, *rest: Any) -> Any:
            path = os.path.join(self.workdir.root, name)
            self.check(what, name, path)
            return function(path, *rest)

        return reader


def _roots(workdir: Workdir) -> list[Path]:
    """The working directory and the checkouts it links (read-only trees in the cache)."""
    links = [workdir.classes / "global"]
    if workdir.dependencies.is_dir():
        links += sorted(workdir.dependencies.iterdir())
    return [workdir.root.resolve()] + [p.resolve() for p in links if p.is_symlink()]
