"""Cached bare mirrors of fleet repositories on a worker, and per-deployment checkouts.

Layout under the worker's git directory (settings.git_dir):

    mirrors/<owner>/<name>.git      `git clone --mirror` once, then `git fetch --prune`
    mirrors/<owner>/<name>.git.lock flock held while cloning, fetching or adding worktrees
    checkouts/.rev-<sha>-<mirror>/  `git worktree add --detach` of one revision, shared
    checkouts/<deployment-id>       a symlink to it (or, for a retried checkout, a worktree
                                    of its own)

A push never clones: the first use of a repository clones its mirror, every later use fetches
only what is new, and a revision the mirror already holds is not fetched at all (commits are
immutable). Checkouts are worktrees of the mirror, so they share its object store and cost
only the files written; the deployments of one revision on a worker share one worktree (a
fleet-wide change checks the revision out once, not once per root: writing a 1,000-root
fleet's files takes about a second), which goes with the last of them. Checkouts are read,
never written.

The remote of a repository comes from `remote_for(repo)`, which the worker builds from its
settings (the repository on the configured GitHub, `shared.github.urls.clone_url`): never from
the `clone_url` a request or payload carries, so no caller chooses what the worker clones, and a
mirror's `origin` changes only with the settings. Credentials for HTTPS remotes come from a
`token_for(repo)` callback (the GitHub App's installation token) and reach git through
`GIT_CONFIG_*` environment variables as an `http.extraheader`: never on the command line, never
in the mirror's config, never in errors; they go only to that remote.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from shared.contracts.deploy import Relation, RepoRef
from shared.process import CommandTimedOut, Finished, run

ZERO_SHA = "0" * 40
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# A fetch of a large fleet over a slow link can take a while; a hung remote must not block
# the activity forever (its heartbeats would keep it alive).
GIT_TIMEOUT_SECONDS = 30 * 60

TokenProvider = Callable[[RepoRef], "str | None"]
# Where a repository is cloned from (see the module's docstring).
RemoteFor = Callable[[RepoRef], str]


def git_env(token: str | None) -> dict[str, str]:
    """The environment for a non-interactive git that authenticates with an installation token.

    The token goes in an `http.extraheader` through GIT_CONFIG_* variables: never in argv, a
    remote URL or a config file, where logs, `ps` or error messages would show it."""
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"  # never wait for a password nobody will type
    env["GIT_ASKPASS"] = "true"
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
        env["GIT_CONFIG_COUNT"] = str(count + 1)
        env[f"GIT_CONFIG_KEY_{count}"] = "http.extraheader"
        env[f"GIT_CONFIG_VALUE_{count}"] = f"AUTHORIZATION: basic {basic}"
    return env


class GitMirrorError(RuntimeError):
    """git failed: network, disk, a remote that went away. Worth retrying."""


class RevisionNotFound(GitMirrorError):
    """The revision is not in the repository even after a fetch (retrying will not help)."""


def is_zero(sha: str | None) -> bool:
    return not sha or set(sha) == {"0"}


def _safe(name: str, what: str) -> str:
    if not _SAFE_NAME.match(name) or name.endswith((".lock", ".git")) or ".." in name:
        raise ValueError(f"{what} {name!r}: only letters, digits, '.', '_' and '-' are allowed")
    return name


@dataclass(frozen=True)
class PullRefs:
    """A pull request's refs as the mirror has them after a fetch (None: not on the remote)."""

    head: str | None
    merge: str | None
    base: str | None


class GitMirror:
    """Mirrors and checkouts under `git_dir`. Safe to use from several threads and processes:
    clones, fetches and worktree changes of one mirror are serialized by a file lock."""

    def __init__(
        self,
        git_dir: Path,
        *,
        remote_for: RemoteFor,
        token_for: TokenProvider | None = None,
        timeout: float = GIT_TIMEOUT_SECONDS,
    ) -> None:
        self.git_dir = git_dir.resolve()
        self.remote_for = remote_for
        self.mirrors_dir = self.git_dir / "mirrors"
        self.checkouts_dir = self.git_dir / "checkouts"
        self.token_for = token_for
        self.timeout = timeout

    # --- paths ---------------------------------------------------------------------------

    def mirror_path(self, repo: RepoRef) -> Path:
        owner = _safe(repo.owner, "repository owner")
        name = _safe(repo.name, "repository name")
        return self.mirrors_dir / owner / f"{name}.git"

    def checkout_path(self, name: str) -> Path:
        return self.checkouts_dir / _safe(name, "checkout name")

    # --- running git ---------------------------------------------------------------------

    def env_for(self, repo: RepoRef | None) -> dict[str, str]:
        token = None
        if repo is not None and self.token_for and self.remote_for(repo).startswith("https://"):
            token = self.token_for(repo)
        return git_env(token)

    def _git(
        self,
        cwd: Path | None,
        *args: str,
        repo: RepoRef | None = None,
        check: bool = True,
    ) -> Finished:
        cmd = ["git", *(["-C", str(cwd)] if cwd else []), *args]
        try:
            proc = run(cmd, timeout=self.timeout, env=self.env_for(repo), what=f"git {args[0]}")
        except CommandTimedOut as err:
            raise GitMirrorError(str(err)) from None
        if check and not proc.ok:
            raise GitMirrorError(f"git {' '.join(args[:2])}: {proc.detail()}")
        return proc

    @contextlib.contextmanager
    def _locked(self, mirror: Path) -> Iterator[None]:
        mirror.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{mirror}.lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # --- mirror --------------------------------------------------------------------------

    def fetch(self, repo: RepoRef) -> Path:
        """Clone the mirror if this worker has none yet, else fetch what is new."""
        mirror = self.mirror_path(repo)
        with self._locked(mirror):
            self._fetch_locked(repo, mirror)
        return mirror

    def _fetch_locked(self, repo: RepoRef, mirror: Path) -> None:
        remote = self.remote_for(repo)
        if not (mirror / "HEAD").is_file():
            # Clone next to the final path, then rename: a crash never leaves half a mirror.
            shutil.rmtree(mirror, ignore_errors=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{mirror.name}.", dir=mirror.parent))
            try:
                self._git(None, "clone", "--mirror", "--quiet", remote, str(tmp), repo=repo)
                os.replace(tmp, mirror)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            return
        current = self._git(mirror, "config", "--get", "remote.origin.url", check=False)
        if current.out.strip() != remote:  # only when the settings changed
            self._git(mirror, "remote", "set-url", "origin", remote)
        self._git(mirror, "fetch", "--prune", "--quiet", "origin", repo=repo)

    def has_commit(self, repo: RepoRef, revision: str) -> bool:
        mirror = self.mirror_path(repo)
        if is_zero(revision) or not (mirror / "HEAD").is_file():
            return False
        proc = self._git(mirror, "cat-file", "-e", f"{revision}^{{commit}}", check=False)
        return proc.returncode == 0

    def ensure(self, repo: RepoRef, *revisions: str) -> Path:
        """The mirror, fetched only when one of `revisions` is missing from it.

        A commit that still is missing after a fetch of every ref is asked for by id (GitHub
        serves commits reachable from any ref, including pull requests); when that fails too
        the revision does not exist there: `RevisionNotFound`.
        """
        mirror = self.mirror_path(repo)
        wanted = [r for r in revisions if not is_zero(r)]
        if all(self.has_commit(repo, r) for r in wanted) and (mirror / "HEAD").is_file():
            return mirror
        with self._locked(mirror):
            missing = [r for r in wanted if not self.has_commit(repo, r)]
            if missing or not (mirror / "HEAD").is_file():
                self._fetch_locked(repo, mirror)
            for revision in [r for r in wanted if not self.has_commit(repo, r)]:
                self._git(mirror, "fetch", "--quiet", "origin", revision, repo=repo, check=False)
                if not self.has_commit(repo, revision):
                    raise RevisionNotFound(
                        f"revision {revision} is not in {repo.full_name} (fetched from its remote)"
                    )
        return mirror

    def default_tip(self, repo: RepoRef) -> str:
        """The tip of the repository's default branch, fetched now: the rollwright.yaml in
        force (who may click, who may hotfix)."""
        self.fetch(repo)
        return self.resolve(repo, f"refs/heads/{repo.default_branch}")

    def resolve(self, repo: RepoRef, revision: str) -> str:
        mirror = self.mirror_path(repo)
        proc = self._git(mirror, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
        return proc.out.strip()

    # --- pull requests -------------------------------------------------------------------

    def pull_refs(self, repo: RepoRef, number: int, base_ref: str) -> PullRefs:
        """Fetch the mirror (a mirror fetches every ref, `refs/pull/*` included, and prunes
        the ones GitHub dropped) and resolve the pull request's head and merge refs and its
        base branch. A ref the remote does not have is None: GitHub has no merge ref while a
        pull request conflicts with its base."""
        if number < 1:
            raise ValueError(f"pull request number {number}: must be positive")
        mirror = self.fetch(repo)
        return PullRefs(
            head=self._ref(mirror, f"refs/pull/{number}/head"),
            merge=self._ref(mirror, f"refs/pull/{number}/merge"),
            base=self._ref(mirror, f"refs/heads/{base_ref}") if base_ref else None,
        )

    def _ref(self, mirror: Path, ref: str) -> str | None:
        check = self._git(None, "check-ref-format", ref, check=False)
        if check.returncode != 0:
            return None
        proc = self._git(
            mirror, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False
        )
        return (proc.out.strip() or None) if proc.returncode == 0 else None

    def parents(self, repo: RepoRef, revision: str) -> list[str]:
        """The parents of a commit, first parent first."""
        mirror = self.mirror_path(repo)
        proc = self._git(mirror, "rev-list", "--parents", "-n", "1", revision)
        return proc.out.split()[1:]

    def merge_base(self, repo: RepoRef, a: str, b: str) -> str | None:
        """The best common ancestor of two commits, None when they share no history."""
        mirror = self.mirror_path(repo)
        proc = self._git(mirror, "merge-base", a, b, check=False)
        if proc.returncode not in (0, 1):
            raise GitMirrorError(f"git merge-base {a[:12]} {b[:12]}: {proc.err.strip()}")
        return proc.out.strip() or None

    # --- ancestry ------------------------------------------------------------------------

    def relation(self, repo: RepoRef, base: str | None, head: str) -> Relation:
        """How `head` relates to the latest deployed `base`: first / same / ahead / behind /
        diverged. A base the repository no longer has (history rewritten and collected) is
        "diverged": nothing proves `head` contains it, so a person confirms."""
        self.ensure(repo, head)
        if base is None or is_zero(base):
            return "first"
        if not self.has_commit(repo, base):
            self.fetch(repo)
            if not self.has_commit(repo, base):
                return "diverged"
        mirror = self.mirror_path(repo)
        base_sha, head_sha = self.resolve(repo, base), self.resolve(repo, head)
        if base_sha == head_sha:
            return "same"
        if self._is_ancestor(mirror, base_sha, head_sha):
            return "ahead"
        if self._is_ancestor(mirror, head_sha, base_sha):
            return "behind"
        return "diverged"

    def _is_ancestor(self, mirror: Path, ancestor: str, descendant: str) -> bool:
        proc = self._git(mirror, "merge-base", "--is-ancestor", ancestor, descendant, check=False)
        if proc.returncode not in (0, 1):
            raise GitMirrorError(f"git merge-base --is-ancestor: {proc.err.strip()}")
        return proc.returncode == 0

    # --- checkouts -----------------------------------------------------------------------

    def checkout(self, repo: RepoRef, revision: str, name: str) -> tuple[Path, str]:
        """`revision` at checkouts/<name>: a link to the worker's shared worktree of the
        revision, made when the first checkout of it needs it. A checkout that exists already
        is replaced by a worktree of its own (a retried activity starts clean, whatever the
        failed attempt left). Returns the path and the full commit id."""
        mirror = self.ensure(repo, revision)
        sha = self.resolve(repo, revision)
        dest = self.checkout_path(name)
        shared = self.checkouts_dir / f".rev-{sha}-{_digest(mirror)}"
        self.checkouts_dir.mkdir(parents=True, exist_ok=True)
        doomed: list[Path] = []
        with self._locked(mirror):
            if dest.is_symlink() or dest.exists():
                doomed += self._release_locked(mirror, dest)
                self._add_worktree(mirror, dest, sha)
            else:
                if not (shared / ".git").is_file():
                    doomed += self._unlink_locked(mirror, shared)
                    self._add_worktree(mirror, shared, sha)
                dest.symlink_to(shared.name)
        self._dispose(mirror, doomed)
        return dest, sha

    def remove_checkout(self, path: Path) -> bool:
        """Delete a checkout made by `checkout` (and the revision's shared worktree with the
        last link to it). Paths outside checkouts/ are refused (the path comes from an
        activity payload). Returns False when there was nothing to remove."""
        path = Path(os.path.abspath(path))
        if path.parent != self.checkouts_dir:
            raise ValueError(f"{path} is not a checkout under {self.checkouts_dir}")
        if not (path.is_symlink() or path.exists()):
            return False
        mirror = _mirror_of(self._target(path))
        if mirror is None:
            if path.is_symlink():
                path.unlink(missing_ok=True)
            else:
                shutil.rmtree(path, ignore_errors=True)
            return True
        with self._locked(mirror):
            doomed = self._release_locked(mirror, path)
        self._dispose(mirror, doomed)
        return True

    def _target(self, path: Path) -> Path:
        """The worktree of checkout `path`: the shared one it links to, or itself."""
        return self.checkouts_dir / os.readlink(path) if path.is_symlink() else path

    def _release_locked(self, mirror: Path, path: Path) -> list[Path]:
        """Take checkout `path` away, and the shared worktree it links to when no other
        checkout does; returns what `_dispose` deletes."""
        target = self._target(path)
        doomed = self._unlink_locked(mirror, path)
        if target != path and not self._linked(target):
            doomed += self._unlink_locked(mirror, target)
        return doomed

    def _add_worktree(self, mirror: Path, dest: Path, sha: str) -> None:
        self._git(mirror, "worktree", "add", "--detach", "--force", "--quiet", str(dest), sha)

    def _linked(self, shared: Path) -> bool:
        """Whether a checkout still links to the shared worktree `shared`."""
        for entry in self.checkouts_dir.iterdir():
            with contextlib.suppress(OSError):
                if entry.is_symlink() and os.readlink(entry) == shared.name:
                    return True
        return False

    def _unlink_locked(self, mirror: Path, path: Path) -> list[Path]:
        """Take `path` out of checkouts/ at once (a link is removed, a worktree renamed
        aside); returns the directories left to delete, which `_dispose` does without the
        lock: deleting a fleet's files takes a while, and checkouts wait for the lock."""
        if path.is_symlink():
            path.unlink()
            return []
        if not path.exists():
            return []
        aside = Path(tempfile.mkdtemp(prefix=".removing-", dir=self.checkouts_dir))
        os.replace(path, aside / "tree")
        return [aside]

    def _dispose(self, mirror: Path, doomed: list[Path]) -> None:
        if not doomed:
            return
        for aside in doomed:
            shutil.rmtree(aside, ignore_errors=True)
        with self._locked(mirror):
            # Drops the worktrees' bookkeeping in the mirror now that their directories are gone.
            self._git(mirror, "worktree", "prune", check=False)

    def prune_checkouts(self, max_age_seconds: float) -> list[Path]:
        """Remove checkouts not touched for `max_age_seconds` (left by a worker that died;
        a deployment may wait for review up to 7 days, so callers pass more than that)."""
        removed: list[Path] = []
        if not self.checkouts_dir.is_dir():
            return removed
        cutoff = time.time() - max_age_seconds
        for path in sorted(self.checkouts_dir.iterdir()):
            if path.name.startswith("."):
                continue  # shared worktrees go with their last link; leftovers below
            try:
                # a link's own age: the checkout's, not its revision's
                stale = (path.is_symlink() or path.is_dir()) and path.lstat().st_mtime < cutoff
            except FileNotFoundError:
                continue
            if stale and self.remove_checkout(path):
                removed.append(path)
        for path in sorted(self.checkouts_dir.iterdir()):
            # shared worktrees nobody links to, and removals a crash interrupted
            try:
                stale = path.name.startswith(".") and path.lstat().st_mtime < cutoff
            except FileNotFoundError:
                continue
            if stale and path.name.startswith(".removing-"):
                shutil.rmtree(path, ignore_errors=True)
            elif stale and path.name.startswith(".rev-") and not self._linked(path):
                self.remove_checkout(path)
        return removed


def _digest(mirror: Path) -> str:
    """A short name for a mirror (two repositories may hold the same commit)."""
    return hashlib.sha256(str(mirror).encode()).hexdigest()[:12]


def _mirror_of(checkout: Path) -> Path | None:
    """The mirror a worktree belongs to, from its `.git` file (`gitdir: <mirror>/worktrees/x`)."""
    try:
        text = (checkout / ".git").read_text()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text.split(":", 1)[1].strip())
    mirror = gitdir.parent.parent
    return mirror if (mirror / "HEAD").is_file() else None


def commit_summary(checkout: Path, revision: str = "HEAD") -> dict[str, str]:
    """Subject, author and date of a commit of a checkout (what reviewers read about it):
    `{"sha", "subject", "author", "date"}`."""
    proc = run(
        ["git", "-C", str(checkout), "log", "-1", "--format=%H%x00%s%x00%an%x00%cI", revision],
        timeout=30,
    )
    if not proc.ok:
        raise GitMirrorError(f"git log {revision}: {proc.err.strip()}")
    sha, subject, author, date = [*proc.out.rstrip("\n").split("\0"), "", "", ""][:4]
    return {"sha": sha, "subject": subject, "author": author, "date": date}
