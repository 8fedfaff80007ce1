"""The JSON shapes of GitHub's objects as the emulator serves and sends them: the App, users,
organizations, repositories, check runs, issue comments and pull requests. Keys follow GitHub's
own payloads and OpenAPI description."""

from __future__ import annotations

import hashlib
import time
import urllib.parse
from datetime import UTC, datetime
from typing import Any

from shared.devstack.emulator.model import App, CheckRunRecord, CommentRecord, Repo, node_id
from shared.devstack.emulator.state import Store

APP_PERMISSIONS = {
    "checks": "write",
    "contents": "write",
    "metadata": "read",
    "pull_requests": "write",
    "statuses": "read",
}
APP_EVENTS = ("check_run", "check_suite", "issue_comment", "pull_request", "push")
_REPO_URLS = (
    ("forks", "/forks"),
    ("keys", "/keys{/key_id}"),
    ("collaborators", "/collaborators{/collaborator}"),
    ("teams", "/teams"),
    ("hooks", "/hooks"),
    ("issue_events", "/issues/events{/number}"),
    ("events", "/events"),
    ("assignees", "/assignees{/user}"),
    ("branches", "/branches{/branch}"),
    ("tags", "/tags"),
    ("blobs", "/git/blobs{/sha}"),
    ("git_tags", "/git/tags{/sha}"),
    ("git_refs", "/git/refs{/sha}"),
    ("trees", "/git/trees{/sha}"),
    ("statuses", "/statuses/{sha}"),
    ("languages", "/languages"),
    ("stargazers", "/stargazers"),
    ("contributors", "/contributors"),
    ("subscribers", "/subscribers"),
    ("subscription", "/subscription"),
    ("commits", "/commits{/sha}"),
    ("git_commits", "/git/commits{/sha}"),
    ("comments", "/comments{/number}"),
    ("issue_comment", "/issues/comments{/number}"),
    ("contents", "/contents/{+path}"),
    ("compare", "/compare/{base}...{head}"),
    ("merges", "/merges"),
    ("archive", "/{archive_format}{/ref}"),
    ("downloads", "/downloads"),
    ("issues", "/issues{/number}"),
    ("pulls", "/pulls{/number}"),
    ("milestones", "/milestones{/number}"),
    ("notifications", "/notifications{?since,all,participating}"),
    ("labels", "/labels{/name}"),
    ("releases", "/releases{/id}"),
    ("deployments", "/deployments"),
)


class Shapes:
    """The objects of one emulator: its App, and the records in its store."""

    def __init__(self, app: App, store: Store) -> None:
        self._app = app
        self._store = store

    def app(self, base: str) -> dict[str, Any]:
        owner = user_json("rollwright", 1, "Organization", base)
        return {
            "id": self._app.id,
            "slug": self._app.slug,
            "node_id": node_id("App", self._app.id),
            "client_id": self._app.client_id,
            "owner": owner,
            "name": self._app.slug,
            "description": "rollwright (GitHub emulator)",
            "external_url": base,
            "html_url": f"{base}/apps/{self._app.slug}",
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "permissions": dict(APP_PERMISSIONS),
            "events": list(APP_EVENTS),
        }

    def owner(self, repo: Repo, base: str) -> dict[str, Any]:
        return user_json(repo.owner, repo.owner_id, repo.owner_type, base)

    def organization(self, repo: Repo, base: str) -> dict[str, Any]:
        org = f"{base}/orgs/{repo.owner}"
        return {
            "login": repo.owner,
            "id": repo.owner_id,
            "node_id": node_id("Organization", repo.owner_id),
            "url": org,
            "repos_url": f"{org}/repos",
            "events_url": f"{org}/events",
            "hooks_url": f"{org}/hooks",
            "issues_url": f"{org}/issues",
            "members_url": f"{org}/members{{/member}}",
            "public_members_url": f"{org}/public_members{{/member}}",
            "avatar_url": f"{base}/avatars/{repo.owner}",
            "description": "",
        }

    def installation_ref(self, repo: Repo) -> dict[str, Any]:
        return {
            "id": repo.installation_id,
            "node_id": node_id("IntegrationInstallation", repo.installation_id),
        }

    def repository(self, repo: Repo, base: str, *, push: bool = False) -> dict[str, Any]:
        api = f"{base}/repos/{repo.full_name}"
        web = f"{base}/{repo.full_name}"
        data: dict[str, Any] = {
            "id": repo.id,
            "node_id": node_id("Repository", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "private": True,
            "owner": self.owner(repo, base),
            "html_url": web,
            "description": None,
            "fork": False,
            "url": api,
        }
        for name, suffix in _REPO_URLS:
            data[f"{name}_url"] = api + suffix
        data.update(
            {
                "created_at": repo.created_at,
                "updated_at": repo.created_at,
                "pushed_at": repo.created_at,
                "git_url": f"git://{base.split('://', 1)[-1]}/{repo.full_name}.git",
                "ssh_url": f"git@emulator:{repo.full_name}.git",
                "clone_url": f"{web}.git",
                "svn_url": web,
                "homepage": None,
                "size": 0,
                "stargazers_count": 0,
                "watchers_count": 0,
                "language": None,
                "has_issues": True,
                "has_projects": False,
                "has_downloads": True,
                "has_wiki": False,
                "has_pages": False,
                "forks_count": 0,
                "mirror_url": None,
                "archived": False,
                "disabled": False,
                "open_issues_count": sum(p["state"] == "open" for p in repo.pulls.values()),
                "license": None,
                "forks": 0,
                "open_issues": sum(p["state"] == "open" for p in repo.pulls.values()),
                "watchers": 0,
                "default_branch": repo.default_branch,
                "is_template": False,
                "topics": [],
                "visibility": "private",
                "web_commit_signoff_required": False,
                "custom_properties": {},
            }
        )
        if push:
            # push payloads carry two extra keys, and created_at / pushed_at as Unix seconds
            data["stargazers"] = 0
            data["master_branch"] = repo.default_branch
            created = datetime.strptime(repo.created_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            epoch = int(created.timestamp())
            data["created_at"] = epoch
            data["pushed_at"] = int(time.time())
        return data

    def check_run(self, run: CheckRunRecord, base: str, *, webhook: bool = False) -> dict[str, Any]:
        repo = self._store.repo(run.owner, run.repo)
        state = run.state
        api = f"{base}/repos/{repo.full_name}"
        suite_id = state["check_suite_id"]
        pulls = [
            _pull_ref(repo, p, base)
            for p in repo.pulls.values()
            if p["head_sha"] == state["head_sha"] and p["state"] == "open"
        ]
        suite: dict[str, Any] = {"id": suite_id}
        if webhook:
            head_branch = next(
                (p["head_ref"] for p in repo.pulls.values() if p["head_sha"] == state["head_sha"]),
                repo.default_branch,
            )
            suite = {
                "id": suite_id,
                "node_id": node_id("CheckSuite", suite_id),
                "head_branch": head_branch,
                "head_sha": state["head_sha"],
                "status": state["status"],
                "conclusion": state["conclusion"],
                "url": f"{api}/check-suites/{suite_id}",
                "before": None,
                "after": state["head_sha"],
                "pull_requests": pulls,
                "app": self.app(base),
                "created_at": run.history[0].at,
                "updated_at": run.history[-1].at,
            }
        return {
            "id": run.id,
            "node_id": node_id("CheckRun", run.id),
            "head_sha": state["head_sha"],
            "external_id": state["external_id"],
            "url": f"{api}/check-runs/{run.id}",
            "html_url": f"{base}/{repo.full_name}/runs/{run.id}",
            "details_url": state["details_url"],
            "status": state["status"],
            "conclusion": state["conclusion"],
            "started_at": state["started_at"],
            "completed_at": state["completed_at"],
            "output": {
                **state["output"],
                "annotations_url": f"{api}/check-runs/{run.id}/annotations",
            },
            "name": state["name"],
            "check_suite": suite,
            # another app's run (a CI's, added by tests) names that app
            "app": {**self.app(base), **state["app"]} if "app" in state else self.app(base),
            "pull_requests": pulls,
        }

    def comment(self, comment: CommentRecord, base: str) -> dict[str, Any]:
        full = f"{comment.owner}/{comment.repo}"
        bot = comment.user_login.endswith("[bot]")
        return {
            "id": comment.id,
            "node_id": node_id("IssueComment", comment.id),
            "url": f"{base}/repos/{full}/issues/comments/{comment.id}",
            "html_url": f"{base}/{full}/pull/{comment.issue_number}#issuecomment-{comment.id}",
            "body": comment.body,
            "user": user_json(
                comment.user_login,
                stable_id(comment.user_login),
                "Bot" if bot else "User",
                base,
            ),
            "created_at": comment.created_at,
            "updated_at": comment.updated_at,
            "issue_url": f"{base}/repos/{full}/issues/{comment.issue_number}",
            "author_association": "NONE" if bot else "MEMBER",
            "performed_via_github_app": self.app(base) if bot else None,
        }

    def pull(self, repo: Repo, pull: dict[str, Any], base: str) -> dict[str, Any]:
        full = repo.full_name
        api = f"{base}/repos/{full}"
        number = pull["number"]
        closed = pull["state"] == "closed"
        return {
            "url": f"{api}/pulls/{number}",
            "id": pull["id"],
            "node_id": node_id("PullRequest", pull["id"]),
            "html_url": f"{base}/{full}/pull/{number}",
            "diff_url": f"{base}/{full}/pull/{number}.diff",
            "patch_url": f"{base}/{full}/pull/{number}.patch",
            "issue_url": f"{api}/issues/{number}",
            "number": number,
            "state": pull["state"],
            "locked": False,
            "title": pull["title"],
            "user": user_json(pull["user"], stable_id(pull["user"]), "User", base),
            "body": None,
            "created_at": pull["created_at"],
            "updated_at": pull["updated_at"],
            "closed_at": pull["updated_at"] if closed else None,
            "merged_at": pull["updated_at"] if pull["merged"] else None,
            "merge_commit_sha": pull["merge_commit_sha"],
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "labels": [],
            "milestone": None,
            "commits_url": f"{api}/pulls/{number}/commits",
            "review_comments_url": f"{api}/pulls/{number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{number}/comments",
            "statuses_url": f"{api}/statuses/{pull['head_sha']}",
            "head": self._head(repo, pull, base),
            "base": self._pull_side(repo, pull["base_ref"], pull["base_sha"], base),
            "author_association": "MEMBER",
            "auto_merge": None,
            "active_lock_reason": None,
            "draft": pull["draft"],
            "merged": pull["merged"],
            "mergeable": pull["mergeable"],
            "rebaseable": pull["mergeable"],
            "mergeable_state": (
                "clean"
                if pull["mergeable"]
                else "dirty"
                if pull["mergeable"] is False
                else "unknown"
            ),
            "merged_by": None,
            "comments": sum(
                (c.owner, c.repo, c.issue_number) == (repo.owner, repo.name, number)
                for c in self._store.comments.values()
            ),
            "review_comments": 0,
            "maintainer_can_modify": False,
            "commits": 1,
            "additions": 0,
            "deletions": 0,
            "changed_files": 0,
        }

    def _head(self, repo: Repo, pull: dict[str, Any], base: str) -> dict[str, Any]:
        side = self._pull_side(repo, pull["head_ref"], pull["head_sha"], base)
        fork = pull.get("fork")
        if fork:  # a fork's head: its repository is the fork (tests name it)
            owner, _, name = fork.partition("/")
            side["label"] = f"{owner}:{pull['head_ref']}"
            side["repo"] = {**side["repo"], "name": name, "full_name": fork, "fork": True}
            side["repo"]["owner"] = user_json(owner, stable_id(owner), "User", base)
        return side

    def _pull_side(self, repo: Repo, ref: str, sha: str, base: str) -> dict[str, Any]:
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.owner(repo, base),
            "repo": self.repository(repo, base),
        }


def stable_id(login: str) -> int:
    return 10_000 + int(hashlib.sha256(login.encode()).hexdigest()[:8], 16) % 1_000_000


def user_json(login: str, user_id: int, kind: str, base: str) -> dict[str, Any]:
    quoted = urllib.parse.quote(login)
    api = f"{base}/users/{quoted}"
    return {
        "login": login,
        "id": user_id,
        "node_id": node_id(kind, user_id),
        "avatar_url": f"{base}/avatars/{quoted}",
        "gravatar_id": "",
        "url": api,
        "html_url": f"{base}/{quoted}",
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
        "type": kind,
        "site_admin": False,
    }


def _pull_ref(repo: Repo, pull: dict[str, Any], base: str) -> dict[str, Any]:
    ref_repo = {"id": repo.id, "url": f"{base}/repos/{repo.full_name}", "name": repo.name}
    return {
        "url": f"{base}/repos/{repo.full_name}/pulls/{pull['number']}",
        "id": pull["id"],
        "number": pull["number"],
        "head": {"ref": pull["head_ref"], "sha": pull["head_sha"], "repo": ref_repo},
        "base": {"ref": pull["base_ref"], "sha": pull["base_sha"], "repo": ref_repo},
    }
