"""The headers every answer of the gateway carries, whatever route (or error) made it.

- `Content-Security-Policy`: only this gateway's own scripts, styles and forms; no inline
  code (the pages link gateway/static/ instead), no plugins, no `<base>`. FastAPI's API
  documentation pages (`/docs`, `/redoc`) load Swagger UI and ReDoc from a CDN with inline
  code and show no data: they get only `frame-ancestors 'none'`.
- `frame-ancestors 'none'` and `X-Frame-Options: DENY`: no page can be framed, so no site —
  not even another port of the same host, which is the same *site* to a `SameSite=Lax`
  cookie — can lay the dev stack's buttons or the sign-out under a decoy and have them
  clicked.
- `Cache-Control: no-store`, unless the route chose its own (the static files): a signed-in
  page or a JSON read is never kept by a browser or a shared cache for the next person.
- `X-Content-Type-Options: nosniff` (a raw preview report is text, never HTML or script) and
  `Referrer-Policy: same-origin` (links to GitHub do not carry the page's address).

A plain ASGI middleware: it adds headers to the answer's start and never buffers a body, so
the streamed job page and the webhook path stay as fast as they were.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

FRAMING = "frame-ancestors 'none'"
FIXED = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}
NO_STORE = "no-store"


def page_policy(public_url: str) -> str:
    """The pages' policy. The gateway's public URL is allowed besides 'self': its pages link
    their files and post their forms there, also when a browser reached it by another name."""
    parts = urlsplit(public_url)
    public = f" {parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src 'self'{public}",
            f"style-src 'self'{public}",
            f"img-src 'self'{public}",
            "connect-src 'self'",
            f"form-action 'self'{public}",
            FRAMING,
            "base-uri 'none'",
        ]
    )


class SecurityHeaders:
    def __init__(self, app: ASGIApp, *, public_url: str, docs_paths: Iterable[str]) -> None:
        self.app = app
        self.policy = page_policy(public_url)
        self.docs_paths = frozenset(docs_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = FRAMING if scope["path"] in self.docs_paths else self.policy

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["content-security-policy"] = policy
                for name, value in FIXED.items():
                    headers[name] = value
                if "cache-control" not in headers:
                    headers["cache-control"] = NO_STORE
            await send(message)

        await self.app(scope, receive, send_with_headers)
