"""`POST /api/deploy`: a manual deploy of one root at one revision — the rollback path.

Authenticated with the static bearer token `ROLLWRIGHT_API_TOKEN`; without a configured token
the endpoint does not exist (404). The deploy is a manual, `api` revision signal-with-started
into the root's DeployWorkflow, so it goes ahead of merged revisions and locks the queue for
them until someone clicks Unlock.

The gateway never clones, so it cannot check that the root exists or resolve a branch name:
`revision` must be a full commit sha, and an unknown root fails in the render with a failed
check run. The body names the repository only: the worker finds the App's installation for it
through GitHub and clones it from the configured GitHub (`ROLLWRIGHT_GITHUB_API_URL`), never
from a URL or an installation a caller names (docs/security.md).
"""

from __future__ import annotations

import hmac
import uuid
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.context import Gateway, GatewayDep
from gateway.dispatcher import DispatchError
from shared.contracts.deploy import NewRevision, RepoRef
from shared.github.urls import clone_url, web_base

router = APIRouter(prefix="/api", tags=["api"])
bearer = HTTPBearer(auto_error=False, description="ROLLWRIGHT_API_TOKEN")

SEGMENT = r"[A-Za-z0-9_.][A-Za-z0-9_.-]*"


class DeployRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repo: str = Field(pattern=rf"^{SEGMENT}/{SEGMENT}$", examples=["acme/fleet"])
    root: str = Field(
        pattern=rf"^{SEGMENT}(/{SEGMENT})*$", max_length=400, examples=["staging/cluster-a"]
    )
    revision: str = Field(
        pattern=r"^[0-9a-fA-F]{40}([0-9a-fA-F]{24})?$",
        description="Full commit sha (SHA-1 or SHA-256); branch names cannot be resolved here.",
    )
    requested_by: str | None = Field(default=None, max_length=255)
    default_branch: str = "main"

    @field_validator("root")
    @classmethod
    def _no_dot_segments(cls, value: str) -> str:
        if any(part in (".", "..") for part in value.split("/")):
            raise ValueError("root must not contain '.' or '..' segments")
        return value


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


def require_token(
    gw: GatewayDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    token = gw.settings.api_token
    if token is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "Not Found")
    given = credentials.credentials if credentials else ""
    if not hmac.compare_digest(given.encode(), token.get_secret_value().encode()):
        gw.metrics.api_deploys.labels(outcome="unauthorized").inc()
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "a valid bearer token is required",
            headers={"WWW-Authenticate": "Bearer"},
        )


@router.post(
    "/deploy",
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=[Depends(require_token)],
    responses={
        401: {"description": "Missing or wrong bearer token."},
        404: {"description": "No API token is configured: the API is off."},
        503: {"description": "Temporal is unavailable; nothing was queued."},
    },
)
async def deploy(body: DeployRequest, gw: GatewayDep) -> DeployAccepted:
    """Queue a manual deploy of `root` at `revision` (manual items run before merged ones)."""
    owner, name = body.repo.split("/", 1)
    web = f"{web_base(gw.settings.github_api_url)}/{owner}/{name}"
    repo = RepoRef(
        owner=owner,
        name=name,
        clone_url=clone_url(gw.settings.github_api_url, owner, name),
        default_branch=body.default_branch,
        html_url=web,
    )
    revision = NewRevision(
        revision=body.revision.lower(),
        trigger="manual",
        reason="api",
        requested_by=body.requested_by or "api",
        deployment_id=str(uuid.uuid4()),
    )
    return await _queue(gw, repo, body.root, revision)


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
    )
