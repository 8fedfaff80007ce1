"""Who is asking for a page, and whether they may read the repository it shows.

- a bearer token equal to ROLLWRIGHT_API_TOKEN: a machine, which reads everything;
- a valid session cookie: a person signed in with GitHub, who reads the repositories GitHub
  says they can read;
- with ROLLWRIGHT_OPEN_PAGES: anyone, who reads everything;
- otherwise nobody: `SignInRequired`, which the app answers with the sign-in redirect (pages)
  or 401 (JSON), before any data is looked at.

A page of a repository the viewer cannot read answers exactly as a page of nothing would
(404), so the pages do not tell outsiders which deployments, roots or pull requests exist.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool

from gateway.access.permissions import PermissionUnknown, ReadPermissions
from gateway.access.session import SignedIn, Signer
from shared.github.app import GitHubApp
from shared.github.configured import configured_app
from shared.settings import Settings

SESSION_COOKIE = "rollwright_session"
SESSION_PURPOSE = "session"
log = logging.getLogger("rollwright.gateway.access")


def cookie_name(name: str, settings: Settings) -> str:
    """Behind TLS the cookies take the `__Host-` prefix: the browser then keeps them only as
    set by this host (Secure, `Path=/`, no Domain), never by a sibling subdomain."""
    return f"__Host-{name}" if settings.public_url.startswith("https://") else name


class SignInRequired(Exception):
    """Nobody is signed in (or the bearer token is wrong)."""

    def __init__(self, *, bad_token: bool = False) -> None:
        super().__init__("sign in with GitHub, or send the bearer token")
        self.bad_token = bad_token


@dataclass(frozen=True)
class Viewer:
    kind: Literal["user", "machine", "anyone"]
    login: str | None = None
    user_id: int | None = None


class Access:
    """The gateway's sign-in state: the cookie signer, the permission cache and the GitHub
    App that asks (built on first use: a gateway whose pages nobody signs in to never asks)."""

    def __init__(self, settings: Settings) -> None:
        if settings.signin_configured and not settings.github_configured:
            raise ValueError(
                "ROLLWRIGHT_GITHUB_OAUTH_CLIENT_ID is set but no GitHub App is: the gateway "
                "asks GitHub through the App who may read a repository (set "
                "ROLLWRIGHT_GITHUB_APP_ID and ROLLWRIGHT_GITHUB_PRIVATE_KEY(_FILE))"
            )
        self.settings = settings
        key = settings.session_key() if settings.signin_configured else None
        self.signer = Signer(key) if key is not None else None
        self.permissions = ReadPermissions(
            self.github, ttl_seconds=settings.permission_cache_seconds
        )
        self._github: GitHubApp | None = None
        self._lock = threading.Lock()

    def github(self) -> GitHubApp:
        with self._lock:
            if self._github is None:
                self._github = configured_app(self.settings)
            return self._github

    def close(self) -> None:
        with self._lock:
            if self._github is not None:
                self._github.close()
                self._github = None

    def viewer(self, request: Request) -> Viewer:
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credential.strip():
            given = credential.strip().encode()
            for token in (self.settings.api_token, self.settings.read_token):
                if token is not None and hmac.compare_digest(
                    given, token.get_secret_value().encode()
                ):
                    return Viewer("machine")
            raise SignInRequired(bad_token=True)
        if self.signer is not None:
            cookie = request.cookies.get(cookie_name(SESSION_COOKIE, self.settings))
            who = SignedIn.of(self.signer.verify(SESSION_PURPOSE, cookie))
            if who is not None:
                return Viewer("user", who.login, who.user_id)
        if self.settings.open_pages:
            return Viewer("anyone")
        raise SignInRequired()

    async def may_read(self, viewer: Viewer, repo: str) -> bool:
        """May `viewer` read `owner/name`? (PermissionUnknown when GitHub did not answer.)"""
        if viewer.kind != "user" or self.settings.open_pages:
            return True
        assert viewer.login is not None
        return await self.permissions.can_read(viewer.login, repo)

    async def readable(self, viewer: Viewer, repos: Iterable[str]) -> list[str]:
        """Those of `repos` the viewer may read, in their order (asked side by side: a
        front page of many repositories waits for the slowest answer, not their sum). One
        GitHub did not answer for is left out: a list fails closed, one repository at a
        time, rather than not at all or with a message naming what it hides."""

        async def allowed(repo: str) -> bool:
            try:
                return await self.may_read(viewer, repo)
            except PermissionUnknown as err:
                log.warning("read permission unknown", extra={"error": str(err)})
                return False

        names = list(repos)
        answers = await asyncio.gather(*(allowed(repo) for repo in names))
        return [repo for repo, ok in zip(names, answers, strict=True) if ok]


def get_access(request: Request) -> Access:
    access: Access = request.app.state.access
    return access


AccessDep = Annotated[Access, Depends(get_access)]


def current_viewer(request: Request, access: AccessDep) -> Viewer:
    return access.viewer(request)


ViewerDep = Annotated[Viewer, Depends(current_viewer)]


@dataclass(frozen=True)
class Reading:
    """A request's viewer with the means to check what they may read: what routes take."""

    access: Access
    viewer: Viewer

    async def may_read(self, repo: str) -> bool:
        return await self.access.may_read(self.viewer, repo)

    async def readable(self, repos: Iterable[str]) -> list[str]:
        return await self.access.readable(self.viewer, repos)

    @property
    def everything(self) -> bool:
        """Machines and open pages read every repository (no filtering needed)."""
        return self.viewer.kind != "user" or self.access.settings.open_pages

    async def visible(self, repos: Callable[[], list[str]]) -> list[str] | None:
        """The repositories of `repos()` the viewer may read, or None for all of them."""
        if self.everything:
            return None
        return await self.readable(await run_in_threadpool(repos))

    async def narrow(
        self, repo: str | None, repos: Callable[[], list[str]]
    ) -> tuple[bool, str | None]:
        """For a listing that spans repositories unless `repo` names one (a root's page):
        (whether to show it, the repository to narrow it to). Without `repo`, a person who
        reads every repository of `repos()` sees them all; one who reads only one of them
        sees that one; one who reads several but not all must name one (False)."""
        if self.everything:
            return True, repo
        every = await run_in_threadpool(repos)
        if repo is not None:  # GitHub is asked only of repositories rollwright knows
            return repo in every and await self.may_read(repo), repo
        visible = await self.readable(every)
        if len(visible) == 1:
            return True, visible[0]
        return bool(visible) and len(visible) == len(every), None


def current_reading(access: AccessDep, viewer: ViewerDep) -> Reading:
    return Reading(access, viewer)


ReadingDep = Annotated[Reading, Depends(current_reading)]
