"""`POST /api/deploy`: a manual deploy of a root (or, for the deploy admin team, several) at
one revision — the rollback path.

Who calls is vouched for, never declared (gateway/access/callers.py): a person by a GitHub
token or a signed-in session, with write access to the repository; a machine by
`ROLLWRIGHT_API_TOKEN`. With neither a token nor a GitHub App configured the endpoint does not
exist (404). Each deploy is a manual, `api` revision signal-with-started into its root's
DeployWorkflow, so it goes ahead of merged revisions and locks the queue for them until someone
clicks Unlock; the caller is its `requested_by` (the check run, the job page, the review
policy's author) and is on the audit trail, refused or not.

The gateway never clones, so it cannot check that a root exists or resolve a branch name:
`revision` must be a full commit sha, and an unknown root fails in the render with a failed
check run. The body names the repository only: the worker finds the App's installation for it
through GitHub and clones it from the configured GitHub (`ROLLWRIGHT_GITHUB_API_URL`), never
from a URL or an installation a caller names (docs/security.md).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPBearer
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from gateway.access.callers import Caller, Callers, NotIdentified, Refused, Unknown
from gateway.context import Gateway, GatewayDep
from gateway.dispatcher import DispatchError
from shared.contracts.deploy import AuditRecord, NewRevision, RepoRef
from shared.github.urls import clone_url, web_base

router = APIRouter(prefix="/api", tags=["api"])
# Names the scheme in the OpenAPI description; the handler identifies the caller.
bearer = HTTPBearer(
    auto_error=False, description="ROLLWRIGHT_API_TOKEN, or a person's GitHub token"
)

SEGMENT = r"[A-Za-z0-9_.][A-Za-z0-9_.-]*"
MAX_ROOTS = 100


def _no_dot_segments(value: str) -> str:
    if any(part in (".", "..") for part in value.split("/")):
        raise ValueError("root must not contain '.' or '..' segments")
    return value


RootName = Annotated[
    str,
    StringConstraints(pattern=rf"^{SEGMENT}(/{SEGMENT})*$", max_length=400),
    AfterValidator(_no_dot_segments),
]


class DeployRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repo: str = Field(pattern=rf"^{SEGMENT}/{SEGMENT}$", examples=["acme/fleet"])
    root: RootName | None = Field(default=None, examples=["staging/cluster-a"])
    roots: list[RootName] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ROOTS,
        description="Several roots at once (the deploy admin team only); instead of `root`.",
    )
    revision: str = Field(
        pattern=r"^[0-9a-fA-F]{40}([0-9a-fA-F]{24})?$",
        description="Full commit sha (SHA-1 or SHA-256); branch names cannot be resolved here.",
    )
    default_branch: str = "main"

    @model_validator(mode="after")
    def _one_of_root_and_roots(self) -> DeployRequest:
        if (self.root is None) == (self.roots is None):
            raise ValueError("give either root or roots")
        return self

    @property
    def targets(self) -> list[str]:
        if self.root is not None:
            return [self.root]
        return list(dict.fromkeys(self.roots or []))


class DeployAccepted(BaseModel):
    status: Literal["queued"] = "queued"
    workflow_id: str
    repo: str
    root: str
    revision: str
    # The gateway chooses the deployment id, so it can link the job page; when the revision
    # is already queued or running for the root, it is that deployment's id.
    deployment_id: str | None = None
    job_url: str | None = None
    root_url: str | None = None
    requested_by: str | None = None  # the caller, as GitHub vouched for them


class DeploysAccepted(BaseModel):
    status: Literal["queued"] = "queued"
    deployments: list[DeployAccepted]


async def identified(request: Request, gw: GatewayDep) -> Caller:
    """The caller, before the body is read: an unknown caller gets 401, not the schema."""
    callers: Callers = request.app.state.callers
    if not callers.enabled:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "Not Found")
    try:
        return await callers.identify(request)
    except NotIdentified as err:
        gw.metrics.api_deploys.labels(outcome="unauthorized").inc()
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, str(err), headers={"WWW-Authenticate": "Bearer"}
        ) from err
    except Unknown as err:
        gw.metrics.api_deploys.labels(outcome="unavailable").inc()
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(err)) from err


@router.post(
    "/deploy",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeployAccepted | DeploysAccepted,
    dependencies=[Depends(bearer)],
    responses={
        401: {"description": "No caller rollwright or GitHub vouches for."},
        403: {"description": "The caller may not deploy this (audited)."},
        404: {"description": "No API token and no GitHub App are configured: the API is off."},
        503: {
            "description": "Temporal or GitHub is unavailable: nothing was queued, or (several "
            "roots) the detail names the roots queued before it and the rest."
        },
    },
)
async def deploy(
    body: DeployRequest,
    request: Request,
    gw: GatewayDep,
    caller: Annotated[Caller, Depends(identified)],
) -> DeployAccepted | DeploysAccepted:
    """Queue a manual deploy of `root` (or `roots`) at `revision` (manual items run before
    merged ones)."""
    callers: Callers = request.app.state.callers
    try:
        await callers.authorize(caller, body.repo, body.targets)
    except Refused as err:
        gw.metrics.api_deploys.labels(outcome="refused").inc()
        await _audit(gw, caller, body, None, counted=False, reason=str(err))
        raise HTTPException(status.HTTP_403_FORBIDDEN, str(err)) from err
    except Unknown as err:
        gw.metrics.api_deploys.labels(outcome="unavailable").inc()
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(err)) from err
    owner, name = body.repo.split("/", 1)
    repo = RepoRef(
        owner=owner,
        name=name,
        clone_url=clone_url(gw.settings.github_api_url, owner, name),
        default_branch=body.default_branch,
        html_url=f"{web_base(gw.settings.github_api_url)}/{owner}/{name}",
    )
    accepted: list[DeployAccepted] = []
    for root in body.targets:
        revision = NewRevision(
            revision=body.revision.lower(),
            trigger="manual",
            reason="api",
            requested_by=caller.name,
            deployment_id=str(uuid.uuid4()),
        )
        try:
            queued = await _queue(gw, repo, root, revision)
        except HTTPException as err:
            if not accepted:
                raise
            # some roots are queued already: say which, so a retry names only the rest
            done = ", ".join(f"{a.root} ({a.deployment_id})" for a in accepted)
            rest = ", ".join(body.targets[len(accepted) :])
            raise HTTPException(
                err.status_code, f"{err.detail}; queued: {done}; not queued: {rest}"
            ) from err
        accepted.append(queued)
        await _audit(gw, caller, body, queued, counted=True)
    if body.root is not None:
        return accepted[0]
    return DeploysAccepted(deployments=accepted)


async def _audit(
    gw: Gateway,
    caller: Caller,
    body: DeployRequest,
    queued: DeployAccepted | None,
    *,
    counted: bool,
    reason: str = "",
) -> None:
    """The deploy on the audit trail: one row per root, refused or queued."""
    roots = [queued.root] if queued is not None else body.targets
    for root in roots:
        record = AuditRecord(
            repo=body.repo,
            root=root,
            deployment_id=queued.deployment_id if queued is not None else None,
            action="deploy",
            actor=caller.name,
            source="api",
            counted=counted,
            reason=reason or f"revision {body.revision[:12]} (via {caller.via.replace('_', ' ')})",
            at=datetime.now(UTC),
        )
        await run_in_threadpool(gw.audit_trail.record, record)


async def _queue(gw: Gateway, repo: RepoRef, root: str, revision: NewRevision) -> DeployAccepted:
    try:
        dispatched = await gw.dispatcher.queue_revision(repo, root, revision)
    except DispatchError as err:
        gw.metrics.api_deploys.labels(outcome="unavailable").inc()
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(err)) from err
    gw.metrics.api_deploys.labels(outcome="queued").inc()
    public = gw.settings.public_url.rstrip("/")
    deployment_id = dispatched.deployment_id or revision.deployment_id
    return DeployAccepted(
        workflow_id=dispatched.workflow_id,
        repo=repo.full_name,
        root=root,
        revision=revision.revision,
        deployment_id=deployment_id,
        job_url=gw.settings.job_url(deployment_id) if deployment_id else None,
        root_url=f"{public}/roots/{quote(root)}?repo={quote(repo.full_name, safe='')}",
        requested_by=revision.requested_by,
    )
