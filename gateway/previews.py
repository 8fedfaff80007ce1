"""Pull request preview pages: the full, uncut report the check run and comment link to.

- `GET /previews/{owner}/{repo}/{pr}`: the newest reported head of the pull request;
- `GET /previews/{owner}/{repo}/{pr}/{head}`: one head's report (what a check run links to);
- `GET /previews/{owner}/{repo}/{pr}/{head}/report.md|report.diff|report.json`: raw files.

Reports come from the blob store (`previews/<owner>/<repo>/<pr>/<head>/`, written by the
worker's `preview_build`, already redacted). The Markdown is rendered with markdown-it-py;
raw HTML in it is escaped except the few tags the report itself uses for collapsible
sections (`<details>`, `<summary>`, `<code>`, `<b>`, …, without attributes other than
`open`), so a resource name or value in a pull request cannot inject markup here.

Only for those who may read the repository (gateway/access), like the other pages.
"""

from __future__ import annotations

import html
import json
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from gateway.access.viewer import Reading, ReadingDep
from gateway.context import GatewayDep
from gateway.names import Owner, RepoName, Revision
from shared.contracts.preview import PreviewPointer, preview_latest_key, preview_prefix
from shared.review.markdown_html import render_markdown
from shared.stores.blob import BlobStore

PullNumber = Annotated[int, PathParam(ge=1)]
Head = Revision
RAW_TYPES = {
    "report.md": "text/markdown; charset=utf-8",
    "report.diff": "text/plain; charset=utf-8",
    "report.json": "application/json",
}

router = APIRouter(tags=["previews"])


@router.get("/previews/{owner}/{repo}/{pr}", response_class=HTMLResponse)
async def latest_preview(
    owner: Owner, repo: RepoName, pr: PullNumber, gw: GatewayDep, reading: ReadingDep
) -> HTMLResponse:
    """The newest reported head of a pull request."""
    await _require_read(reading, owner, repo, pr)
    blobs = gw.blobs
    raw = await run_in_threadpool(blobs.get, preview_latest_key(f"{owner}/{repo}", pr))
    if raw is None:
        raise HTTPException(404, f"no preview of {owner}/{repo}#{pr} yet")
    try:
        pointer = PreviewPointer.model_validate_json(raw)
    except ValidationError as err:
        message = f"the preview pointer of {owner}/{repo}#{pr} is unreadable"
        raise HTTPException(500, message) from err
    return await _page(blobs, owner, repo, pr, pointer.head_sha)


@router.get("/previews/{owner}/{repo}/{pr}/{head}", response_class=HTMLResponse)
async def head_preview(
    owner: Owner, repo: RepoName, pr: PullNumber, head: Head, gw: GatewayDep, reading: ReadingDep
) -> HTMLResponse:
    """One head's full report."""
    await _require_read(reading, owner, repo, pr)
    return await _page(gw.blobs, owner, repo, pr, head)


@router.get("/previews/{owner}/{repo}/{pr}/{head}/{name}")
async def raw_report(
    owner: Owner,
    repo: RepoName,
    pr: PullNumber,
    head: Head,
    name: str,
    gw: GatewayDep,
    reading: ReadingDep,
) -> Response:
    """report.md (Markdown), report.diff (unified diff) or report.json, as stored."""
    await _require_read(reading, owner, repo, pr)
    if name not in RAW_TYPES:
        raise HTTPException(404, f"no {name!r}: try {', '.join(RAW_TYPES)}")
    key = preview_prefix(f"{owner}/{repo}", pr, head) + name
    data = await run_in_threadpool(gw.blobs.get, key)
    if data is None:
        raise HTTPException(404, f"no preview of {owner}/{repo}#{pr} at {head[:12]}")
    return Response(data, media_type=RAW_TYPES[name])


async def _require_read(reading: Reading, owner: str, repo: str, pr: int) -> None:
    """A pull request of a repository the viewer cannot read is no preview at all (404)."""
    if not await reading.may_read(f"{owner}/{repo}"):
        raise HTTPException(404, f"no preview of {owner}/{repo}#{pr} yet")


async def _page(blobs: BlobStore, owner: str, repo: str, pr: int, head: str) -> HTMLResponse:
    prefix = preview_prefix(f"{owner}/{repo}", pr, head)
    markdown = await run_in_threadpool(blobs.get, f"{prefix}report.md")
    if markdown is None:
        return HTMLResponse(_pending(owner, repo, pr, head))
    meta_raw = await run_in_threadpool(blobs.get, f"{prefix}report.json")
    meta: dict[str, Any] = json.loads(meta_raw) if meta_raw else {}
    body = render_markdown(markdown.decode("utf-8", "replace"))
    return HTMLResponse(_layout(owner, repo, pr, head, meta, body))


def _pending(owner: str, repo: str, pr: int, head: str) -> str:
    """The page a preview check run links to before its head has a report: being built, or
    failed before writing one. Names nothing but what the address already says."""
    e = html.escape
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Preview of {e(owner)}/{e(repo)}#{pr} at {e(head[:12])}</title>
<link rel="stylesheet" href="/static/preview.css"></head>
<body>
<h1>Preview of {e(owner)}/{e(repo)}#{pr}</h1>
<p id="pending">No report of head <code>{e(head[:12])}</code> yet: the preview is still being
built, or it failed before writing one (its check run says why). Reload this page once the
check run has finished.</p>
</body></html>
"""


def _layout(owner: str, repo: str, pr: int, head: str, meta: dict[str, Any], body: str) -> str:
    e = html.escape
    failed = bool(meta.get("failed"))
    verdict = "fails to render on the PR side" if failed else "renders"
    base = str(meta.get("base") or "")[:12]
    merge = meta.get("merge")
    side = f"merge {str(merge)[:12]}" if merge else f"head {head[:12]}"
    here = f"/previews/{e(owner)}/{e(repo)}/{pr}/{e(head)}"
    links = " · ".join(f'<a href="{here}/{name}">{name}</a>' for name in RAW_TYPES)
    status = "failed" if failed else "ok"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Preview of {e(owner)}/{e(repo)}#{pr} at {e(head[:12])}</title>
<link rel="stylesheet" href="/static/preview.css"></head>
<body>
<h1>Preview of {e(owner)}/{e(repo)}#{pr}</h1>
<p class="meta">PR {e(side)} against {e(base)}: <span class="{status}">{e(verdict)}</span>
· raw: {links}</p>
<main>
{body}
</main>
</body></html>
"""
