"""Governance activities (docs/governance.md): a deployment's review policy, read from its
checkout, and the verdict on one review click, with GitHub's word on the clicker.

`review_policy` runs pinned (it reads the checkout before it is removed). `judge_review` runs
on the shared queue: it asks GitHub for the clicker's collaborator permission and for the
memberships of the teams the policy names, then applies the decision table in
`shared/review/governance.py`. The workflow keeps only what the verdicts add up to.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from temporalio import activity

from activities.errors import fleet_mistakes, github_errors
from activities.github import GitHubAccess
from activities.heartbeat import blocking
from activities.joblog import JobLog
from activities.render import shared_fleet
from activities.store import FILES_DIR, load_render, load_render_meta
from shared.contracts.activityrefs import (
    ACT_CARRY_OVER,
    ACT_JUDGE_REVIEW,
    ACT_REVIEW_POLICY,
)
from shared.contracts.governance import (
    CarryOver,
    CarryOverRequest,
    JudgeRequest,
    OwnersRequirement,
    ReviewPolicy,
    ReviewPolicyRequest,
    Verdict,
)
from shared.contracts.preview import preview_fingerprints_key
from shared.engine.atlas.layout import AtlasLayout
from shared.engine.config.fleet import FleetConfig
from shared.engine.fleet import detect_layout
from shared.engine.policies.sets import check_root, sets_for
from shared.engine.tree import WorkTree
from shared.github.app import GitHubApp, PullOfCommit
from shared.review.diff import fingerprint
from shared.review.governance import approvers_of, decide, policy_for, teams_named
from shared.review.owners import changed_paths, owners_for
from shared.review.policies import findings_of, policy_checks
from shared.review.policychanges import SetChange, set_changes
from shared.stores.blob import BlobStore

# How long GitHub's list of a commit's pull requests is reused: every root of a merged revision
# asks for the same list (a fleet-wide change asked 1,000 times within minutes). An empty list
# is kept only briefly: read too early (GitHub links a merge to its pull request within
# moments), it would keep approvals from carrying over (the roots would ask for review, the
# safe side, but needlessly).
PULLS_SECONDS = 60.0
NO_PULLS_SECONDS = 5.0
# Policy findings written to a job log one line each (an S3 append rewrites the whole log).
JOB_LOG_FINDINGS = 200


class GovernanceActivities:
    def __init__(self, github: GitHubAccess, blobs: BlobStore, jobs: JobLog | None = None) -> None:
        self.github = github
        self.blobs = blobs
        self.jobs = jobs or JobLog(None)
        self._pulls: dict[tuple[str, str], tuple[float, list[PullOfCommit]]] = {}
        self._pulls_lock = threading.Lock()

    def _pulls_of(self, app: GitHubApp, repo: str, sha: str) -> list[PullOfCommit]:
        """`app.pulls_of_commit`, asked once per commit every PULLS_SECONDS."""
        now = time.monotonic()
        with self._pulls_lock:
            self._pulls = {
                k: v
                for k, v in self._pulls.items()
                if now - v[0] < (PULLS_SECONDS if v[1] else NO_PULLS_SECONDS)
            }
            known = self._pulls.get((repo, sha))
        if known is not None:
            return known[1]
        pulls = app.pulls_of_commit(repo, sha)
        with self._pulls_lock:
            self._pulls[(repo, sha)] = (now, pulls)
        return pulls

    @activity.defn(name=ACT_REVIEW_POLICY.name)
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
        config = FleetConfig.load(tree)
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
            if layout != "atlas" or not changed:
                owners = owners_for(tree, config, layout, request.root, changed, read)
            else:
                # The fleet the render opened on this checkout knows its clusters already:
                # finding them again cost every deployment of a fleet-wide change 0.1 s.
                checkout = Path(request.checkout_path)
                fleet, lock = shared_fleet(checkout)
                planner = fleet.layout.planner if isinstance(fleet.layout, AtlasLayout) else None
                with lock:
                    owners = owners_for(
                        tree, config, layout, request.root, changed, read, planner=planner
                    )
        policy = policy_for(config, request.root, layout, author=request.author, owners=owners)
        if request.new_prefix:
            # The sets this revision changes against the last published one: their owners
            # approve whatever the sets find (the change may have switched them off).
            base = None
            if request.old_prefix:
                base = str(load_render_meta(self.blobs, request.old_prefix).get("revision") or "")
            changes = set_changes(request.root, config, Path(request.checkout_path), base)
            if changes or sets_for(config, request.root):
                policy = self._checked(request, tree, config, policy, changes)
        return policy

    def _checked(
        self,
        request: ReviewPolicyRequest,
        tree: WorkTree,
        config: FleetConfig,
        policy: ReviewPolicy,
        changes: list[SetChange],
    ) -> ReviewPolicy:
        """The root's policy sets run over its stored (redacted) render: every finding goes to
        the job log, the first ones and a requirement per set with failing denies or that the
        revision changes to the policy."""
        assert request.new_prefix is not None
        render = load_render(self.blobs, request.new_prefix)
        findings = findings_of(check_root(tree, config, request.root, render.files))
        checks, requirements = policy_checks(config, request.root, findings, changes)
        for change in changes:
            self.jobs.write(
                request.deployment_id,
                "policy set changed",
                policy_set=change.policy_set,
                changed=change.what,
                owners=change.owners,
            )
        for finding in findings[:JOB_LOG_FINDINGS]:
            self.jobs.write(
                request.deployment_id,
                f"policy {finding.level}",
                policy_set=finding.policy_set,
                object=finding.subject(),
                policy=finding.policy,
                says=finding.message,
            )
        self.jobs.write(
            request.deployment_id,
            "policy checks done",
            sets=checks.sets,
            denies=checks.denies,
            warnings=checks.warnings,
        )
        return policy.model_copy(update={"policy_sets": requirements, "checks": checks})

    @activity.defn(name=ACT_JUDGE_REVIEW.name)
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
            permission, teams = who_is(app, repo, actor, request.policy)
        return decide(
            request.policy,
            request.decision,
            actor,
            repo=repo,
            permission=permission,
            teams=teams,
            satisfied=request.satisfied,
        )

    @activity.defn(name=ACT_CARRY_OVER.name)
    async def carry_over(self, request: CarryOverRequest) -> CarryOver:
        with github_errors():
            result = await blocking(self._carry_over, request)
        activity.logger.info(
            "pull request approval checked",
            extra={
                "repo": request.repo.full_name,
                "deployment": request.deployment_id,
                "pr": result.pr,
                "approvers": result.approvers,
                "reason": result.reason,
            },
        )
        return result

    def _carry_over(self, request: CarryOverRequest) -> CarryOver:
        """The merged pull request's approving reviews of its last head, each judged like a
        click, when the deployment's diff is exactly the diff previewed for that head."""
        repo, app = request.repo.full_name, self.github.app_for(request.repo)
        pull = _merged_pull(self._pulls_of(app, repo, request.revision), request.revision)
        if pull is None:
            return CarryOver(reason="this commit did not come from a merged pull request")
        pr = f"#{pull.number}"
        raw = self.blobs.get(preview_fingerprints_key(repo, pull.number, pull.head_sha))
        previewed = json.loads(raw).get(request.root) if raw is not None else None
        if previewed is None:
            return CarryOver(
                pr=pull.number, reason=f"{pr} was not previewed for this root at its last head"
            )
        old = load_render_meta(self.blobs, request.old_prefix) if request.old_prefix else {}
        new = load_render_meta(self.blobs, request.new_prefix)
        ours = fingerprint(old.get("file_digests") or {}, new.get("file_digests") or {})
        if {p: list(d) for p, d in ours.items()} != previewed:
            return CarryOver(
                pr=pull.number,
                reason=f"the diff differs from the one previewed for {pr} (something else was "
                "deployed or merged since)",
            )
        approvers = head_approvers(app, repo, pull.number, pull.head_sha)
        if not approvers:
            return CarryOver(pr=pull.number, reason=f"{pr} has no approval of its last head")
        # The pull request's author stands for the change here, whoever merged it.
        policy = request.policy.model_copy(update={"author": pull.author})
        counted, satisfies, refused = [], [], []
        for login in approvers:
            permission, teams = who_is(app, repo, login, policy)
            verdict = decide(
                policy, "approve", login, repo=repo, permission=permission, teams=teams
            )
            if verdict.counts:
                counted.append(login)
                satisfies += [r for r in verdict.satisfies if r not in satisfies]
            else:
                refused.append(verdict.reason)
        missing = policy.outstanding(satisfies)
        reason = ""
        if missing:
            reason = f"the approvals of {pr} do not cover: " + "; ".join(
                policy.whose(r) for r in missing
            )
            if refused:
                reason += " (" + "; ".join(refused) + ")"
        return CarryOver(pr=pull.number, approvers=counted, satisfies=satisfies, reason=reason)


def who_is(app: GitHubApp, repo: str, login: str, *policies: ReviewPolicy) -> tuple[str, set[str]]:
    """GitHub's permission of `login` on `repo`, and the policies' teams they are in."""
    permission = app.collaborator_permission(repo, login)
    teams = {
        f"@{org}/{slug}".lower()
        for org, slug in teams_named(*policies)
        if app.is_team_member(repo, org, slug, login)
    }
    return permission, teams


def head_approvers(app: GitHubApp, repo: str, number: int, head: str) -> list[str]:
    """Who approves pull request `number` at its head `head` (`approvers_of`)."""
    return approvers_of(app.pull_reviews(repo, number), head)


def owners_report(
    app: GitHubApp, repo: str, number: int, head: str, owners: list[OwnersRequirement]
) -> list[str]:
    """Markdown for a preview: each OWNERS file the change touches, and whether the pull
    request's approvals of its head already meet it (judged like clicks: write access, teams)."""
    if not owners:
        return []
    approvers = head_approvers(app, repo, number, head)
    lines = [
        "### OWNERS",
        "",
        "The deployments of this change need an approval from an owner of each application "
        "it touches (docs/governance.md); GitHub reviews of this head carry over after merge.",
        "",
        "| application | OWNERS | owners | approved |",
        "|---|---|---|---|",
    ]
    for req in owners:
        policy = ReviewPolicy(owners=[req])
        by = []
        for login in approvers:
            permission, teams = who_is(app, repo, login, policy)
            verdict = decide(
                policy, "approve", login, repo=repo, permission=permission, teams=teams
            )
            if req.name in verdict.satisfies:
                by.append(f"@{login}")
        names = ", ".join(o if o.startswith("@") else f"@{o}" for o in req.owners)
        status = f"yes, by {', '.join(by)}" if by else "not yet"
        lines.append(f"| `{req.application}` | `{req.path}` | {names} | {status} |")
    return lines


def _merged_pull(pulls: list[PullOfCommit], sha: str) -> PullOfCommit | None:
    """The merged pull request whose merge commit `sha` is (a commit pushed directly, or one
    that is only some open pull request's head, has none)."""
    return next((p for p in pulls if p.merged and p.merge_commit_sha == sha), None)
