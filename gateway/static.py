"""`GET /static/{name}`: the pages' stylesheets and scripts (the job page's live log, the rollout
page's countdown).

They are files rather than inline `<style>` and `<script>` so the pages' Content-Security-
Policy (gateway/headers.py) can allow only this gateway's own files. The few files are read
once, when the module loads; a name is looked up among them, never joined to a path, so no
request reaches another file. They hold no data, so they need no sign-in; an ETag lets
browsers revalidate them cheaply (`no-cache`: a new gateway's files are used at once).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request, Response

STATIC = Path(__file__).parent / "static"
TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
CACHE = "no-cache"


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


def _load() -> dict[str, Asset]:
    assets = {}
    for path in sorted(STATIC.iterdir()):
        if path.suffix in TYPES:
            body = path.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            assets[path.name] = Asset(body, TYPES[path.suffix], etag)
    return assets


ASSETS = _load()
router = APIRouter(tags=["pages"], include_in_schema=False)


@router.get("/static/{name}")
async def asset(name: str, request: Request) -> Response:
    found = ASSETS.get(name)
    if found is None:
        raise HTTPException(404, "Not Found")
    headers = {"ETag": found.etag, "Cache-Control": CACHE}
    if request.headers.get("if-none-match") == found.etag:
        return Response(status_code=304, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)
