"""rollwright activities: everything the workflows do to the world, registered by name.

`build_activities(settings, client)` wires the implementations to this worker's stores,
git cache and GitHub App and returns the callables a `temporalio.worker.Worker` takes:
`all` for the shared task queue, `pinned` for this worker's own queue (checkout, render,
diff and cleanup run where the checkout is; a PR preview's fetch and render run where its
mirror was fetched; publish works from the stored render and may run on any worker),
`waits` for the waits queue and `admitting` for the admission queue (`worker_task_queue`,
answered once this worker has room: activities.admission).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client

from activities.admission import Admission
from activities.authority import ActionJudge
from activities.dispatch import DispatchActivities, QueueActivities
from activities.git import GitActivities
from activities.github import GitHubAccess, GitHubActivities
from activities.governance import GovernanceActivities
from activities.hotfix import HotfixActivities
from activities.joblog import JobLog
from activities.metrics import WorkerMetrics
from activities.preview import PreviewActivities
from activities.promotion import PromotionActivities, PromotionSignals
from activities.publish import BlobPublisher, PublishActivities, Publisher, publish_targets
from activities.publish_catalog import PullOpener
from activities.render import RenderActivities
from activities.store import StoreActivities
from activities.verify import DeliveryVerifier, VerifyPlans
from shared.contracts.deploy import RepoRef
from shared.github.gitdata import open_pull_request
from shared.github.urls import clone_url
from shared.notify.notifier import Announcer
from shared.settings import Settings
from shared.stores.blob import BlobStore
from shared.stores.blob_url import open_blob_store
from shared.stores.gitmirror import GitMirror
from shared.stores.sql.engine import Database


@dataclass
class Activities:
    """The activity callables of one worker, and what they hold open."""

    all: list[Callable[..., Any]]
    pinned: list[Callable[..., Any]]
    waits: list[Callable[..., Any]]
    admitting: list[Callable[..., Any]]  # for the admission queue (worker_task_queue)
    mirror: GitMirror
    blobs: BlobStore
    database: Database
    github: GitHubAccess
    metrics: WorkerMetrics
    admission: Admission | None = None  # deployments holding this worker (worker_task_queue)
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in self._closers:
            close()


def build_activities(
    settings: Settings,
    client: Client,
    *,
    blobs: BlobStore | None = None,
    database: Database | None = None,
    github: GitHubAccess | None = None,
    publisher: Publisher | None = None,
    metrics: WorkerMetrics | None = None,
    admission: Admission | None = None,
) -> Activities:
    """Every activity the workflows call (the ACT_* names of shared.contracts.deploy)."""
    closers: list[Callable[[], None]] = []  # only what is built here
    blobs = blobs if blobs is not None else open_blob_store(settings.blobs, settings)
    if database is None:
        database = Database(settings.database)
        closers.append(database.close)
    if github is None:
        github = GitHubAccess(settings)
        closers.append(github.close)
    mirror = GitMirror(
        settings.git_dir, remote_for=github_remotes(settings), token_for=github.token_for
    )
    publisher = publisher if publisher is not None else BlobPublisher(blobs, settings.blobs)
    if metrics is None:
        metrics = WorkerMetrics()
        metrics.watch_github(github.quota)

    jobs = JobLog(blobs)
    git = GitActivities(mirror, jobs, blobs)
    render = RenderActivities(settings, blobs)
    targets = publish_targets(
        settings, mirror, blobs, github.token_for, open_pull=catalog_pull_opener(github)
    )
    publish = PublishActivities(publisher, jobs, targets=targets)
    previews = PreviewActivities(settings, mirror, blobs, github)
    governance = GovernanceActivities(github, blobs, jobs)
    pinned: list[Callable[..., Any]] = [
        previews.preview_revisions,
        previews.preview_build,
        git.checkout,
        render.render_root,
        render.diff_render,
        governance.review_policy,
        publish.publish,
        git.cleanup_checkout,
    ]
    announcer = Announcer(database, settings)
    store = StoreActivities(blobs, database, metrics, announcer)
    checks = GitHubActivities(settings, github, jobs)
    dispatch = DispatchActivities(client, settings)
    queues = QueueActivities(settings, client, admission)
    shared: list[Callable[..., Any]] = [
        git.affected_roots,
        git.revision_relation,
        dispatch.signal_deploys,
        dispatch.await_dispatch,
        dispatch.report_review,
        queues.worker_task_queue,
        queues.worker_alive,
        store.load_latest,
        store.persist_latest,
        store.record_deployment,
        store.record_audit,
        store.record_deployments,
        dispatch.deployment_status,
        previews.preview_comment,
        *_promotion_activities(mirror, blobs, github, client, settings, announcer),
        checks.check_run,
        checks.queue_check_runs,
        VerifyPlans(mirror).verify_plan,
        DeliveryVerifier(jobs, mirror=mirror).verify_delivery,
        governance.judge_review,
        governance.carry_over,
        ActionJudge(github, mirror).judge_action,
        *_hotfix_activities(github, mirror, client, settings),
    ]
    return Activities(
        all=shared + pinned,
        pinned=pinned,
        # also on the shared queue: dispatches scheduled before the waits queue existed
        waits=[dispatch.await_dispatch],
        # also on the shared queue: previews, and deployments started before admission
        admitting=[queues.worker_task_queue],
        mirror=mirror,
        blobs=blobs,
        database=database,
        github=github,
        metrics=metrics,
        admission=admission,
        _closers=closers,
    )


def catalog_pull_opener(github: GitHubAccess) -> PullOpener:
    """Catalog pull requests on the configured GitHub, with the App."""

    def open_pull(repo: RepoRef, head: str, base: str, title: str, body: str) -> str:
        app = github.app_for(repo)
        return open_pull_request(
            app, repo.full_name, head=head, base=base, title=title, body=body
        ).url

    return open_pull


def github_remotes(settings: Settings) -> Callable[[RepoRef], str]:
    """The worker's mirrors clone each repository from the configured GitHub, whatever URL a
    request or payload names."""
    return lambda repo: clone_url(settings.github_api_url, repo.owner, repo.name)


def _promotion_activities(
    mirror: GitMirror,
    blobs: BlobStore,
    github: GitHubAccess,
    client: Client,
    settings: Settings,
    announcer: Announcer,
) -> list[Callable[..., Any]]:
    """The PromotionWorkflow's activities, and the ones that start and signal it."""
    promotions = PromotionActivities(mirror, blobs, github, announcer)
    signals = PromotionSignals(client, settings)
    return [
        promotions.evaluate,
        promotions.deployments,
        promotions.touched,
        promotions.commit,
        promotions.graduate,
        promotions.rollback,
        signals.signal_promotions,
        signals.notify_promotions,
    ]


__all__ = ["Activities", "build_activities"]


def _hotfix_activities(
    github: GitHubAccess, mirror: GitMirror, client: Client, settings: Settings
) -> list[Callable[..., Any]]:
    hotfixes = HotfixActivities(github, mirror, client, settings)
    return [hotfixes.hotfix_judge, hotfixes.hotfix_comment, hotfixes.hotfix_merged]
