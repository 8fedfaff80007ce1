"""The GitHub App's OAuth web flow in the emulator, for user access tokens, and the user such a
token is for (`GET /user`).

`GET /login/oauth/authorize` is the "Authorize" page (whoever one types in is who signs in), its
form POSTs back and redirects to `redirect_uri` with a one-time `code` and the `state`;
`POST /login/oauth/access_token` exchanges the code (with the App's OAuth client id and secret)
for a `ghu_` token, which `GET /user` answers for. Errors of the exchange are HTTP 200 with
`error`/`error_description`/`error_uri`, as on GitHub.
"""

from __future__ import annotations

import hmac
import html
import re
import secrets
import time
import urllib.parse
from typing import Any

from shared.devstack.emulator.auth import Credentials
from shared.devstack.emulator.model import (
    ApiError,
    App,
    FormEncoded,
    Html,
    OAuthCode,
    Redirect,
    Request,
    Route,
    make_route,
)
from shared.devstack.emulator.shapes import stable_id, user_json
from shared.devstack.emulator.state import Store

# GitHub's rule for logins: alphanumerics and hyphens, 39 at most, not starting with a hyphen.
LOGIN_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
OAUTH_DOCS = "https://docs.github.com/apps/managing-oauth-apps"


class OAuthFlow:
    """The web flow's pages and code exchange, and `GET /user`."""

    def __init__(
        self,
        app: App,
        store: Store,
        credentials: Credentials,
        *,
        client_secret: str,
        code_ttl: float,
    ) -> None:
        self._app = app
        self._store = store
        self._credentials = credentials
        self._client_secret = client_secret
        self._code_ttl = code_ttl  # seconds; GitHub's codes live 10 minutes
        self._codes: dict[str, OAuthCode] = {}

    def routes(self) -> list[Route]:
        r = make_route
        return [
            r("GET", "/user", self._get_user, "user-token", False),
            # the OAuth web flow (github.com, not api.github.com, on GitHub)
            r("GET", "/login/oauth/authorize", self._oauth_authorize_page, "none", False),
            r("POST", "/login/oauth/authorize", self._oauth_authorize, "none", False),
            r("POST", "/login/oauth/access_token", self._oauth_access_token, "none", False),
        ]

    def issue_oauth_code(self, login: str, redirect_uri: str) -> str:
        """A one-time code of the web flow, as if `login` had clicked Authorize (for tests
        that skip the browser); exchange it at `POST /login/oauth/access_token`."""
        if not LOGIN_RE.fullmatch(login):
            raise ValueError(f"not a GitHub login: {login!r}")
        code = secrets.token_hex(10)
        with self._store.lock:
            self._codes[code] = OAuthCode(
                self._app.client_id, redirect_uri, login, time.time() + self._code_ttl
            )
        return code

    def issue_user_token(self, login: str) -> str:
        """A user access token (`ghu_`) of `login` without the web flow."""
        return str(self._credentials.new_user_tokens(login)["access_token"])

    def _get_user(self, req: Request) -> tuple[int, Any]:
        """`GET /user` for a user access token: the user it was issued to."""
        assert req.user is not None
        login = req.user
        return 200, {
            **user_json(login, stable_id(login), "User", req.base),
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
        if fields.get("client_id") != self._app.client_id:
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

        app = html.escape(self._app.slug)
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
        id_ok = fields.get("client_id") == self._app.client_id
        secret = fields.get("client_secret", "").encode()
        secret_ok = hmac.compare_digest(secret, self._client_secret.encode())
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
        with self._store.lock:
            code = self._codes.get(fields.get("code", ""))
            usable = (
                code is not None
                and code.client_id == self._app.client_id
                and code.expires >= time.time()
            )
            if code is None or not usable:
                self._codes.pop(fields.get("code", ""), None)
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
            del self._codes[fields["code"]]  # single use
            return self._credentials.new_user_tokens(code.login)


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


def _oauth_error(error: str, description: str, page: str) -> dict[str, Any]:
    return {"error": error, "error_description": description, "error_uri": f"{OAUTH_DOCS}/{page}"}


def _message_page(title: str, text: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"</head><body style='font-family:sans-serif;max-width:40em;margin:2em auto'>"
        f"<h1>{html.escape(title)}</h1><p id='error'>{html.escape(text)}</p></body></html>"
    )
