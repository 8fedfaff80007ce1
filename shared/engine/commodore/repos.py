"""The global repository and the components, at git URLs: bare mirrors in rollwright's cache,
and their files at one revision.

    mirror, sha = Mirrors().commit(url, "v7.1.0", what="component 'argocd'")
    mirror.tree(sha)     # its files, extracted once: <cache>/git/trees/<sha>

Cache layout under `$ROLLWRIGHT_CACHE_DIR/git` (default `~/.cache/rollwright/git`):

    <sha256 of the URL>.git        `git clone --mirror`, then `git fetch --prune`
    <sha256 of the URL>.git.lock   flock held while cloning or fetching
    trees/<commit>/                the files of a commit, extracted once, shared, read only

A repository is fetched at most once a minute per process (`ROLLWRIGHT_GIT_FETCH_TTL`: one
render of many clusters sees one answer for a branch, and a later push to it is seen), again
when a version asked for is not in the mirror yet, and not at all when the revision asked for
is a commit the mirror already holds (commits are immutable). Any URL git reaches works: https
(with the machine's git credentials), ssh and `file://`. URLs and git's own messages never
carry credentials into errors: a URL with a user:password part is shown without it.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import re
import shutil
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit, urlunsplit

from shared.engine.errors import FleetError
from shared.process import CommandTimedOut, Finished, run

CACHE_ENV = "ROLLWRIGHT_CACHE_DIR"
FETCH_TTL_ENV = "ROLLWRIGHT_GIT_FETCH_TTL"
DEFAULT_FETCH_TTL = 60.0
GIT_TIMEOUT_SECONDS = 10 * 60
_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")


def cache_dir() -> Path:
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.path.expanduser("~"), ".cache", "rollwright"
    )
    return Path(base) / "git"


def shown(url: str) -> str:
    """`url` as messages show it: without a password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


class RepoError(FleetError):
    """A repository that could not be reached: not the fleet's fault, retried."""

    retryable = True


def _git(*args: str, cwd: Path | None = None) -> Finished:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
    return run(["git", *args], timeout=GIT_TIMEOUT_SECONDS, what="git", env=env, cwd=cwd)


@dataclass(frozen=True)
class Mirror:
    url: str
    path: Path

    def find(self, revision: str | None, *, listed_first: bool = False) -> str | None:
        """The commit `revision` (a branch, tag or commit; None: the default branch) names in
        the mirror, or None. With `listed_first`, the first branch or tag `git ls-remote
        --heads --tags <revision>` would list (by name, its last parts `revision`) comes
        first: how jsonnet-bundler resolves a version of a GitHub repository."""
        if listed_first and revision:
            listed = self._listed(revision)
            if listed is not None:
                return listed
        wanted = revision or "HEAD"
        candidates = (
            [wanted]
            if revision is None
            else [f"refs/tags/{wanted}", f"refs/heads/{wanted}", wanted]
        )
        return next(filter(None, (self._commit(name) for name in candidates)), None)

    def _listed(self, pattern: str) -> str | None:
        refs = _git(
            "--git-dir",
            str(self.path),
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads",
            "refs/tags",
        )
        for ref in sorted(refs.out.split("\n") if refs.ok else []):
            if ref and f"/{ref}".endswith(f"/{pattern}"):
                commit = self._commit(ref)
                if commit is not None:
                    return commit
        return None

    def _commit(self, name: str) -> str | None:
        """The commit `name` (a ref or a sha) names in the mirror, or None."""
        found = _git(
            "--git-dir", str(self.path), "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"
        )
        return found.out.strip() if found.ok else None

    def short(self, sha: str) -> str:
        """`git rev-parse --short=6`, as Commodore names commits in its catalog commits."""
        found = _git("--git-dir", str(self.path), "rev-parse", "--short=6", sha)
        return found.out.strip() if found.ok else sha[:6]

    def default_branch(self) -> str:
        """The branch the repository's HEAD names: Commodore's version of a repository
        checked out without one."""
        found = _git("--git-dir", str(self.path), "symbolic-ref", "--short", "HEAD")
        return found.out.strip() if found.ok else "HEAD"

    def read_text(self, sha: str, rel: str) -> str | None:
        """File `rel` of commit `sha`, or None when it has none."""
        found = _git("--git-dir", str(self.path), "show", f"{sha}:{rel}")
        return found.out if found.ok else None

    def paths(self, sha: str) -> list[str]:
        """The paths of the files of commit `sha`."""
        found = _git("--git-dir", str(self.path), "ls-tree", "-r", "-z", "--name-only", sha)
        if not found.ok:
            raise RepoError(f"cannot read commit {sha[:12]} of {shown(self.url)}: {found.detail()}")
        return [p for p in found.out.split("\0") if p]

    def extract(self, sha: str, dest: Path) -> None:
        """The files of commit `sha` into `dest` (created), without .git."""
        found = _git("--git-dir", str(self.path), "archive", "--format=tar", sha)
        if not found.ok:
            raise RepoError(f"cannot read commit {sha[:12]} of {shown(self.url)}: {found.detail()}")
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(found.stdout)) as tar:
            try:
                # "data": no link leads out of the files (a component's Jsonnet or Jinja2
                # template would read the worker's files through it).
                tar.extractall(dest, filter="data")
            except tarfile.FilterError as err:
                raise FleetError(
                    f"commit {sha[:12]} of {shown(self.url)}: {err} (refused: links must "
                    "stay inside the repository)"
                ) from None

    def tree(self, sha: str) -> Path:
        """The files of commit `sha`, extracted once into the cache (`trees/<sha>`) and shared
        by every render that reads it: never written to."""
        final = self.path.parent / "trees" / sha
        if final.is_dir():
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=final.parent))
        try:
            self.extract(sha, staging / "files")
            try:
                os.rename(staging / "files", final)
            except OSError:
                if not final.is_dir():  # not another process's identical tree: a real failure
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return final


class Mirrors:
    """Mirrors, fetched at most once per `ROLLWRIGHT_GIT_FETCH_TTL` seconds (default 60) per
    process, and the commits their branches and tags named then (thread-safe). A commit asked
    for by its full id is immutable: once in the mirror it is never fetched again."""

    _fetched: ClassVar[dict[str, float]] = {}  # mirror path -> when it was last fetched
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_dir()

    def mirror(self, url: str) -> Mirror:
        name = hashlib.sha256(url.encode()).hexdigest()[:32]
        return Mirror(url, self.root / f"{name}.git")

    def commit(
        self, url: str, revision: str | None, *, what: str, listed_first: bool = False
    ) -> tuple[Mirror, str]:
        """The mirror of `url` and the commit `revision` names (`Mirror.find`): from the
        mirror when it was fetched within the TTL (or `revision` is a commit it holds), else
        after a fetch."""
        mirror = self.mirror(url)
        missing = False
        if mirror.path.is_dir():
            immutable = bool(revision and _FULL_SHA.match(revision))
            if immutable or self._fresh(mirror):
                sha = mirror.find(revision, listed_first=listed_first)
                if sha is not None:
                    return mirror, sha
                missing = True  # a tag or branch pushed since the last fetch
        self._fetch(mirror, what, force=missing)
        sha = mirror.find(revision, listed_first=listed_first)
        if sha is None:
            raise FleetError(
                f"{what}: version {revision or 'HEAD'!r} is no branch, tag or commit of "
                f"{shown(url)}"
            )
        return mirror, sha

    def _fresh(self, mirror: Mirror) -> bool:
        fetched = Mirrors._fetched.get(str(mirror.path))
        return fetched is not None and time.monotonic() - fetched < _fetch_ttl()

    def _fetch(self, mirror: Mirror, what: str, *, force: bool) -> None:
        url = mirror.url
        with Mirrors._lock:
            if not force and self._fresh(mirror) and mirror.path.is_dir():
                return
            self.root.mkdir(parents=True, exist_ok=True)
            with open(f"{mirror.path}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    if mirror.path.is_dir():
                        done = _git("--git-dir", str(mirror.path), "fetch", "--prune", "--quiet")
                    else:
                        done = _git("clone", "--mirror", "--quiet", url, str(mirror.path))
                except CommandTimedOut as err:
                    raise RepoError(f"{what}: {shown(url)}: {err}") from None
                if not done.ok:
                    detail = done.detail().replace(url, shown(url))
                    raise RepoError(f"{what}: cannot fetch {shown(url)}: {detail}")
            Mirrors._fetched[str(mirror.path)] = time.monotonic()


def _fetch_ttl() -> float:
    try:
        return float(os.environ.get(FETCH_TTL_ENV, "") or DEFAULT_FETCH_TTL)
    except ValueError:
        return DEFAULT_FETCH_TTL
