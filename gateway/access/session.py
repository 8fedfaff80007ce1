"""Signed, expiring values for cookies: the session (who signed in) and the OAuth state.

A value is `base64url(JSON).base64url(HMAC-SHA256)`; the MAC covers a purpose as well, so a
value signed for one use (the OAuth state) is never accepted for another (the session). Only
a login and a user id are kept: no GitHub token ever reaches a cookie.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Signer:
    def __init__(self, key: bytes) -> None:
        # an empty key is no key: anyone could sign a session with it
        if not key:
            raise ValueError("a signing key must not be empty")
        self._key = key

    def _mac(self, purpose: str, body: str) -> str:
        message = purpose.encode() + b"\0" + body.encode()
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())

    def sign(self, purpose: str, payload: dict[str, Any], ttl_seconds: float) -> str:
        claims = {**payload, "exp": int(time.time() + ttl_seconds)}
        body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{self._mac(purpose, body)}"

    def verify(self, purpose: str, value: str | None) -> dict[str, Any] | None:
        """The payload of a value signed for `purpose` that has not expired; else None. The
        whole MAC is compared: a truncated or empty one is refused."""
        if not value or value.count(".") != 1:
            return None
        body, mac = value.split(".")
        if not hmac.compare_digest(mac.encode(), self._mac(purpose, body).encode()):
            return None
        try:
            claims = json.loads(_unb64(body))
        except ValueError:
            return None
        if not isinstance(claims, dict) or not isinstance(claims.get("exp"), int):
            return None
        if claims["exp"] < time.time():
            return None
        return claims


@dataclass(frozen=True)
class SignedIn:
    """Who a session cookie says is signed in."""

    login: str
    user_id: int

    def payload(self) -> dict[str, Any]:
        return {"login": self.login, "id": self.user_id}

    @classmethod
    def of(cls, claims: dict[str, Any] | None) -> SignedIn | None:
        if claims is None:
            return None
        login, user_id = claims.get("login"), claims.get("id")
        if not isinstance(login, str) or not login or not isinstance(user_id, int):
            return None
        return cls(login, user_id)
