"""The query side of a merged revision's page (`/revisions/<owner>/<repo>/<sha>`, the Details
link of the revision's `rollwright` summary check run): every root deployed at that revision,
each with its newest deployment there, read from SQL like the root pages.
"""

from __future__ import annotations

from urllib.parse import urlencode

from pydantic import BaseModel, Field

from gateway.jobviews import JobReader, RootDeployment
from shared.contracts.deploy import TERMINAL_STATES
from shared.github.urls import web_base
from shared.stores.sql.tables import DeploymentRow


class RevisionRoot(RootDeployment):
    """One root at the revision: its newest deployment of it (`attempts`: how many there were)."""

    root: str
    attempts: int = 1
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
            **reader.deployment_fields(row),
            root=root,
            attempts=attempts[root],
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
