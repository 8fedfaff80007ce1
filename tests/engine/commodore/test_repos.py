"""Git repositories at URLs for the commodore layout: versions resolved in a bare mirror in
rollwright's cache, fetched again when a version is missing or the fetch is older than the
TTL, never for a commit id the mirror holds; passwords never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.engine.commodore.repos import Mirrors, shown
from shared.engine.errors import FleetError
from tests.support.commodore import publish, repo_with
from tests.support.gitrepo import git


@pytest.fixture
def component(tmp_path: Path) -> tuple[Path, str]:
    source = repo_with(tmp_path / "src" / "component", {"a.txt": "one\n"}, tag="v1")
    (tmp_path / "remotes").mkdir()
    return source, publish(source, tmp_path / "remotes")


def test_tags_branches_and_commits_resolve(component: tuple[Path, str], tmp_path: Path) -> None:
    source, url = component
    mirrors = Mirrors(tmp_path / "cache")
    head = git(source, "rev-parse", "HEAD")
    for version in ("v1", "main", head, None):
        mirror, sha = mirrors.commit(url, version, what="component 'x'")
        assert sha == head
    mirror.extract(head, tmp_path / "out")
    assert (tmp_path / "out" / "a.txt").read_text() == "one\n"
    with pytest.raises(FleetError, match="version 'v9' is no branch, tag or commit"):
        mirrors.commit(url, "v9", what="component 'x'")


def test_a_new_tag_is_fetched_and_a_moved_branch_after_the_ttl(
    component: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, url = component
    mirrors = Mirrors(tmp_path / "cache")
    _, first = mirrors.commit(url, "main", what="component 'x'")
    repo_with(source, {"a.txt": "two\n"}, tag="v2")
    publish(source, tmp_path / "remotes")
    _, tagged = mirrors.commit(url, "v2", what="component 'x'")  # missing: fetched now
    assert tagged != first
    repo_with(source, {"a.txt": "three\n"})
    publish(source, tmp_path / "remotes")
    _, cached = mirrors.commit(url, "main", what="component 'x'")
    assert cached == tagged  # within the TTL: the answer of the last fetch
    monkeypatch.setenv("ROLLWRIGHT_GIT_FETCH_TTL", "0")
    _, moved = mirrors.commit(url, "main", what="component 'x'")
    assert moved == git(source, "rev-parse", "HEAD")


def test_an_unreachable_repository_is_retryable_and_hides_its_password(tmp_path: Path) -> None:
    url = "https://user:hunter2@127.0.0.1:9/component.git"
    with pytest.raises(FleetError) as caught:
        Mirrors(tmp_path / "cache").commit(url, "v1", what="component 'x'")
    assert caught.value.retryable
    assert "hunter2" not in str(caught.value)
    assert shown(url) == "https://user@127.0.0.1:9/component.git"
