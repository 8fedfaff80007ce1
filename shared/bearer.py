"""The bearer token that guards a `/metrics` endpoint (the gateway's, each worker's).

    if not bearer.accepts(request.headers.get("authorization"), token):
        ...  # 401 with `WWW-Authenticate: Bearer`

One rule for both endpoints: `Authorization: Bearer <token>` (the scheme in any case, as HTTP
authentication schemes are), compared in constant time.
"""

from __future__ import annotations

import hmac

CHALLENGE = ("WWW-Authenticate", "Bearer")
REFUSAL = "a valid bearer token is required\n"


def accepts(authorization: str | None, token: str) -> bool:
    """Whether the `Authorization` header's value carries `token` as a bearer token."""
    scheme, _, credentials = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.strip().encode(), token.encode())
