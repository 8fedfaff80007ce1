"""The query side of the job pages and the JSON API: a deployment, its timeline, log and
diff, and a root's deployments, read from SQL (history, events, job index) and the blob store
(`jobs/<id>/log`, `jobs/<id>/diff.json`). Temporal is only linked to, never asked.

Everything here is already redacted where it was written; the pages escape it on output.
"""

from __future__ import annotations

import logging
import shlex
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Request
from pydantic import BaseModel, Field, ValidationError

from gateway.context import Gateway
from shared.contracts.deploy import (
    TERMINAL_STATES,
    FleetRoots,
    LatestDeployment,
    deploy_workflow_id,
    lock_from_latest,
)
from shared.github.urls import web_base
from shared.review.compared import ReviewContext, context_key
from shared.review.diffdoc import DiffDocument, document_key
from shared.settings import Settings
from shared.stores.blob import BlobStore, fleet_roots_key, job_log_key, latest_key
from shared.stores.joblog import parse_log
from shared.stores.sql.audit import AuditStore
from shared.stores.sql.deployments import DeploymentStore, FleetRoot
from shared.stores.sql.notifications import NotificationStore
from shared.stores.sql.tables import AuditRow, DeploymentRow

log = logging.getLogger("rollwright.gateway")

ROOTS_PAGE_SIZE = 25
UNDEPLOYED = "undeployed"  # the fleet page's state of a root without a deployment


class TimelineEvent(BaseModel):
    state: str
    at: datetime
    message: str = ""
    check_run_id: int | None = None


class AuditEvent(BaseModel):
    """One person's action (approve, reject, unlock, promote, halt, resume, rollback), where
    it was made, and whether it counted (`reason`: why not). `counted` is null on the row the
    gateway writes when it receives a click that a workflow judges (docs/governance.md)."""

    id: int
    repo: str
    root: str | None = None
    deployment_id: str | None = None
    action: str
    actor: str | None = None
    source: str
    counted: bool | None
    reason: str = ""
    at: datetime

    @classmethod
    def of(cls, row: AuditRow) -> AuditEvent:
        return cls(
            id=row.id,
            repo=row.repo,
            root=row.root,
            deployment_id=row.deployment_id,
            action=row.action,
            actor=row.actor,
            source=row.source,
            counted=row.counted,
            reason=row.reason or "",
            at=row.at if row.at.tzinfo else row.at.replace(tzinfo=UTC),
        )


class AuditPage(BaseModel):
    """`GET /api/audit`: events newest first; pass `next` as `before` for older ones."""

    events: list[AuditEvent]
    next: int | None


class ResourceSummary(BaseModel):
    path: str
    status: str
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    additions: int
    deletions: int
    hidden: list[str] = Field(default_factory=list)


class DiffStats(BaseModel):
    added: int
    removed: int
    changed: int
    additions: int
    deletions: int
    resources: list[ResourceSummary]


class Notification(BaseModel):
    """An event about the deployment for one sink, and whether it went (docs/notifications.md)."""

    event_id: str
    sink: str
    kind: str
    state: str  # pending, sent, failed
    attempts: int
    created_at: datetime
    sent_at: datetime | None = None
    last_error: str = ""


class JobLinks(BaseModel):
    page: str
    log: str
    diff: str
    root_page: str
    commit: str | None
    check_runs: dict[int, str]  # check run id → its page on GitHub
    workflow: str | None  # the DeploymentWorkflow in the Temporal UI
    deploy_workflow: str | None  # the root's DeployWorkflow


class Hotfix(BaseModel):
    """A deployment of an unmerged pull request's head (docs/governance.md, "Hotfixes")."""

    pr: int
    head: str
    url: str  # the pull request on GitHub

    @classmethod
    def of(cls, row: DeploymentRow, github: str) -> Hotfix | None:
        if row.hotfix_pr is None:
            return None
        return cls(
            pr=row.hotfix_pr,
            head=row.hotfix_head or row.revision,
            url=f"{github}/{row.repo}/pull/{row.hotfix_pr}",
        )


class Job(BaseModel):
    """A deployment as the job page shows it (`GET /api/jobs/{id}`)."""

    deployment_id: str
    repo: str
    root: str
    revision: str
    trigger: str
    state: str
    finished: bool
    requested_by: str | None = None
    approved_by: str | None = None
    check_run_id: int | None = None
    added: int | None = None
    removed: int | None = None
    changed: int | None = None
    message: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None
    started_at: datetime | None = None
    approved_at: datetime | None = None
    finished_at: datetime | None = None
    timeline: list[TimelineEvent]
    audit: list[AuditEvent] = Field(default_factory=list)  # clicks on it, counted or not
    notifications: list[Notification] = Field(default_factory=list)  # what was sent about it
    links: JobLinks
    rollback_command: str
    # Some deployment published this revision on the root: only then is rolling back to it
    # offered (a revision never deployed is no known-good state to return to).
    revision_deployed: bool = False
    diff: DiffStats | None = None
    # What the review compares: the commit (subject, author, link) and the base render.
    review: ReviewContext | None = None
    hotfix: Hotfix | None = None


class LogPage(BaseModel):
    """`GET /api/jobs/{id}/log?after=N`: the lines after the first N, and whether more may
    come (poll again until `finished`)."""

    lines: list[dict[str, Any]]
    next: int  # pass as `after` next time
    finished: bool
    state: str | None  # the deployment's state now (None: not recorded yet)


class RootDeployment(BaseModel):
    deployment_id: str
    repo: str
    revision: str
    trigger: str
    state: str
    requested_by: str | None = None
    approved_by: str | None = None
    added: int | None = None
    removed: int | None = None
    changed: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    page: str
    message: str = ""  # the outcome, as the deployment recorded it
    live: bool = False  # the root runs this deployment's render (published last)
    hotfix: Hotfix | None = None


class RootLock(BaseModel):
    """A root's queue locked by a manual deployment (latest.json), until someone unlocks."""

    repo: str
    deployment_id: str
    revision: str
    since: datetime | None = None
    locked_by: str | None = None  # who asked for the locking deployment
    hotfix: Hotfix | None = None  # a hotfix's lock: its pull request's merge opens it
    page: str  # the locking deployment's job page
    check_run: str | None = None  # its check run on GitHub, which offers the Unlock button


class QueuedDeployment(BaseModel):
    position: int
    deployment_id: str
    repo: str
    revision: str
    trigger: str
    requested_by: str | None = None
    since: datetime | None = None
    page: str


class RootPage(BaseModel):
    """`GET /api/roots/{root}`: a root's deployments, newest first."""

    root: str
    repo: str | None
    page: int
    pages: int
    total: int
    deployments: list[RootDeployment]
    workflows: dict[str, str]  # repo → the root's DeployWorkflow in the Temporal UI
    locks: list[RootLock] = Field(default_factory=list)
    queue: list[QueuedDeployment] = Field(default_factory=list)
    live: dict[str, str] = Field(default_factory=dict)  # repo → the live deployment's id


class FleetRow(BaseModel):
    """One root on the fleet page; a root of the fleet never deployed has state
    `undeployed` and no deployment's fields."""

    root: str
    revision: str  # of its newest deployment ("" when never deployed)
    state: str
    deployed_revision: str | None  # the newest that reached the cluster
    health: str  # verified → healthy, unhealthy, verifying, published (not verified), none
    queued: int
    locked: bool
    locked_by: str | None = None  # the deployment holding the lock
    page: str | None  # the newest deployment's job page
    root_page: str | None  # its deployments (None: there are none)
    queue: str | None = None  # the root's DeployWorkflow in the Temporal UI
    revision_page: str | None = None  # the newest deployment's revision page
    deployed_revision_page: str | None = None


class FleetPage(BaseModel):
    """`GET /` (and `/api/fleet`): every root of a repository."""

    repo: str | None
    repositories: list[str]
    state: str | None  # the filter
    states: dict[str, int]  # every root's state → how many, for the filter links
    roots: list[FleetRow]


# How the newest delivery stands, as the fleet page says it.
HEALTH = {
    "verified": "healthy",
    "unhealthy": "unhealthy",
    "verifying": "verifying",
    "published": "published (not verified)",
}


class JobReader:
    """Reads jobs for one gateway: its settings, deployment and audit stores and (lazily
    opened) blob store."""

    def __init__(self, gateway: Gateway) -> None:
        self.settings: Settings = gateway.settings
        self.deployments: DeploymentStore = gateway.deployments
        self.audit_trail: AuditStore = gateway.audit_trail
        self.notifications: NotificationStore = gateway.notifications
        self._gateway = gateway

    @property
    def blobs(self) -> BlobStore:
        return self._gateway.blobs

    # --- one deployment -----------------------------------------------------------------------

    def job(self, deployment_id: str, *, with_diff: bool = True) -> Job | None:
        """The deployment; `with_diff=False` leaves out the diff's counts (which read the
        whole diff document)."""
        row = self.deployments.get(deployment_id)
        if row is None:
            return self._queued_job(deployment_id)
        events = [
            TimelineEvent(
                state=e.state,
                at=e.at if e.at.tzinfo else e.at.replace(tzinfo=UTC),
                message=e.message or "",
                check_run_id=e.check_run_id,
            )
            for e in self.deployments.events(deployment_id)
        ]
        check_runs = [e.check_run_id for e in events if e.check_run_id] + (
            [row.check_run_id] if row.check_run_id else []
        )
        return Job(
            deployment_id=row.deployment_id,
            repo=row.repo,
            root=row.root,
            revision=row.revision,
            trigger=row.trigger,
            state=row.state,
            finished=row.state in TERMINAL_STATES,
            requested_by=row.requested_by,
            approved_by=row.approved_by,
            check_run_id=row.check_run_id,
            added=row.added,
            removed=row.removed,
            changed=row.changed,
            message=row.message or "",
            created_at=_utc(row.created_at),
            updated_at=_utc(row.updated_at),
            started_at=_utc(getattr(row, "started_at", None)),
            approved_at=_utc(getattr(row, "approved_at", None)),
            finished_at=_utc(getattr(row, "finished_at", None)),
            timeline=events,
            hotfix=Hotfix.of(row, web_base(self.settings.github_api_url)),
            audit=[AuditEvent.of(a) for a in self.audit_trail.of_deployment(deployment_id)],
            notifications=[
                Notification(**vars(n)) for n in self.notifications.of_deployment(deployment_id)
            ],
            links=self.links(deployment_id, row.repo, row.root, row.revision, check_runs),
            rollback_command=self.rollback_command(row.repo, row.root, row.revision),
            revision_deployed=self.deployments.revision_published(row.repo, row.root, row.revision),
            diff=self.diff_stats(deployment_id) if with_diff else None,
            review=self.review(deployment_id),
        )

    def _queued_job(self, deployment_id: str) -> Job | None:
        """A queued deployment whose row is missing (the queue records one when it enqueues,
        but recording may fail, and queues from before that did not) still has the first
        lines of its log from its check run, whose details link is this page. The trigger
        is not in them: `merge` is a guess."""
        first = next(
            (line for line in self.log(deployment_id) if line.get("repo") and line.get("root")),
            None,
        )
        if first is None:
            return None
        repo, root, revision = str(first["repo"]), str(first["root"]), str(first["revision"])
        check_runs = [int(first["check_run"])] if first.get("check_run") else []
        return Job(
            deployment_id=deployment_id,
            repo=repo,
            root=root,
            revision=revision,
            trigger=str(first.get("trigger") or "merge"),
            state="queued",
            finished=False,
            check_run_id=check_runs[0] if check_runs else None,
            timeline=[],
            links=self.links(deployment_id, repo, root, revision, check_runs),
            rollback_command=self.rollback_command(repo, root, revision),
        )

    def links(
        self, deployment_id: str, repo: str, root: str, revision: str, check_runs: list[int]
    ) -> JobLinks:
        settings = self.settings
        public = settings.public_url.rstrip("/")
        github = web_base(settings.github_api_url)
        return JobLinks(
            page=settings.job_url(deployment_id),
            log=f"{public}/api/jobs/{deployment_id}/log",
            diff=f"{public}/api/jobs/{deployment_id}/diff",
            root_page=f"{public}/roots/{quote(root)}?repo={quote(repo, safe='')}",
            commit=f"{github}/{repo}/commit/{revision}" if revision else None,
            check_runs={run: f"{github}/{repo}/runs/{run}" for run in dict.fromkeys(check_runs)},
            workflow=self.workflow_url(deployment_id),
            deploy_workflow=self.workflow_url(deploy_workflow_id(repo, root)),
        )

    def workflow_url(self, workflow_id: str) -> str | None:
        base = self.settings.temporal_ui_url.rstrip("/")
        if not base:
            return None
        namespace = quote(self.settings.temporal_namespace, safe="")
        return f"{base}/namespaces/{namespace}/workflows/{quote(workflow_id, safe='')}"

    def rollback_command(self, repo: str, root: str, revision: str) -> str:
        return shlex.join(
            [
                "rollwright",
                "deploy",
                root,
                "--revision",
                revision,
                "--repo",
                repo,
                "--url",
                self.settings.public_url.rstrip("/"),
            ]
        )

    def audit(
        self,
        *,
        repo: str | None,
        root: str | None,
        actor: str | None,
        action: str | None,
        counted: bool | None,
        before: int | None,
        limit: int,
        repos: list[str] | None = None,
    ) -> AuditPage:
        rows = self.audit_trail.query(
            repos=repos,
            repo=repo,
            root=root,
            actor=actor,
            action=action,
            counted=counted,
            before_id=before,
            limit=limit,
        )
        events = [AuditEvent.of(r) for r in rows]
        return AuditPage(events=events, next=events[-1].id if len(events) == limit else None)

    def review(self, deployment_id: str) -> ReviewContext | None:
        raw = self.blobs.get(context_key(deployment_id))
        return None if raw is None else ReviewContext.model_validate_json(raw)

    def raw_diff(self, deployment_id: str) -> bytes | None:
        return self.blobs.get(document_key(deployment_id))

    def diff_document(self, deployment_id: str) -> DiffDocument | None:
        raw = self.raw_diff(deployment_id)
        return None if raw is None else DiffDocument.model_validate_json(raw)

    def diff_stats(self, deployment_id: str) -> DiffStats | None:
        document = self.diff_document(deployment_id)
        if document is None:
            return None
        return DiffStats(
            added=document.added,
            removed=document.removed,
            changed=document.changed,
            additions=document.additions,
            deletions=document.deletions,
            resources=[
                ResourceSummary.model_validate(r.model_dump(exclude={"hunks"}))
                for r in document.resources
            ],
        )

    def repo_of(self, deployment_id: str) -> str | None:
        """The repository of a deployment (its row, else its log's first lines)."""
        row = self.deployments.get(deployment_id)
        if row is not None:
            return row.repo
        first = next((line for line in self.log(deployment_id) if line.get("repo")), None)
        return str(first["repo"]) if first is not None else None

    def log(self, deployment_id: str) -> list[dict[str, Any]]:
        return parse_log(self.blobs.get(job_log_key(deployment_id)))

    def log_page(self, deployment_id: str, after: int) -> LogPage:
        # The state is read before the log: a line written after the last state is then
        # still returned by this call or a later one, never skipped.
        row = self.deployments.get(deployment_id)
        lines = self.log(deployment_id)
        start = max(0, min(after, len(lines)))
        return LogPage(
            lines=lines[start:],
            next=len(lines),
            finished=row is not None and row.state in TERMINAL_STATES,
            state=row.state if row is not None else None,
        )

    # --- a root ------------------------------------------------------------------------------

    def fleet(
        self, repo: str | None, state: str | None, visible: list[str] | None = None
    ) -> FleetPage:
        """The fleet page: one repository's roots (the only one when `repo` is None and
        there is one), filtered by the newest deployment's state (`running`: not finished).
        `visible`: the repositories the viewer may read (None: all); another shows nothing."""
        repositories = self.deployments.repositories() if visible is None else visible
        if repo is None and len(repositories) == 1:
            repo = repositories[0]
        shown = repo is not None and (visible is None or repo in visible)
        rows = (
            [self._fleet_row(repo, r) for r in self.deployments.fleet(repo)]
            if shown and repo
            else []
        )
        if shown and repo:
            rows = self._with_undeployed(repo, rows)
        states: dict[str, int] = {}
        for row in rows:
            states[row.state] = states.get(row.state, 0) + 1
        if state == "running":
            rows = [r for r in rows if r.state not in TERMINAL_STATES | {UNDEPLOYED}]
        elif state:
            rows = [r for r in rows if r.state == state]
        return FleetPage(
            repo=repo, repositories=repositories, state=state, states=states, roots=rows
        )

    def _with_undeployed(self, repo: str, rows: list[FleetRow]) -> list[FleetRow]:
        """The rows, and a row for every root of the fleet's newest dispatched revision
        without a deployment (`FleetRoots`, noted by the dispatch), by root."""
        raw = self.blobs.get(fleet_roots_key(repo))
        if raw is None:
            return rows
        try:
            noted = FleetRoots.model_validate_json(raw)
        except ValidationError:
            log.warning("fleet roots unreadable", extra={"repo": repo})
            return rows
        known = {row.root for row in rows}
        undeployed = [
            FleetRow(
                root=root,
                revision="",
                state=UNDEPLOYED,
                deployed_revision=None,
                health="none",
                queued=0,
                locked=False,
                page=None,
                root_page=None,
                queue=self.workflow_url(deploy_workflow_id(repo, root)),
            )
            for root in noted.roots
            if root not in known
        ]
        return sorted(rows + undeployed, key=lambda row: row.root)

    def _fleet_row(self, repo: str, found: FleetRoot) -> FleetRow:
        latest, delivered = found.latest, found.delivered
        lock = self._lock(repo, found.root)
        return FleetRow(
            root=found.root,
            revision=latest.revision,
            state=latest.state,
            deployed_revision=delivered.revision if delivered else None,
            health=HEALTH.get(delivered.state, delivered.state) if delivered else "none",
            queued=found.queued,
            locked=lock is not None,
            locked_by=lock,
            page=self.settings.job_url(latest.deployment_id),
            root_page=f"{self.settings.public_url.rstrip('/')}/roots/{quote(found.root)}"
            f"?repo={quote(repo, safe='')}",
            queue=self.workflow_url(deploy_workflow_id(repo, found.root)),
            revision_page=self.settings.revision_url(repo, latest.revision),
            deployed_revision_page=(
                self.settings.revision_url(repo, delivered.revision) if delivered else None
            ),
        )

    def _lock(self, repo: str, root: str) -> str | None:
        """The deployment holding the root's queue lock (latest.json, as the queue rebuilds
        it), or None."""
        raw = self.blobs.get(latest_key(repo, root))
        if raw is None:
            return None
        try:
            latest = LatestDeployment.model_validate_json(raw)
        except ValueError:
            return None
        lock = lock_from_latest(latest)  # the rule the DeployWorkflow rebuilds its lock with
        return lock.by_deployment if lock.locked else None

    def root_page(self, root: str, repo: str | None, page: int) -> RootPage:
        total = self.deployments.count(repo, root=root)
        pages = max(1, -(-total // ROOTS_PAGE_SIZE))
        page = max(1, min(page, pages))
        rows = self.deployments.of_root(
            root, limit=ROOTS_PAGE_SIZE, offset=(page - 1) * ROOTS_PAGE_SIZE, repo=repo
        )
        repos = [repo] if repo else sorted({r.repo for r in rows})
        live = {
            name: found.deployment_id
            for name in repos
            if (found := self.deployments.live(root, name)) is not None
        }
        queue = [
            QueuedDeployment(
                position=i,
                deployment_id=q.deployment_id,
                repo=q.repo,
                revision=q.revision,
                trigger=q.trigger,
                requested_by=q.requested_by,
                since=_utc(q.created_at),
                page=self.settings.job_url(q.deployment_id),
            )
            for i, q in enumerate(self.deployments.queued(root, repo), start=1)
        ]
        workflows = {
            name: url
            for name in repos
            if (url := self.workflow_url(deploy_workflow_id(name, root))) is not None
        }
        return RootPage(
            root=root,
            repo=repo,
            page=page,
            pages=pages,
            total=total,
            workflows=workflows,
            locks=[lock for name in repos if (lock := self.root_lock(name, root)) is not None],
            queue=queue,
            live=live,
            deployments=[
                RootDeployment(
                    **self.deployment_fields(r), live=live.get(r.repo) == r.deployment_id
                )
                for r in rows
            ],
        )

    def deployment_fields(self, row: DeploymentRow) -> dict[str, Any]:
        """A deployment's row as a `RootDeployment` (the root and revision pages' rows)."""
        return {
            "deployment_id": row.deployment_id,
            "repo": row.repo,
            "revision": row.revision,
            "trigger": row.trigger,
            "state": row.state,
            "requested_by": row.requested_by,
            "approved_by": row.approved_by,
            "added": row.added,
            "removed": row.removed,
            "changed": row.changed,
            "created_at": _utc(row.created_at),
            "updated_at": _utc(row.updated_at),
            "hotfix": Hotfix.of(row, web_base(self.settings.github_api_url)),
            "page": self.settings.job_url(row.deployment_id),
            "message": row.message or "",
        }

    def root_lock(self, repo: str, root: str) -> RootLock | None:
        """The lock latest.json says the root's queue holds (as the DeployWorkflow reads it)."""
        raw = self.blobs.get(latest_key(repo, root))
        if raw is None:
            return None
        try:
            latest = LatestDeployment.model_validate_json(raw)
        except ValidationError:
            log.warning("latest.json unreadable", extra={"repo": repo, "root": root})
            return None
        lock = lock_from_latest(latest)
        if not lock.locked or lock.by_deployment is None:
            return None
        row = self.deployments.get(lock.by_deployment)
        github = web_base(self.settings.github_api_url)
        run = latest.check_run_id
        return RootLock(
            repo=repo,
            deployment_id=lock.by_deployment,
            revision=lock.revision or latest.revision,
            since=_utc(lock.since),
            locked_by=row.requested_by if row is not None else None,
            hotfix=Hotfix.of(row, github) if row is not None else None,
            page=self.settings.job_url(lock.by_deployment),
            check_run=f"{github}/{repo}/runs/{run}" if run else None,
        )


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def get_reader(request: Request) -> JobReader:
    """One reader per app, built on first use from the gateway's settings and stores."""
    state = request.app.state
    reader: JobReader | None = getattr(state, "job_reader", None)
    if reader is None:
        gateway = state.gateway
        reader = state.job_reader = JobReader(gateway)
    return reader


ReaderDep = Annotated[JobReader, Depends(get_reader)]
