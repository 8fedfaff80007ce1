"""GitHub App authentication in the emulator: App JWTs (RS256, signed by the configured App
key), the installation tokens exchanged for them, user access tokens of the OAuth web flow, and
which of them each route asks for (`Credentials.authenticate`)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey

from shared.devstack.emulator.model import DOCS, ApiError, Repo, Request, Route
from shared.devstack.emulator.state import Store

# GitHub rejects an App JWT whose `exp` is more than 10 minutes ahead (clock drift allowed).
JWT_MAX_LIFETIME = 600
JWT_LEEWAY = 60
# User access tokens of a GitHub App (expiring, the default): 8 hours; refresh tokens: the
# 6 months GitHub's docs give today (15897600 s; older pages said 15811200).
USER_TOKEN_TTL = 28800
REFRESH_TOKEN_TTL = 15897600


# GitHub's primary rate limit of an installation token (REST, per hour).
INSTALLATION_RATE_LIMIT = 5000


class Credentials:
    """The App's key, and the tokens the emulator issued (with their expiry)."""

    def __init__(self, store: Store, *, app_id: int, app_key: str, token_ttl: int) -> None:
        self._store = store
        self._app_id = app_id
        self._public_key = _public_key(app_key)
        self._token_ttl = token_ttl
        self._tokens: dict[str, tuple[int, float]] = {}  # token → (installation id, expiry)
        self._user_tokens: dict[str, tuple[str, float]] = {}  # ghu_ token → (login, expiry)
        # installation → (start of its rate-limit hour, requests in it)
        self._quota: dict[int, tuple[float, int]] = {}
        # whether a user may read a repository (the collaborator permissions), for user tokens
        self.user_reads: Callable[[Repo, str], bool] | None = None

    def issue_token(self, installation_id: int) -> str:
        """An installation token without the JWT dance (for tests poking the API directly)."""
        token = "ghs_" + secrets.token_urlsafe(27)[:36]
        with self._store.lock:
            self._tokens[token] = (installation_id, time.time() + self._token_ttl)
        return token

    def quota_headers(self, authorization: str) -> dict[str, str]:
        """GitHub's `X-RateLimit-*` headers for a request with an installation token: each
        installation has INSTALLATION_RATE_LIMIT requests an hour, counted from the first;
        other requests (the App's JWT, none) get none here."""
        token = authorization.split(" ", 1)[-1].strip()
        now = time.time()
        with self._store.lock:
            entry = self._tokens.get(token)
            if entry is None or entry[1] < now:
                return {}
            installation = entry[0]
            start, used = self._quota.get(installation, (now, 0))
            if now - start >= 3600:
                start, used = now, 0
            used += 1
            self._quota[installation] = (start, used)
        return {
            "X-RateLimit-Limit": str(INSTALLATION_RATE_LIMIT),
            "X-RateLimit-Remaining": str(max(0, INSTALLATION_RATE_LIMIT - used)),
            "X-RateLimit-Used": str(used),
            "X-RateLimit-Reset": str(int(start + 3600)),
            "X-RateLimit-Resource": "core",
        }

    def expiry(self, token: str) -> float:
        """When an installation token issued here expires (`time.time()` seconds)."""
        with self._store.lock:
            return self._tokens[token][1]

    def new_user_tokens(self, login: str) -> dict[str, Any]:
        access = "ghu_" + _token_chars(36)
        refresh = "ghr_" + _token_chars(76)
        now = time.time()
        with self._store.lock:
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

    def authenticate(self, route: Route, request: Request, header: str) -> None:
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
        elif route.auth == "repo-reader" and self._is_user_token(credential):
            # A user access token sees a repository its user may read (GitHub's answer to a
            # person's token); an installation token goes on as "token" below.
            login = self._user_of_token(credential)
            owner, repo = request.params["owner"], request.params["repo"]
            with self._store.lock:
                record = self._store.find_repo(owner, repo)
            if record is None or self.user_reads is None or not self.user_reads(record, login):
                raise ApiError(404, "Not Found")
            request.repo, request.user = record, login
        elif route.auth == "org-token":
            # An installation sees the teams of the organization it is installed on (with the
            # "members: read" permission); any other organization is hidden.
            installation = self._installation_of_token(credential)
            org = request.params["org"].lower()
            with self._store.lock:
                installed = any(
                    r.owner.lower() == org and r.installation_id == installation
                    for r in self._store.repos.values()
                )
            if not installed:
                raise ApiError(404, "Not Found")
        else:
            installation = self._installation_of_token(credential)
            owner, repo = request.params["owner"], request.params["repo"]
            with self._store.lock:
                record = self._store.find_repo(owner, repo)
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
        if str(claims["iss"]) != str(self._app_id):
            raise ApiError(401, "Integration not found")
        if float(claims["exp"]) - time.time() > JWT_MAX_LIFETIME + JWT_LEEWAY:
            raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future")

    def _is_user_token(self, token: str) -> bool:
        with self._store.lock:
            return token in self._user_tokens

    def _user_of_token(self, token: str) -> str:
        """The login a user access token was issued to. An installation token is refused the
        way GitHub refuses it on user endpoints (403), anything else is a 401."""
        now = time.time()
        with self._store.lock:
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
        with self._store.lock:
            entry = self._tokens.get(token)
            user = self._user_tokens.get(token)
        if user is not None and user[1] >= time.time():
            # a user access token: the emulator gives its users no repository to see, and
            # GitHub hides what a token cannot see
            raise ApiError(404, "Not Found")
        if entry is None or entry[1] < time.time():
            raise ApiError(401, "Bad credentials")
        return entry[0]


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


def _token_chars(length: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(secrets.choice(alphabet) for _ in range(length))
