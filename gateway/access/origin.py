"""Whether a browser's request was sent by one of this gateway's own pages.

A `SameSite=Lax` cookie goes with a form posted from another port of the same host (the
same *site*), so the cookie alone does not say where a click came from. The browser does:
its `Origin` must be the gateway's (from `ROLLWRIGHT_PUBLIC_URL`), or, when it sends no
`Origin`, its `Sec-Fetch-Site` must be `same-origin`. A request with neither (an old
client, a forged one) is not from a page here.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import Request


def from_own_page(request: Request, public_url: str) -> bool:
    here = urlsplit(public_url)
    origin = request.headers.get("origin")
    if origin is not None:
        return origin == f"{here.scheme}://{here.netloc}"
    return request.headers.get("sec-fetch-site") == "same-origin"
