"""A stateful fake of the slice of GitHub that rollwright talks to.

Used by the tests and by `rollwright dev` when no GitHub App is configured. It is an HTTP
server (stdlib `ThreadingHTTPServer`, in a background thread or as its own process) that

- serves the REST endpoints rollwright calls, with GitHub App authentication: installation
  tokens are only issued for an RS256 App JWT signed by the configured App key, and repository
  endpoints need one of those tokens;
- validates every request body against the endpoint's JSON schema from GitHub's OpenAPI
  description (`rest_schemas.json`, copied from `@octokit/openapi`) plus the limits
  GitHub enforces without saying so in the schema, and answers 422 the way GitHub does;
- keeps check runs (with the full history of every create/update), issue comments, pull
  requests and check suites in memory;
- sends GitHub-shaped, signed webhooks: any payload, a push computed from a real git
  repository, and the `check_run.requested_action` a button click produces;
- implements the GitHub App's OAuth web flow for user access tokens: `GET
  /login/oauth/authorize` is the "Authorize" page (whoever one types in is who signs in), its
  form POSTs back and redirects to `redirect_uri` with a one-time `code` and the `state`;
  `POST /login/oauth/access_token` exchanges the code (with `oauth_client_id` and
  `oauth_client_secret`) for a `ghu_` token, which `GET /user` answers for. Errors of the
  exchange are HTTP 200 with `error`/`error_description`/`error_uri`, as on GitHub.

GitHub behaviour modelled on purpose (and relied on by the worker's check-run cache):
- a completed check run stays completed: a later update keeps its id, may change its
  conclusion, output and actions, but a `status` of queued/in_progress is ignored (GitHub does
  not reopen completed runs; see lyft/atlantis#265, Mergifyio/mergify#1989);
- giving a `conclusion` completes the run; `completed` without a conclusion is a 422;
- `output` and `actions`, when sent, replace the previous ones; when left out they stay.
- output `summary`/`text` are limited to 65,535 characters by GitHub; the emulator enforces
  65,535 UTF-8 *bytes*, the stricter reading, so anything it accepts GitHub accepts too.

Control endpoints under `/_emulator/…` (no auth; bind to loopback) let another process seed
state, read it back and click buttons; `GET /<owner>/<repo>/runs/<id>` is a small HTML page
of a check run with its buttons, the emulator's stand-in for github.com.

Run standalone: `python -m shared.devstack.emulator.server --app-id 1 --app-key app.pem --port 9100
--repo acme/fleet:1:main --webhook-url http://127.0.0.1:8000/events --webhook-secret s`.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import hmac
import html
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey

from shared.devstack.background import BackgroundHTTPServer, FakeRequestHandler
from shared.devstack.emulator.gitdata import GitDataApi
from shared.devstack.emulator.model import (
    DOCS,
    ApiError,
    CheckRunRecord,
    CheckRunUpdate,
    CommentRecord,
    Fault,
    FormEncoded,
    Hook,
    Html,
    OAuthCode,
    Page,
    Redirect,
    Repo,
    Request,
    RequestRecord,
    Route,
    WebhookDelivery,
    make_route,
    node_id,
    utc_now,
)
from shared.github.app import webhook_signature
from shared.github.limits import OUTPUT_LIMIT
from shared.review.markdown_html import render_markdown

SCHEMAS_FILE = Path(__file__).with_name("rest_schemas.json")
# The git data API and pull request creation (promotions), from the same OpenAPI description.
GIT_SCHEMAS_FILE = Path(__file__).with_name("rest_schemas_git.json")
HOOKSHOT_AGENT = "GitHub-Hookshot/rollwright-emulator"
ZERO_SHA = "0" * 40
# GitHub rejects an App JWT whose `exp` is more than 10 minutes ahead (clock drift allowed).
JWT_MAX_LIFETIME = 600
JWT_LEEWAY = 60
COMMENT_BODY_LIMIT = 65536  # GitHub: "Body is too long (maximum is 65536 characters)"
# User access tokens of a GitHub App (expiring, the default): 8 hours; refresh tokens: the
# 6 months GitHub's docs give today (15897600 s; older pages said 15811200).
USER_TOKEN_TTL = 28800
REFRESH_TOKEN_TTL = 15897600
# GitHub's rule for logins: alphanumerics and hyphens, 39 at most, not starting with a hyphen.
LOGIN_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
OAUTH_DOCS = "https://docs.github.com/apps/managing-oauth-apps"

# Endpoint key (as in endpoints.json) → documentation page GitHub links in its errors.
_DOC_PAGES = {
    "POST /repos/{owner}/{repo}/check-runs": "checks/runs#create-a-check-run",
    "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}": "checks/runs#update-a-check-run",
    "POST /app/installations/{installation_id}/access_tokens": (
        "apps/apps#create-an-installation-access-token-for-an-app"
    ),
    "POST /repos/{owner}/{repo}/issues/{issue_number}/comments": (
        "issues/comments#create-an-issue-comment"
    ),
    "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}": (
        "issues/comments#update-an-issue-comment"
    ),
}
_DOC_PAGES.update(
    {
        "POST /repos/{owner}/{repo}/git/blobs": "git/blobs#create-a-blob",
        "POST /repos/{owner}/{repo}/git/trees": "git/trees#create-a-tree",
        "POST /repos/{owner}/{repo}/git/commits": "git/commits#create-a-commit",
        "POST /repos/{owner}/{repo}/git/refs": "git/refs#create-a-reference",
        "PATCH /repos/{owner}/{repo}/git/refs/{ref}": "git/refs#update-a-reference",
        "POST /repos/{owner}/{repo}/pulls": "pulls/pulls#create-a-pull-request",
    }
)
_RESOURCES = {
    "POST /repos/{owner}/{repo}/git/blobs": "Blob",
    "POST /repos/{owner}/{repo}/git/trees": "Tree",
    "POST /repos/{owner}/{repo}/git/commits": "Commit",
    "POST /repos/{owner}/{repo}/git/refs": "Reference",
    "PATCH /repos/{owner}/{repo}/git/refs/{ref}": "Reference",
    "POST /repos/{owner}/{repo}/pulls": "PullRequest",
    "POST /repos/{owner}/{repo}/check-runs": "CheckRun",
    "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}": "CheckRun",
    "POST /app/installations/{installation_id}/access_tokens": "InstallationAccessToken",
    "POST /repos/{owner}/{repo}/issues/{issue_number}/comments": "IssueComment",
    "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}": "IssueComment",
}


# --------------------------------------------------------------------------- schemas


def extract_request_schemas(endpoints: dict[str, Any]) -> dict[str, Any]:
    """The packaged form of `endpoints.json`: request schemas only (responses are built here)."""
    return {
        key: {"operationId": spec["operationId"], "request_schema": spec["request_schema"]}
        for key, spec in endpoints.items()
        if spec.get("request_schema")
    }


def _with_github_limits(key: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Add the limits GitHub enforces that its published schema leaves out."""
    schema = copy.deepcopy(schema)
    props = schema.get("properties", {})
    actions = props.get("actions", {}).get("items")
    if actions is not None:
        action_props = actions.setdefault("properties", {})
        for name, limit in (("label", 20), ("identifier", 20), ("description", 40)):
            action_props.setdefault(name, {"type": "string"})
            action_props[name]["maxLength"] = limit
        props["actions"]["maxItems"] = 3
    output = props.get("output", {}).get("properties")
    if output is not None:
        for name in ("summary", "text"):
            output.setdefault(name, {"type": "string"})
            output[name]["maxLength"] = OUTPUT_LIMIT
    if key.endswith("/comments") or key.endswith("/comments/{comment_id}"):
        props.setdefault("body", {"type": "string"})["maxLength"] = COMMENT_BODY_LIMIT
    return schema


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0's `nullable: true` in JSON Schema terms (`type: [T, "null"]`): GitHub
    documents a null tree entry sha as "delete this path"."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def load_validators(
    path: Path = SCHEMAS_FILE, extra: tuple[Path, ...] = (GIT_SCHEMAS_FILE,)
) -> dict[str, jsonschema.protocols.Validator]:
    data = json.loads(path.read_text())["endpoints"]
    for more in extra:
        data.update(json.loads(more.read_text())["endpoints"])
    validators: dict[str, jsonschema.protocols.Validator] = {}
    for key, spec in data.items():
        schema = _with_github_limits(key, _json_schema(spec["request_schema"]))
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
        validators[key] = cls(schema, format_checker=jsonschema.FormatChecker())
    return validators


# --------------------------------------------------------------------------- records


class _HTTPHandler(FakeRequestHandler):
    owner: GitHubEmulator
    server_version = "GitHub.com"

    def _serve(self) -> None:
        headers, raw = self.read_request()
        base = f"http://{headers.get('host') or self.owner.url.split('://', 1)[1]}"
        status, body, extra = self.owner.dispatch(self.command, self.path, headers, raw, base)
        out_headers = {"X-GitHub-Request-Id": uuid.uuid4().hex[:16].upper(), **extra}
        if isinstance(body, Page):
            body, link = _paginate(body, base, self.path)
            if link:
                out_headers["Link"] = link
        if isinstance(body, Html):
            data, content_type = body.text.encode(), "text/html; charset=utf-8"
        elif isinstance(body, Redirect):
            data, content_type = b"", "text/plain"
            out_headers["Location"] = body.location
        elif isinstance(body, FormEncoded):
            data = urllib.parse.urlencode(body.fields).encode()
            content_type = "application/x-www-form-urlencoded; charset=utf-8"
        else:
            data, content_type = json.dumps(body).encode(), "application/json; charset=utf-8"
        self.write_answer(status, content_type, data, out_headers)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve


class GitHubEmulator(BackgroundHTTPServer):
    """The fake GitHub. `start()` it (or use it as a context manager), then point PyGithub's
    `base_url` at `url`."""

    handler = _HTTPHandler

    def __init__(
        self,
        *,
        app_id: int,
        app_key: str,
        app_slug: str = "rollwright",
        webhook_url: str | None = None,
        webhook_secret: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        token_ttl: int = 3600,
        default_permission: str = "none",
        oauth_client_id: str = "Iv1.emulator",
        oauth_client_secret: str | None = None,
        oauth_code_ttl: float = 600,
    ) -> None:
        super().__init__("GitHub emulator", host, port)
        self.app_id = app_id
        self.app_slug = app_slug
        self._public_key = _public_key(app_key)
        self.webhook_url = webhook_url
        self.webhook_secret = webhook_secret
        self._token_ttl = token_ttl
        # What the permission API says of anyone not made a collaborator: GitHub's `none`
        # for a private repository; the dev stack says `write`, so whoever one clicks as in
        # the emulator's pages counts unless told otherwise (docs/governance.md).
        if default_permission not in _ROLE_PERMISSION:
            raise ValueError(f"unknown collaborator permission {default_permission!r}")
        self.default_permission = default_permission
        # The App's OAuth credentials (user access tokens, the web flow); a random secret
        # unless given. GitHub's codes live 10 minutes (`oauth_code_ttl`, seconds).
        self.oauth_client_id = oauth_client_id
        self.oauth_client_secret = oauth_client_secret or secrets.token_hex(20)
        self._oauth_code_ttl = oauth_code_ttl
        self._validators = load_validators()
        self._lock = threading.RLock()
        self._repos: dict[str, Repo] = {}
        self._tokens: dict[str, tuple[int, float]] = {}  # token → (installation id, expiry)
        self._oauth_codes: dict[str, OAuthCode] = {}
        self._user_tokens: dict[str, tuple[str, float]] = {}  # ghu_ token → (login, expiry)
        self._check_runs: dict[int, CheckRunRecord] = {}
        self._suites: dict[tuple[str, str], int] = {}  # (repo, head sha) → check suite id
        self._comments: dict[int, CommentRecord] = {}
        self._requests: list[RequestRecord] = []
        self._deliveries: list[WebhookDelivery] = []
        self._faults: list[Fault] = []
        self._hooks: list[Hook] = []
        self._ids: dict[str, int] = {}
        # (repo, login) → collaborator permission (admin, maintain, write, triage, read)
        self._permissions: dict[tuple[str, str], str] = {}
        # (org, team slug) → login → membership state (active, pending)
        self._teams: dict[tuple[str, str], dict[str, str]] = {}
        # (repo, pull number) → submitted reviews, oldest first
        self._reviews: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._routes = self._build_routes()

    # ------------------------------------------------------------------ seeding

    def seed_repository(
        self,
        owner: str,
        repo: str,
        installation_id: int,
        default_branch: str = "main",
        *,
        git_dir: Path | None = None,
        owner_type: str = "Organization",
    ) -> dict[str, Any]:
        """Install the App on `owner/repo`. `git_dir` backs compare and push webhooks."""
        with self._lock:
            record = Repo(
                owner=owner,
                name=repo,
                id=self._next("repo", start=100),
                installation_id=installation_id,
                default_branch=default_branch,
                owner_type=owner_type,
                owner_id=self._next("account", start=1000),
                git_dir=git_dir,
                created_at=utc_now(),
            )
            self._repos[record.full_name.lower()] = record
            return self._repository_json(record, self._base())

    def set_permission(self, owner: str, repo: str, login: str, permission: str) -> None:
        """Make `login` a collaborator of `owner/repo` with `permission` (admin, maintain,
        write, triage or read); anyone else has none (a private repository)."""
        if permission not in _ROLE_PERMISSION:
            raise ValueError(f"unknown collaborator permission {permission!r}")
        with self._lock:
            record = self._repo(owner, repo)
            self._permissions[(record.full_name.lower(), login.lower())] = permission

    def add_team_member(self, org: str, team_slug: str, login: str, state: str = "active") -> None:
        """Put `login` in the team `org/team_slug` (state `pending`: invited, not yet in)."""
        with self._lock:
            self._teams.setdefault((org.lower(), team_slug.lower()), {})[login.lower()] = state

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
        with self._lock:
            record = self._repo(owner, repo)
            pull = record.pulls[number]
            review = {
                "id": self._next("review", start=80000),
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
    ) -> dict[str, Any]:
        """Create or replace pull request `number` (its issue takes comments from now on).

        In a repository seeded with `git_dir`, GitHub's pull refs are written there too:
        `refs/pull/N/head` (the head commit) and, while the pull request is open,
        `refs/pull/N/merge` (a real merge commit of the base branch tip and the head; none when
        they conflict, and `mergeable` then says False).
        """
        with self._lock:
            record = self._repo(owner, repo)
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
                "id": previous.get("id") or self._next("pull", start=5000),
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
                "created_at": previous.get("created_at") or utc_now(),
                "updated_at": utc_now(),
            }
            record.pulls[number] = pull
            return self.pull_json(record, pull, self._base())

    def issue_token(self, installation_id: int) -> str:
        """An installation token without the JWT dance (for tests poking the API directly)."""
        token = "ghs_" + secrets.token_urlsafe(27)[:36]
        with self._lock:
            self._tokens[token] = (installation_id, time.time() + self._token_ttl)
        return token

    def issue_oauth_code(self, login: str, redirect_uri: str) -> str:
        """A one-time code of the web flow, as if `login` had clicked Authorize (for tests
        that skip the browser); exchange it at `POST /login/oauth/access_token`."""
        if not LOGIN_RE.fullmatch(login):
            raise ValueError(f"not a GitHub login: {login!r}")
        code = secrets.token_hex(10)
        with self._lock:
            self._oauth_codes[code] = OAuthCode(
                self.oauth_client_id, redirect_uri, login, time.time() + self._oauth_code_ttl
            )
        return code

    def issue_user_token(self, login: str) -> str:
        """A user access token (`ghu_`) of `login` without the web flow."""
        return str(self._new_user_tokens(login)["access_token"])

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        *,
        message: str = "Server Error",
        headers: dict[str, str] | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` matching requests with an error (5xx, rate limits…)."""
        with self._lock:
            self._faults.append(
                Fault(
                    method.upper(),
                    re.compile(path_regex),
                    status,
                    {"message": message, "documentation_url": DOCS},
                    dict(headers or {}),
                    times,
                )
            )

    def before_next(
        self, method: str, path_regex: str, action: Callable[[], None], *, times: int = 1
    ) -> None:
        """Run `action` just before answering the next `times` matching requests, outside
        the emulator's lock: a race made to happen (say, a push landing between a client
        reading a branch and updating it)."""
        with self._lock:
            self._hooks.append(Hook(method.upper(), re.compile(path_regex), action, times))

    # ------------------------------------------------------------------ reading state

    def check_runs(self, owner: str, repo: str) -> list[CheckRunRecord]:
        """Every check run of the repository, oldest first, each with its full history."""
        with self._lock:
            key = f"{owner}/{repo}".lower()
            return [
                copy.deepcopy(run)
                for run in self._check_runs.values()
                if f"{run.owner}/{run.repo}".lower() == key
            ]

    def check_run(self, check_run_id: int) -> CheckRunRecord:
        with self._lock:
            if check_run_id not in self._check_runs:
                raise KeyError(f"no check run {check_run_id}")
            return copy.deepcopy(self._check_runs[check_run_id])

    def comments(self, owner: str, repo: str, issue_number: int) -> list[CommentRecord]:
        with self._lock:
            key = f"{owner}/{repo}".lower()
            return [
                copy.deepcopy(c)
                for c in self._comments.values()
                if f"{c.owner}/{c.repo}".lower() == key and c.issue_number == issue_number
            ]

    def pulls(self, owner: str, repo: str) -> dict[int, dict[str, Any]]:
        """The repository's pull requests by number (seeded or opened through the API)."""
        with self._lock:
            return copy.deepcopy(self._repo(owner, repo).pulls)

    def requests(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._requests)

    def deliveries(self) -> list[WebhookDelivery]:
        with self._lock:
            return list(self._deliveries)

    def add_comment(
        self, owner: str, repo: str, issue_number: int, body: str, *, user_login: str
    ) -> int:
        """A comment written by someone else (a human), e.g. to test sticky-comment lookup."""
        with self._lock:
            return self._create_comment(self._repo(owner, repo), issue_number, body, user_login)

    # ------------------------------------------------------------------ webhooks

    def send_webhook(
        self,
        event: str,
        payload: dict[str, Any] | bytes,
        url: str | None = None,
        secret: str | None = None,
        *,
        delivery_id: str | None = None,
    ) -> WebhookDelivery:
        """POST a webhook like GitHub does: signed over the exact bytes sent."""
        target = url or self.webhook_url
        if not target:
            raise ValueError("no webhook URL: pass url= or configure webhook_url")
        key = secret if secret is not None else self.webhook_secret
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        delivery = delivery_id or str(uuid.uuid4())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": HOOKSHOT_AGENT,
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery,
            "X-GitHub-Hook-ID": "1",
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-GitHub-Hook-Installation-Target-ID": str(self.app_id),
        }
        if key:
            headers["X-Hub-Signature-256"] = webhook_signature(key, body)
            # GitHub still sends the legacy SHA-1 header alongside
            legacy = hmac.new(key.encode(), body, hashlib.sha1).hexdigest()
            headers["X-Hub-Signature"] = f"sha1={legacy}"
        request = urllib.request.Request(target, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as err:
            status, text = err.code, err.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError) as err:
            raise ConnectionError(f"delivering webhook {event} to {target}: {err}") from err
        result = WebhookDelivery(event, delivery, target, body, headers, status, text)
        with self._lock:
            self._deliveries.append(result)
        return result

    def redeliver(self, delivery_id: str) -> WebhookDelivery:
        """Send a past delivery again, same GUID and bytes (GitHub's "Redeliver")."""
        with self._lock:
            past = next((d for d in self._deliveries if d.delivery_id == delivery_id), None)
        if past is None:
            raise KeyError(f"no webhook delivery {delivery_id}")
        return self.send_webhook(past.event, past.body, past.url, delivery_id=delivery_id)

    def requested_action_payload(
        self, check_run_id: int, identifier: str, sender_login: str
    ) -> dict[str, Any]:
        """The `check_run.requested_action` payload GitHub sends when a button is clicked."""
        with self._lock:
            run = self._check_runs.get(check_run_id)
            if run is None:
                raise KeyError(f"no check run {check_run_id}")
            offered = [a["identifier"] for a in run.state["actions"]]
            if identifier not in offered:
                raise ValueError(
                    f"check run {check_run_id} ({run.name}) has no button {identifier!r}; "
                    f"it offers {offered or 'none'}"
                )
            repo = self._repo(run.owner, run.repo)
            base = self._base()
            payload: dict[str, Any] = {
                "action": "requested_action",
                "check_run": self._check_run_json(run, base, webhook=True),
                "requested_action": {"identifier": identifier},
                "repository": self._repository_json(repo, base),
            }
            if repo.owner_type == "Organization":
                payload["organization"] = self._organization_json(repo, base)
            payload["sender"] = _user_json(sender_login, _stable_id(sender_login), "User", base)
            payload["installation"] = self._installation_ref(repo)
            return payload

    def click_action(
        self, check_run_id: int, identifier: str, sender_login: str
    ) -> WebhookDelivery:
        """Someone clicks a check-run button: send `check_run.requested_action`."""
        payload = self.requested_action_payload(check_run_id, identifier, sender_login)
        return self.send_webhook("check_run", payload)

    def push_payload(
        self,
        owner: str,
        repo: str,
        before: str,
        after: str,
        *,
        ref: str | None = None,
        pusher: str = "octocat",
        forced: bool | None = None,
    ) -> dict[str, Any]:
        """A `push` payload computed from the seeded git repository (commits, files, forced)."""
        with self._lock:
            record = self._repo(owner, repo)
        if record.git_dir is None:
            raise ValueError(f"{owner}/{repo} was seeded without git_dir; push needs git")
        base = self._base()
        git_dir = record.git_dir
        deleted = after == ZERO_SHA
        created = before == ZERO_SHA
        commits: list[dict[str, Any]] = []
        if not deleted:
            span = [after] if created else [f"{before}..{after}"]
            shas = _git(git_dir, "rev-list", "--reverse", "--max-count=20", *span).split()
            commits = [_push_commit(git_dir, sha, record, base) for sha in shas]
        if forced is None:
            forced = (
                not created
                and not deleted
                and _git_ok(git_dir, "merge-base", "--is-ancestor", before, after) is False
            )
        head = (
            None
            if deleted
            else (commits[-1] if commits else _push_commit(git_dir, after, record, base))
        )
        payload: dict[str, Any] = {
            "ref": ref or f"refs/heads/{record.default_branch}",
            "before": before,
            "after": after,
            "repository": self._repository_json(record, base, push=True),
            "pusher": {"name": pusher, "email": f"{pusher}@users.noreply.github.com"},
            "sender": _user_json(pusher, _stable_id(pusher), "User", base),
            "installation": self._installation_ref(record),
            "created": created,
            "deleted": deleted,
            "forced": forced,
            "base_ref": None,
            "compare": f"{base}/{owner}/{repo}/compare/{before[:12]}...{after[:12]}",
            "commits": commits,
            "head_commit": head,
        }
        if record.owner_type == "Organization":
            payload["organization"] = self._organization_json(record, base)
        return payload

    def send_push(
        self, owner: str, repo: str, before: str, after: str, *, ref: str | None = None
    ) -> WebhookDelivery:
        return self.send_webhook("push", self.push_payload(owner, repo, before, after, ref=ref))

    # ------------------------------------------------------------------ internals

    def _next(self, kind: str, start: int = 1) -> int:
        with self._lock:
            value = self._ids.get(kind, start - 1) + 1
            self._ids[kind] = value
            return value

    def _base(self) -> str:
        return self.url if self.running else self.configured_url

    def _repo(self, owner: str, repo: str) -> Repo:
        record = self._repos.get(f"{owner}/{repo}".lower())
        if record is None:
            raise KeyError(f"repository {owner}/{repo} is not seeded in the GitHub emulator")
        return record

    def _build_routes(self) -> list[Route]:
        r = make_route
        return [
            r("GET", "/app", self._get_app, "jwt", False),
            r(
                "POST",
                "/app/installations/{installation_id}/access_tokens",
                self._create_token,
                "jwt",
                True,
            ),
            r("GET", "/repos/{owner}/{repo}/installation", self._get_installation, "jwt", False),
            r("GET", "/repos/{owner}/{repo}", self._get_repository, "token", False),
            r("POST", "/repos/{owner}/{repo}/check-runs", self._create_check_run, "token", True),
            r(
                "PATCH",
                "/repos/{owner}/{repo}/check-runs/{check_run_id}",
                self._update_check_run,
                "token",
                True,
            ),
            r(
                "GET",
                "/repos/{owner}/{repo}/check-runs/{check_run_id}",
                self._get_check_run,
                "token",
                False,
            ),
            r(
                "POST",
                "/repos/{owner}/{repo}/issues/{issue_number}/comments",
                self._post_comment,
                "token",
                True,
            ),
            r(
                "GET",
                "/repos/{owner}/{repo}/issues/{issue_number}/comments",
                self._list_comments,
                "token",
                False,
            ),
            r(
                "PATCH",
                "/repos/{owner}/{repo}/issues/comments/{comment_id}",
                self._edit_comment,
                "token",
                True,
            ),
            r(
                "GET",
                "/repos/{owner}/{repo}/issues/comments/{comment_id}",
                self._get_comment,
                "token",
                False,
            ),
            r("GET", "/repos/{owner}/{repo}/compare/{basehead}", self._compare, "token", False),
            r("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", self._get_pull, "token", False),
            r(
                "GET",
                "/repos/{owner}/{repo}/pulls/{pull_number}/reviews",
                self._list_reviews,
                "token",
                False,
            ),
            r(
                "GET",
                "/repos/{owner}/{repo}/commits/{commit_sha}/pulls",
                self._commit_pulls,
                "token",
                False,
            ),
            r(
                "GET",
                "/repos/{owner}/{repo}/collaborators/{username}/permission",
                self._get_permission,
                "token",
                False,
            ),
            r(
                "GET",
                "/orgs/{org}/teams/{team_slug}/memberships/{username}",
                self._get_membership,
                "org-token",
                False,
            ),
            *GitDataApi(self).routes(),  # git data API and pull request creation
            r("GET", "/user", self._get_user, "user-token", False),
            # the OAuth web flow (github.com, not api.github.com, on GitHub)
            r("GET", "/login/oauth/authorize", self._oauth_authorize_page, "none", False),
            r("POST", "/login/oauth/authorize", self._oauth_authorize, "none", False),
            r("POST", "/login/oauth/access_token", self._oauth_access_token, "none", False),
            # control surface for other processes (rollwright dev, the demo)
            r("GET", "/_emulator/state", self._ctl_state, "none", False),
            r("POST", "/_emulator/repos", self._ctl_seed, "none", False),
            r(
                "PUT",
                "/_emulator/repos/{owner}/{repo}/pulls/{number}",
                self._ctl_pull,
                "none",
                False,
            ),
            r("POST", "/_emulator/repos/{owner}/{repo}/push", self._ctl_push, "none", False),
            r(
                "PUT",
                "/_emulator/repos/{owner}/{repo}/collaborators/{username}",
                self._ctl_permission,
                "none",
                False,
            ),
            r(
                "PUT",
                "/_emulator/orgs/{org}/teams/{team_slug}/memberships/{username}",
                self._ctl_membership,
                "none",
                False,
            ),
            r("POST", "/_emulator/check-runs/{check_run_id}/click", self._ctl_click, "none", False),
            r("POST", "/_emulator/webhooks", self._ctl_webhook, "none", False),
            r("POST", "/_emulator/oauth/codes", self._ctl_oauth_code, "none", False),
            r("GET", "/{owner}/{repo}/runs/{check_run_id}", self._html_check_run, "none", False),
            r("GET", "/{owner}/{repo}/commit/{sha}", self._html_commit, "none", False),
        ]

    # --- dispatch (called from the HTTP handler threads)

    def dispatch(
        self, method: str, target: str, headers: dict[str, str], raw: bytes, base: str
    ) -> tuple[int, Any, dict[str, str]]:
        parsed = urllib.parse.urlsplit(target)
        path = parsed.path.rstrip("/") or "/"
        try:
            status, body, extra = self._answer(method, path, parsed.query, headers, raw, base)
        except Exception as err:  # answer like GitHub's 500 rather than drop the connection
            status, body, extra = 500, ApiError(500, f"emulator error: {err!r}").body, {}
        with self._lock:
            self._requests.append(RequestRecord(method, path, status))
        return status, body, extra

    def _answer(
        self,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        raw: bytes,
        base: str,
    ) -> tuple[int, Any, dict[str, str]]:
        hook = self._take_hook(method, path)
        if hook is not None:
            hook.action()
        fault = self._take_fault(method, path)
        if fault is not None:
            return fault.status, fault.body, fault.headers
        route, params = self._match(method, path)
        if route is None:
            return 404, ApiError(404, "Not Found").body, {}
        content_type = headers.get("content-type", "")
        request = Request(
            method,
            path,
            params,
            urllib.parse.parse_qs(query),
            None,
            raw,
            content_type,
            base,
            headers=headers,
        )
        try:
            self._authenticate(route, request, headers.get("authorization", ""))
            if route.schema is not None or (raw and "json" in content_type):
                request.body = _parse_json(raw)
            if route.schema is not None:
                self._validate(route.schema, request.body)
            if route.auth == "none":
                # control routes may deliver webhooks, and the receiver may call back into
                # this emulator: they take the lock themselves, never across a delivery
                status, body = route.handler(request)
            else:
                with self._lock:
                    status, body = route.handler(request)
        except ApiError as err:
            return err.status, err.body, {}
        except (KeyError, TypeError, ValueError) as err:
            if route.auth != "none":
                raise
            # a malformed control request (missing or unknown field)
            return 400, ApiError(400, f"bad emulator request: {err!r}").body, {}
        return status, body, {}

    def _take_hook(self, method: str, path: str) -> Hook | None:
        with self._lock:
            for hook in self._hooks:
                if hook.method == method and hook.path.search(path):
                    hook.times -= 1
                    if hook.times <= 0:
                        self._hooks.remove(hook)
                    return hook
        return None

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.method == method and fault.path.search(path):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _match(self, method: str, path: str) -> tuple[Route | None, dict[str, str]]:
        for route in self._routes:
            found = route.pattern.match(path) if route.method == method else None
            if found is not None:
                return route, {k: urllib.parse.unquote(v) for k, v in found.groupdict().items()}
        return None, {}

    def _authenticate(self, route: Route, request: Request, header: str) -> None:
        if route.auth == "none":
            return
        scheme, _, credential = header.partition(" ")
        credential = credential.strip()
        if not credential or scheme.lower() not in ("token", "bearer"):
            raise ApiError(401, "Requires authentication")
        if route.auth == "jwt":
            self._verify_jwt(credential)
        elif route.auth == "user-token":
            request.user = self._user_of_token(credential)
        elif route.auth == "org-token":
            # An installation sees the teams of the organization it is installed on (with the
            # "members: read" permission); any other organization is hidden.
            installation = self._installation_of_token(credential)
            org = request.params["org"].lower()
            with self._lock:
                installed = any(
                    r.owner.lower() == org and r.installation_id == installation
                    for r in self._repos.values()
                )
            if not installed:
                raise ApiError(404, "Not Found")
        else:
            installation = self._installation_of_token(credential)
            owner, repo = request.params["owner"], request.params["repo"]
            with self._lock:
                record = self._repos.get(f"{owner}/{repo}".lower())
            if record is None or record.installation_id != installation:
                # GitHub hides repositories a token cannot see
                raise ApiError(404, "Not Found")
            request.repo = record

    def _verify_jwt(self, token: str) -> None:
        try:
            claims = jwt.decode(
                token,
                self._public_key,
                algorithms=["RS256"],
                options={"require": ["exp", "iat", "iss"], "verify_iss": False},
                leeway=JWT_LEEWAY,
            )
        except jwt.ExpiredSignatureError as err:
            raise ApiError(
                401,
                "'Expiration time' claim ('exp') must be a numeric value representing the "
                "future time at which the assertion expires",
            ) from err
        except jwt.ImmatureSignatureError as err:
            raise ApiError(
                401,
                "'Issued at' claim ('iat') must be an Integer representing the time "
                "that the assertion was issued",
            ) from err
        except jwt.PyJWTError as err:
            raise ApiError(401, "A JSON web token could not be decoded") from err
        if str(claims["iss"]) != str(self.app_id):
            raise ApiError(401, "Integration not found")
        if float(claims["exp"]) - time.time() > JWT_MAX_LIFETIME + JWT_LEEWAY:
            raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future")

    def _user_of_token(self, token: str) -> str:
        """The login a user access token was issued to. An installation token is refused the
        way GitHub refuses it on user endpoints (403), anything else is a 401."""
        now = time.time()
        with self._lock:
            user = self._user_tokens.get(token)
            installation = self._tokens.get(token)
        if user is not None and user[1] >= now:
            return user[0]
        if installation is not None and installation[1] >= now:
            raise ApiError(
                403,
                "Resource not accessible by integration",
                documentation_url=f"{DOCS}/users/users#get-the-authenticated-user",
            )
        raise ApiError(401, "Bad credentials")

    def _installation_of_token(self, token: str) -> int:
        with self._lock:
            entry = self._tokens.get(token)
            user = self._user_tokens.get(token)
        if user is not None and user[1] >= time.time():
            # a user access token: the emulator gives its users no repository to see, and
            # GitHub hides what a token cannot see
            raise ApiError(404, "Not Found")
        if entry is None or entry[1] < time.time():
            raise ApiError(401, "Bad credentials")
        return entry[0]

    def _validate(self, key: str, body: Any) -> None:
        validator = self._validators[key]
        problems = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
        problems_out = [_schema_problem(_RESOURCES[key], e) for e in problems]
        if isinstance(body, dict):
            problems_out += _byte_limit_problems(_RESOURCES[key], body)
        if problems_out:
            raise ApiError(
                422,
                "Invalid request.",
                errors=problems_out,
                documentation_url=f"{DOCS}/{_DOC_PAGES[key]}",
            )

    # --- App endpoints

    def _get_app(self, req: Request) -> tuple[int, Any]:
        return 200, self._app_json(req.base)

    def _create_token(self, req: Request) -> tuple[int, Any]:
        installation_id = _int_param(req.params["installation_id"])
        repos = [r for r in self._repos.values() if r.installation_id == installation_id]
        if not repos:
            raise ApiError(404, "Not Found")
        token = self.issue_token(installation_id)
        expires = datetime.fromtimestamp(self._tokens[token][1], UTC)
        return 201, {
            "token": token,
            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "permissions": dict(_APP_PERMISSIONS),
            "repository_selection": "selected",
            "repositories": [self._repository_json(r, req.base) for r in repos],
        }

    def _get_installation(self, req: Request) -> tuple[int, Any]:
        record = self._repos.get(f"{req.params['owner']}/{req.params['repo']}".lower())
        if record is None:
            raise ApiError(404, "Not Found")
        base = req.base
        iid = record.installation_id
        return 200, {
            "id": iid,
            "account": self._owner_json(record, base),
            "repository_selection": "selected",
            "access_tokens_url": f"{base}/app/installations/{iid}/access_tokens",
            "repositories_url": f"{base}/installation/repositories",
            "html_url": f"{base}/organizations/{record.owner}/settings/installations/{iid}",
            "app_id": self.app_id,
            "app_slug": self.app_slug,
            "target_id": record.owner_id,
            "target_type": record.owner_type,
            "permissions": dict(_APP_PERMISSIONS),
            "events": list(_APP_EVENTS),
            "created_at": record.created_at,
            "updated_at": record.created_at,
            "single_file_name": None,
            "has_multiple_single_files": False,
            "single_file_paths": [],
            "suspended_at": None,
            "suspended_by": None,
        }

    def _get_repository(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        return 200, self._repository_json(req.repo, req.base)

    # --- the OAuth web flow and the authenticated user

    def _get_user(self, req: Request) -> tuple[int, Any]:
        """`GET /user` for a user access token: the user it was issued to."""
        assert req.user is not None
        login = req.user
        return 200, {
            **_user_json(login, _stable_id(login), "User", req.base),
            "user_view_type": "public",
            "name": login,
            "company": None,
            "blog": "",
            "location": None,
            "email": None,
            "hireable": None,
            "bio": None,
            "twitter_username": None,
            "notification_email": None,
            "public_repos": 0,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
        }

    def _oauth_authorize_page(self, req: Request) -> tuple[int, Any]:
        """github.com's "Authorize <app>" screen: whoever is typed in signs in."""
        fields = {k: v[0] for k, v in req.query.items()}
        refused = self._oauth_refusal(fields)
        if refused is not None:
            return refused
        return 200, Html(self._authorize_page(fields, fields.get("login", "")))

    def _oauth_authorize(self, req: Request) -> tuple[int, Any]:
        """The Authorize form posted: a one-time code, and back to `redirect_uri`."""
        fields = _form_fields(req)
        refused = self._oauth_refusal(fields)
        if refused is not None:
            return refused
        login = fields.get("login", "").strip()
        if not LOGIN_RE.fullmatch(login):
            problem = "Sign in as a GitHub login: letters, digits and hyphens, 39 at most."
            return 422, Html(self._authorize_page(fields, login, problem))
        redirect_uri = fields["redirect_uri"]
        code = self.issue_oauth_code(login, redirect_uri)
        back = {"code": code}
        if fields.get("state"):
            back["state"] = fields["state"]
        return 302, Redirect(_with_query(redirect_uri, back))

    def _oauth_refusal(self, fields: dict[str, str]) -> tuple[int, Html] | None:
        """The error page for an authorization request this App cannot serve, if any."""
        if fields.get("client_id") != self.oauth_client_id:
            return 404, Html(_message_page("Not Found", "No application has this client_id."))
        redirect_uri = fields.get("redirect_uri", "")
        if not redirect_uri:
            # GitHub falls back on the App's callback URL; the emulator knows none
            text = "redirect_uri is required: the GitHub emulator has no registered callback URL."
            return 400, Html(_message_page("Bad request", text))
        if urllib.parse.urlsplit(redirect_uri).scheme not in ("http", "https"):
            text = "redirect_uri must be an http or https URL."
            return 400, Html(_message_page("Bad request", text))
        return None

    def _authorize_page(self, fields: dict[str, str], login: str, problem: str = "") -> str:
        def hidden(name: str) -> str:
            value = html.escape(fields.get(name, ""))
            return f'<input type="hidden" name="{name}" value="{value}">'

        app = html.escape(self.app_slug)
        error = f"<p id='error' style='color:#b00'>{html.escape(problem)}</p>" if problem else ""
        return (
            f"<!doctype html><html><head><meta charset='utf-8'><title>Authorize {app}</title>"
            f"</head><body style='font-family:sans-serif;max-width:40em;margin:2em auto'>"
            f"<h1>Authorize {app}</h1>"
            f"<p>{app} (GitHub emulator) wants to know who you are. You are redirected to "
            f"<code>{html.escape(fields.get('redirect_uri', ''))}</code>.</p>{error}"
            f'<form method="post" action="/login/oauth/authorize">'
            f"{hidden('client_id')}{hidden('redirect_uri')}{hidden('state')}"
            f'<label for="login">Sign in as</label> '
            f'<input type="text" id="login" name="login" value="{html.escape(login)}"'
            f' autocomplete="username" required> '
            f'<button type="submit" id="authorize">Authorize</button></form></body></html>'
        )

    def _oauth_access_token(self, req: Request) -> tuple[int, Any]:
        """Exchange a code for a user access token. Like GitHub: errors are HTTP 200 with
        `error`, and the answer is JSON only when the client accepts JSON."""
        fields = {k: v[0] for k, v in req.query.items()}
        fields.update(_form_fields(req))
        answer = self._exchange_code(fields)
        if "application/json" in req.headers.get("accept", ""):
            return 200, answer
        return 200, FormEncoded({k: str(v) for k, v in answer.items()})

    def _exchange_code(self, fields: dict[str, str]) -> dict[str, Any]:
        id_ok = fields.get("client_id") == self.oauth_client_id
        secret = fields.get("client_secret", "").encode()
        secret_ok = hmac.compare_digest(secret, self.oauth_client_secret.encode())
        if not (id_ok and secret_ok):
            return _oauth_error(
                "incorrect_client_credentials",
                "The client_id and/or client_secret passed are incorrect.",
                "troubleshooting-oauth-app-access-token-request-errors/"
                "#incorrect-client-credentials",
            )
        grant = fields.get("grant_type", "authorization_code")
        if grant != "authorization_code":
            return _oauth_error(
                "unsupported_grant_type",
                "The GitHub emulator exchanges authorization codes only.",
                "troubleshooting-oauth-app-access-token-request-errors/",
            )
        with self._lock:
            code = self._oauth_codes.get(fields.get("code", ""))
            usable = (
                code is not None
                and code.client_id == self.oauth_client_id
                and code.expires >= time.time()
            )
            if code is None or not usable:
                self._oauth_codes.pop(fields.get("code", ""), None)
                return _oauth_error(
                    "bad_verification_code",
                    "The code passed is incorrect or expired.",
                    "troubleshooting-oauth-app-access-token-request-errors/#bad-verification-code",
                )
            redirect_uri = fields.get("redirect_uri")
            if redirect_uri and redirect_uri != code.redirect_uri:
                # the code stays usable: the client may retry with the right redirect_uri
                return _oauth_error(
                    "redirect_uri_mismatch",
                    "The redirect_uri MUST match the registered callback URL for this application.",
                    "troubleshooting-authorization-request-errors/#redirect-uri-mismatch2",
                )
            del self._oauth_codes[fields["code"]]  # single use
            return self._new_user_tokens(code.login)

    def _new_user_tokens(self, login: str) -> dict[str, Any]:
        access = "ghu_" + _token_chars(36)
        refresh = "ghr_" + _token_chars(76)
        now = time.time()
        with self._lock:
            # the refresh token is handed out like GitHub's but not redeemable here
            # (grant_type=refresh_token answers unsupported_grant_type)
            self._user_tokens[access] = (login, now + USER_TOKEN_TTL)
        return {
            "access_token": access,
            "expires_in": USER_TOKEN_TTL,
            "refresh_token": refresh,
            "refresh_token_expires_in": REFRESH_TOKEN_TTL,
            "token_type": "bearer",
            "scope": "",
        }

    def _ctl_oauth_code(self, req: Request) -> tuple[int, Any]:
        """`{"login": "octocat", "redirect_uri": "http://…/callback"}` → `{"code": …}`."""
        body = _object(req.body)
        return 201, {"code": self.issue_oauth_code(str(body["login"]), str(body["redirect_uri"]))}

    # --- check runs

    def _create_check_run(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        body: dict[str, Any] = req.body
        now = utc_now()
        conclusion = body.get("conclusion")
        status = "completed" if conclusion else body.get("status", "queued")
        _require_conclusion(status, conclusion, body)
        run_id = self._next("check_run")
        suite = self._suite_for(req.repo, body["head_sha"])
        output = body.get("output") or {}
        state: dict[str, Any] = {
            "name": body["name"],
            "head_sha": body["head_sha"],
            "external_id": body.get("external_id", ""),
            "details_url": body.get("details_url"),
            "status": status,
            "conclusion": conclusion,
            "started_at": body.get("started_at") or now,
            "completed_at": (body.get("completed_at") or now) if status == "completed" else None,
            "output": {
                "title": output.get("title"),
                "summary": output.get("summary"),
                "text": output.get("text"),
                "annotations_count": len(output.get("annotations", [])),
            },
            "actions": list(body.get("actions", [])),
            "check_suite_id": suite,
        }
        run = CheckRunRecord(run_id, req.repo.owner, req.repo.name, state)
        run.history.append(CheckRunUpdate("POST", copy.deepcopy(body), copy.deepcopy(state), now))
        self._check_runs[run_id] = run
        return 201, self._check_run_json(run, req.base)

    def _update_check_run(self, req: Request) -> tuple[int, Any]:
        run = self._find_check_run(req)
        body: dict[str, Any] = req.body
        now = utc_now()
        state = run.state
        for key in ("name", "details_url", "external_id", "started_at"):
            if key in body:
                state[key] = body[key]
        conclusion = body.get("conclusion")
        status = body.get("status")
        _require_conclusion(status, conclusion, body)
        if conclusion:
            # completes the run, or changes the conclusion of an already completed one
            state["conclusion"] = conclusion
            state["status"] = "completed"
            state["completed_at"] = body.get("completed_at") or now
        elif status is not None and state["status"] != "completed":
            state["status"] = status
        # a completed run never goes back to queued/in_progress (the request still succeeds)
        if "output" in body:
            output = body["output"]
            state["output"] = {
                "title": output.get("title", state["output"].get("title")),
                "summary": output["summary"],
                "text": output.get("text"),
                "annotations_count": state["output"]["annotations_count"]
                + len(output.get("annotations", [])),
            }
        if "actions" in body:
            state["actions"] = list(body["actions"])
        run.history.append(CheckRunUpdate("PATCH", copy.deepcopy(body), copy.deepcopy(state), now))
        return 200, self._check_run_json(run, req.base)

    def _get_check_run(self, req: Request) -> tuple[int, Any]:
        return 200, self._check_run_json(self._find_check_run(req), req.base)

    def _find_check_run(self, req: Request) -> CheckRunRecord:
        assert req.repo is not None
        run = self._check_runs.get(_int_param(req.params["check_run_id"]))
        if run is None or (run.owner, run.repo) != (req.repo.owner, req.repo.name):
            raise ApiError(404, "Not Found")
        return run

    def _suite_for(self, repo: Repo, head_sha: str) -> int:
        key = (repo.full_name.lower(), head_sha)
        if key not in self._suites:
            self._suites[key] = self._next("check_suite", start=7000)
        return self._suites[key]

    # --- comments

    def _post_comment(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        number = _int_param(req.params["issue_number"])
        comment_id = self._create_comment(req.repo, number, req.body["body"], self.bot_login())
        return 201, self._comment_json(self._comments[comment_id], req.base)

    def _create_comment(self, repo: Repo, number: int, body: str, user_login: str) -> int:
        if number not in repo.pulls:
            raise ApiError(404, "Not Found")
        now = utc_now()
        comment_id = self._next("comment", start=900)
        self._comments[comment_id] = CommentRecord(
            comment_id, repo.owner, repo.name, number, body, user_login, now, now, [body]
        )
        return comment_id

    def _list_comments(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        number = _int_param(req.params["issue_number"])
        if number not in req.repo.pulls:
            raise ApiError(404, "Not Found")
        items = [
            self._comment_json(c, req.base)
            for c in self._comments.values()
            if (c.owner, c.repo, c.issue_number) == (req.repo.owner, req.repo.name, number)
        ]
        return 200, Page(items, req)

    def _edit_comment(self, req: Request) -> tuple[int, Any]:
        comment = self._find_comment(req)
        comment.body = req.body["body"]
        comment.bodies.append(comment.body)
        comment.updated_at = utc_now()
        return 200, self._comment_json(comment, req.base)

    def _get_comment(self, req: Request) -> tuple[int, Any]:
        return 200, self._comment_json(self._find_comment(req), req.base)

    def _find_comment(self, req: Request) -> CommentRecord:
        assert req.repo is not None
        comment = self._comments.get(_int_param(req.params["comment_id"]))
        if comment is None or (comment.owner, comment.repo) != (req.repo.owner, req.repo.name):
            raise ApiError(404, "Not Found")
        return comment

    # --- pulls and compare

    def _list_reviews(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        number = _int_param(req.params["pull_number"])
        if number not in req.repo.pulls:
            raise ApiError(404, "Not Found")
        api = f"{req.base}/repos/{req.repo.full_name}"
        page = f"{req.base}/{req.repo.full_name}/pull/{number}"
        items = [
            {
                "id": r["id"],
                "node_id": node_id("PullRequestReview", r["id"]),
                "user": _user_json(r["login"], _stable_id(r["login"]), "User", req.base),
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
            self.pull_json(req.repo, pull, req.base)
            for number, pull in sorted(req.repo.pulls.items())
            if sha in (pull.get("merge_commit_sha"), pull["head_sha"])
        ]
        return 200, Page(items, req)

    def _get_permission(self, req: Request) -> tuple[int, Any]:
        """GitHub's answer for a collaborator (or anyone: a private repository's outsiders
        have `none`); `permission` folds maintain into write and triage into read."""
        assert req.repo is not None
        login = req.params["username"]
        key = (req.repo.full_name.lower(), login.lower())
        role = self._permissions.get(key, self.default_permission)
        user = _user_json(login, _stable_id(login), "User", req.base)
        return 200, {"permission": _ROLE_PERMISSION[role], "role_name": role, "user": user}

    def _get_membership(self, req: Request) -> tuple[int, Any]:
        org, slug, login = (req.params[k] for k in ("org", "team_slug", "username"))
        state = self._teams.get((org.lower(), slug.lower()), {}).get(login.lower())
        if state is None:
            raise ApiError(404, "Not Found")
        url = f"{req.base}/organizations/{_stable_id(org)}/team/{_stable_id(slug)}"
        return 200, {"url": f"{url}/memberships/{login}", "role": "member", "state": state}

    def _get_pull(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        pull = req.repo.pulls.get(_int_param(req.params["pull_number"]))
        if pull is None:
            raise ApiError(404, "Not Found")
        return 200, self.pull_json(req.repo, pull, req.base)

    def _compare(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        git_dir = req.repo.git_dir
        base_ref, sep, head_ref = req.params["basehead"].partition("...")
        if not sep or git_dir is None:
            raise ApiError(404, "Not Found")
        base_sha = _git_ok(git_dir, "rev-parse", "--verify", "--quiet", f"{base_ref}^{{commit}}")
        head_sha = _git_ok(git_dir, "rev-parse", "--verify", "--quiet", f"{head_ref}^{{commit}}")
        if not isinstance(base_sha, str) or not isinstance(head_sha, str):
            raise ApiError(404, "Not Found")
        merge_base = _git_ok(git_dir, "merge-base", base_sha, head_sha)
        if not isinstance(merge_base, str):
            raise ApiError(404, f"No common ancestor between {base_ref} and {head_ref}.")
        counts = _git(git_dir, "rev-list", "--left-right", "--count", f"{base_sha}...{head_sha}")
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
        shas = _git(git_dir, "rev-list", "--reverse", f"{merge_base}..{head_sha}").split()
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

    # --- control endpoints

    def _ctl_state(self, req: Request) -> tuple[int, Any]:
        with self._lock:
            return 200, copy.deepcopy(self._state_json(req.base))

    def _state_json(self, base: str) -> dict[str, Any]:
        return {
            "repositories": sorted(r.full_name for r in self._repos.values()),
            "check_runs": [
                {
                    "id": run.id,
                    "repository": f"{run.owner}/{run.repo}",
                    "html_url": f"{base}/{run.owner}/{run.repo}/runs/{run.id}",
                    "state": run.state,
                    "history": [dataclasses.asdict(u) for u in run.history],
                }
                for run in self._check_runs.values()
            ],
            "comments": [dataclasses.asdict(c) for c in self._comments.values()],
            "deliveries": [
                {"event": d.event, "delivery_id": d.delivery_id, "status": d.status}
                for d in self._deliveries
            ],
        }

    def _ctl_seed(self, req: Request) -> tuple[int, Any]:
        body = _object(req.body)
        git_dir = body.get("git_dir")
        return 201, self.seed_repository(
            str(body["owner"]),
            str(body["repo"]),
            int(body["installation_id"]),
            str(body.get("default_branch", "main")),
            git_dir=Path(git_dir) if git_dir else None,
            owner_type=str(body.get("owner_type", "Organization")),
        )

    def _ctl_pull(self, req: Request) -> tuple[int, Any]:
        body = _object(req.body)
        return 200, self.set_pull(
            req.params["owner"], req.params["repo"], _int_param(req.params["number"]), **body
        )

    def _ctl_permission(self, req: Request) -> tuple[int, Any]:
        """`{"permission": "read"}`: what the permission API answers for that user."""
        permission = str(_object(req.body)["permission"])
        self.set_permission(
            req.params["owner"], req.params["repo"], req.params["username"], permission
        )
        return 200, {"permission": permission}

    def _ctl_membership(self, req: Request) -> tuple[int, Any]:
        """`{"state": "active"}` (default) or `"pending"`: the user's team membership."""
        state = str(_object(req.body or {}).get("state", "active"))
        self.add_team_member(
            req.params["org"], req.params["team_slug"], req.params["username"], state
        )
        return 200, {"state": state}

    def _ctl_push(self, req: Request) -> tuple[int, Any]:
        body = _object(req.body)
        delivery = self.send_push(
            req.params["owner"],
            req.params["repo"],
            str(body["before"]),
            str(body["after"]),
            ref=body.get("ref"),
        )
        return 200, _delivery_json(delivery)

    def _ctl_click(self, req: Request) -> tuple[int, Any]:
        if "json" in req.content_type:
            fields = {k: str(v) for k, v in _object(req.body).items()}
        else:
            form = urllib.parse.parse_qs(req.raw.decode())
            fields = {k: v[0] for k, v in form.items()}
        run_id = _int_param(req.params["check_run_id"])
        try:
            delivery = self.click_action(
                run_id, fields["identifier"], fields.get("sender", "octocat")
            )
        except (KeyError, ValueError) as err:
            raise ApiError(422, str(err)) from err
        if "json" in req.content_type:
            return 200, _delivery_json(delivery)
        run = self._check_runs[run_id]
        return 303, Redirect(f"{req.base}/{run.owner}/{run.repo}/runs/{run_id}")

    def _ctl_webhook(self, req: Request) -> tuple[int, Any]:
        body = _object(req.body)
        delivery = self.send_webhook(str(body["event"]), body["payload"])
        return 200, _delivery_json(delivery)

    def _html_commit(self, req: Request) -> tuple[int, Any]:
        """A commit's page (what `html_url`s and the job page's revision link open): message,
        author and the patch, from the seeded repository."""
        with self._lock:
            repo = self._repos.get(f"{req.params['owner']}/{req.params['repo']}".lower())
        sha = req.params["sha"]
        if repo is None or repo.git_dir is None or not re.fullmatch(r"[0-9a-fA-F]{4,40}", sha):
            raise ApiError(404, "Not Found")
        full = _git_ok(repo.git_dir, "rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}")
        if not isinstance(full, str):
            raise ApiError(404, "Not Found")
        shown = _git(repo.git_dir, "show", "--format=%H%n%an <%ae>%n%cI%n%B%x00", "--patch", full)
        header, _, patch = shown.partition("\0")
        commit, author, date, *message = header.split("\n")
        return 200, Html(_render_commit_page(repo.full_name, commit, author, date, message, patch))

    def _html_check_run(self, req: Request) -> tuple[int, Any]:
        with self._lock:
            run = self._check_runs.get(_int_param(req.params["check_run_id"]))
            if run is None or (run.owner, run.repo) != (req.params["owner"], req.params["repo"]):
                raise ApiError(404, "Not Found")
            return 200, Html(_render_check_run_page(run))

    # --- JSON shapes (keys follow GitHub's own payloads and OpenAPI description)

    def bot_login(self) -> str:
        return f"{self.app_slug}[bot]"

    def _app_json(self, base: str) -> dict[str, Any]:
        owner = _user_json("rollwright", 1, "Organization", base)
        return {
            "id": self.app_id,
            "slug": self.app_slug,
            "node_id": node_id("App", self.app_id),
            "client_id": self.oauth_client_id,
            "owner": owner,
            "name": self.app_slug,
            "description": "rollwright (GitHub emulator)",
            "external_url": base,
            "html_url": f"{base}/apps/{self.app_slug}",
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "permissions": dict(_APP_PERMISSIONS),
            "events": list(_APP_EVENTS),
        }

    def _owner_json(self, repo: Repo, base: str) -> dict[str, Any]:
        return _user_json(repo.owner, repo.owner_id, repo.owner_type, base)

    def _organization_json(self, repo: Repo, base: str) -> dict[str, Any]:
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

    def _installation_ref(self, repo: Repo) -> dict[str, Any]:
        return {
            "id": repo.installation_id,
            "node_id": node_id("IntegrationInstallation", repo.installation_id),
        }

    def _repository_json(self, repo: Repo, base: str, *, push: bool = False) -> dict[str, Any]:
        api = f"{base}/repos/{repo.full_name}"
        web = f"{base}/{repo.full_name}"
        data: dict[str, Any] = {
            "id": repo.id,
            "node_id": node_id("Repository", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "private": True,
            "owner": self._owner_json(repo, base),
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

    def _check_run_json(
        self, run: CheckRunRecord, base: str, *, webhook: bool = False
    ) -> dict[str, Any]:
        repo = self._repo(run.owner, run.repo)
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
                "app": self._app_json(base),
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
            "app": self._app_json(base),
            "pull_requests": pulls,
        }

    def _comment_json(self, comment: CommentRecord, base: str) -> dict[str, Any]:
        full = f"{comment.owner}/{comment.repo}"
        bot = comment.user_login.endswith("[bot]")
        return {
            "id": comment.id,
            "node_id": node_id("IssueComment", comment.id),
            "url": f"{base}/repos/{full}/issues/comments/{comment.id}",
            "html_url": f"{base}/{full}/pull/{comment.issue_number}#issuecomment-{comment.id}",
            "body": comment.body,
            "user": _user_json(
                comment.user_login,
                _stable_id(comment.user_login),
                "Bot" if bot else "User",
                base,
            ),
            "created_at": comment.created_at,
            "updated_at": comment.updated_at,
            "issue_url": f"{base}/repos/{full}/issues/{comment.issue_number}",
            "author_association": "NONE" if bot else "MEMBER",
            "performed_via_github_app": self._app_json(base) if bot else None,
        }

    def pull_json(self, repo: Repo, pull: dict[str, Any], base: str) -> dict[str, Any]:
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
            "user": _user_json(pull["user"], _stable_id(pull["user"]), "User", base),
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
            "head": self._pull_side(repo, pull["head_ref"], pull["head_sha"], base),
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
                for c in self._comments.values()
            ),
            "review_comments": 0,
            "maintainer_can_modify": False,
            "commits": 1,
            "additions": 0,
            "deletions": 0,
            "changed_files": 0,
        }

    def _pull_side(self, repo: Repo, ref: str, sha: str, base: str) -> dict[str, Any]:
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self._owner_json(repo, base),
            "repo": self._repository_json(repo, base),
        }


# --------------------------------------------------------------------------- helpers

_APP_PERMISSIONS = {
    "checks": "write",
    "contents": "write",
    "metadata": "read",
    "pull_requests": "write",
}
_APP_EVENTS = ("check_run", "check_suite", "pull_request", "push")
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


def _public_key(pem: str) -> RSAPublicKey:
    data = pem.encode()
    if b"PRIVATE KEY" in data:
        private = serialization.load_pem_private_key(data, password=None)
        if not isinstance(private, RSAPrivateKey):
            raise ValueError("the GitHub App key must be an RSA key")
        return private.public_key()
    public = serialization.load_pem_public_key(data)
    if not isinstance(public, RSAPublicKey):
        raise ValueError("the GitHub App key must be an RSA key")
    return public


# Collaborator role → the `permission` GitHub's permission API answers with.
_ROLE_PERMISSION = {
    "admin": "admin",
    "maintain": "write",
    "write": "write",
    "triage": "read",
    "read": "read",
    "none": "none",
}


def _stable_id(login: str) -> int:
    return 10_000 + int(hashlib.sha256(login.encode()).hexdigest()[:8], 16) % 1_000_000


def _user_json(login: str, user_id: int, kind: str, base: str) -> dict[str, Any]:
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


def _require_conclusion(status: str | None, conclusion: str | None, body: dict[str, Any]) -> None:
    if conclusion:
        return
    if status == "completed" or "completed_at" in body:
        raise ApiError(
            422,
            "Invalid request.",
            errors=[
                {
                    "resource": "CheckRun",
                    "field": "conclusion",
                    "code": "missing_field",
                    "message": "conclusion is required when status is completed",
                }
            ],
        )


def _schema_problem(resource: str, error: jsonschema.ValidationError) -> dict[str, Any]:
    path = ".".join(str(p) for p in error.absolute_path)
    code = {
        "maxLength": "too_long",
        "maxItems": "too_long",
        "required": "missing_field",
        "enum": "invalid",
        "type": "invalid",
    }.get(str(error.validator), "invalid")
    if error.validator == "required" and isinstance(error.validator_value, list):
        missing = [
            name
            for name in error.validator_value
            if isinstance(error.instance, dict) and name not in error.instance
        ]
        path = ".".join(filter(None, [path, missing[0] if missing else ""]))
    return {"resource": resource, "field": path, "code": code, "message": error.message}


def _byte_limit_problems(resource: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    output = body.get("output")
    if not isinstance(output, dict):
        return []
    problems = []
    for name in ("summary", "text"):
        value = output.get(name)
        if isinstance(value, str) and len(value) <= OUTPUT_LIMIT:
            size = len(value.encode())
            if size > OUTPUT_LIMIT:
                problems.append(
                    {
                        "resource": resource,
                        "field": f"output.{name}",
                        "code": "too_long",
                        "message": f"Only {OUTPUT_LIMIT} bytes are allowed; {size} were supplied.",
                    }
                )
    return problems


def _parse_json(raw: bytes) -> Any:
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise ApiError(400, "Problems parsing JSON") from err


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "expected a JSON object")
    return body


def _form_fields(req: Request) -> dict[str, str]:
    """A POST's fields: a JSON object, or a form (`application/x-www-form-urlencoded`)."""
    if "json" in req.content_type:
        body = req.body if isinstance(req.body, dict) else {}
        return {str(k): str(v) for k, v in body.items() if v is not None}
    try:
        text = req.raw.decode()
    except UnicodeDecodeError as err:
        raise ApiError(400, "the form is not UTF-8") from err
    return {k: v[0] for k, v in urllib.parse.parse_qs(text, keep_blank_values=True).items()}


def _with_query(url: str, extra: dict[str, str]) -> str:
    """`url` with `extra` appended to its query (its own query is kept)."""
    parts = urllib.parse.urlsplit(url)
    added = urllib.parse.urlencode(extra)
    query = f"{parts.query}&{added}" if parts.query else added
    return urllib.parse.urlunsplit(parts._replace(query=query))


def _token_chars(length: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _oauth_error(error: str, description: str, page: str) -> dict[str, Any]:
    return {"error": error, "error_description": description, "error_uri": f"{OAUTH_DOCS}/{page}"}


def _message_page(title: str, text: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"</head><body style='font-family:sans-serif;max-width:40em;margin:2em auto'>"
        f"<h1>{html.escape(title)}</h1><p id='error'>{html.escape(text)}</p></body></html>"
    )


def _int_param(value: str) -> int:
    try:
        return int(value)
    except ValueError as err:
        raise ApiError(404, "Not Found") from err


def _delivery_json(delivery: WebhookDelivery) -> dict[str, Any]:
    return {
        "event": delivery.event,
        "delivery_id": delivery.delivery_id,
        "status": delivery.status,
        "response": delivery.response,
    }


def _git(git_dir: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(git_dir), *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise ApiError(500, f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def _git_ok(git_dir: Path, *args: str) -> str | bool:
    """stdout (stripped) when git succeeds and prints something, True/False otherwise."""
    proc = subprocess.run(
        ["git", "-C", str(git_dir), *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return False
    return proc.stdout.strip() or True


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
    _git(git_dir, "update-ref", f"refs/pull/{number}/head", head_sha)
    merge_ref = f"refs/pull/{number}/merge"
    tip = _git_ok(git_dir, "rev-parse", "--verify", "--quiet", f"refs/heads/{base_ref}^{{commit}}")
    base = tip if isinstance(tip, str) else base_sha
    if not open_ or not base:
        _git_ok(git_dir, "update-ref", "-d", merge_ref)
        return None
    tree = subprocess.run(
        ["git", "-C", str(git_dir), "merge-tree", "--write-tree", "--no-messages", base, head_sha],
        capture_output=True,
        text=True,
        check=False,
    )
    if tree.returncode != 0:  # 1: conflicts; GitHub then has no merge ref
        _git_ok(git_dir, "update-ref", "-d", merge_ref)
        return None
    env = {**os.environ, **_MERGE_IDENTITY}
    date = _git(git_dir, "show", "-s", "--format=%cI", head_sha).strip()
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
    _git(git_dir, "update-ref", merge_ref, merge)
    return merge


def _commit_json(git_dir: Path, sha: str, full_name: str, base: str) -> dict[str, Any]:
    fmt = "%H%x00%T%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%P%x00%B"
    fields = _git(git_dir, "show", "-s", f"--format={fmt}", sha).split("\x00")
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
    fields = _git(git_dir, "diff", "-z", "--numstat", "-M", base_sha, head_sha).split("\0")
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
    fields = _git(git_dir, "diff", "-z", "--name-status", "-M", base_sha, head_sha).split("\0")
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


def _push_commit(git_dir: Path, sha: str, repo: Repo, base: str) -> dict[str, Any]:
    fmt = "%H%x00%T%x00%an%x00%ae%x00%cn%x00%ce%x00%cI%x00%B"
    fields = _git(git_dir, "show", "-s", f"--format={fmt}", sha).split("\x00")
    commit_sha, tree, an, ae, cn, ce, cd, message = fields[:8]
    changes: dict[str, list[str]] = {"added": [], "removed": [], "modified": []}
    listing = _git(git_dir, "diff-tree", "--no-commit-id", "-r", "--name-status", "--root", sha)
    for line in listing.splitlines():
        code, _, name = line.partition("\t")
        bucket = {"A": "added", "D": "removed"}.get(code[:1], "modified")
        changes[bucket].append(name)
    return {
        "id": commit_sha,
        "tree_id": tree,
        "distinct": True,
        "message": message.rstrip("\n"),
        "timestamp": cd,
        "url": f"{base}/{repo.full_name}/commit/{commit_sha}",
        "author": {"name": an, "email": ae, "username": an},
        "committer": {"name": cn, "email": ce, "username": cn},
        **changes,
    }


def _render_check_run_page(run: CheckRunRecord) -> str:
    state = run.state
    output = state["output"]
    buttons = "".join(
        f'<button name="identifier" value="{html.escape(a["identifier"])}"'
        f' title="{html.escape(a["description"])}">{html.escape(a["label"])}</button> '
        for a in state["actions"]
    )
    if buttons:
        buttons = (
            f'<form method="post" action="/_emulator/check-runs/{run.id}/click">'
            f'clicked by <input name="sender" value="octocat" size="12"> {buttons}</form>'
        )
    history = "".join(
        f"<li>{html.escape(u.at)} {u.method} → {html.escape(str(u.state['status']))}"
        f" {html.escape(str(u.state['conclusion'] or ''))}</li>"
        for u in run.history
    )
    title = html.escape(f"{run.owner}/{run.repo} · {state['name']}")
    details = state.get("details_url") or ""
    # GitHub shows a "Details" link to details_url beside the check run; so does this page.
    details_link = (
        f" · <a id='details' href='{html.escape(details)}'>Details</a>"
        if details.startswith(("http://", "https://"))
        else ""
    )
    commit = f"/{run.owner}/{run.repo}/commit/{state['head_sha']}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body style='font-family:sans-serif;max-width:70em;margin:2em auto'>"
        f"<h1>{title}</h1>"
        f"<p>check run {run.id} · <b>{html.escape(state['status'])}</b>"
        f" {html.escape(state['conclusion'] or '')} · head "
        f"<a href='{html.escape(commit)}'>{html.escape(state['head_sha'][:12])}</a>"
        f" · external id {html.escape(state['external_id'] or '')}{details_link}</p>"
        f"<p>{buttons}</p>"
        f"<h2>{html.escape(output.get('title') or '')}</h2>"
        # GitHub renders the summary and text as Markdown: rollwright writes them for that.
        f"<div id='summary'>{render_markdown(output.get('summary') or '')}</div>"
        f"<div id='text'>{render_markdown(output.get('text') or '')}</div>"
        f"<h3>History</h3><ol>{history}</ol></body></html>"
    )


def _render_commit_page(
    full_name: str, commit: str, author: str, date: str, message: list[str], patch: str
) -> str:
    subject = message[0] if message else ""
    body = "\n".join(message[1:]).strip()
    title = html.escape(f"{full_name} · {subject}")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body style='font-family:sans-serif;max-width:70em;margin:2em auto'>"
        f"<h1 id='subject'>{html.escape(subject)}</h1>"
        f"<p>{html.escape(full_name)} · commit <code id='sha'>{html.escape(commit)}</code>"
        f" · {html.escape(author)} · {html.escape(date)}</p>"
        f"<pre style='white-space:pre-wrap'>{html.escape(body)}</pre>"
        f"<pre id='patch'>{html.escape(patch.strip())}</pre></body></html>"
    )


def _paginate(page: Page, base: str, target: str) -> tuple[list[dict[str, Any]], str]:
    query = page.request.query
    per_page = max(1, min(100, int(query.get("per_page", ["30"])[0])))
    number = max(1, int(query.get("page", ["1"])[0]))
    last = max(1, -(-len(page.items) // per_page))
    chunk = page.items[(number - 1) * per_page : number * per_page]
    path = urllib.parse.urlsplit(target).path

    def link(n: int, rel: str) -> str:
        return f'<{base}{path}?per_page={per_page}&page={n}>; rel="{rel}"'

    links = []
    if number < last:
        links += [link(number + 1, "next"), link(last, "last")]
    if number > 1:
        links += [link(1, "first"), link(number - 1, "prev")]
    return chunk, ", ".join(links)


# --------------------------------------------------------------------------- standalone


def _parse_repo(spec: str) -> tuple[str, str, int, str]:
    """`owner/repo[:installation_id[:default_branch]]`."""
    name, *rest = spec.split(":")
    owner, _, repo = name.partition("/")
    if not owner or not repo:
        raise argparse.ArgumentTypeError(f"--repo {spec!r}: expected owner/repo[:id[:branch]]")
    installation = int(rest[0]) if rest and rest[0] else 1
    branch = rest[1] if len(rest) > 1 else "main"
    return owner, repo, installation, branch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shared.devstack.emulator.server", description="Run the fake GitHub API."
    )
    parser.add_argument("--app-id", type=int, default=1)
    parser.add_argument("--app-key", type=Path, help="PEM file: the App's private or public key")
    parser.add_argument("--app-slug", default="rollwright")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--webhook-url")
    parser.add_argument("--webhook-secret")
    parser.add_argument("--oauth-client-id", default="Iv1.emulator")
    parser.add_argument(
        "--oauth-client-secret", help="the App's OAuth client secret (default: a random one)"
    )
    parser.add_argument("--repo", action="append", default=[], type=_parse_repo)
    parser.add_argument("--git-dir", type=Path, help="git repository backing the first --repo")
    parser.add_argument(
        "--extract-schemas",
        type=Path,
        metavar="ENDPOINTS_JSON",
        help=f"rewrite {SCHEMAS_FILE.name} from GitHub's endpoints.json and exit",
    )
    args = parser.parse_args(argv)
    if args.extract_schemas:
        data = {
            "source": json.loads(SCHEMAS_FILE.read_text())["source"],
            "endpoints": extract_request_schemas(json.loads(args.extract_schemas.read_text())),
        }
        SCHEMAS_FILE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return 0
    if args.app_key is None:
        parser.error("--app-key is required")
    emulator = GitHubEmulator(
        app_id=args.app_id,
        app_key=args.app_key.read_text(),
        app_slug=args.app_slug,
        webhook_url=args.webhook_url,
        webhook_secret=args.webhook_secret,
        host=args.host,
        port=args.port,
        oauth_client_id=args.oauth_client_id,
        oauth_client_secret=args.oauth_client_secret,
    )
    for index, (owner, repo, installation, branch) in enumerate(args.repo):
        git_dir = args.git_dir if index == 0 else None
        emulator.seed_repository(owner, repo, installation, branch, git_dir=git_dir)
    emulator.start()
    print(f"GitHub emulator listening on {emulator.url}", flush=True)
    emulator.serve_until_signalled()
    return 0


if __name__ == "__main__":
    sys.exit(main())
