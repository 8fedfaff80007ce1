"""The pages: `/jobs/{deployment_id}` (the check run's details link), `/roots/{root}`, the
fleet `/` and a patch's rollout `/rollouts/{owner}/{repo}/{patch_id}`.

Server-rendered HTML (Jinja2, autoescaped) that reads fine without JavaScript; a few lines of
vanilla JS follow the live log (polling `/api/jobs/{id}/log` every second) and expand or
collapse every resource. The diff renders from the stored `diff.json` (never re-diffed), unified
or side by side (`?view=split`), each resource a collapsed `<details>`. The page is streamed:
everything above the diff goes out first, and the diff document is only loaded and rendered
after that, in chunks, so a 5 MB diff starts arriving as fast as a small one.

Dev mode adds Approve / Reject / Unlock (gateway/devactions.py), clicked as the signed-in
person; in production the action route does not exist (404) and the buttons live on GitHub
only.

Every page is for those who may read its repository (gateway/access): anonymous visitors are
sent to sign in, and a page of a repository the viewer cannot read answers like a missing one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from gateway import devactions, revisionview, rolloutview
from gateway.access.origin import from_own_page
from gateway.access.viewer import Reading, ReadingDep
from gateway.context import GatewayDep
from gateway.dispatcher import DispatchError
from gateway.jobviews import JobReader, ReaderDep
from gateway.names import DeploymentId, Owner, PatchId, RepoName, RepoQuery, Revision, RootId
from shared.contracts.promotion import (
    RolloutView,
    promotion_check_run_name,
    promotion_workflow_id,
)
from shared.review.diffdoc import DiffDocument, changed_parts, split_rows, unified_rows
from shared.review.markdown_html import render_markdown

log = logging.getLogger("rollwright.gateway.pages")

router = APIRouter(tags=["pages"], include_in_schema=False)
TEMPLATES = Path(__file__).parent / "templates"
FLUSH = "<!--flush-->"  # the streamed page sends everything before this mark at once
CHUNK = 64 * 1024
SYMBOLS = {"added": "+", "removed": "-", "changed": "~"}
SIGNS = {"add": "+", "del": "-", "ctx": " ", "note": ""}
DEV_SENDER = "dev-reviewer"
OPEN_RESOURCES = 5  # a diff of this many resources or fewer opens expanded


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def _logtext(line: dict[str, Any]) -> str:
    """One log line as text: time of day, message, then key=value for the other fields."""
    time = str(line.get("time", ""))
    time = time.partition("T")[2].removesuffix("Z").removesuffix("+00:00") or time
    parts = [time, str(line.get("message", ""))]
    for key, value in line.items():
        if key not in ("time", "message"):
            parts.append(f"{key}={value if isinstance(value, str) else _json(value)}")
    return " ".join(parts).strip()


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


templates = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(["html"], default=True),
    trim_blocks=False,
)
templates.filters["when"] = _when
templates.filters["logtext"] = _logtext


def _inline_code(text: str) -> Markup:
    """Workflow messages mark ids and revisions as `code` (they are Markdown on check runs):
    escaped, with those spans as <code>."""
    parts = str(escape(text)).split("`")
    if len(parts) % 2 == 0:  # an odd backtick: nothing is code
        return Markup(str(escape(text)))
    return Markup(
        "".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts))
    )


templates.filters["inline_code"] = _inline_code


def marked_parts(parts: list[tuple[str, bool]]) -> Markup:
    """A side-by-side line with the parts that changed within it marked (escaped)."""
    return Markup(
        "".join(
            f'<span class="chg">{escape(text)}</span>' if changed else str(escape(text))
            for text, changed in parts
        )
    )


def _markdown(text: str) -> Markup:
    """Messages rollwright wrote as Markdown for check runs (review requirements, Argo CD's
    table of a verification), as HTML through the one safe renderer: raw HTML in them is
    escaped, links are validated."""
    return Markup(render_markdown(text))


templates.filters["markdown"] = _markdown


def error_page(code: int, title: str, detail: str, public_url: str) -> HTMLResponse:
    html = templates.get_template("error.html").render(
        title=title, detail=detail, public_url=public_url.rstrip("/")
    )
    return HTMLResponse(html, status_code=code)


def _page(template: str, reading: Reading, public: str, **context: Any) -> HTMLResponse:
    """A page of the layout: its template with the gateway's URL and who is signed in."""
    html = templates.get_template(template).render(
        public_url=public, viewer=reading.viewer, **context
    )
    return HTMLResponse(html)


def _fleet_url(public: str, repo: str) -> str:
    return f"{public}/?{urlencode({'repo': repo})}"


def _chunks(pieces: Iterable[str]) -> Iterator[bytes]:
    """Template output in chunks of about CHUNK bytes; everything up to FLUSH right away."""
    buffer: list[str] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= CHUNK or FLUSH in piece:
            yield "".join(buffer).encode()
            buffer.clear()
            size = 0
    if buffer:
        yield "".join(buffer).encode()


@router.get("/jobs/{deployment_id}", response_class=HTMLResponse, response_model=None)
async def job_page(
    deployment_id: DeploymentId,
    reader: ReaderDep,
    reading: ReadingDep,
    view: Annotated[str, Query(pattern="^(unified|split)$")] = "unified",
    live: bool = False,
) -> StreamingResponse | HTMLResponse:
    """The job page; `?live=1` is the same page without the log and the diff: what the
    page's script fetches to refresh its state, approver, buttons, timeline and check runs."""
    settings = reader.settings
    # the diff (up to megabytes) is read while the page streams, not before it starts
    job = await run_in_threadpool(reader.job, deployment_id, with_diff=False)
    if job is None or not await reading.may_read(job.repo):
        return error_page(
            404,
            "No such deployment",
            f"Rollwright has no record of deployment {deployment_id}.",
            settings.public_url,
        )
    log_lines = [] if live else await run_in_threadpool(reader.log, deployment_id)
    buttons: list[devactions.Button] = []
    dev_error = ""
    if settings.dev_mode and not job.finished:
        try:
            buttons = await run_in_threadpool(
                devactions.buttons, settings, job.repo, job.root, deployment_id
            )
        except devactions.EmulatorError as err:
            dev_error = str(err)
    public = settings.public_url.rstrip("/")
    context = {
        "job": job,
        "log_lines": log_lines,
        "buttons": buttons,
        "dev_error": dev_error,
        "action_base": f"{public}/jobs/{deployment_id}/actions",
        "api_url": f"{public}/api/jobs/{deployment_id}",
        "public_url": public,
        "viewer": reading.viewer,
        "split": view == "split",
        "symbols": SYMBOLS,
        "signs": SIGNS,
        "unified_rows": unified_rows,
        "split_rows": split_rows,
        "changed_parts": changed_parts,
        "marked": marked_parts,
        "open_resources": OPEN_RESOURCES,
        "diff_document": _lazy_document(reader, deployment_id),
        "live": live,
    }
    pieces = templates.get_template("job.html").generate(**context)
    # A sync iterator: Starlette pulls it in a worker thread, so loading and rendering a
    # large diff never blocks the event loop.
    return StreamingResponse(_chunks(pieces), media_type="text/html; charset=utf-8")


def _lazy_document(reader: JobReader, deployment_id: str) -> Any:
    """The diff document, loaded only when the template reaches it (after the flush)."""

    def document() -> DiffDocument | None:
        try:
            return reader.diff_document(deployment_id)
        except Exception as err:  # the rest of the page is already on its way
            log.warning("diff unreadable", extra={"deployment": deployment_id, "error": str(err)})
            return None

    return document


@router.post("/jobs/{deployment_id}/actions/{identifier}", response_model=None)
async def job_action(
    deployment_id: DeploymentId,
    identifier: str,
    reader: ReaderDep,
    reading: ReadingDep,
    request: Request,
) -> RedirectResponse | HTMLResponse:
    """Dev mode: click a button of the deployment's check run on the GitHub emulator, as
    the signed-in person (machines and open pages click as `dev-reviewer`)."""
    settings = reader.settings
    if not settings.dev_mode:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "Not Found")
    public = settings.public_url.rstrip("/")
    # A plain urlencoded form (the page's); parsed here, python-multipart is not needed.
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    try:
        check_run_id = int(form["check_run_id"][0])
    except (KeyError, ValueError):
        return error_page(400, "Which check run?", "The form names no check run.", public)
    if identifier not in devactions.IDENTIFIERS:
        return error_page(404, "No such action", f"{identifier!r} is not a button.", public)
    if not _clicked_here(request, reading, public):
        return error_page(
            403,
            "Click on the job page",
            "Buttons are clicked from this gateway's own pages, by someone signed in.",
            public,
        )
    job = await run_in_threadpool(reader.job, deployment_id)
    if job is None or not await reading.may_read(job.repo):
        return error_page(404, "No such deployment", deployment_id, public)
    sender = reading.viewer.login or DEV_SENDER
    offered = await run_in_threadpool(
        devactions.buttons, settings, job.repo, job.root, deployment_id
    )
    if not any(b.identifier == identifier and b.check_run_id == check_run_id for b in offered):
        return error_page(
            409,
            "That button is gone",
            f"Check run {check_run_id} no longer offers {identifier}: the deployment moved on. "
            "Reload the job page.",
            public,
        )
    try:
        await run_in_threadpool(devactions.click, settings, check_run_id, identifier, sender)
    except devactions.EmulatorError as err:
        log.warning(
            "dev action failed",
            extra={"deployment": deployment_id, "action": identifier, "error": str(err)},
        )
        return error_page(502, "The click did not go through", str(err), public)
    log.info("dev action clicked", extra={"deployment": deployment_id, "action": identifier})
    if form.get("back") == ["root"]:  # the root page's Unlock: back where it was clicked
        root_url = settings.root_url(job.repo, job.root)
        return RedirectResponse(root_url, status_code=303)
    return RedirectResponse(f"{public}/jobs/{deployment_id}", status_code=303)


def _clicked_here(request: Request, reading: Reading, public: str) -> bool:
    """A click counts from a machine (its bearer token is never sent by a browser on its
    own), or from a signed-in person on this gateway's own page: another site, even one on
    the same host at another port (the same *site* to SameSite cookies), cannot click for
    them. Open pages click for nobody."""
    if reading.viewer.kind == "machine":
        return True
    if reading.viewer.kind != "user":
        return False
    return from_own_page(request, public)


@router.get("/", response_class=HTMLResponse)
async def fleet_page(
    reader: ReaderDep, reading: ReadingDep, repo: RepoQuery = None, state: str | None = None
) -> HTMLResponse:
    """`?repo=OWNER/NAME`: the fleet page, every root of the repository with its newest
    deployment, what the cluster runs and how that delivery was verified, the queue and the
    lock (`?state=` filters). Without it: the front page (every root, and each fleet)."""
    if not repo:
        return await index_page(reader, reading)
    public = reader.settings.public_url.rstrip("/")
    visible = await reading.visible(reader.deployments.repositories)
    fleet = await run_in_threadpool(reader.fleet, repo, state or None, visible)

    def filter_url(value: str | None) -> str:
        query = {
            **({"repo": fleet.repo} if fleet.repo else {}),
            **({"state": value} if value else {}),
        }
        return f"{public}/?{urlencode(query)}" if query else f"{public}/"

    return _page(
        "fleet.html",
        reading,
        public,
        fleet=fleet,
        filter_url=filter_url,
        repo_url=lambda name: _fleet_url(public, name),
        api_url=f"{public}/api/fleet?{urlencode({'repo': fleet.repo or ''})}",
    )


@router.get("/revisions/{owner}/{name}/{revision}", response_class=HTMLResponse)
async def revision_page(
    owner: Owner, name: RepoName, revision: Revision, reader: ReaderDep, reading: ReadingDep
) -> HTMLResponse:
    """A merged revision: every root deployed at it with its newest deployment there (the
    `rollwright` summary check run's Details link, where Approve all is)."""
    public = reader.settings.public_url.rstrip("/")
    repo = f"{owner}/{name}"
    if not await reading.may_read(repo):
        return error_page(
            404, "No such revision", f"Rollwright has no record of {repo}@{revision}.", public
        )
    page = await run_in_threadpool(revisionview.revision_page, reader, repo, revision)
    return _page("revision.html", reading, public, page=page)


@router.get("/rollouts/{owner}/{name}/{patch_id}", response_class=HTMLResponse)
async def rollout_page(
    owner: Owner,
    name: RepoName,
    patch_id: PatchId,
    gateway: GatewayDep,
    reader: ReaderDep,
    reading: ReadingDep,
) -> HTMLResponse:
    """A patch's rollout as a pipeline: the sequence's nodes in order with their state, what
    it waits for (gate, window, soak, deployments), a halt and its reason, and what can be
    done now (the check run's buttons and their equivalents)."""
    public = reader.settings.public_url.rstrip("/")
    repo = f"{owner}/{name}"
    readable = await reading.may_read(repo)
    try:
        view = await gateway.dispatcher.rollout(repo, patch_id) if readable else None
    except DispatchError as err:
        return error_page(503, "Temporal did not answer", str(err), public)
    if view is None:
        return error_page(
            404, "No such rollout", f"No rollout of patch {patch_id!r} in {repo} is known.", public
        )
    nodes = await run_in_threadpool(rolloutview.pipeline, view, reader, datetime.now(UTC))
    return _page(
        "rollout.html",
        reading,
        public,
        view=view,
        nodes=nodes,
        actions=rollout_actions(view),
        check_run=promotion_check_run_name(patch_id),
        temporal=reader.workflow_url(promotion_workflow_id(repo, patch_id)),
        fleet_url=_fleet_url(public, repo),
        job_url=reader.settings.job_url,
    )


def rollout_actions(view: RolloutView) -> list[tuple[str, str]]:
    """(button, what it does) for the clicks the rollout takes now."""
    actions = []
    if view.phase == "gate" and view.gate == "manual" and view.next_node:
        actions.append(("Promote", f"commits the patch to {view.next_node}"))
    if view.phase == "halted" and view.halt is not None:
        actions.append(("Resume", "continues; the node still waits for a good deployment"))
        if view.halt.deployment_ids and not view.halt.rolled_back:
            actions.append(("Roll back", f"reverts the promotion to {view.halt.node}"))
    elif view.phase in ("deploying", "soaking", "gate", "promoting"):
        actions.append(("Halt", "stops the rollout where it is"))
    return actions


async def index_page(reader: ReaderDep, reading: ReadingDep) -> HTMLResponse:
    """The front page: every root with a deployment that the viewer may read, the most
    recently active first, each linked to its root page (so `/` is a way in, not a dead
    end)."""
    public = reader.settings.public_url.rstrip("/")
    rows = await run_in_threadpool(reader.deployments.roots)
    repositories = sorted({row.repo for row in rows})
    if not reading.everything:
        repositories = await reading.readable(repositories)
    shown = set(repositories)
    settings = reader.settings
    roots = [
        {
            "repo": row.repo,
            "root": row.root,
            "deployments": row.deployments,
            "last": row.last,
            "state": row.newest.state,
            "newest": settings.job_url(row.newest.deployment_id),
            "awaiting_review": row.awaiting_review,
            "page": settings.root_url(row.repo, row.root),
        }
        for row in rows
        if row.repo in shown
    ]
    fleets = {name: _fleet_url(public, name) for name in repositories}
    return _page("index.html", reading, public, roots=roots, fleets=fleets)


@router.get("/roots/{root:path}", response_class=HTMLResponse)
async def root_page(
    root: RootId,
    reader: ReaderDep,
    reading: ReadingDep,
    repo: RepoQuery = None,
    page: Annotated[int, Query(ge=1)] = 1,
) -> HTMLResponse:
    settings = reader.settings
    public = settings.public_url.rstrip("/")
    shown, repo = await reading.narrow(repo or None, lambda: reader.deployments.repositories(root))
    # what the viewer may not read is not looked at: it answers as a root with no deployments
    listing = await run_in_threadpool(reader.root_page, root, repo, page) if shown else None
    if listing is None or listing.total == 0:
        where = f" in {repo}" if repo else ""
        return error_page(
            404, "No such root", f"No deployments of root {root!r}{where} are recorded.", public
        )

    def page_url(number: int) -> str:
        query = {"page": str(number), **({"repo": repo} if repo else {})}
        return f"{public}/roots/{quote(root)}?{urlencode(query)}"

    # In the dev stack the lock banner clicks Unlock itself (through the emulator's check
    # run, as for the job page's buttons); with GitHub, it links the check run that offers it.
    unlock: dict[str, devactions.Button] = {}
    if settings.dev_mode:
        for lock in listing.locks:
            try:
                offered = await run_in_threadpool(
                    devactions.buttons, settings, lock.repo, root, lock.deployment_id
                )
            except devactions.EmulatorError as err:
                log.warning("emulator unreachable", extra={"root": root, "error": str(err)})
                continue
            for button in offered:
                if button.identifier == "unlock":
                    unlock[lock.deployment_id] = button
    query = urlencode({"page": str(listing.page), **({"repo": repo} if repo else {})})
    return _page(
        "root.html",
        reading,
        public,
        page=listing,
        page_url=page_url,
        api_url=f"{public}/api/roots/{quote(root)}?{query}",
        unlock=unlock,
    )
