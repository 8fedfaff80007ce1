"""GitHub as rollwright uses it: a GitHub App that writes check runs and sticky PR comments.

`GitHubApp` wraps PyGithub with App authentication (app id + private key → App JWT →
installation token per repository, refreshed by PyGithub before it expires). `base_url` points
at api.github.com, a GitHub Enterprise Server (`https://HOST/api/v3`) or the emulator.

Everything GitHub would reject is rejected here first, with a ValueError that says why:
at most 3 actions, label ≤ 20, identifier ≤ 20, description ≤ 40 characters, output summary and
text ≤ 65,535 bytes (`shared.github.limits`). Nothing is cut silently: `shared.github.limits` is
the one place that shortens text, on section boundaries, with a visible marker, keeping the
Markdown valid.

Errors are split for the worker's retry policy: `GitHubRetryableError` (5xx, rate limits,
network) and `GitHubRequestError` (any other 4xx: retrying would not help). PyGithub's own
retries are switched off so the activity's retry policy (and its heartbeats) stay in charge.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal, TypeVar

import requests
from github import (
    Auth,
    Github,
    GithubException,
    GithubIntegration,
    RateLimitExceededException,
    UnknownObjectException,
)
from github.IssueComment import IssueComment
from github.Repository import Repository
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from shared.github.limits import COMMENT_LIMIT, MAX_ACTIONS, OUTPUT_LIMIT, size

DEFAULT_BASE_URL = "https://api.github.com"

CheckStatus = Literal["queued", "in_progress", "completed"]
CheckConclusion = Literal[
    "action_required", "cancelled", "failure", "neutral", "success", "skipped", "timed_out"
]

T = TypeVar("T")

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- webhooks


def webhook_signature(secret: str | bytes, body: bytes) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body`."""
    key = secret.encode() if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def verify_webhook_signature(secret: str | bytes, body: bytes, header: str | None) -> bool:
    """Constant-time check of `X-Hub-Signature-256` over the exact bytes received: the whole
    value, never a part of it (a truncated or empty digest is refused). An empty secret is
    no secret (anyone can sign with it), so nothing verifies against it."""
    if not secret or not header:
        return False
    return hmac.compare_digest(webhook_signature(secret, body).encode(), header.encode())


# --------------------------------------------------------------------------- models


class CheckRunOutput(BaseModel):
    """The complete output of a check run; GitHub replaces the whole of it on every update."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: str = Field(min_length=1)
    summary: str = Field(min_length=1)
    text: str | None = None

    @field_validator("summary", "text")
    @classmethod
    def _within_limit(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and size(value) > OUTPUT_LIMIT:
            raise ValueError(
                f"check run output {info.field_name} is {size(value):,} bytes; GitHub allows "
                f"at most {OUTPUT_LIMIT:,} (cut it on whole sections with fit_text)"
            )
        return value

    def payload(self) -> dict[str, str]:
        data = {"title": self.title, "summary": self.summary}
        if self.text is not None:
            data["text"] = self.text
        return data


class CheckRunAction(BaseModel):
    """A button on a check run; a click arrives as `check_run.requested_action`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str = Field(min_length=1, max_length=20)
    description: str = Field(min_length=1, max_length=40)
    identifier: str = Field(min_length=1, max_length=20)

    def payload(self) -> dict[str, str]:
        return {"label": self.label, "description": self.description, "identifier": self.identifier}


@dataclass(frozen=True)
class CheckRunState:
    """What GitHub answered after an update (a completed run stays completed)."""

    id: int
    status: str
    conclusion: str | None
    html_url: str | None


def _action_payloads(actions: Sequence[CheckRunAction]) -> list[dict[str, str]]:
    if len(actions) > MAX_ACTIONS:
        labels = ", ".join(a.label for a in actions)
        raise ValueError(
            f"a check run takes at most {MAX_ACTIONS} actions, got {len(actions)}: {labels}"
        )
    return [a.payload() for a in actions]


# --------------------------------------------------------------------------- errors


class GitHubError(Exception):
    """A GitHub API call failed. `operation` says what rollwright was doing."""

    retryable: ClassVar[bool] = False

    def __init__(self, operation: str, status: int | None, message: str) -> None:
        self.operation = operation
        self.status = status
        self.message = message
        code = f"{status} " if status is not None else ""
        super().__init__(f"{operation}: GitHub answered {code}{message}")


class GitHubRetryableError(GitHubError):
    """Worth retrying later: GitHub 5xx, a primary or secondary rate limit, a network error."""

    retryable = True

    def __init__(
        self, operation: str, status: int | None, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(operation, status, message)
        self.retry_after = retry_after


class GitHubRequestError(GitHubError):
    """GitHub refused the request (4xx): the same request would fail again."""


def _error_message(data: Any) -> str:
    if not isinstance(data, dict):
        return str(data or "").strip()[:500] or "no message"
    message = str(data.get("message") or "no message")
    details = []
    for item in data.get("errors") or []:
        if isinstance(item, dict):
            field = item.get("field") or item.get("resource") or ""
            text = item.get("message") or item.get("code") or ""
            details.append(f"{field}: {text}" if field else str(text))
        else:
            details.append(str(item))
    return f"{message} ({'; '.join(details)})" if details else message


def _retry_after(headers: dict[str, str]) -> float | None:
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    if "retry-after" in lowered:
        try:
            return float(lowered["retry-after"])
        except ValueError:
            return None
    if lowered.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in lowered:
        try:
            return max(0.0, float(lowered["x-ratelimit-reset"]) - time.time())
        except ValueError:
            return None
    return None


def _rate_limited(err: GithubException) -> bool:
    if isinstance(err, RateLimitExceededException) or err.status == 429:
        return True
    if err.status != 403:
        return False
    lowered = {k.lower(): v for k, v in (err.headers or {}).items()}
    message = _error_message(err.data).lower()
    return (
        "retry-after" in lowered
        or lowered.get("x-ratelimit-remaining") == "0"
        or "rate limit" in message
    )


def translate_error(operation: str, err: Exception) -> GitHubError:
    """Map a PyGithub / requests failure onto retryable or not."""
    if isinstance(err, GithubException):
        message = _error_message(err.data)
        if err.status >= 500 or _rate_limited(err):
            return GitHubRetryableError(
                operation, err.status, message, _retry_after(dict(err.headers or {}))
            )
        return GitHubRequestError(operation, err.status, message)
    if isinstance(err, requests.RequestException):
        return GitHubRetryableError(operation, None, f"{type(err).__name__}: {err}")
    raise TypeError(f"not a GitHub error: {err!r}")


@contextmanager
def _calling(operation: str) -> Iterator[None]:
    try:
        yield
    except (GithubException, requests.RequestException) as err:
        raise translate_error(operation, err) from err


# --------------------------------------------------------------------------- client


@dataclass(frozen=True)
class PullOfCommit:
    number: int
    head_sha: str
    merge_commit_sha: str | None
    merged: bool
    author: str | None


@dataclass(frozen=True)
class PullReview:
    login: str
    state: str  # APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED
    commit_id: str


@dataclass(frozen=True)
class PullInfo:
    """A pull request as a hotfix is judged on it."""

    number: int
    state: str  # open, closed
    merged: bool
    draft: bool
    head_sha: str
    head_repo: str | None  # owner/name of the head's repository (None: deleted fork)
    author: str | None
    html_url: str


@dataclass(frozen=True)
class CommitCheck:
    """A check run or a commit status on a commit, as one: `app` is the check run's app id
    (None for a status), `outcome` its conclusion, or its status while it has none."""

    kind: Literal["check run", "status"]
    name: str
    outcome: str
    app: int | None = None


class GitHubApp:
    """One GitHub App (id + private key) talking to one GitHub (api.github.com, GHES, emulator).

    Thread-safe: installation ids and per-installation clients are cached behind a lock.
    `min_request_interval` / `min_write_interval` are PyGithub's throttles, which keep a busy
    installation below GitHub's secondary rate limits; set them to 0 for the emulator.
    """

    def __init__(
        self,
        app_id: int | str,
        private_key_pem: str,
        base_url: str = DEFAULT_BASE_URL,
        *,
        timeout: int = 15,
        min_request_interval: float = 0.25,
        min_write_interval: float = 1.0,
    ) -> None:
        if not str(app_id).strip():
            raise ValueError("GitHub App id is empty")
        if "PRIVATE KEY" not in private_key_pem:
            raise ValueError("GitHub App private key is not a PEM private key")
        self.app_id = str(app_id)
        self.base_url = base_url.rstrip("/")
        self._auth = Auth.AppAuth(self.app_id, private_key_pem)
        self._integration = GithubIntegration(
            auth=self._auth,
            base_url=self.base_url,
            timeout=timeout,
            user_agent="rollwright",
            per_page=100,
            retry=None,
            seconds_between_requests=min_request_interval or None,
            seconds_between_writes=min_write_interval or None,
            lazy=True,
        )
        self._lock = threading.Lock()
        self._installations: dict[str, int] = {}
        self._clients: dict[int, Github] = {}
        # The App's bot login, learned once (None once known means GitHub would not say).
        self._bot_login: str | None = None
        self._bot_login_known = False

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
        self._integration.close()

    # -- identity

    def bot_login(self) -> str | None:
        """The login of this App's bot user, `<slug>[bot]`, which authors everything the App
        writes (`GET /app` with the App JWT; learned once per client, so once per process).

        None when GitHub refuses to say (a 4xx: an old GHES, a proxy): callers then fall back
        to weaker matching. A retryable failure is not remembered, so the next call asks again.
        """
        with self._lock:
            if self._bot_login_known:
                return self._bot_login
        login: str | None = None
        try:
            with _calling("learning the GitHub App's slug"):
                slug = self._integration.get_app().slug
            login = f"{slug}[bot]" if slug else None
        except GitHubRetryableError as err:
            log.warning("github app identity unknown", extra={"error": str(err)})
            return None
        except GitHubRequestError as err:
            log.warning("github app identity unknown", extra={"error": str(err)})
        with self._lock:
            self._bot_login, self._bot_login_known = login, True
        return login

    # -- installations

    def installation_for(self, repo: str) -> int:
        """The installation id of this App on `owner/name` (cached)."""
        owner, name = _split_repo(repo)
        key = f"{owner}/{name}".lower()
        with self._lock:
            if key in self._installations:
                return self._installations[key]
        with _calling(f"finding the GitHub App installation on {repo}"):
            installation_id = int(self._integration.get_repo_installation(owner, name).id)
        with self._lock:
            self._installations[key] = installation_id
        return installation_id

    def remember_installation(self, repo: str, installation_id: int) -> None:
        """Record the installation id a webhook named for `owner/name` (saves one lookup)."""
        owner, name = _split_repo(repo)
        with self._lock:
            self._installations[f"{owner}/{name}".lower()] = int(installation_id)

    def installation_token(self, repo: str) -> tuple[str, datetime]:
        """A fresh installation access token for `owner/name` and when it expires (git over
        HTTPS). Callers cache it; never log it."""
        installation_id = self.installation_for(repo)
        with _calling(f"creating an installation token for {repo}"):
            auth = self._integration.get_access_token(installation_id)
        return auth.token, auth.expires_at

    def _client(self, repo: str) -> Github:
        installation_id = self.installation_for(repo)
        with self._lock:
            client = self._clients.get(installation_id)
            if client is None:
                client = self._integration.get_github_for_installation(installation_id)
                self._clients[installation_id] = client
        return client

    def quota(self) -> dict[int, tuple[int, int]]:
        """Installation id → (requests remaining, limit), as GitHub's last answer to each
        installation's client said (`X-RateLimit-*`); installations not asked yet are left out
        (reading the figure would cost a request)."""
        with self._lock:
            clients = dict(self._clients)
        out = {}
        for installation_id, client in clients.items():
            remaining, limit = client.requester.rate_limiting
            if limit >= 0:
                out[installation_id] = (remaining, limit)
        return out

    def _repo(self, repo: str) -> Repository:
        owner, name = _split_repo(repo)
        return self._client(repo).get_repo(f"{owner}/{name}")  # lazy: no request until used

    def repository(self, repo: str) -> Repository:
        """The PyGithub repository through this App's installation token (lazy: no request
        until used). For callers that wrap their own calls (shared.github.gitdata)."""
        return self._repo(repo)

    def _call(self, operation: str, fn: Callable[[], T]) -> T:
        with _calling(operation):
            return fn()

    # -- who may do what

    def collaborator_permission(self, repo: str, login: str) -> str:
        """`login`'s permission on `owner/name` as GitHub's permission API says it: admin,
        write (maintain too), read (triage too) or none. Needs the App's "metadata: read"."""
        return self._call(
            f"reading the permission of {login} on {repo}",
            lambda: self._repo(repo).get_collaborator_permission(login),
        )

    def is_team_member(self, repo: str, org: str, team_slug: str, login: str) -> bool:
        """Whether `login` is an active member of `@org/team_slug`, asked through the
        installation on `repo` (the App needs the organization's "members: read"). A team
        the installation cannot see reads as no membership."""
        quote = urllib.parse.quote
        url = (
            f"/orgs/{quote(org, safe='')}/teams/{quote(team_slug, safe='')}"
            f"/memberships/{quote(login, safe='')}"
        )

        def ask() -> bool:
            requester = self._client(repo).requester
            try:
                _, data = requester.requestJsonAndCheck("GET", url)
            except UnknownObjectException:
                return False
            return isinstance(data, dict) and data.get("state") == "active"

        return self._call(f"reading the membership of {login} in @{org}/{team_slug}", ask)

    # -- pull requests and their reviews

    def pulls_of_commit(self, repo: str, sha: str) -> list[PullOfCommit]:
        """The pull requests `sha` belongs to (as merge commit or head), as GitHub lists them
        (`GET /repos/{owner}/{repo}/commits/{sha}/pulls`)."""

        def ask() -> list[PullOfCommit]:
            client = self._client(repo)
            _, data = client.requester.requestJsonAndCheck(
                "GET", f"/repos/{repo}/commits/{sha}/pulls", parameters={"per_page": 100}
            )
            return [
                PullOfCommit(
                    number=int(p["number"]),
                    head_sha=str(p["head"]["sha"]),
                    merge_commit_sha=p.get("merge_commit_sha"),
                    merged=bool(p.get("merged_at")),
                    author=(p.get("user") or {}).get("login"),
                )
                for p in (data if isinstance(data, list) else [])
            ]

        return self._call(f"listing the pull requests of {repo}@{sha[:12]}", ask)

    def pull_reviews(self, repo: str, number: int) -> list[PullReview]:
        """Every submitted review of pull request `number`, oldest first."""

        def ask() -> list[PullReview]:
            pull = self._repo(repo).get_pull(number)
            return [
                PullReview(
                    login=str(r.user.login) if r.user else "",
                    state=str(r.state),
                    commit_id=str(r.commit_id or ""),
                )
                for r in pull.get_reviews()
            ]

        return self._call(f"listing the reviews of {repo}#{number}", ask)

    def pull(self, repo: str, number: int) -> PullInfo:
        """Pull request `number` (`GET /repos/{owner}/{repo}/pulls/{number}`)."""

        def ask() -> PullInfo:
            _, data = self._client(repo).requester.requestJsonAndCheck(
                "GET", f"/repos/{repo}/pulls/{number}"
            )
            head = data.get("head") or {}
            return PullInfo(
                number=int(data["number"]),
                state=str(data.get("state")),
                merged=bool(data.get("merged")),
                draft=bool(data.get("draft")),
                head_sha=str(head.get("sha")),
                head_repo=(head.get("repo") or {}).get("full_name"),
                author=(data.get("user") or {}).get("login"),
                html_url=str(data.get("html_url") or ""),
            )

        return self._call(f"reading pull request {repo}#{number}", ask)

    def commit_checks(self, repo: str, sha: str) -> list[CommitCheck]:
        """Every check run (the newest of each name and app) and commit status (the newest
        of each context) on `sha`."""

        def ask() -> list[CommitCheck]:
            requester = self._client(repo).requester
            checks: list[CommitCheck] = []
            page = 1
            while True:
                _, data = requester.requestJsonAndCheck(
                    "GET",
                    f"/repos/{repo}/commits/{sha}/check-runs",
                    parameters={"per_page": 100, "page": page, "filter": "latest"},
                )
                runs = data.get("check_runs") or []
                for run in runs:
                    checks.append(
                        CommitCheck(
                            kind="check run",
                            name=str(run.get("name")),
                            outcome=str(run.get("conclusion") or run.get("status")),
                            app=(run.get("app") or {}).get("id"),
                        )
                    )
                if len(runs) < 100:
                    break
                page += 1
            _, combined = requester.requestJsonAndCheck(
                "GET", f"/repos/{repo}/commits/{sha}/status", parameters={"per_page": 100}
            )
            for status in combined.get("statuses") or []:
                checks.append(
                    CommitCheck(
                        kind="status", name=str(status.get("context")), outcome=str(status["state"])
                    )
                )
            return checks

        return self._call(f"listing the checks of {repo}@{sha[:12]}", ask)

    # -- check runs

    def create_check_run(
        self,
        repo: str,
        name: str,
        head_sha: str,
        external_id: str,
        status: CheckStatus,
        details_url: str | None,
        output: CheckRunOutput,
        actions: Sequence[CheckRunAction] = (),
        *,
        conclusion: CheckConclusion | None = None,
    ) -> int:
        """Create a check run on `head_sha`; returns its id."""
        action_payloads = _action_payloads(actions)
        if status == "completed" and conclusion is None:
            raise ValueError(f"check run {name}: status completed needs a conclusion")
        kwargs: dict[str, Any] = {
            "name": name,
            "head_sha": head_sha,
            "external_id": external_id,
            "status": status,
            "output": output.payload(),
            "actions": action_payloads,
        }
        if details_url:
            kwargs["details_url"] = details_url
        if conclusion is not None:
            kwargs["conclusion"] = conclusion
        operation = f"creating check run {name} on {repo}@{head_sha[:12]}"
        run = self._call(operation, lambda: self._repo(repo).create_check_run(**kwargs))
        return int(run.id)

    def update_check_run(
        self,
        repo: str,
        check_run_id: int,
        *,
        status: CheckStatus | None = None,
        conclusion: CheckConclusion | None = None,
        output: CheckRunOutput,
        actions: Sequence[CheckRunAction],
        details_url: str | None = None,
    ) -> CheckRunState:
        """Update a check run, always with its complete output and buttons (`[]` removes them);
        `details_url` replaces the link when given.

        GitHub keeps a completed run completed: the answer's `status` says what happened, and a
        caller that needs an in-progress run again must create a new one.
        """
        action_payloads = _action_payloads(actions)
        if status == "completed" and conclusion is None:
            raise ValueError(f"check run {check_run_id}: status completed needs a conclusion")
        kwargs: dict[str, Any] = {"output": output.payload(), "actions": action_payloads}
        if status is not None and conclusion is None:
            kwargs["status"] = status
        if conclusion is not None:
            kwargs["conclusion"] = conclusion
        if details_url:
            kwargs["details_url"] = details_url

        def edit() -> CheckRunState:
            run = self._repo(repo).get_check_run(check_run_id)  # lazy object, PATCH only
            run.edit(**kwargs)
            return CheckRunState(int(run.id), run.status, run.conclusion, run.html_url)

        return self._call(f"updating check run {check_run_id} on {repo}", edit)

    # -- sticky comments

    def upsert_sticky_comment(self, repo: str, pr_number: int, marker: str, body: str) -> int:
        """Create or edit in place the one comment of this App on the PR tagged with `marker`.

        The marker is an HTML comment (`<!-- marker -->`, invisible when rendered) at the top
        of the body. Only comments by this App's bot user (`bot_login`) are considered, so
        neither a human nor another bot quoting the raw marker can take the sticky comment
        over. When the App's login cannot be learned, any bot's comment is considered, and one
        GitHub refuses to edit (403: not ours) is passed over. Returns the comment id.
        """
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9:._/ -]*", marker) or "--" in marker:
            raise ValueError(f"sticky comment marker {marker!r}: use letters, digits, ':._/ -'")
        tag = f"<!-- {marker} -->"
        full = body if tag in body else f"{tag}\n{body}"
        if size(full) > COMMENT_LIMIT:
            raise ValueError(
                f"PR comment is {size(full):,} bytes; GitHub allows at most {COMMENT_LIMIT:,} "
                "(cut it on whole sections with fit_text)"
            )
        operation = f"writing the {marker} comment on {repo}#{pr_number}"

        login = self.bot_login()

        def ours(comment: IssueComment) -> bool:
            if tag not in (comment.body or ""):
                return False
            if login is not None:
                return str(comment.user.login).lower() == login.lower()
            return bool(comment.user.type == "Bot")

        def upsert() -> int:
            issue = self._repo(repo).get_issue(pr_number)
            for comment in issue.get_comments():
                if not ours(comment):
                    continue
                if comment.body != full:
                    try:
                        comment.edit(full)
                    except GithubException as err:
                        if login is not None or err.status != 403 or _rate_limited(err):
                            raise
                        log.info(
                            "sticky comment not editable, passed over",
                            extra={"repo": repo, "pr": pr_number, "comment": comment.id},
                        )
                        continue
                return int(comment.id)
            return int(issue.create_comment(full).id)

        return self._call(operation, upsert)


def _split_repo(repo: str) -> tuple[str, str]:
    owner, _, name = repo.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(f"repository {repo!r}: expected owner/name")
    return owner, name
