"""The worker's git cache: mirrors fetched incrementally, ancestry, per-deployment checkouts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from activities import github_remotes
from shared.contracts.deploy import RepoRef
from shared.settings import Settings
from shared.stores.gitmirror import GitMirror, GitMirrorError, RevisionNotFound
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo, local_remote


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "origin")
    write_files(repo, {"README.md": "one\n"})
    commit_all(repo, "one")
    return repo


@pytest.fixture
def ref(origin: Path) -> RepoRef:
    return RepoRef(owner="acme", name="fleet", clone_url=str(origin))


@pytest.fixture
def mirror(tmp_path: Path) -> GitMirror:
    return GitMirror(tmp_path / "cache", remote_for=local_remote)


def commit(repo: Path, text: str) -> str:
    write_files(repo, {"README.md": text + "\n"})
    return commit_all(repo, text)


def test_clone_once_then_fetch_incrementally(origin: Path, ref: RepoRef, mirror: GitMirror) -> None:
    first = git(origin, "rev-parse", "HEAD")
    path = mirror.ensure(ref, first)
    assert path == mirror.git_dir / "mirrors/acme/fleet.git"
    assert git(path, "rev-parse", "--is-bare-repository") == "true"
    marker = path / "rollwright-test-marker"
    marker.write_text("the same mirror directory survives fetches")
    inode = path.stat().st_ino

    second = commit(origin, "two")
    assert not mirror.has_commit(ref, second)
    mirror.ensure(ref, second)
    assert mirror.has_commit(ref, second)
    assert marker.exists() and path.stat().st_ino == inode  # fetched, not cloned again
    assert git(path, "rev-parse", "refs/heads/main") == second


def test_known_revision_does_not_fetch(origin: Path, ref: RepoRef, mirror: GitMirror) -> None:
    first = git(origin, "rev-parse", "HEAD")
    path = mirror.ensure(ref, first)
    commit(origin, "two")
    mirror.ensure(ref, first)
    # main in the mirror still points at the first commit: nothing was fetched
    assert git(path, "rev-parse", "refs/heads/main") == first


def test_unknown_revision(origin: Path, ref: RepoRef, mirror: GitMirror) -> None:
    with pytest.raises(RevisionNotFound, match=r"revision 1{40} is not in acme/fleet"):
        mirror.ensure(ref, "1" * 40)


def test_fetch_follows_forced_push(origin: Path, ref: RepoRef, mirror: GitMirror) -> None:
    base = git(origin, "rev-parse", "HEAD")
    old = commit(origin, "old tip")
    mirror.ensure(ref, old)
    git(origin, "reset", "-q", "--hard", base)
    rewritten = commit(origin, "rewritten tip")
    path = mirror.ensure(ref, rewritten)
    assert git(path, "rev-parse", "refs/heads/main") == rewritten


def test_relation(origin: Path, ref: RepoRef, mirror: GitMirror) -> None:
    a = git(origin, "rev-parse", "HEAD")
    b = commit(origin, "b")
    c = commit(origin, "c")
    git(origin, "checkout", "-q", "-b", "side", a)
    d = commit(origin, "d")
    assert mirror.relation(ref, None, b) == "first"
    assert mirror.relation(ref, "0" * 40, b) == "first"
    assert mirror.relation(ref, b, b) == "same"
    assert mirror.relation(ref, b, c) == "ahead"
    assert mirror.relation(ref, c, b) == "behind"
    assert mirror.relation(ref, c, d) == "diverged"
    assert mirror.relation(ref, a, d) == "ahead"
    # a base the repository never had: nothing proves head contains it
    assert mirror.relation(ref, "2" * 40, c) == "diverged"


def test_checkout_and_cleanup(origin: Path, ref: RepoRef, mirror: GitMirror) -> None:
    first = git(origin, "rev-parse", "HEAD")
    second = commit(origin, "two")
    path, sha = mirror.checkout(ref, first, "deploy-1")
    assert path == mirror.git_dir / "checkouts/deploy-1"
    assert sha == first
    assert (path / "README.md").read_text() == "one\n"
    other, _ = mirror.checkout(ref, "main", "deploy-2")  # names resolve to commits
    assert (other / "README.md").read_text() == "two\n"
    assert git(other, "rev-parse", "HEAD") == second

    # a retried checkout starts clean
    (path / "junk").write_text("left by a failed attempt")
    again, _ = mirror.checkout(ref, first, "deploy-1")
    assert again == path and not (path / "junk").exists()

    mirror_path = mirror.mirror_path(ref)
    assert "deploy-1" in git(mirror_path, "worktree", "list")
    assert mirror.remove_checkout(path) is True
    assert not path.exists()
    assert "deploy-1" not in git(mirror_path, "worktree", "list")
    assert mirror.remove_checkout(path) is False  # already gone: fine


def test_cleanup_refuses_paths_outside_checkouts(mirror: GitMirror, tmp_path: Path) -> None:
    victim = tmp_path / "precious"
    victim.mkdir()
    for path in (victim, mirror.checkouts_dir / ".." / "precious", mirror.checkouts_dir):
        with pytest.raises(ValueError, match="is not a checkout"):
            mirror.remove_checkout(path)
    assert victim.exists()


def test_prune_stale_checkouts(origin: Path, ref: RepoRef, mirror: GitMirror) -> None:
    old, _ = mirror.checkout(ref, "main", "old")
    fresh, _ = mirror.checkout(ref, "main", "fresh")
    past = time.time() - 3600
    # a checkout's age is its own (both link to the revision's shared worktree)
    os.utime(old, (past, past), follow_symlinks=False)
    assert mirror.prune_checkouts(600) == [old]
    assert not old.exists() and fresh.exists()
    assert (fresh / "README.md").is_file()


def test_checkouts_of_one_revision_share_a_worktree(
    origin: Path, ref: RepoRef, mirror: GitMirror
) -> None:
    """A fleet-wide change checks its revision out once per worker, not once per root; the
    shared worktree goes with the last checkout of it."""
    first, sha = mirror.checkout(ref, "main", "deploy-1")
    second, _ = mirror.checkout(ref, sha, "deploy-2")
    assert first.resolve() == second.resolve()
    assert (second / "README.md").read_text() == "one\n"
    assert git(second, "rev-parse", "HEAD") == sha
    mirror_path = mirror.mirror_path(ref)
    assert len(git(mirror_path, "worktree", "list").splitlines()) == 2  # the mirror and one

    assert mirror.remove_checkout(first) is True
    assert not first.exists() and (second / "README.md").is_file()
    assert mirror.remove_checkout(second) is True
    assert not second.exists()
    assert list(mirror.checkouts_dir.iterdir()) == []  # the shared worktree went too
    assert len(git(mirror_path, "worktree", "list").splitlines()) == 1


def test_prune_removes_unlinked_shared_worktrees(
    origin: Path, ref: RepoRef, mirror: GitMirror
) -> None:
    path, _ = mirror.checkout(ref, "main", "deploy-1")
    shared = path.resolve()
    path.unlink()  # as a worker that died between the two steps of a removal leaves it
    past = time.time() - 3600
    os.utime(shared, (past, past))
    assert mirror.prune_checkouts(600) == []
    assert list(mirror.checkouts_dir.iterdir()) == []


def test_unsafe_names_are_refused(mirror: GitMirror) -> None:
    with pytest.raises(ValueError, match="repository owner"):
        mirror.mirror_path(RepoRef(owner="..", name="x"))
    with pytest.raises(ValueError, match="checkout name"):
        mirror.checkout_path("../x")


def test_unreachable_remote_is_a_retryable_error(tmp_path: Path, mirror: GitMirror) -> None:
    ref = RepoRef(owner="acme", name="gone", clone_url=str(tmp_path / "nowhere"))
    with pytest.raises(GitMirrorError) as info:
        mirror.fetch(ref)
    assert not isinstance(info.value, RevisionNotFound)
    assert not mirror.mirror_path(ref).exists()  # no half-cloned mirror left behind


def test_token_goes_in_the_environment_not_the_command_line(mirror: GitMirror) -> None:
    ref = RepoRef(owner="acme", name="fleet", clone_url="https://github.invalid/acme/fleet.git")
    with_token = GitMirror(
        mirror.git_dir, token_for=lambda r: "ghs_secret", remote_for=local_remote
    )
    env = with_token.env_for(ref)
    headers = [v for k, v in env.items() if k.startswith("GIT_CONFIG_VALUE_")]
    assert len(headers) == 1 and headers[0].startswith("AUTHORIZATION: basic ")
    assert "ghs_secret" not in headers[0]  # base64 of x-access-token:<token>
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    local = RepoRef(owner="acme", name="fleet", clone_url="/srv/fleet")
    assert not any(k.startswith("GIT_CONFIG_VALUE_") for k in with_token.env_for(local))


def test_the_mirror_clones_its_remote_never_the_url_a_repo_ref_claims(
    origin: Path, tmp_path: Path
) -> None:
    evil = init_repo(tmp_path / "evil")
    write_files(evil, {"README.md": "not the fleet\n"})
    evil_head = commit_all(evil, "evil")
    first = git(origin, "rev-parse", "HEAD")
    mirror = GitMirror(tmp_path / "cache", remote_for=lambda repo: str(origin))
    claimed = RepoRef(owner="acme", name="fleet", clone_url=str(evil))
    path = mirror.ensure(claimed, first)
    assert git(path, "rev-parse", "refs/heads/main") == first
    with pytest.raises(RevisionNotFound):
        mirror.ensure(claimed, evil_head)
    # A later request naming another URL does not move the mirror's origin either.
    mirror.fetch(RepoRef(owner="acme", name="fleet", clone_url=f"file://{evil}"))
    assert git(path, "config", "--get", "remote.origin.url") == str(origin)


def test_the_worker_clones_from_the_configured_github_with_its_token_only_there(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path, github_api_url="https://ghe.example/api/v3")
    remotes = github_remotes(settings)
    for claimed in ("file:///srv/evil.git", "https://evil.example/acme/fleet.git", ""):
        ref = RepoRef(owner="acme", name="fleet", clone_url=claimed)
        assert remotes(ref) == "https://ghe.example/acme/fleet.git"
    mirror = GitMirror(tmp_path / "cache", remote_for=remotes, token_for=lambda r: "ghs_secret")
    ref = RepoRef(owner="acme", name="fleet", clone_url="https://evil.example/acme/fleet.git")
    env = mirror.env_for(ref)
    # The token goes with the configured remote; git is never pointed at the claimed host.
    assert any(k.startswith("GIT_CONFIG_VALUE_") for k in env)
    assert "evil.example" not in " ".join(env.values())
