"""Comparing two commits in the GitHub emulator (`GET /repos/{owner}/{repo}/compare/{basehead}`),
computed with git from the seeded repository: status, ahead/behind, commits and changed files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.devstack.emulator.git import git, git_output
from shared.devstack.emulator.model import ApiError, Request, Route, make_route, node_id


def routes() -> list[Route]:
    return [make_route("GET", "/repos/{owner}/{repo}/compare/{basehead}", _compare, "token", False)]


def _compare(req: Request) -> tuple[int, Any]:
    assert req.repo is not None
    git_dir = req.repo.git_dir
    base_ref, sep, head_ref = req.params["basehead"].partition("...")
    if not sep or git_dir is None:
        raise ApiError(404, "Not Found")
    base_sha = git_output(git_dir, "rev-parse", "--verify", "--quiet", f"{base_ref}^{{commit}}")
    head_sha = git_output(git_dir, "rev-parse", "--verify", "--quiet", f"{head_ref}^{{commit}}")
    if not base_sha or not head_sha:
        raise ApiError(404, "Not Found")
    merge_base = git_output(git_dir, "merge-base", base_sha, head_sha)
    if not merge_base:
        raise ApiError(404, f"No common ancestor between {base_ref} and {head_ref}.")
    counts = git(git_dir, "rev-list", "--left-right", "--count", f"{base_sha}...{head_sha}")
    behind, ahead = (int(n) for n in counts.split())
    status = (
        "identical"
        if ahead == behind == 0
        else "ahead"
        if behind == 0
        else "behind"
        if ahead == 0
        else "diverged"
    )
    shas = git(git_dir, "rev-list", "--reverse", f"{merge_base}..{head_sha}").split()
    base = req.base
    full = req.repo.full_name
    return 200, {
        "url": f"{base}/repos/{full}/compare/{base_ref}...{head_ref}",
        "html_url": f"{base}/{full}/compare/{base_ref}...{head_ref}",
        "permalink_url": f"{base}/{full}/compare/{base_sha}...{head_sha}",
        "diff_url": f"{base}/{full}/compare/{base_ref}...{head_ref}.diff",
        "patch_url": f"{base}/{full}/compare/{base_ref}...{head_ref}.patch",
        "base_commit": _commit_json(git_dir, base_sha, full, base),
        "merge_base_commit": _commit_json(git_dir, merge_base, full, base),
        "status": status,
        "ahead_by": ahead,
        "behind_by": behind,
        "total_commits": ahead,
        "commits": [_commit_json(git_dir, sha, full, base) for sha in shas[:250]],
        "files": _changed_files(git_dir, merge_base, head_sha),
    }


def _commit_json(git_dir: Path, sha: str, full_name: str, base: str) -> dict[str, Any]:
    fmt = "%H%x00%T%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%P%x00%B"
    fields = git(git_dir, "show", "-s", f"--format={fmt}", sha).split("\x00")
    commit_sha, tree, an, ae, ad, cn, ce, cd, parents, message = fields[:10]
    api = f"{base}/repos/{full_name}"
    return {
        "sha": commit_sha,
        "node_id": node_id("Commit", int(commit_sha[:7], 16)),
        "url": f"{api}/commits/{commit_sha}",
        "html_url": f"{base}/{full_name}/commit/{commit_sha}",
        "commit": {
            "url": f"{api}/git/commits/{commit_sha}",
            "author": {"name": an, "email": ae, "date": ad},
            "committer": {"name": cn, "email": ce, "date": cd},
            "message": message.rstrip("\n"),
            "tree": {"url": f"{api}/git/trees/{tree}", "sha": tree},
            "comment_count": 0,
        },
        "author": None,
        "committer": None,
        "parents": [
            {"sha": p, "url": f"{api}/commits/{p}", "html_url": f"{base}/{full_name}/commit/{p}"}
            for p in parents.split()
        ],
    }


def _changed_files(git_dir: Path, base_sha: str, head_sha: str) -> list[dict[str, Any]]:
    statuses = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "C": "copied"}
    stats: dict[str, tuple[int, int]] = {}
    fields = git(git_dir, "diff", "-z", "--numstat", "-M", base_sha, head_sha).split("\0")
    while len(fields) > 1:
        added_text, deleted_text, path = fields.pop(0).split("\t", 2)
        if not path:  # a rename: old and new paths follow as separate fields
            path = fields[1]
            del fields[:2]
        stats[path] = (
            int(added_text) if added_text != "-" else 0,
            int(deleted_text) if deleted_text != "-" else 0,
        )
    files = []
    fields = git(git_dir, "diff", "-z", "--name-status", "-M", base_sha, head_sha).split("\0")
    while len(fields) > 1:
        code = fields.pop(0)[:1]
        previous = fields.pop(0) if code in ("R", "C") else None
        path = fields.pop(0)
        added, deleted = stats.get(path, (0, 0))
        entry: dict[str, Any] = {
            "filename": path,
            "status": statuses.get(code, "changed"),
            "additions": added,
            "deletions": deleted,
            "changes": added + deleted,
        }
        if previous is not None:
            entry["previous_filename"] = previous
        files.append(entry)
    return files
