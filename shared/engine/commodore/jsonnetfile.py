"""A `jsonnetfile.json` read as jsonnet-bundler (jb) reads it: its dependencies, each a git
repository (a remote, an optional subdirectory, a version) or a local directory, with the
names jb vendors them under.

    deps = parse(text, where="component 'demo': jsonnetfile.json")
    deps.dependencies[0].name          # 'github.com/acme/lib/jsonnet': vendor/<name>
    deps.dependencies[0].legacy_name   # 'jsonnet': the symlink vendor/<legacy name>
    deps.dependencies[0].remote        # 'https://github.com/acme/lib.git': what git fetches

jb keeps only host, path and repository of a remote and fetches
`https://<host>/<user>/<repo>.git` or `ssh://git@<host>/<user>/<repo>.git`; a remote it
cannot parse, a source other than `git` or `local`, a missing version and a key jb does not
know are refused, naming the file and the key.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from shared.engine.commodore.repos import shown
from shared.engine.errors import FleetError

FILE = "jsonnetfile.json"
JSONNET_FILE = "jsonnetfile.jsonnet"

HTTPS = "https://"
SSH = "ssh://git@"

# How jb tells the parts of a remote (spec/v1/deps/git.go), in order; the first that matches
# anywhere in the remote wins. A host needs a top-level domain; `file://` and bare paths
# match none.
_HOST = r"(?P<host>[a-zA-Z0-9][a-zA-Z0-9.-]{1,61}[a-zA-Z0-9]\.[a-zA-Z]{2,})"
_REMOTES = (
    (re.compile(r"ssh://git@(?P<host>.+)/(?P<user>.+)/(?P<repo>.+).git"), SSH),
    (re.compile(r"^git@(?P<host>.+):(?P<user>.+)/(?P<repo>.+).git"), SSH),
    (re.compile(_HOST + r"/(?P<user>[-_~a-zA-Z0-9/.]+)/(?P<repo>[-_a-zA-Z0-9.]+)\.git"), HTTPS),
    (re.compile(_HOST + r"/(?P<user>[-_~a-zA-Z0-9.]+)/(?P<repo>[-_a-zA-Z0-9.]+)"), HTTPS),
)
# jb tries each remote pattern followed by these, in order, and keeps the first match's parts.
_SUFFIXES = (r"/(?P<subdir>.*)@(?P<version>.*)", r"/(?P<subdir>.*)", r"@(?P<version>.*)", "")

_FILE_KEYS = {"version", "dependencies", "legacyImports"}
_V1_KEYS = {"source", "version", "sum", "single", "name"}
_V0_KEYS = {"source", "version", "sum", "name"}


@dataclass(frozen=True)
class GitSource:
    scheme: str  # HTTPS or SSH
    host: str
    user: str
    repo: str
    subdir: str  # "" or "/<subdir>", as jb keeps it

    @property
    def name(self) -> str:
        return f"{self.host}/{self.user}/{self.repo.removesuffix('.git')}{self.subdir}"

    @property
    def legacy_name(self) -> str:
        return _go_base(self.repo.removesuffix(".git") + self.subdir)

    @property
    def remote(self) -> str:
        return f"{self.scheme}{self.host}/{self.user}/{self.repo}.git"


@dataclass(frozen=True)
class LocalSource:
    directory: str  # relative to the directory of the jsonnetfile.json naming it


@dataclass(frozen=True)
class Dependency:
    source: GitSource | LocalSource
    version: str  # git: a branch, tag or commit; local: ""
    legacy_name_compat: str  # the `name` key (version 0: the dependency's name)
    single: bool  # its own dependencies are not installed
    key: str  # where it is in its file, for messages: "dependencies[2]"

    @property
    def name(self) -> str:
        """Its directory under vendor/ (jb's `Name()`)."""
        if isinstance(self.source, GitSource):
            return self.source.name
        return self.source_legacy_name

    @property
    def source_legacy_name(self) -> str:
        if isinstance(self.source, GitSource):
            return self.source.legacy_name
        return _go_base(posixpath.normpath(self.source.directory))

    @property
    def legacy_name(self) -> str:
        """The symlink vendor/<legacy name> -> <name> (git dependencies only)."""
        return self.legacy_name_compat or self.source_legacy_name


@dataclass(frozen=True)
class JsonnetFile:
    dependencies: list[Dependency]  # in jb's order: a repeated name keeps its first place
    legacy_imports: bool


def parse(text: str, where: str) -> JsonnetFile:
    """The dependencies of a jsonnetfile.json's `text`; `where` names the file in messages."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise FleetError(
            f"{where}:{err.lineno}: not valid JSON: {err.msg} (line {err.lineno}, column "
            f"{err.colno})"
        ) from None
    if not isinstance(data, dict):
        raise FleetError(f"{where}: must be a JSON object")
    unknown = sorted(set(data) - _FILE_KEYS)
    if unknown:
        raise FleetError(f"{where}: key {unknown[0]!r} is not one jsonnet-bundler reads")
    version = data.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version not in (0, 1):
        raise FleetError(
            f"{where}: version: {version!r} is no jsonnetfile version jsonnet-bundler knows (0 "
            "or 1)"
        )
    legacy = data.get("legacyImports", True)
    if not isinstance(legacy, bool):
        raise FleetError(f"{where}: legacyImports: must be true or false")
    entries = data.get("dependencies") or []
    if not isinstance(entries, list):
        raise FleetError(f"{where}: dependencies: must be a list")
    deps = [_dependency(e, f"dependencies[{i}]", version, where) for i, e in enumerate(entries)]
    # jb's ordered maps (a Python dict alike): a repeated key keeps the place where it first
    # appeared and the contents of its last entry; a version 0 file is keyed by `name` first
    if version == 0:
        deps = list({d.legacy_name_compat: d for d in deps}.values())
    ordered = {d.name: d for d in deps}
    return JsonnetFile(list(ordered.values()), legacy if version == 1 else True)


def _dependency(entry: Any, key: str, file_version: int, where: str) -> Dependency:
    if not isinstance(entry, dict):
        raise FleetError(f"{where}: {key}: must be a JSON object")
    known = _V1_KEYS if file_version == 1 else _V0_KEYS
    unknown = sorted(set(entry) - known)
    if unknown:
        raise FleetError(f"{where}: {key}.{unknown[0]}: not a key jsonnet-bundler reads")
    for field in ("version", "sum", "name"):
        if not isinstance(entry.get(field, ""), str):
            raise FleetError(f"{where}: {key}.{field}: must be a string")
    single = entry.get("single", False)
    if not isinstance(single, bool):
        raise FleetError(f"{where}: {key}.single: must be true or false")
    source = entry.get("source")
    if not isinstance(source, dict):
        raise FleetError(f"{where}: {key}.source: missing (a 'git' or 'local' source)")
    kinds = sorted(source)
    if kinds not in (["git"], ["local"]):
        raise FleetError(
            f"{where}: {key}.source: {', '.join(repr(k) for k in kinds) or 'nothing'}: "
            "jsonnet-bundler fetches exactly one 'git' or 'local' source"
        )
    name = entry.get("name", "")
    if file_version == 0 and not name:
        raise FleetError(f"{where}: {key}.name: missing (a version 0 jsonnetfile names each)")
    if name and (name in (".", "..") or "/" in name):
        raise FleetError(
            f"{where}: {key}.name: {name!r} must be a single directory name (vendor/<name>)"
        )
    version = entry.get("version", "")
    if "git" in source:
        git = _git(source["git"], f"{key}.source.git", file_version, where)
        if not version:
            raise FleetError(
                f"{where}: {key}.version: missing (the branch, tag or commit of "
                f"{git.remote} to fetch)"
            )
        return Dependency(git, version, name, single, key)
    if file_version == 0:
        raise FleetError(
            f"{where}: {key}.source.local: local sources of a version 0 jsonnetfile are not "
            'supported: write "version": 1'
        )
    local = source["local"]
    directory = local.get("directory") if isinstance(local, dict) else None
    if not isinstance(directory, str) or not directory:
        raise FleetError(f"{where}: {key}.source.local.directory: missing")
    last = posixpath.normpath(directory).rsplit("/", 1)[-1]
    if directory.startswith("/") or last in (".", ".."):
        raise FleetError(
            f"{where}: {key}.source.local.directory: {directory!r} must be a relative path "
            "naming a directory (jsonnet-bundler links it as vendor/<its last name>)"
        )
    return Dependency(LocalSource(directory), "", name, single, key)


def _git(git: Any, key: str, file_version: int, where: str) -> GitSource:
    if not isinstance(git, dict):
        raise FleetError(f"{where}: {key}: must be a JSON object")
    unknown = sorted(set(git) - {"remote", "subdir"})
    if unknown:
        raise FleetError(f"{where}: {key}.{unknown[0]}: not a key jsonnet-bundler reads")
    remote, subdir = git.get("remote", ""), git.get("subdir", "")
    if not isinstance(remote, str) or not isinstance(subdir, str):
        raise FleetError(f"{where}: {key}: remote and subdir must be strings")
    parsed = parse_remote(remote)
    if parsed is None:
        raise FleetError(
            f"{where}: {key}.remote: {shown(remote)!r} is no git remote jsonnet-bundler can parse "
            "(https://<host>/<path>/<repo>[.git], ssh://git@<host>/<path>/<repo>.git or "
            "git@<host>:<path>/<repo>.git)"
        )
    scheme, host, user, repo = parsed
    subdir = subdir.strip("/") if file_version == 0 else subdir.removeprefix("/")
    parts = subdir.rstrip("/").split("/") if subdir else []
    if any(part in ("", ".", "..") for part in parts):
        raise FleetError(
            f"{where}: {key}.subdir: {subdir!r} must be a path inside the repository "
            "(no '.', '..' or empty parts)"
        )
    return GitSource(scheme, host, user, repo, f"/{subdir}" if subdir else "")


def parse_remote(remote: str) -> tuple[str, str, str, str] | None:
    """(scheme, host, user, repo) of `remote` as jb parses it, or None."""
    for pattern, scheme in _REMOTES:
        if not pattern.search(remote):
            continue
        for suffix in _SUFFIXES:
            found = re.search(pattern.pattern + suffix, remote)
            if found:
                return scheme, found["host"], found["user"], found["repo"]
    return None


def _go_base(path: str) -> str:
    """The last element of `path`, trailing slashes ignored (Go's filepath.Base)."""
    path = path.rstrip("/")
    return path.rsplit("/", 1)[-1] if path else "/"
