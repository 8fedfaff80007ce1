"""Signing in to the gateway's pages through the GitHub emulator's OAuth flow, as a browser
does: the page sends the client to `/auth/signin`, that to the emulator's authorize page,
whose form (here: the same fields, posted) sends it back to `/auth/callback` with a code."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import httpx

AUTHORIZE_PATH = "/login/oauth/authorize"


class SignInFailed(RuntimeError):
    """The flow did not end on the page asked for."""


def open_signed_in(http: httpx.Client, page_url: str, login: str) -> httpx.Response:
    """GET `page_url` as `login`, signing in on the way when the gateway asks; the cookie
    stays in `http` for the next requests."""
    answer = http.get(page_url, follow_redirects=True)
    if urlsplit(str(answer.url)).path != AUTHORIZE_PATH:
        return answer  # signed in already, or no sign-in asked for (open pages)
    authorize = urlsplit(str(answer.url))
    fields = dict(parse_qsl(authorize.query))
    fields.pop("login", None)
    done = http.post(
        f"{authorize.scheme}://{authorize.netloc}{AUTHORIZE_PATH}",
        data={**fields, "login": login},
        follow_redirects=True,
    )
    if urlsplit(str(done.url)).path == AUTHORIZE_PATH:
        raise SignInFailed(
            f"signing in as {login} stopped on the authorize page: {done.text[:300]}"
        )
    return done
