"""The query side of a merged revision's page (`/revisions/<owner>/<repo>/<sha>`, the Details
link of the revision's `rollwright` summary check run): every root deployed at that revision,
each with its newest deployment there, read from SQL like the root pages.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import urlencode

from pydantic import BaseModel, Field

from gateway.jobviews import JobReader
from shared.contracts.deploy import TERMINAL_STATES
from shared.github.urls import web_base
from shared.stores.sql.tables import DeploymentRow


class RevisionRoot(BaseModel):
    """One root at the revision: its newest deployment of it (`attempts`: how many there were)."""

    root: str
    deployment_id: str
    state: str
    trigger: str
    requested_by: str | None = None
    approved_by: str | None = None
    added: int | None = None
    removed: int | None = None
    changed: int | None = None
    message: str = ""
    created_at: datetime | None = None
    attempts: int = 1
    page: str  # the job page
    root_page: str


class RevisionPage(BaseModel):
    repo: str
    revision: str
    commit: str  # the commit on GitHub
    fleet: str  # the repository's fleet page
    roots: list[RevisionRoot]
    states: dict[str, int] = Field(default_factory=dict)  # state → roots in it
    awaiting_review: int = 0
    running: int = 0  # roots whose deployment has not finished


def revision_page(reader: JobReader, repo: str, revision: str) -> RevisionPage:
    settings = reader.settings
    rows = reader.deployments.of_revision(repo, revision)
    newest: dict[str, DeploymentRow] = {}
    attempts: dict[str, int] = {}
    for row in rows:  # by root, the newest first
        newest.setdefault(row.root, row)
        attempts[row.root] = attempts.get(row.root, 0) + 1
    roots = [
        RevisionRoot(
            root=root,
            deployment_id=row.deployment_id,
            state=row.state,
            trigger=row.trigger,
            requested_by=row.requested_by,
            approved_by=row.approved_by,
            added=row.added,
            removed=row.removed,
            changed=row.changed,
            message=row.message or "",
            created_at=_utc(row.created_at),
            attempts=attempts[root],
            page=settings.job_url(row.deployment_id),
            root_page=settings.root_url(repo, root),
        )
        for root, row in newest.items()
    ]
    states: dict[str, int] = {}
    for item in roots:
        states[item.state] = states.get(item.state, 0) + 1
    public = settings.public_url.rstrip("/")
    return RevisionPage(
        repo=repo,
        revision=revision,
        commit=f"{web_base(settings.github_api_url)}/{repo}/commit/{revision}",
        fleet=f"{public}/?{urlencode({'repo': repo})}",
        roots=roots,
        states=states,
        awaiting_review=states.get("awaiting_review", 0),
        running=sum(1 for r in roots if r.state not in TERMINAL_STATES),
    )


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)
