"""Governance activities (docs/governance.md): a deployment's review policy, read from its
checkout, and the verdict on one review click, with GitHub's word on the clicker.

`review_policy` runs pinned (it reads the checkout before it is removed). `judge_review` runs
on the shared queue: it asks GitHub for the clicker's collaborator permission and for the
memberships of the teams the policy names, then applies the decision table in
`shared/review/governance.py`. The workflow keeps only what the verdicts add up to.
"""

from __future__ import annotations

from pathlib import Path

from temporalio import activity

from activities.errors import fleet_mistakes, github_errors
from activities.github import GitHubAccess
from activities.heartbeat import blocking
from activities.joblog import JobLog
from activities.store import FILES_DIR, load_render_meta
from shared.contracts.governance import (
    ACT_JUDGE_REVIEW,
    ACT_REVIEW_POLICY,
    JudgeRequest,
    ReviewPolicy,
    ReviewPolicyRequest,
    Verdict,
)
from shared.engine import fleetconfig
from shared.engine.layout import detect_layout
from shared.engine.tree import WorkTree
from shared.review.governance import decide, policy_for, teams_named
from shared.review.owners import changed_paths, owners_for
from shared.stores.blob import BlobStore


class GovernanceActivities:
    def __init__(self, github: GitHubAccess, blobs: BlobStore, jobs: JobLog | None = None) -> None:
        self.github = github
        self.blobs = blobs
        self.jobs = jobs or JobLog(None)

    @activity.defn(name=ACT_REVIEW_POLICY)
    async def review_policy(self, request: ReviewPolicyRequest) -> ReviewPolicy:
        with fleet_mistakes():
            policy = await blocking(self._policy, request)
        activity.logger.info(
            "review policy resolved",
            extra={
                "repo": request.repo.full_name,
                "root": request.root,
                "rule": policy.rule or "defaults",
                "review": policy.review,
                "requirements": policy.requirements(),
            },
        )
        return policy

    def _policy(self, request: ReviewPolicyRequest) -> ReviewPolicy:
        tree = WorkTree(Path(request.checkout_path))
        config = fleetconfig.load(tree)
        layout = detect_layout(tree, config)
        owners = []
        if request.new_prefix:
            # The applications the rendered diff touches (file digests: a rotated secret
            # touches its application too), and their OWNERS at this revision.
            prefixes = {"old": request.old_prefix, "new": request.new_prefix}

            def digests(side: str) -> dict[str, str]:
                prefix = prefixes[side]
                meta = load_render_meta(self.blobs, prefix) if prefix else {}
                return dict(meta.get("file_digests") or {})

            def read(side: str, path: str) -> bytes | None:
                prefix = prefixes[side]
                return self.blobs.get(prefix + FILES_DIR + path) if prefix else None

            changed = changed_paths(digests("old"), digests("new"))
            owners = owners_for(tree, config, layout, request.root, changed, read)
        return policy_for(config, request.root, layout, author=request.author, owners=owners)

    @activity.defn(name=ACT_JUDGE_REVIEW)
    async def judge_review(self, request: JudgeRequest) -> Verdict:
        with github_errors():
            verdict = await blocking(self._judge, request)
        activity.logger.info(
            "review click judged",
            extra={
                "repo": request.repo.full_name,
                "deployment": request.deployment_id,
                "by": request.actor,
                "decision": request.decision,
                "counts": verdict.counts,
                "permission": verdict.permission,
                "satisfies": verdict.satisfies,
            },
        )
        self.jobs.write(
            request.deployment_id,
            "review click counted" if verdict.counts else "review click refused",
            by=request.actor,
            decision=request.decision,
            reason=verdict.reason or None,
        )
        return verdict

    def _judge(self, request: JudgeRequest) -> Verdict:
        repo = request.repo.full_name
        actor = request.actor
        if not actor:
            permission = "none"
            teams: set[str] = set()
        else:
            app = self.github.app_for(request.repo)
            permission = app.collaborator_permission(repo, actor)
            teams = {
                f"@{org}/{slug}".lower()
                for org, slug in teams_named(request.policy)
                if app.is_team_member(repo, org, slug, actor)
            }
        return decide(
            request.policy,
            request.decision,
            actor,
            repo=repo,
            permission=permission,
            teams=teams,
            satisfied=request.satisfied,
        )
