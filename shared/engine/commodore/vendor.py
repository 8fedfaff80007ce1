"""The working directory's `vendor/` as `jb install` (jsonnet-bundler) fills it when Commodore
runs it on its own jsonnetfile.json, which lists each component's checkout and
`dependencies/lib` as local dependencies; jb then installs the components' own dependencies,
transitively:

    vendor/<component>              -> ../dependencies/<component>   (Commodore's local deps)
    vendor/lib                      -> ../dependencies/lib
    vendor/<host>/<user>/<repo>[/<subdir>]   a git dependency's files at its commit
    vendor/<directory name>         -> a local dependency's directory
    vendor/<legacy name>            -> <host>/<user>/<repo>[/<subdir>]

    install(workdir, mirrors, ["demo", "extra"])

jb's order, which decides versions: the dependencies a jsonnetfile.json lists are installed
first, in order, then each one's own jsonnetfile.json in the same way; a name already
installed keeps the version it was installed at (the first wins: the components in name
order, each component's whole tree before the next component's; each file's own dependencies
before those of its libraries). The legacy-name symlinks follow
the same order. No lock file takes part: Commodore deletes its own before `jb install`, and jb
reads no dependency's.

Git repositories come through rollwright's mirrors (shared.engine.commodore.repos) at the
commit the version names; their files are copied into vendor/ as jb checks them out. Where jb
would silently let a second package lose (a legacy name or a directory another package
holds, a local name linked elsewhere) or fail obscurely (a cycle, a missing subdirectory), the
cluster is refused, naming the component, the file and the key.
"""

from __future__ import annotations

import functools
import os
import posixpath
import shutil
from dataclasses import dataclass
from pathlib import Path

from shared.engine.commodore import jsonnetfile
from shared.engine.commodore.confine import Confinement
from shared.engine.commodore.jsonnetfile import Dependency, GitSource, JsonnetFile
from shared.engine.commodore.repos import Mirror, Mirrors, shown
from shared.engine.commodore.workdir import Workdir
from shared.engine.errors import FleetError

LIB = "lib"
# jb fetches these remotes as GitHub's archives (`git archive` on GitHub's side) of the commit
# `git ls-remote` lists first for the version, every other by a git checkout of the version.
GITHUB_ARCHIVES = "https://github.com/"


@dataclass(frozen=True)
class Package:
    """An installed dependency: `directory` is where jb's files of it are, as a path in the
    working directory (a local dependency's directory as Commodore has it, unresolved)."""

    dependency: Dependency
    directory: Path
    via: str  # what required it first, for messages
    commit: str = ""  # git dependencies: the commit installed
    top: bool = False  # one of Commodore's own: a component's checkout or dependencies/lib

    @property
    def name(self) -> str:
        return self.dependency.name

    @property
    def is_git(self) -> bool:
        return isinstance(self.dependency.source, GitSource)

    def describe(self) -> str:
        """The package, its source and where it was asked for."""
        source = self.dependency.source
        if self.top:
            return f"{self.name} (Commodore's local dependency {source_text(source)})"
        asked = f"required by {self.via}, {jsonnetfile.FILE} {self.dependency.key}"
        if isinstance(source, GitSource):
            return f"{self.name} ({shown(source.remote)} {self.dependency.version}, {asked})"
        return f"{self.name} (local {source_text(source)}, {asked})"


def source_text(source: GitSource | jsonnetfile.LocalSource) -> str:
    return source.remote if isinstance(source, GitSource) else source.directory


def install(workdir: Workdir, mirrors: Mirrors, components: list[str]) -> list[Package]:
    """vendor/ for the components `components`; the packages in jb's order."""
    return _Installer(workdir, mirrors).install(sorted(components))


class _Installer:
    def __init__(self, workdir: Workdir, mirrors: Mirrors) -> None:
        self.workdir = workdir
        self.mirrors = mirrors
        self.locked: dict[str, Package] = {}
        self.done: dict[str, list[str]] = {}  # package -> what its jsonnetfile.json installed
        self.confinement = Confinement(workdir, "")

    def install(self, components: list[str]) -> list[Package]:
        top: list[str] = []
        for name in [*components, LIB]:
            directory = self.workdir.lib if name == LIB else self.workdir.component_dir(name)
            source = jsonnetfile.LocalSource(os.path.relpath(directory, self.workdir.root))
            dep = Dependency(source, "", "", False, f"dependencies[{len(top)}]")
            via = "Commodore's jsonnetfile.json"
            self.locked[name] = Package(dep, directory, via, top=True)
            self.workdir.link(directory, self.workdir.vendor / name)
            top.append(name)
        order = self._nested(top, ())
        self._link_legacy_names(order)
        return [self.locked[name] for name in order]

    def _nested(self, names: list[str], stack: tuple[str, ...]) -> list[str]:
        """`names` (installed) and, in jb's order, what their jsonnetfile.json files install."""
        order = list(names)
        for name in names:
            package = self.locked[name]
            if package.dependency.single:
                continue  # jb installs none of its dependencies
            if name in stack:
                chain = " -> ".join([*stack[stack.index(name) :], name])
                raise FleetError(
                    f"{package.describe()}: jsonnet dependencies form a cycle ({chain}), "
                    "which jsonnet-bundler never finishes installing"
                )
            if name not in self.done:
                self.done[name] = self._jsonnetfile(package, (*stack, name))
            order += [n for n in self.done[name] if n not in order]
        return order

    def _jsonnetfile(self, package: Package, stack: tuple[str, ...]) -> list[str]:
        """Install the dependencies of `package`'s jsonnetfile.json, then theirs."""
        where = self._where(package)
        if package.top and (package.directory / jsonnetfile.JSONNET_FILE).is_file():
            raise FleetError(
                f"{where} {jsonnetfile.JSONNET_FILE}: not supported by the commodore layout "
                "yet (Commodore renders it into jsonnetfile.json with the component's "
                "jsonnetfile_parameters)"
            )
        file = package.directory / jsonnetfile.FILE
        if not file.is_file():
            return []
        parsed: JsonnetFile = jsonnetfile.parse(file.read_text(), f"{where} {jsonnetfile.FILE}")
        names: list[str] = []
        for dep in parsed.dependencies:
            installed = self.locked.get(dep.name)
            if installed is None:
                self.locked[dep.name] = self._install(dep, package, where)
            else:
                self._same(installed, dep, package, where)
            if dep.name not in names:
                names.append(dep.name)
        return self._nested(names, stack)

    def _where(self, package: Package) -> str:
        if package.top:  # a component, or lib
            return f"component {package.name!r}:"
        return f"{package.describe()}:"

    def _same(self, installed: Package, dep: Dependency, parent: Package, where: str) -> None:
        """A name installed before: jb keeps it as it is (its version wins); a local
        dependency of that name in another directory would silently be the first one."""
        if isinstance(dep.source, jsonnetfile.LocalSource):
            directory = self._local_directory(dep, parent, where)
            if installed.is_git or installed.directory != directory:
                raise FleetError(
                    f"{where} {jsonnetfile.FILE}: {dep.key}.source.local: vendor/{dep.name} is "
                    f"already {installed.describe()}: the two clash in vendor/"
                )

    def _install(self, dep: Dependency, parent: Package, where: str) -> Package:
        via = _via(parent)
        self._check_free(dep, where)
        if isinstance(dep.source, jsonnetfile.LocalSource):
            directory = self._local_directory(dep, parent, where)
            self.workdir.link(directory, self.workdir.vendor / dep.name)
            return Package(dep, directory, via)
        source = dep.source
        what = f"{where} {jsonnetfile.FILE}: {dep.key} ({dep.name})"
        github = source.remote.startswith(GITHUB_ARCHIVES)
        mirror, sha = self.mirrors.commit(
            source.remote, dep.version, what=what, listed_first=github
        )
        if not github:
            self._check_attributes(mirror, sha, dep, where)
        files = mirror.tree(sha)
        subdir = source.subdir.strip("/")
        found = files / subdir if subdir else files
        if subdir and (found.is_symlink() or not found.is_dir()):
            raise FleetError(
                f"{where} {jsonnetfile.FILE}: {dep.key}.source.git.subdir: {subdir!r} is no "
                f"directory of {shown(source.remote)} at {dep.version}"
            )
        directory = self._vendored(dep.name)
        directory.parent.mkdir(parents=True, exist_ok=True)
        # copied, as jb checks them out: a relative import or link leading out of the
        # package resolves in vendor/, as with jb, not in the cache
        shutil.copytree(found, directory, symlinks=True)
        return Package(dep, directory, via, sha)

    def _check_attributes(self, mirror: Mirror, sha: str, dep: Dependency, where: str) -> None:
        """The cache's trees are `git archive`'s, which honours the export-ignore and
        export-subst attributes; jb checks out repositories other than GitHub's, which does
        not: such a repository would differ, so it is refused."""
        found = _export_attributes(mirror, sha)
        if found:
            raise FleetError(
                f"{where} {jsonnetfile.FILE}: {dep.key} ({dep.name}): {found} sets "
                "export-ignore or export-subst, which the commodore layout does not support "
                "in a jsonnet dependency outside https://github.com/"
            )

    def _local_directory(self, dep: Dependency, parent: Package, where: str) -> Path:
        """A local dependency's directory: relative to the jsonnetfile.json naming it, where
        Commodore has that file (jb resolves the parent's symlinks, which in Commodore's
        working directory lead to its own directories)."""
        assert isinstance(dep.source, jsonnetfile.LocalSource)
        directory = Path(posixpath.normpath(parent.directory / dep.source.directory))
        key = f"{where} {jsonnetfile.FILE}: {dep.key}.source.local.directory"
        if not directory.is_relative_to(self.workdir.root) or not self.confinement.allows(
            directory
        ):
            raise FleetError(
                f"{key}: {dep.source.directory!r} refused: it is outside the component's "
                "working directory"
            )
        if not directory.is_dir():
            raise FleetError(f"{key}: {dep.source.directory!r} is no directory")
        return directory

    def _vendored(self, name: str) -> Path:
        return self.workdir.vendor / posixpath.normpath(name)

    def _check_free(self, dep: Dependency, where: str) -> None:
        """No package's directory in vendor/ may be, hold or lie in another's (jb would
        install one over the other)."""
        mine = posixpath.normpath(dep.name)
        for other in self.locked.values():
            theirs = posixpath.normpath(other.name)
            if _overlap(mine, theirs):
                raise FleetError(
                    f"{where} {jsonnetfile.FILE}: {dep.key} ({dep.name}): vendor/{mine} "
                    f"clashes with vendor/{theirs} of {other.describe()}"
                )

    def _link_legacy_names(self, order: list[str]) -> None:
        """vendor/<legacy name> -> <name> for each git package, in jb's order; a name taken
        (by a package, a directory or an earlier link) is refused: jb would leave it to the
        first and the second package's legacy imports would read the first."""
        holders: dict[str, str] = {n: self.locked[n].describe() for n in order}
        for name in order:
            package = self.locked[name]
            if not package.is_git:
                continue
            legacy = package.dependency.legacy_name
            link = self.workdir.vendor / legacy
            if os.path.lexists(link):
                holder = holders.get(legacy) or f"the directory vendor/{legacy}"
                raise FleetError(
                    f"{package.describe()}: its legacy name vendor/{legacy} is already "
                    f"{holder}: the two clash in vendor/ (set another 'name' for one of them "
                    f"in {jsonnetfile.FILE})"
                )
            os.symlink(posixpath.normpath(name), link)
            holders[legacy] = package.describe()


def _via(parent: Package) -> str:
    if parent.top:
        return f"component {parent.name!r}"
    return f"{parent.name} (required by {parent.via})"


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


@functools.lru_cache(maxsize=1024)
def _export_attributes(mirror: Mirror, sha: str) -> str | None:
    """The first .gitattributes of commit `sha` setting export-ignore or export-subst
    (a commit never changes: asked once per process)."""
    for rel in mirror.paths(sha):
        if posixpath.basename(rel) == ".gitattributes":
            text = mirror.read_text(sha, rel) or ""
            if "export-ignore" in text or "export-subst" in text:
                return rel
    return None
