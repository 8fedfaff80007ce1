"""Pull requests in the GitHub emulator: seeding them (with GitHub's pull refs written into the
seeded git repository), their reviews, getting one and the pull requests of a commit. Listing
and opening them through the API is the git data API's (`gitdata`)."""

from __future__ import annotations

import copy
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.devstack.emulator.git import git, git_output
from shared.devstack.emulator.model import (
    ApiError,
    Page,
    Request,
    Route,
    int_param,
    make_route,
    node_id,
    utc_now,
)
from shared.devstack.emulator.shapes import Shapes, stable_id, user_json
from shared.devstack.emulator.state import Store


class Pulls:
    """Pull requests and their reviews; the handlers run under the store's lock."""

    def __init__(self, store: Store, shapes: Shapes, base_url: Callable[[], str]) -> None:
        self._store = store
        self._shapes = shapes
        self._base_url = base_url  # the emulator's URL, for answers given outside a request
        # (repo, pull number) → submitted reviews, oldest first
        self._reviews: dict[tuple[str, int], list[dict[str, Any]]] = {}

    def routes(self) -> list[Route]:
        r = make_route
        repo = "/repos/{owner}/{repo}"
        return [
            r("GET", f"{repo}/pulls/{{pull_number}}", self._get_pull, "token", False),
            r("GET", f"{repo}/pulls/{{pull_number}}/reviews", self._list_reviews, "token", False),
            r("GET", f"{repo}/commits/{{commit_sha}}/pulls", self._commit_pulls, "token", False),
        ]

    def add_review(
        self,
        owner: str,
        repo: str,
        number: int,
        login: str,
        state: str = "APPROVED",
        *,
        commit_id: str | None = None,
    ) -> dict[str, Any]:
        """`login` submits a review of pull request `number` (APPROVED, CHANGES_REQUESTED,
        COMMENTED or DISMISSED) on `commit_id` (default: the pull request's head now)."""
        if state not in ("APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED"):
            raise ValueError(f"unknown review state {state!r}")
        with self._store.lock:
            record = self._store.repo(owner, repo)
            pull = record.pulls[number]
            review = {
                "id": self._store.next_id("review", start=80000),
                "login": login,
                "state": state,
                "commit_id": commit_id or pull["head_sha"],
                "submitted_at": utc_now(),
            }
            self._reviews.setdefault((record.full_name.lower(), number), []).append(review)
            return review

    def set_pull(
        self,
        owner: str,
        repo: str,
        number: int,
        *,
        head_sha: str,
        base_sha: str | None = None,
        head_ref: str | None = None,
        base_ref: str | None = None,
        state: str = "open",
        merged: bool = False,
        mergeable: bool | None = True,
        draft: bool = False,
        title: str | None = None,
        user_login: str = "octocat",
        merge_commit_sha: str | None = None,
        fork: str | None = None,
    ) -> dict[str, Any]:
        """Create or replace pull request `number` (its issue takes comments from now on).

        In a repository seeded with `git_dir`, GitHub's pull refs are written there too:
        `refs/pull/N/head` (the head commit) and, while the pull request is open,
        `refs/pull/N/merge` (a real merge commit of the base branch tip and the head; none when
        they conflict, and `mergeable` then says False). `fork`: `owner/name` of the
        repository the head comes from, when it is a fork.
        """
        with self._store.lock:
            record = self._store.repo(owner, repo)
            previous = record.pulls.get(number, {})
            if record.git_dir is not None:
                merge = _write_pull_refs(
                    record.git_dir,
                    number,
                    head_sha,
                    base_ref or record.default_branch,
                    base_sha,
                    state == "open" and not merged,
                )
                if merge_commit_sha is None:
                    merge_commit_sha = merge
                if mergeable is True and merge is None and state == "open":
                    mergeable = False
            pull = {
                "number": number,
                "id": previous.get("id") or self._store.next_id("pull", start=5000),
                "head_sha": head_sha,
                "base_sha": base_sha or head_sha,
                "head_ref": head_ref or f"pr-{number}",
                "base_ref": base_ref or record.default_branch,
                "state": state,
                "merged": merged,
                "mergeable": mergeable,
                "draft": draft,
                "title": title or f"Pull request {number}",
                "user": user_login,
                "merge_commit_sha": merge_commit_sha,
                "fork": fork,
                "created_at": previous.get("created_at") or utc_now(),
                "updated_at": utc_now(),
            }
            record.pulls[number] = pull
            return self._shapes.pull(record, pull, self._base_url())

    def pulls(self, owner: str, repo: str) -> dict[int, dict[str, Any]]:
        """The repository's pull requests by number (seeded or opened through the API)."""
        with self._store.lock:
            return copy.deepcopy(self._store.repo(owner, repo).pulls)

    def _list_reviews(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        number = int_param(req.params["pull_number"])
        if number not in req.repo.pulls:
            raise ApiError(404, "Not Found")
        api = f"{req.base}/repos/{req.repo.full_name}"
        page = f"{req.base}/{req.repo.full_name}/pull/{number}"
        items = [
            {
                "id": r["id"],
                "node_id": node_id("PullRequestReview", r["id"]),
                "user": user_json(r["login"], stable_id(r["login"]), "User", req.base),
                "body": "",
                "state": r["state"],
                "html_url": f"{page}#pullrequestreview-{r['id']}",
                "pull_request_url": f"{api}/pulls/{number}",
                "_links": {
                    "html": {"href": page},
                    "pull_request": {"href": f"{api}/pulls/{number}"},
                },
                "submitted_at": r["submitted_at"],
                "commit_id": r["commit_id"],
                "author_association": "MEMBER",
            }
            for r in self._reviews.get((req.repo.full_name.lower(), number), [])
        ]
        return 200, Page(items, req)

    def _commit_pulls(self, req: Request) -> tuple[int, Any]:
        """The pull requests a commit belongs to: merged ones whose merge commit it is, and
        those whose head it is (GitHub lists both)."""
        assert req.repo is not None
        sha = req.params["commit_sha"]
        items = [
            self._shapes.pull(req.repo, pull, req.base)
            for number, pull in sorted(req.repo.pulls.items())
            if sha in (pull.get("merge_commit_sha"), pull["head_sha"])
        ]
        return 200, Page(items, req)

    def _get_pull(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        pull = req.repo.pulls.get(int_param(req.params["pull_number"]))
        if pull is None:
            raise ApiError(404, "Not Found")
        return 200, self._shapes.pull(req.repo, pull, req.base)


# GitHub's test merge commits are authored by GitHub; fixed so a merge ref is reproducible.
_MERGE_IDENTITY = {
    "GIT_AUTHOR_NAME": "GitHub",
    "GIT_AUTHOR_EMAIL": "noreply@github.com",
    "GIT_COMMITTER_NAME": "GitHub",
    "GIT_COMMITTER_EMAIL": "noreply@github.com",
}


def _write_pull_refs(
    git_dir: Path, number: int, head_sha: str, base_ref: str, base_sha: str | None, open_: bool
) -> str | None:
    """refs/pull/N/head, and refs/pull/N/merge (returned) unless closed or conflicting."""
    git(git_dir, "update-ref", f"refs/pull/{number}/head", head_sha)
    merge_ref = f"refs/pull/{number}/merge"
    tip = git_output(
        git_dir, "rev-parse", "--verify", "--quiet", f"refs/heads/{base_ref}^{{commit}}"
    )
    base = tip or base_sha
    if not open_ or not base:
        git_output(git_dir, "update-ref", "-d", merge_ref)
        return None
    tree = subprocess.run(
        ["git", "-C", str(git_dir), "merge-tree", "--write-tree", "--no-messages", base, head_sha],
        capture_output=True,
        text=True,
        check=False,
    )
    if tree.returncode != 0:  # 1: conflicts; GitHub then has no merge ref
        git_output(git_dir, "update-ref", "-d", merge_ref)
        return None
    env = {**os.environ, **_MERGE_IDENTITY}
    date = git(git_dir, "show", "-s", "--format=%cI", head_sha).strip()
    env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    commit = subprocess.run(
        [
            "git",
            "-C",
            str(git_dir),
            "commit-tree",
            "-p",
            base,
            "-p",
            head_sha,
            "-m",
            f"Merge {head_sha} into {base}",
            tree.stdout.split()[0],
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if commit.returncode != 0:
        raise ApiError(500, f"git commit-tree failed: {commit.stderr.strip()}")
    merge = commit.stdout.strip()
    git(git_dir, "update-ref", merge_ref, merge)
    return merge
