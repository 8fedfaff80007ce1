"""Hotfixes from unmerged pull requests (docs/governance.md, "Hotfixes"): judging a
`/rollwright hotfix` command, the sticky `rollwright:hotfix` comment, and telling the hotfixed
roots' queues that the pull request was merged.

The judge reads rollwright.yaml's `hotfix` from the tip of the default branch in the worker's
mirror (never from the pull request: it cannot loosen its own rules), the roots at the
pull request's head, and asks GitHub about the pull request, its reviews and checks, the
commenter's permission and the author's team; `shared/review/hotfixes.py` decides.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from temporalio import activity
from temporalio.client import Client

from activities.errors import github_errors
from activities.github import GitHubAccess
from activities.heartbeat import beat, blocking
from shared.contracts.activityrefs import ACT_HOTFIX_COMMENT, ACT_HOTFIX_JUDGE, ACT_HOTFIX_MERGED
from shared.contracts.deploy import SIGNAL_HOTFIX_MERGED, RepoRef
from shared.contracts.hotfix import (
    HOTFIX_COMMENT_MARKER,
    HotfixCommentRequest,
    HotfixJudgeRequest,
    HotfixMergedRequest,
    HotfixVerdict,
)
from shared.contracts.queueing import signal_queue
from shared.engine.config.fleet import FleetConfig
from shared.engine.config.hotfix import HotfixSettings
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import GitTree
from shared.github.app import GitHubApp
from shared.review.hotfixes import HotfixFacts, judge
from shared.settings import Settings
from shared.stores.gitmirror import GitMirror, RevisionNotFound

SIGNALS_AT_ONCE = 8


class HotfixActivities:
    def __init__(
        self, github: GitHubAccess, mirror: GitMirror, client: Client, settings: Settings
    ) -> None:
        self.github = github
        self.mirror = mirror
        self.client = client
        self.settings = settings

    @activity.defn(name=ACT_HOTFIX_JUDGE.name)
    async def hotfix_judge(self, request: HotfixJudgeRequest) -> HotfixVerdict:
        with github_errors():
            verdict = await blocking(self._judge, request)
        activity.logger.info(
            "hotfix judged",
            extra={
                "repo": request.repo.full_name,
                "pr": request.pr,
                "by": request.command.by,
                "roots": ",".join(request.command.roots),
                "allowed": verdict.allowed,
                "head": verdict.head_sha,
            },
        )
        return verdict

    def _judge(self, request: HotfixJudgeRequest) -> HotfixVerdict:
        repo, command = request.repo, request.command
        name = repo.full_name
        app = self.github.app_for(repo)
        try:
            settings = self._settings(repo)
        except (FleetError, RevisionNotFound) as err:
            return HotfixVerdict(
                allowed=False,
                reasons=[f"rollwright.yaml on `{repo.default_branch}` cannot be read: {err}"],
            )
        pull = app.pull(name, request.pr)
        facts = HotfixFacts(
            repo=name,
            default_branch=repo.default_branch,
            settings=settings,
            commenter=command.by,
            permission=app.collaborator_permission(name, command.by),
            pull=pull,
            roots=command.roots,
        )
        if settings is not None:
            roots, error = self._roots_at(repo, pull.head_sha)
            team = settings.author_team
            facts = replace(
                facts,
                roots_at_head=roots,
                fleet_error=error,
                reviews=app.pull_reviews(name, request.pr),
                checks=app.commit_checks(name, pull.head_sha) if settings.checks else (),
                own_app=int(app.app_id) if app.app_id.isdigit() else None,
                author_in_team=self._in_team(app, name, team, pull.author),
            )
        judged = judge(facts)
        return HotfixVerdict(
            allowed=judged.allowed,
            reasons=judged.reasons,
            met=judged.met,
            head_sha=pull.head_sha,
            url=pull.html_url,
        )

    @staticmethod
    def _in_team(app: GitHubApp, repo: str, team: str | None, author: str | None) -> bool | None:
        if team is None or not author:
            return None
        org, _, slug = team.lstrip("@").partition("/")
        return app.is_team_member(repo, org, slug, author)

    def _settings(self, repo: RepoRef) -> HotfixSettings | None:
        tip = self.mirror.default_tip(repo)
        return FleetConfig.load(GitTree(self.mirror.ensure(repo, tip), tip)).hotfix

    def _roots_at(self, repo: RepoRef, head: str) -> tuple[frozenset[str] | None, str]:
        """The fleet's roots at the pull request's head (a branch of the repository, so the
        mirror's fetch has it), or why they cannot be told."""
        try:
            path = self.mirror.ensure(repo, head)
            return frozenset(Fleet.open(GitTree(path, head)).roots()), ""
        except (FleetError, RevisionNotFound) as err:
            return None, str(err)

    @activity.defn(name=ACT_HOTFIX_COMMENT.name)
    async def hotfix_comment(self, request: HotfixCommentRequest) -> int:
        app = self.github.app_for(request.repo)
        with github_errors():
            return await blocking(
                app.upsert_sticky_comment,
                request.repo.full_name,
                request.pr,
                HOTFIX_COMMENT_MARKER,
                request.body,
            )

    @activity.defn(name=ACT_HOTFIX_MERGED.name)
    async def hotfix_merged(self, request: HotfixMergedRequest) -> None:
        """Signal-with-start `hotfix_merged` to every hotfixed root's queue. A retry signals
        again; a queue whose lock is already open ignores the repeat."""
        slots = asyncio.Semaphore(SIGNALS_AT_ONCE)

        async def signal(root: str) -> None:
            async with slots:
                await signal_queue(
                    self.client,
                    self.settings.task_queue,
                    request.repo,
                    root,
                    SIGNAL_HOTFIX_MERGED,
                    request.merged,
                )
            beat()

        outcomes = await asyncio.gather(
            *(signal(root) for root in request.roots), return_exceptions=True
        )
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        if failed:
            raise failed[0]
        activity.logger.info(
            "hotfix merge signalled",
            extra={"repo": request.repo.full_name, "pr": request.merged.pr, "roots": len(outcomes)},
        )
