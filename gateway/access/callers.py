"""Who calls the manual-deploy API, as GitHub vouches for it, and what they may deploy.

A caller is one of:
- a **person with a GitHub token** (`Authorization: Bearer <token>`: a personal access token,
  `gh auth token`, an OAuth or App user token): the gateway asks GitHub `GET /user` with it and
  keeps the login for a few minutes (by the token's digest, never the token), then drops the
  token;
- a **person signed in to the pages** (the session cookie), on a request sent by one of the
  gateway's own pages (`origin.from_own_page`: a cookie alone could ride a cross-site form);
- **the API token** (`ROLLWRIGHT_API_TOKEN`): a machine, named `api token` on the check run,
  the job page and the audit trail.

A person needs write access to the repository (the App asks GitHub's collaborator-permission
API), and deploying several roots at once needs membership of `ROLLWRIGHT_DEPLOY_ADMIN_TEAM`;
the API token deploys one root at a time. Nobody names who they are in the request body.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

import httpx
from fastapi import Request
from fastapi.concurrency import run_in_threadpool

from gateway.access.origin import from_own_page
from gateway.access.session import SignedIn
from gateway.access.viewer import SESSION_COOKIE, SESSION_PURPOSE, Access, cookie_name
from shared.github.app import GitHubRequestError, GitHubRetryableError

TOKEN_NAME = "api token"
LOGIN_TTL_SECONDS = 300.0
TIMEOUT_SECONDS = 10.0
WRITES = frozenset({"write", "admin"})
# GitHub's token formats: prefixed (personal, OAuth, user-to-server, fine-grained, installation)
# or an older 40-hex token (GitHub Enterprise Server)
GITHUB_TOKEN = re.compile(
    r"(gh[pousr]_[A-Za-z0-9_]{20,255}|github_pat_[A-Za-z0-9_]{20,255}|[0-9a-f]{40})"
)


class NotIdentified(Exception):
    """No caller GitHub or the gateway vouches for (401); the message says why."""


class Refused(Exception):
    """A known caller who may not do this (403); the message says why."""


class Unknown(Exception):
    """GitHub did not answer a question about the caller (503)."""


@dataclass(frozen=True)
class Caller:
    kind: Literal["person", "token"]
    login: str | None = None  # a person's GitHub login
    via: Literal["github_token", "session", "api_token"] = "api_token"
    # the GitHub token itself, kept for this request only (it must read the repository)
    github_token: str | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """As the check run, the job page and the audit trail show the caller."""
        return self.login if self.login is not None else TOKEN_NAME


class Callers:
    def __init__(self, access: Access) -> None:
        self.access = access
        self.settings = access.settings
        self._lock = threading.Lock()
        self._logins: dict[str, tuple[str, float]] = {}  # token digest → (login, expiry)

    @property
    def enabled(self) -> bool:
        """Whether the API has any way to know a caller (else it does not exist: 404)."""
        return self.settings.api_token is not None or self.settings.github_configured

    async def identify(self, request: Request) -> Caller:
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        token = credential.strip()
        if scheme.lower() == "bearer" and token:
            api = self.settings.api_token
            if api is not None and hmac.compare_digest(
                token.encode(), api.get_secret_value().encode()
            ):
                return Caller("token")
            if not self.settings.github_configured or not GITHUB_TOKEN.fullmatch(token):
                # another secret (the read token, an old API token) is never sent to GitHub
                raise NotIdentified("a valid bearer token is required")
            return Caller("person", await self._login_of(token), "github_token", token)
        if scheme:
            raise NotIdentified("a bearer token is required")
        signer = self.access.signer
        cookie = request.cookies.get(cookie_name(SESSION_COOKIE, self.settings))
        who = SignedIn.of(signer.verify(SESSION_PURPOSE, cookie)) if signer else None
        if who is None:
            raise NotIdentified("a bearer token (the API token or a GitHub token) is required")
        if not from_own_page(request, self.settings.public_url):
            raise NotIdentified("a signed-in deploy must come from one of the gateway's pages")
        return Caller("person", who.login, "session")

    async def _login_of(self, token: str) -> str:
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            known = self._logins.get(digest)
        if known is not None and known[1] > now:
            return known[0]
        answer = await self._as_token(token, "/user", "whose token this is")
        if answer.status_code in (401, 403, 404):
            raise NotIdentified("GitHub does not accept this token as a user's")
        login = answer.json().get("login") if answer.status_code == 200 else None
        if not isinstance(login, str) or not login:
            raise Unknown(f"GitHub answered GET /user with {answer.status_code}")
        with self._lock:
            if len(self._logins) > 10_000:
                self._logins.clear()
            self._logins[digest] = (login, now + LOGIN_TTL_SECONDS)
        return login

    async def _as_token(self, token: str, path: str, asking: str) -> httpx.Response:
        """GET `path` of the configured GitHub as the token's holder."""
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
                return await http.get(
                    f"{self.settings.github_api_url.rstrip('/')}{path}",
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Accept": "application/vnd.github+json",
                    },
                )
        except httpx.HTTPError as err:
            raise Unknown(f"GitHub did not say {asking} ({type(err).__name__})") from err

    async def _token_reads(self, token: str, repo: str) -> None:
        """The token itself may read the repository: a token GitHub issued for something
        else (a zero-scope sign-in to another site) says who someone is, not that they meant
        to deploy here."""
        answer = await self._as_token(token, f"/repos/{repo}", "what the token may read")
        if answer.status_code in (401, 403, 404):
            raise Refused(f"this GitHub token cannot read {repo}: it may not deploy there")
        if answer.status_code != 200:
            raise Unknown(f"GitHub answered GET /repos/{repo} with {answer.status_code}")

    async def authorize(self, caller: Caller, repo: str, roots: list[str]) -> None:
        """Refused unless `caller` may deploy `roots` of `repo` (see the module)."""
        several = len(roots) > 1
        if caller.kind == "token":
            if several:
                raise Refused(
                    "the API token deploys one root at a time; several at once need a member of "
                    "the deploy admin team (a GitHub token or a signed-in session)"
                )
            return
        assert caller.login is not None
        if caller.github_token is not None:
            await self._token_reads(caller.github_token, repo)
        app = self.access.github()
        try:
            permission = await run_in_threadpool(app.collaborator_permission, repo, caller.login)
            if permission not in WRITES:
                raise Refused(
                    f"@{caller.login} has {permission} access to {repo}: a manual deploy needs "
                    "write access"
                )
            if several:
                team = self.settings.deploy_admin_team
                if not team:
                    raise Refused(
                        "deploying several roots at once needs ROLLWRIGHT_DEPLOY_ADMIN_TEAM "
                        "(nobody may, as configured)"
                    )
                org, _, slug = team.lstrip("@").partition("/")
                member = await run_in_threadpool(app.is_team_member, repo, org, slug, caller.login)
                if not member:
                    raise Refused(
                        f"@{caller.login} is not in @{org}/{slug}: only that team deploys "
                        "several roots at once"
                    )
        except GitHubRetryableError as err:
            raise Unknown(f"GitHub did not answer who may deploy: {err}") from err
        except GitHubRequestError as err:
            raise Refused(f"GitHub refused to say what @{caller.login} may do: {err}") from err
