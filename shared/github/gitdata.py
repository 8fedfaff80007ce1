"""Commits and pull requests written through GitHub's git data API, as the GitHub App.

Promotion commits land on the default branch with the App as author (GitHub shows
`rollwright[bot]`), which is how branch protection and audit logs see them: blobs → a tree on
the parent's tree → a commit → a fast-forward-only ref update. When the branch moved between
reading its tip and updating it, GitHub answers 422 "not a fast forward": `BranchMoved` tells
the caller to plan again on the new tip. Nothing here retries on its own.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from github import GithubException, InputGitTreeElement
from github.GitRef import GitRef
from github.Repository import Repository

from shared.github.app import GitHubApp, GitHubRequestError, translate_error

FILE_MODE = "100644"


class BranchMoved(Exception):
    """The branch is no longer at the commit the change was made on."""

    def __init__(self, branch: str, expected: str) -> None:
        super().__init__(f"branch {branch} moved past {expected[:12]} while committing")
        self.branch = branch
        self.expected = expected


@dataclass(frozen=True)
class PullRequestRef:
    number: int
    url: str
    already_open: bool = False


def branch_tip(app: GitHubApp, repo: str, branch: str) -> str:
    """The commit `branch` points at."""
    try:
        ref = app.repository(repo).get_git_ref(f"heads/{branch}")
        return str(ref.object.sha)
    except GithubException as err:
        raise translate_error(f"reading branch {branch} of {repo}", err) from err


def commit_files(
    app: GitHubApp,
    repo: str,
    branch: str,
    parent: str,
    writes: Mapping[str, bytes],
    deletes: Sequence[str],
    message: str,
    *,
    create_branch: bool = False,
) -> str:
    """Commit `writes` and `deletes` on top of `parent` and move `branch` there; the new sha.

    The branch must still be at `parent` (fast-forward only) or BranchMoved is raised; with
    `create_branch` the branch is created (or, when it exists, reset: it is ours).
    """
    operation = f"committing {len(writes) + len(deletes)} file(s) to {repo}@{branch}"
    gh = app.repository(repo)
    try:
        sha = _commit(gh, parent, writes, deletes, message)
        if create_branch:
            _create_or_reset(gh, branch, sha)
            return sha
        _ref(gh, branch).edit(sha, force=False)
    except GithubException as err:
        failure = translate_error(operation, err)
        if isinstance(failure, GitHubRequestError) and _not_fast_forward(failure):
            raise BranchMoved(branch, parent) from err
        raise failure from err
    return sha


def _commit(
    gh: Repository, parent: str, writes: Mapping[str, bytes], deletes: Sequence[str], message: str
) -> str:
    base = gh.get_git_commit(parent)
    elements = []
    for path in sorted(writes):
        content = base64.b64encode(writes[path]).decode()
        blob = gh.create_git_blob(content, "base64")
        elements.append(InputGitTreeElement(path, FILE_MODE, "blob", sha=blob.sha))
    for path in sorted(deletes):
        # GitHub deletes a path from the base tree when its sha is null.
        elements.append(InputGitTreeElement(path, FILE_MODE, "blob", sha=None))
    tree = gh.create_git_tree(elements, base.tree)
    commit = gh.create_git_commit(message, tree, [base])
    return str(commit.sha)


def _create_or_reset(gh: Repository, branch: str, sha: str) -> None:
    try:
        gh.create_git_ref(f"refs/heads/{branch}", sha)
    except GithubException as err:
        if err.status != 422:  # 422: "Reference already exists"
            raise
        _ref(gh, branch).edit(sha, force=True)


def _ref(gh: Repository, branch: str) -> GitRef:
    """The branch's ref, read: PyGithub's lazy ref has the GET path (`git/ref/…`) as its URL;
    the answer carries the `git/refs/…` URL that updates go to."""
    ref = gh.get_git_ref(f"heads/{branch}")
    ref.object  # noqa: B018  # completes the lazy object (one GET)
    return ref


def _not_fast_forward(err: GitHubRequestError) -> bool:
    return err.status == 422 and "fast forward" in err.message.lower()


def find_open_pull_request(
    app: GitHubApp, repo: str, *, head: str, base: str
) -> PullRequestRef | None:
    """The open pull request from branch `head` into `base`, if there is one."""
    owner = repo.partition("/")[0]
    try:
        for pull in app.repository(repo).get_pulls(state="open", head=f"{owner}:{head}", base=base):
            return PullRequestRef(int(pull.number), str(pull.html_url), already_open=True)
    except GithubException as err:
        raise translate_error(f"listing pull requests from {head} on {repo}", err) from err
    return None


def open_pull_request(
    app: GitHubApp, repo: str, *, head: str, base: str, title: str, body: str
) -> PullRequestRef:
    """Open a pull request from branch `head`, or find the one already open from it."""
    found = find_open_pull_request(app, repo, head=head, base=base)
    if found is not None:
        return found
    try:
        pull = app.repository(repo).create_pull(base=base, head=head, title=title, body=body)
    except GithubException as err:
        raise translate_error(f"opening a pull request from {head} on {repo}", err) from err
    return PullRequestRef(int(pull.number), str(pull.html_url))
