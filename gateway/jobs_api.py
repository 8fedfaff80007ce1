"""The job pages as JSON: `/api/jobs/{id}`, its log (`?after=N`, what the page polls) and
its structured diff, `/api/roots/{root}` (a root's deployments, newest first, paged),
`/api/fleet` (every root of a repository) and `/api/audit` (the audit trail, filtered and
paged).

Read-only, for the same viewers as the pages (gateway/access): a machine with the bearer
token, or a person signed in with GitHub who may read the repository (anything else is
401, and a repository they cannot read is 404 like a missing one). The write side of the API
(`POST /api/deploy`) is gateway/api.py.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from gateway.access.viewer import ReadingDep
from gateway.jobviews import AuditPage, FleetPage, Job, LogPage, ReaderDep, RootPage
from gateway.names import DeploymentId, RepoQuery, RootId

router = APIRouter(prefix="/api", tags=["jobs"])

# An audit row's id is a 64-bit SQL integer: a larger `before` is a 422, never a 500.
ROW_ID_MAX = 2**63 - 1
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "No such deployment."}}


@router.get("/jobs/{deployment_id}", responses=NOT_FOUND)
async def job(deployment_id: DeploymentId, reader: ReaderDep, reading: ReadingDep) -> Job:
    """A deployment: what, who, its state timeline, links, the rollback command and the
    diff's counts per resource (the hunks are at `/diff`)."""
    found = await run_in_threadpool(reader.job, deployment_id)
    if found is None or not await reading.may_read(found.repo):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no deployment {deployment_id}")
    return found


@router.get("/audit")
async def audit(
    reader: ReaderDep,
    reading: ReadingDep,
    repo: RepoQuery = None,
    root: Annotated[str | None, Query(description="A root id.")] = None,
    actor: Annotated[str | None, Query(description="A GitHub login.")] = None,
    action: Annotated[
        str | None,
        Query(description="approve, reject, unlock, promote, halt, resume or rollback."),
    ] = None,
    counted: Annotated[
        bool | None,
        Query(
            description="false: only refused clicks; true: only those that counted (a click "
            "a workflow judges also has a received row, `counted: null`, left out by both)."
        ),
    ] = None,
    before: Annotated[
        int | None, Query(ge=1, le=ROW_ID_MAX, description="`next` of the previous page.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> AuditPage:
    """The audit trail: who approved, rejected, unlocked, promoted, halted, resumed or rolled
    back what, from where (check run, page, API, PR review), when, and whether it counted; of
    the repositories the viewer may read."""
    if repo:
        shown, _ = await reading.narrow(repo, reader.deployments.repositories)
        repos: list[str] | None = [repo] if shown else []
    else:
        repos = await reading.visible(reader.deployments.repositories)
    return await run_in_threadpool(
        lambda: reader.audit(
            repos=repos,
            repo=repo,
            root=root,
            actor=actor,
            action=action,
            counted=counted,
            before=before,
            limit=limit,
        )
    )


@router.get("/jobs/{deployment_id}/log", responses=NOT_FOUND)
async def job_log(
    deployment_id: DeploymentId,
    reader: ReaderDep,
    reading: ReadingDep,
    after: Annotated[int, Query(ge=0, description="Lines already seen.")] = 0,
) -> LogPage:
    """The job log's lines after the first `after`; poll until `finished`."""
    repo = await run_in_threadpool(reader.repo_of, deployment_id)
    # a log whose repository is unknown (no row, no line naming it) is a machine's to read
    readable = await reading.may_read(repo) if repo is not None else reading.everything
    if not readable:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no deployment {deployment_id}")
    page = await run_in_threadpool(reader.log_page, deployment_id, after)
    if page.state is None and not page.lines and after == 0:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no deployment {deployment_id}")
    return page


@router.get(
    "/jobs/{deployment_id}/diff",
    responses={200: {"content": {"application/json": {}}}, **NOT_FOUND},
    response_class=Response,
)
async def job_diff(deployment_id: DeploymentId, reader: ReaderDep, reading: ReadingDep) -> Response:
    """The structured diff (`diff.json`: per resource its status, counts and unified hunks),
    as stored."""
    repo = await run_in_threadpool(reader.repo_of, deployment_id)
    readable = repo is not None and await reading.may_read(repo)
    raw = await run_in_threadpool(reader.raw_diff, deployment_id) if readable else None
    if raw is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no diff for deployment {deployment_id}")
    return Response(raw, media_type="application/json")


@router.get("/roots/{root:path}", responses={404: {"description": "No deployments recorded."}})
async def root(
    root: RootId,
    reader: ReaderDep,
    reading: ReadingDep,
    repo: RepoQuery = None,
    page: Annotated[int, Query(ge=1)] = 1,
) -> RootPage:
    """A root's deployments, newest first, 25 per page; `repo` narrows to one repository."""
    shown, repo = await reading.narrow(repo or None, lambda: reader.deployments.repositories(root))
    # what the viewer may not read is not looked at: it answers as a root with no deployments
    listing = await run_in_threadpool(reader.root_page, root, repo, page) if shown else None
    if listing is None or listing.total == 0:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no deployments of root {root}")
    return listing


@router.get("/fleet")
async def fleet(
    reader: ReaderDep, reading: ReadingDep, repo: RepoQuery = None, state: str | None = None
) -> FleetPage:
    """Every root of a repository (the fleet page as JSON); `state` filters (`running`: not
    finished)."""
    visible = await reading.visible(reader.deployments.repositories)
    return await run_in_threadpool(reader.fleet, repo or None, state or None, visible)
