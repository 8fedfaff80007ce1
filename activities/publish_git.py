"""Publishing a root's render to a git branch: one commit per deployment, only its subtree.

The target is the fleet repo's `rendered` branch by default, or another repository
(`publish.git.repository`, e.g. a Commodore-style catalog). The worker keeps one bare scratch
repository per target under `<git_dir>/publish/`, and per publish:

1. fetches the branch tip (a missing branch is created as an orphan);
2. is done when the branch history already has a commit with the trailer
   `Rollwright-Deployment: <id>` (a retried publish makes no second commit);
3. builds the commit with `git fast-import` — the tip's tree with the root's subtree
   (`publish.git.path`, default `{root}/`) replaced by the render, nothing else touched — and
   is done without pushing when that tree equals the tip's (nothing changed);
4. pushes it without force. A push rejected because the branch moved (another root published
   meanwhile) goes back to 1 and re-applies the subtree onto the new tip, a bounded number of
   times with jittered back-off, so concurrent publishes of different roots all land.

Publishes of one target on one worker take turns (a file lock on the scratch repository);
across workers the rebase-on-reject loop keeps them correct.

Credentials: the fleet repo and `owner/name` targets are pushed with the GitHub App's
installation token, passed to git as an `http.extraheader` through `GIT_CONFIG_*` variables
(never in argv, a remote URL or a message). URL targets use the worker's own git credentials
(SSH keys, credential helpers): the installation token is never sent to a host that a fleet's
`rollwright.yaml` names.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from shared.contracts.deploy import PublishRequest, RepoRef
from shared.engine.config.publish import GitPublishSettings
from shared.process import CommandTimedOut, Finished, run
from shared.stores.gitmirror import RemoteFor, TokenProvider, git_env

BOT_NAME = "rollwright[bot]"
BOT_EMAIL = "rollwright[bot]@users.noreply.github.com"
TRAILER = "Rollwright-Deployment"
PUSH_ATTEMPTS = 8
GIT_TIMEOUT_SECONDS = 10 * 60
_BUILD_REF = "refs/rollwright/build"
# Push outcomes that mean "the branch moved under us": fetch and re-apply.
_RACE_REASONS = (
    "fetch first",
    "non-fast-forward",
    "stale info",
    "failed to update ref",
    "cannot lock ref",
    "incorrect old value",
)


class GitPublishError(RuntimeError):
    """git failed while publishing (network, auth, a protected branch). Retried by Temporal;
    the message names the root and target, never credentials."""


@dataclass(frozen=True)
class GitTarget:
    """Where a root is published: a remote, a branch, and how to authenticate."""

    url: str
    label: str  # for messages and PublishResult: `acme/fleet` or the URL
    branch: str
    auth: RepoRef | None  # whose installation token to send; None: the worker's credentials
    # A branch that does not exist yet starts from this one's tip ("": an orphan branch).
    base: str = ""

    def describe(self) -> str:
        return f'git branch "{self.branch}" of {self.label}'


@dataclass(frozen=True)
class GitOutcome:
    commit: str  # the branch commit holding this deployment's render
    already_published: bool  # no commit made: the trailer was found or nothing changed
    attempts: int  # pushes tried (more than 1: the branch moved and the root was re-applied)


def published_repo(repo: RepoRef, settings: GitPublishSettings) -> RepoRef | None:
    """The repository `publish.git` pushes to with the App's token: the fleet repo, or another
    of its owner's; None for a URL target, which is pushed with the worker's own credentials.
    Raises ValueError for another owner's repository."""
    wanted = settings.repository
    if not wanted:
        return repo
    if "://" in wanted or "@" in wanted:
        return None
    owner, _, name = wanted.partition("/")
    if owner.lower() != repo.owner.lower():
        # The installation token of another owner's installation must not be used on a
        # fleet repo's say-so.
        raise ValueError(
            f"publish.git.repository {wanted!r}: only repositories of the fleet's owner "
            f"({repo.owner}) can be published to with the GitHub App; use a URL for others"
        )
    return RepoRef(owner=owner, name=name, installation_id=repo.installation_id)


def git_target(repo: RepoRef, settings: GitPublishSettings, *, remote_for: RemoteFor) -> GitTarget:
    """The target of `publish.git` for fleet repo `repo`. A repository of the App's is pushed
    at `remote_for`'s URL (the configured GitHub's), never at a URL a request carried."""
    ref = published_repo(repo, settings)
    if ref is None:
        return GitTarget(settings.repository, settings.repository, settings.branch, None)
    return GitTarget(remote_for(ref), settings.repository or repo.full_name, settings.branch, ref)


def commit_message(request: PublishRequest, version: str) -> str:
    """The provenance message: what was published, from where, by whose approval."""
    revision = request.revision
    url = f"{request.repo.html_url.rstrip('/')}/commit/{revision}" if request.repo.html_url else ""
    lines = [
        f"Publish {request.root} at {revision[:12]}",
        "",
        f"Root: {request.root}",
        f"Revision: {revision}" + (f" ({url})" if url else ""),
        f"Repository: {request.repo.full_name}",
        f"Deployment: {request.deployment_id}",
        f"Trigger: {request.trigger}",
        f"Approved by: {request.approved_by or 'nobody (auto-approved)'}",
        f"Published by: rollwright {version}",
        "",
        f"{TRAILER}: {request.deployment_id}",
    ]
    return "\n".join(lines) + "\n"


class GitPublisher:
    """Commits rendered trees to git targets from scratch repositories under `work_dir`."""

    name = "git"

    def __init__(
        self,
        work_dir: Path,
        *,
        token_for: TokenProvider | None = None,
        attempts: int = PUSH_ATTEMPTS,
        backoff: float = 0.2,
        before_push: Callable[[GitTarget, int], None] | None = None,
        timeout: float = GIT_TIMEOUT_SECONDS,
    ) -> None:
        self.work_dir = work_dir.resolve()
        self.token_for = token_for
        self.attempts = attempts
        self.backoff = backoff
        # Called after a commit is built and before it is pushed (target, attempt number):
        # tests hold two publishers there to force them onto the same tip.
        self.before_push = before_push
        self.timeout = timeout

    def publish_tree(
        self,
        target: GitTarget,
        prefix: str,
        files: dict[str, bytes],
        *,
        deployment_id: str,
        message: str,
        root: str,
        replaced: tuple[str, ...] | None = None,
    ) -> GitOutcome:
        """Replace `prefix` (a directory, `prod/eu/`) on the target branch with `files`; with
        `replaced`, only those paths under it (`manifests`, `refs`: the rest is kept)."""
        scratch = self._scratch(target)
        env = self._env(target)
        with _locked(scratch):
            self._init(scratch)
            for attempt in range(1, self.attempts + 1):
                tip = self._fetch(scratch, target, env, root)
                if tip is not None:
                    found = self._find_deployment(scratch, tip, deployment_id)
                    if found:
                        return GitOutcome(found, True, attempt - 1)
                commit = self._build(scratch, tip, prefix, files, message, replaced)
                if tip is not None and self._tree(scratch, commit) == self._tree(scratch, tip):
                    return GitOutcome(tip, True, attempt - 1)
                if self.before_push is not None:
                    self.before_push(target, attempt)
                if self._push(scratch, target, env, commit, root):
                    return GitOutcome(commit, False, attempt)
                time.sleep(random.uniform(0.5, 1.5) * self.backoff * attempt)
        raise GitPublishError(
            f'publishing root "{root}" to {target.describe()}: the push was rejected '
            f"{self.attempts} times because the branch kept moving; giving up for now"
        )

    def find_published(self, target: GitTarget, deployment_id: str, *, root: str) -> str:
        """The branch commit of an earlier attempt of this deployment, or "": a retry looks
        before it renders again (a render that changed since would be refused, although this
        deployment's commit already landed)."""
        scratch = self._scratch(target)
        with _locked(scratch):
            self._init(scratch)
            tip = self._fetch(scratch, target, self._env(target), root)
            return self._find_deployment(scratch, tip, deployment_id) if tip else ""

    def default_branch(self, target: GitTarget, *, root: str) -> str | None:
        """The branch the remote's HEAD names (`git ls-remote --symref`), or None for a
        repository without one (empty)."""
        scratch = self._scratch(target)
        with _locked(scratch):
            self._init(scratch)
            proc = self._git(
                scratch, "ls-remote", "--symref", target.url, "HEAD", env=self._env(target)
            )
        if proc.returncode != 0:
            raise self._error(root, target, "reading the default branch", proc)
        for line in proc.out.splitlines():
            ref, _, name = line.partition("\t")
            if ref.startswith("ref: refs/heads/") and name == "HEAD":
                return ref.removeprefix("ref: refs/heads/")
        return None

    def message_of(self, target: GitTarget, commit: str) -> str:
        """The message of a commit fetched from `target` (in its scratch repository)."""
        return self._git_ok(self._scratch(target), "log", "-1", "--format=%B", commit)

    # --- steps -------------------------------------------------------------------------------

    def _fetch(
        self, scratch: Path, target: GitTarget, env: dict[str, str], root: str
    ) -> str | None:
        remote = f"refs/remotes/target/{target.branch}"
        proc = self._git(
            scratch,
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            target.url,
            f"+refs/heads/{target.branch}:{remote}",
            env=env,
        )
        if proc.returncode != 0:
            if "couldn't find remote ref" in proc.err:
                self._git(scratch, "update-ref", "-d", remote)
                if target.base and target.base != target.branch:
                    return self._fetch(
                        scratch, replace(target, branch=target.base, base=""), env, root
                    )
                return None  # a new branch: the first commit is an orphan
            raise self._error(root, target, "fetching the branch", proc)
        return self._git_ok(scratch, "rev-parse", "--verify", "--quiet", remote).strip()

    def _find_deployment(self, scratch: Path, tip: str, deployment_id: str) -> str:
        """The commit of `tip`'s history carrying this deployment's trailer, or ""."""
        return self._git_ok(
            scratch,
            "log",
            "-n1",
            "--format=%H",
            "--fixed-strings",
            f"--grep={TRAILER}: {deployment_id}",
            tip,
        ).strip()

    def _build(
        self,
        scratch: Path,
        tip: str | None,
        prefix: str,
        files: dict[str, bytes],
        message: str,
        replaced: tuple[str, ...] | None = None,
    ) -> str:
        """A commit on `tip` whose tree has `prefix` replaced by `files` (git fast-import)."""
        stamp = f"{int(datetime.now(UTC).timestamp())} +0000"
        data = message.encode()
        out = [
            f"commit {_BUILD_REF}\n".encode(),
            f"author {BOT_NAME} <{BOT_EMAIL}> {stamp}\n".encode(),
            f"committer {BOT_NAME} <{BOT_EMAIL}> {stamp}\n".encode(),
            b"data %d\n" % len(data),
            data,
            b"\n",
        ]
        if tip is not None:
            out.append(f"from {tip}\n".encode())
            directory = prefix.rstrip("/")
            if replaced is not None:
                out.extend(b"D " + _quote(prefix + path) + b"\n" for path in replaced)
            else:
                out.append(b"deleteall\n" if not directory else b"D " + _quote(directory) + b"\n")
        for path in sorted(files):
            blob = files[path]
            out.append(b"M 100644 inline " + _quote(prefix + path) + b"\n")
            out.append(b"data %d\n" % len(blob))
            out.append(blob)
            out.append(b"\n")
        out.append(b"done\n")
        try:
            proc = run(
                ["git", "-C", str(scratch), "fast-import", "--quiet", "--force", "--done"],
                input=b"".join(out),
                timeout=self.timeout,
                what="git fast-import",
            )
        except CommandTimedOut as err:
            raise GitPublishError(str(err)) from None
        if not proc.ok:
            raise GitPublishError(f"building the commit with git fast-import: {proc.detail(1)}")
        return self._git_ok(scratch, "rev-parse", "--verify", _BUILD_REF).strip()

    def _tree(self, scratch: Path, commit: str) -> str:
        return self._git_ok(scratch, "rev-parse", f"{commit}^{{tree}}").strip()

    def _push(
        self, scratch: Path, target: GitTarget, env: dict[str, str], commit: str, root: str
    ) -> bool:
        """True when the branch now points at `commit`; False when it moved meanwhile."""
        proc = self._git(
            scratch,
            "push",
            "--porcelain",
            "--quiet",
            target.url,
            f"{commit}:refs/heads/{target.branch}",
            env=env,
        )
        if proc.returncode == 0:
            return True
        report = proc.out + proc.err
        if any(reason in report for reason in _RACE_REASONS):
            return False
        raise self._error(root, target, "push rejected", proc)

    # --- plumbing ----------------------------------------------------------------------------

    def _scratch(self, target: GitTarget) -> Path:
        key = hashlib.sha256(target.url.encode()).hexdigest()[:16]
        return self.work_dir / f"{key}.git"

    def _init(self, scratch: Path) -> None:
        if not (scratch / "HEAD").is_file():
            scratch.mkdir(parents=True, exist_ok=True)
            self._git_ok(scratch, "init", "--quiet", "--bare")
            # Scratch objects are cheap to fetch again; never let gc run mid-publish.
            self._git_ok(scratch, "config", "gc.auto", "0")

    def _env(self, target: GitTarget) -> dict[str, str]:
        token = None
        if target.auth is not None and self.token_for and target.url.startswith("https://"):
            token = self.token_for(target.auth)
        return git_env(token)

    def _git(self, cwd: Path, *args: str, env: dict[str, str] | None = None) -> Finished:
        try:
            return run(
                ["git", "-C", str(cwd), *args], timeout=self.timeout, env=env, what=f"git {args[0]}"
            )
        except CommandTimedOut as err:
            raise GitPublishError(str(err)) from None

    def _git_ok(self, cwd: Path, *args: str) -> str:
        proc = self._git(cwd, *args)
        if not proc.ok:
            raise GitPublishError(f"git {' '.join(args[:2])}: {proc.detail(1)}")
        return proc.out

    def _error(self, root: str, target: GitTarget, doing: str, proc: Finished) -> GitPublishError:
        lines = [line.strip() for line in (proc.err + proc.out).splitlines() if line.strip()]
        detail = " ".join(line for line in lines if not line.startswith("To "))[-300:]
        return GitPublishError(
            f'publishing root "{root}" to {target.describe()}: {doing}: {detail or "git failed"}'
        )


@contextlib.contextmanager
def _locked(scratch: Path) -> Iterator[None]:
    scratch.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{scratch}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _quote(path: str) -> bytes:
    """A path as git fast-import reads it: C-style quoted, so any byte is safe."""
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return b'"' + escaped.encode("utf-8") + b'"'
