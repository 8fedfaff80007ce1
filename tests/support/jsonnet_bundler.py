"""`jb install` re-enacted for the real Commodore in tests: no jsonnet-bundler binary can be had
here, so this lays out a Commodore working directory's `vendor/` as jb does, written from
reading jsonnet-bundler's source (pkg/packages.go `Ensure`/`ensure`/`linkLegacy`, pkg/git.go
`Install`, pkg/local.go, spec/v1/deps/git.go), independently of rollwright's
shared/engine/commodore/vendor.py, which the tests compare with it:

- a file's dependencies are read into an ordered map by package name;
- the dependencies of `jsonnetfile.json` are installed in order, then each one's own
  `jsonnetfile.json` (skipped for `single`) in the same way; a name installed before keeps its
  version;
- a git dependency is fetched as jb's git path does it: `git init`, `git remote add origin
  https://<host>/<user>/<repo>.git`, `git fetch --tags --depth 1 origin <version>` (else a full
  fetch), a sparse checkout of the subdirectory, `git checkout <version>`, `.git` removed, the
  subdirectory moved to `vendor/<host>/<user>/<repo>[/<subdir>]`;
- a local dependency is a symlink `vendor/<basename>` to its directory, relative to the
  jsonnetfile.json naming it (after that file's directory's symlinks);
- with `legacyImports` (Commodore's file sets it), `vendor/<legacy name>` -> the package's
  path for each git package, in install order, unless the name is taken.

Only the shapes the tests use are parsed: https and `git@host:` remotes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

_HTTPS = re.compile(r"^https://(?P<host>[^/]+)/(?P<user>.+)/(?P<repo>[^/]+?)(\.git)?$")
_SCP = re.compile(r"^git@(?P<host>[^:]+):(?P<user>.+)/(?P<repo>[^/]+)\.git$")


def _git_parts(remote: str, subdir: str) -> tuple[str, str, str]:
    """(name, legacy name, remote to fetch) of a git source."""
    found = _HTTPS.match(remote)
    scheme = "https://"
    if found is None:
        found = _SCP.match(remote)
        scheme = "ssh://git@"
    assert found is not None, f"the jb stand-in parses no remote {remote!r}"
    sub = "/" + subdir.strip("/") if subdir else ""
    name = f"{found['host']}/{found['user']}/{found['repo']}{sub}"
    fetch = f"{scheme}{found['host']}/{found['user']}/{found['repo']}.git"
    return name, name.rsplit("/", 1)[-1], fetch


def _name(dep: dict[str, Any]) -> str:
    source = dep["source"]
    if "git" in source:
        return _git_parts(source["git"]["remote"], source["git"].get("subdir", ""))[0]
    return os.path.basename(os.path.normpath(source["local"]["directory"]))


def _load(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """A file's dependencies in jb's ordered map (a repeated key keeps its first place and
    takes its last entry: so does a dict); version 0 files are keyed by `name` first."""
    data = json.loads(path.read_text())
    deps = list(data.get("dependencies") or [])
    if data.get("version", 0) == 0:  # jb's v0: every dependency named, legacy imports on
        deps = list({d["name"]: d for d in deps}.values())
    return list({_name(d): d for d in deps}.values()), data.get("legacyImports", True)


def jb_install(work: Path, env: dict[str, str]) -> None:
    """`jb install` in `work` (Commodore's working directory); git runs with `env`."""
    direct, legacy_imports = _load(work / "jsonnetfile.json")
    vendor = work / "vendor"
    shutil.rmtree(vendor, ignore_errors=True)  # as in a fresh working directory
    (vendor / ".tmp").mkdir(parents=True, exist_ok=True)
    locks: dict[str, dict[str, Any]] = {}
    order = _ensure(direct, work, vendor, None, locks, env)
    shutil.rmtree(vendor / ".tmp")
    if legacy_imports:
        for name in order:
            dep = locks[name]
            if "git" not in dep["source"]:
                continue
            git = dep["source"]["git"]
            legacy = dep.get("name") or _git_parts(git["remote"], git.get("subdir", ""))[1]
            link = vendor / legacy
            if os.path.lexists(link):
                continue  # jb: "WARN: cannot link ..."
            os.symlink(name, link)


def _ensure(
    direct: list[dict[str, Any]],
    work: Path,
    vendor: Path,
    parent: Path | None,
    locks: dict[str, dict[str, Any]],
    env: dict[str, str],
) -> list[str]:
    names: list[str] = []
    for dep in direct:
        name = _name(dep)
        if name not in locks:
            locks[name] = _download(dep, name, work, vendor, parent, env)
        if name not in names:
            names.append(name)
    order = list(names)
    for name in names:
        dep = locks[name]
        file = vendor / name / "jsonnetfile.json"
        if dep.get("single") or not file.exists():
            continue
        nested, _ = _load(file)
        real = Path(os.path.realpath(vendor / name))
        for n in _ensure(nested, work, vendor, real, locks, env):
            if n not in order:
                order.append(n)
    return order


def _download(
    dep: dict[str, Any],
    name: str,
    work: Path,
    vendor: Path,
    parent: Path | None,
    env: dict[str, str],
) -> dict[str, Any]:
    source = dep["source"]
    dest = vendor / name
    if "local" in source:
        directory = source["local"]["directory"]
        target = os.path.normpath(os.path.join(parent or work, directory))
        os.symlink(target, dest)
        return dep
    git = source["git"]
    subdir = git.get("subdir", "").strip("/")
    _, _, remote = _git_parts(git["remote"], subdir)
    version = dep["version"]
    tmp = Path(tempfile.mkdtemp(dir=vendor / ".tmp"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args], cwd=tmp, env=env, capture_output=True, text=True, check=False
        )

    run("init", "-q")
    run("remote", "add", "origin", remote)
    if run("fetch", "--tags", "--depth", "1", "origin", version).returncode != 0:
        assert run("fetch", "origin").returncode == 0, f"cannot fetch {remote}"
    if subdir:
        run("config", "core.sparsecheckout", "true")
        (tmp / ".git" / "info" / "sparse-checkout").write_text(f"/{subdir}/*\n")
    done = run("-c", "advice.detachedHead=false", "checkout", version)
    assert done.returncode == 0, f"cannot check out {version} of {remote}: {done.stderr}"
    commit = run("rev-parse", "HEAD").stdout.strip()
    shutil.rmtree(tmp / ".git")
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.rename(tmp / subdir if subdir else tmp, dest)
    shutil.rmtree(tmp, ignore_errors=True)
    return {**dep, "version": commit}
