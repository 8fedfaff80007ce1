"""The GitHub App's user OAuth flow, used only to learn who is signing in.

`authorize_url` sends the browser to GitHub (`/login/oauth/authorize` on github.com, on a
GHES host, or on the dev stack's emulator); `identify` trades the code GitHub sends back for
a user access token, asks `GET /user` who that is, and drops the token. Reading a
repository is then judged through the App's own installation (gateway/access/permissions.py),
so no user token is stored anywhere.
"""

from __future__ import annotations

from urllib.parse import urlencode

import httpx

from shared.github.urls import web_base
from shared.settings import Settings

TIMEOUT_SECONDS = 10.0


class SignInError(Exception):
    """GitHub did not confirm who is signing in; the message says why, without secrets."""


class GitHubOAuth:
    def __init__(self, settings: Settings) -> None:
        if settings.github_oauth_client_id is None or settings.github_oauth_client_secret is None:
            raise ValueError("GitHub sign-in needs the App's client id and client secret")
        self._client_id = settings.github_oauth_client_id
        self._secret = settings.github_oauth_client_secret
        self._web = web_base(settings.github_api_url)
        self._api = settings.github_api_url.rstrip("/")
        self.callback_url = f"{settings.public_url.rstrip('/')}/auth/callback"

    def authorize_url(self, state: str) -> str:
        query = {"client_id": self._client_id, "redirect_uri": self.callback_url, "state": state}
        return f"{self._web}/login/oauth/authorize?{urlencode(query)}"

    async def identify(self, code: str) -> tuple[str, int]:
        """(login, user id) of whoever GitHub issued `code` to."""
        async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
            try:
                answer = await http.post(
                    f"{self._web}/login/oauth/access_token",
                    data={
                        "client_id": self._client_id,
                        "client_secret": self._secret.get_secret_value(),
                        "code": code,
                        "redirect_uri": self.callback_url,
                    },
                    headers={"Accept": "application/json"},
                )
                grant = answer.json() if answer.status_code == 200 else None
            except (httpx.HTTPError, ValueError) as err:
                raise SignInError(f"GitHub did not answer the code exchange: {err}") from err
            if not isinstance(grant, dict):
                raise SignInError(f"GitHub answered the code exchange with {answer.status_code}")
            token = grant.get("access_token")
            if not isinstance(token, str) or not token:
                # GitHub answers 200 with an error code: bad_verification_code (used or
                # expired), incorrect_client_credentials, redirect_uri_mismatch
                error = str(grant.get("error") or "no access token")
                raise SignInError(f"GitHub refused the sign-in code: {error}")
            try:
                user = await http.get(
                    f"{self._api}/user",
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Accept": "application/vnd.github+json",
                    },
                )
                profile = user.json() if user.status_code == 200 else None
            except (httpx.HTTPError, ValueError) as err:
                raise SignInError(f"GitHub did not say who signed in: {err}") from err
        if not isinstance(profile, dict):
            raise SignInError(f"GitHub answered GET /user with {user.status_code}")
        login, user_id = profile.get("login"), profile.get("id")
        if not isinstance(login, str) or not isinstance(user_id, int):
            raise SignInError("GitHub's GET /user named no login and id")
        return login, user_id
