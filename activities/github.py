"""Check runs through the GitHub App, and installation tokens for fetching over HTTPS.

Every check-run call sends the complete output and buttons (`CheckRunRequest` is a full
description, not a patch). GitHub keeps a completed run completed: when a run we ask to be
queued or in progress comes back completed (after `action_required`, a reviewer's approval
moves the deployment back to "publishing"), a new run with the same name and `external_id`
takes over, the old one is marked neutral "Superseded" without buttons, and the new id is
returned for the workflow to use from then on.

Failures: GitHub 5xx, rate limits and network errors are raised as retryable (with GitHub's
Retry-After as the next retry delay when it gave one); any other 4xx and requests that break
GitHub's limits are non-retryable `ApplicationError`s.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import ERR_NOT_CONFIGURED, github_errors
from activities.heartbeat import blocking
from activities.joblog import JobLog
from shared.contracts.activityrefs import (
    ACT_CHECK_RUN,
    ACT_QUEUE_CHECK_RUNS,
)
from shared.contracts.checkrun import REVISION_CHECK_NAME, root_from_check_run_name
from shared.contracts.deploy import (
    CheckRunBatch,
    CheckRunRef,
    CheckRunRefs,
    CheckRunRequest,
    RepoRef,
)
from shared.contracts.preview import PREVIEW_CHECK_NAME, parse_preview_external_id
from shared.contracts.promotion import patch_from_check_run_name
from shared.github.app import (
    CheckRunAction,
    CheckRunOutput,
    GitHubApp,
    GitHubError,
    GitHubRequestError,
)
from shared.github.configured import GitHubNotConfigured, configured_app
from shared.github.limits import OUTPUT_LIMIT, fit_text
from shared.settings import Settings

# Installation tokens live an hour; take a new one well before that.
TOKEN_MARGIN_SECONDS = 10 * 60


class GitHubAccess:
    """The worker's GitHub App client (built on first use) and its installation tokens."""

    def __init__(self, settings: Settings, app: GitHubApp | None = None) -> None:
        self.settings = settings
        self._app = app
        self._lock = threading.Lock()
        self._tokens: dict[str, tuple[str, float]] = {}

    def app(self) -> GitHubApp:
        with self._lock:
            if self._app is None:
                self._app = self._build()
            return self._app

    def _build(self) -> GitHubApp:
        try:
            return configured_app(self.settings)
        except GitHubNotConfigured as err:
            raise ApplicationError(str(err), type=ERR_NOT_CONFIGURED, non_retryable=True) from err

    def quota(self) -> dict[int, tuple[int, int]]:
        """The GitHub quota left per installation (empty until the App has been used)."""
        with self._lock:
            app = self._app
        return app.quota() if app is not None else {}

    def app_for(self, repo: RepoRef) -> GitHubApp:
        app = self.app()
        if repo.installation_id:
            app.remember_installation(repo.full_name, repo.installation_id)
        return app

    def token_for(self, repo: RepoRef) -> str | None:
        """An installation token for git over HTTPS, or None without a GitHub App (public
        repositories, local paths). Cached per repository until shortly before it expires."""
        if not self.settings.github_configured:
            return None
        key = repo.full_name.lower()
        with self._lock:
            cached = self._tokens.get(key)
        if cached and cached[1] - TOKEN_MARGIN_SECONDS > time.time():
            return cached[0]
        try:
            token, expires = self.app_for(repo).installation_token(repo.full_name)
        except GitHubRequestError as err:
            # Not installed there, say; a public repository still fetches without a token.
            activity.logger.warning(
                "no installation token", extra={"repo": repo.full_name, "status": err.status}
            )
            return None
        expiry = (expires.replace(tzinfo=expires.tzinfo or UTC)).timestamp()
        with self._lock:
            self._tokens[key] = (token, expiry)
        return token

    def close(self) -> None:
        with self._lock:
            if self._app is not None:
                self._app.close()
                self._app = None


class GitHubActivities:
    def __init__(
        self, settings: Settings, github: GitHubAccess, jobs: JobLog | None = None
    ) -> None:
        self.settings = settings
        self.github = github
        self.jobs = jobs or JobLog(None)

    @activity.defn(name=ACT_CHECK_RUN.name)
    async def check_run(self, request: CheckRunRequest) -> CheckRunRef:
        with github_errors():
            ref = await blocking(self._check_run, request)
        activity.logger.info(
            "check run written",
            extra={
                "repo": request.repo.full_name,
                "check_name": request.name,
                "check_run": ref.check_run_id,
                "status": request.status,
                "conclusion": request.conclusion,
            },
        )
        self.jobs.write(
            request.external_id,
            "check run created"
            if ref.check_run_id != request.check_run_id
            else "check run updated",
            check_run=ref.check_run_id,
            # what a job page needs while the deployment is only queued (no history row yet)
            repo=request.repo.full_name,
            root=root_from_check_run_name(request.name),
            revision=request.head_sha,
            status=request.status,
            conclusion=request.conclusion,
            title=request.title,
            buttons=[a.identifier for a in request.actions] or None,
        )
        return ref

    @activity.defn(name=ACT_QUEUE_CHECK_RUNS.name)
    async def queue_check_runs(self, batch: CheckRunBatch) -> CheckRunRefs:
        """Several queued items' check runs in one activity: a long queue costs its workflow
        one activity per batch, not one per item. Each answer is recorded in the heartbeat,
        so a retry resumes after the last check run written instead of creating it again."""
        done = activity.info().heartbeat_details
        refs = [CheckRunRef.model_validate(ref) for ref in done[0]] if done else []
        for request in batch.requests[len(refs) :]:
            with github_errors():
                refs.append(await blocking(self._check_run, request))
            activity.heartbeat([ref.model_dump(mode="json") for ref in refs])
        return CheckRunRefs(refs=refs)

    def _check_run(self, request: CheckRunRequest) -> CheckRunRef:
        app = self.github.app_for(request.repo)
        repo = request.repo.full_name
        summary = request.summary
        if request.root_page:
            root = root_from_check_run_name(request.name) or ""
            summary += (
                f"\n\n[The root's queue and deployments]({self.settings.root_url(repo, root)})"
            )
        output = CheckRunOutput(
            title=request.title[:1000] or request.status,
            summary=_fit(summary) or request.title or request.status,
            text=_fit(request.text) or None,
        )
        actions = [
            CheckRunAction(label=a.label, description=a.description, identifier=a.identifier)
            for a in request.actions
        ]
        details_url = details_url_of(self.settings, request)

        def create() -> int:
            return app.create_check_run(
                repo,
                request.name,
                request.head_sha,
                request.external_id,
                request.status,
                details_url,
                output,
                actions,
                conclusion=request.conclusion,
            )

        if request.check_run_id is None:
            return CheckRunRef(check_run_id=create())
        try:
            state = app.update_check_run(
                repo,
                request.check_run_id,
                status=request.status,
                conclusion=request.conclusion,
                output=output,
                actions=actions,
                details_url=details_url,
            )
        except GitHubRequestError as err:
            if err.status != 404:
                raise
            # The run is gone (deleted with its suite): start a new one rather than fail.
            activity.logger.warning(
                "check run not found, creating a new one",
                extra={"repo": repo, "check_run": request.check_run_id},
            )
            return CheckRunRef(check_run_id=create())
        if state.status == "completed" and request.status != "completed":
            new_id = create()
            self._supersede(app, repo, request.check_run_id, new_id, details_url, output)
            return CheckRunRef(check_run_id=new_id)
        return CheckRunRef(check_run_id=state.id, html_url=state.html_url or "")

    def _supersede(
        self,
        app: GitHubApp,
        repo: str,
        old_id: int,
        new_id: int,
        details_url: str | None,
        output: CheckRunOutput,
    ) -> None:
        """Best effort: the old run's buttons would otherwise stay clickable. It keeps the
        diff it showed and points at the job page, where the deployment goes on; a reviewer
        who opens the run they approved is not left with an empty page."""
        job = (
            f" Its job page has the timeline, the log and the full diff: {details_url}"
            if (details_url)
            else ""
        )
        try:
            app.update_check_run(
                repo,
                old_id,
                status="completed",
                conclusion="neutral",
                output=CheckRunOutput(
                    title="Superseded",
                    summary=f"This deployment continues in check run {new_id}.{job}",
                    text=output.text,
                ),
                actions=[],
                details_url=details_url,
            )
        except GitHubError as err:
            activity.logger.warning(
                "could not mark the old check run superseded",
                extra={"repo": repo, "check_run": old_id, "status": err.status},
            )


def details_url_of(settings: Settings, request: CheckRunRequest) -> str:
    """The check run's Details link: always one of the gateway's pages, chosen by the kind of
    check run (its name), whatever the workflow asked for: a merged revision's `rollwright`
    summary → the revision page; a rollout → its rollout page; a preview → its head's
    report; a root's deployment → its job page (or the page the workflow named)."""
    repo = request.repo.full_name
    if request.name == REVISION_CHECK_NAME:
        return settings.revision_url(repo, request.head_sha)
    patch_id = patch_from_check_run_name(request.name)
    if patch_id is not None:
        return settings.rollout_url(repo, patch_id)
    preview = parse_preview_external_id(request.external_id)
    if request.name == PREVIEW_CHECK_NAME and preview is not None:
        return settings.preview_url(repo, *preview)
    return request.details_url or settings.job_url(request.external_id)


def _fit(text: str) -> str:
    """Callers cut their own text; this only guards GitHub's limit for anything they missed."""
    return fit_text([text], OUTPUT_LIMIT) if text else ""
