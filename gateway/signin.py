"""Signing in to the pages with GitHub: `/auth/signin`, `/auth/callback`, `/auth/signout`.

`/auth/signin?next=/jobs/…` sends the browser to GitHub's authorize page with a signed
`state` (where to go back to, and a nonce that must match a short-lived cookie set here, so
a callback started in another browser is refused: no login CSRF). `/auth/callback` checks it,
learns the login from GitHub (gateway/access/oauth.py) and sets the session cookie: signed,
HttpOnly, SameSite=Lax (GitHub's redirect back is a top-level navigation from another site),
Secure when the public URL is https. The cookie holds the login and user id only.
"""

from __future__ import annotations

import logging
import secrets
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from gateway.access.oauth import GitHubOAuth, SignInError
from gateway.access.origin import from_own_page
from gateway.access.session import SignedIn
from gateway.access.viewer import SESSION_COOKIE, SESSION_PURPOSE, AccessDep, cookie_name
from gateway.pages import error_page

log = logging.getLogger("rollwright.gateway.signin")

router = APIRouter(tags=["sign-in"], include_in_schema=False)
STATE_COOKIE = "rollwright_oauth"
STATE_PURPOSE = "oauth-state"
STATE_SECONDS = 10 * 60
# What GitHub's `error` on the callback means (docs.github.com, "Troubleshooting
# authorization request errors").
GITHUB_ERRORS = {
    "access_denied": "You did not authorize the app on GitHub.",
    "redirect_uri_mismatch": "The App's callback URL does not match this gateway's "
    "ROLLWRIGHT_PUBLIC_URL/auth/callback (docs/governance.md).",
    "application_suspended": "The GitHub App is suspended.",
}


def safe_next(value: str | None) -> str:
    """A path on this gateway to return to; anything else (another site, `//host`) is `/`."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def signin_location(public_url: str, next_path: str) -> str:
    return f"{public_url.rstrip('/')}/auth/signin?{urlencode({'next': safe_next(next_path)})}"


def _not_configured(public: str) -> HTMLResponse:
    return error_page(
        503,
        "Sign-in is not configured",
        "These pages show a private fleet's deployments, so they need a GitHub sign-in: set "
        "ROLLWRIGHT_GITHUB_OAUTH_CLIENT_ID and ROLLWRIGHT_GITHUB_OAUTH_CLIENT_SECRET (the "
        "GitHub App's client id and secret, docs/governance.md). Machines can send the bearer "
        "token instead.",
        public,
    )


@router.get("/auth/signin", response_model=None)
async def signin(access: AccessDep, next: str | None = None) -> Response:
    """Off to GitHub's authorize page, then back to `next`."""
    settings = access.settings
    public = settings.public_url.rstrip("/")
    if not settings.signin_configured or access.signer is None:
        return _not_configured(public)
    nonce = secrets.token_urlsafe(16)
    state = access.signer.sign(
        STATE_PURPOSE, {"next": safe_next(next), "nonce": nonce}, STATE_SECONDS
    )
    answer = RedirectResponse(GitHubOAuth(settings).authorize_url(state), status_code=302)
    answer.set_cookie(
        cookie_name(STATE_COOKIE, settings),
        nonce,
        max_age=STATE_SECONDS,
        path="/",
        httponly=True,
        samesite="lax",
        secure=public.startswith("https://"),
    )
    return answer


@router.get("/auth/callback", response_model=None)
async def callback(
    request: Request,
    access: AccessDep,
    code: Annotated[str | None, Query(max_length=200)] = None,
    state: Annotated[str | None, Query(max_length=2000)] = None,
    error: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """GitHub's redirect back: check the state, learn who signed in, set the session."""
    settings = access.settings
    public = settings.public_url.rstrip("/")
    if not settings.signin_configured or access.signer is None:
        return _not_configured(public)
    if error:
        # GitHub's own words only: the query string is anyone's to write
        said = GITHUB_ERRORS.get(error, "GitHub did not sign you in.")
        return error_page(403, "Sign-in was not completed", said, public)
    claims = access.signer.verify(STATE_PURPOSE, state)
    cookie = request.cookies.get(cookie_name(STATE_COOKIE, settings), "")
    if (
        claims is None
        or not code
        or not cookie
        or not secrets.compare_digest(str(claims.get("nonce", "")).encode(), cookie.encode())
    ):
        return error_page(
            400,
            "This sign-in link is not valid",
            "It expired, was already used, or was started in another browser. Open the page "
            "you wanted again to sign in.",
            public,
        )
    try:
        login, user_id = await GitHubOAuth(settings).identify(code)
    except SignInError as err:
        log.warning("sign-in refused", extra={"error": str(err)})
        return error_page(502, "GitHub did not confirm the sign-in", str(err), public)
    log.info("signed in", extra={"login": login})
    answer = RedirectResponse(f"{public}{safe_next(str(claims.get('next')))}", status_code=303)
    answer.set_cookie(
        cookie_name(SESSION_COOKIE, settings),
        access.signer.sign(
            SESSION_PURPOSE, SignedIn(login, user_id).payload(), settings.session_hours * 3600
        ),
        max_age=int(settings.session_hours * 3600),
        path="/",
        httponly=True,
        samesite="lax",
        secure=public.startswith("https://"),
    )
    answer.delete_cookie(
        cookie_name(STATE_COOKIE, settings),
        path="/",
        secure=public.startswith("https://"),
        httponly=True,
        samesite="lax",
    )
    return answer


@router.post("/auth/signout", response_model=None)
async def signout(request: Request, access: AccessDep) -> Response:
    """Sign out, from the sign-out button of this gateway's pages only (another site, even
    on another port of this host, cannot sign anyone out)."""
    public = access.settings.public_url.rstrip("/")
    if not from_own_page(request, public):
        return error_page(
            403, "Sign out from the pages", "Use the Sign out button of this gateway.", public
        )
    answer = RedirectResponse(f"{public}/", status_code=303)
    answer.delete_cookie(
        cookie_name(SESSION_COOKIE, access.settings),
        path="/",
        secure=public.startswith("https://"),
        httponly=True,
        samesite="lax",
    )
    return answer
