"""Who may click Unlock and a rollout's buttons (docs/governance.md): the `judge_action`
activity.

It reads the review policy in force, rollwright.yaml at the tip of the default branch (a
rollout: the tip its workflow evaluated), from the worker's git mirror, for every root the
click acts on: the unlocked root, or the roots the rollout's node holds. Then it asks GitHub
about the clicker like `judge_review` does (`who_is`: collaborator permission, the policies'
teams) and applies `shared/review/governance.py`'s `decide_action`. A fleet whose policy
cannot be read at that revision refuses every click, saying why: without the policy nobody
can tell who may.
"""

from __future__ import annotations

from temporalio import activity

from activities.errors import fleet_mistakes, github_errors
from activities.github import GitHubAccess
from activities.governance import who_is
from activities.heartbeat import blocking
from shared.contracts.activityrefs import ACT_JUDGE_ACTION
from shared.contracts.governance import ActionRequest, ReviewPolicy, Verdict
from shared.engine.config.fleet import FleetConfig
from shared.engine.errors import FleetError
from shared.engine.fleet import detect_layout
from shared.engine.tree import GitTree
from shared.promotion import plan as promotion
from shared.review.governance import NO_ACTOR, decide_action, policy_for
from shared.stores.gitmirror import GitMirror, RevisionNotFound


class ActionJudge:
    """Judges clicks on Unlock, Promote, Halt, Resume and Roll back."""

    def __init__(self, github: GitHubAccess, mirror: GitMirror) -> None:
        self.github = github
        self.mirror = mirror

    @activity.defn(name=ACT_JUDGE_ACTION.name)
    async def judge_action(self, request: ActionRequest) -> Verdict:
        with github_errors(), fleet_mistakes():
            verdict = await blocking(self._judge, request)
        activity.logger.info(
            "click judged",
            extra={
                "repo": request.repo.full_name,
                "workflow": request.workflow_id,
                "action": request.action,
                "by": request.actor,
                "counts": verdict.counts,
                "permission": verdict.permission,
                "reason": verdict.reason,
            },
        )
        return verdict

    def _judge(self, request: ActionRequest) -> Verdict:
        if not request.actor:
            return Verdict(counts=False, reason=NO_ACTOR)
        repo = request.repo.full_name
        try:
            policies = self.policies(request)
        except (FleetError, RevisionNotFound) as err:
            return Verdict(
                counts=False,
                reason=f"the review policy cannot be read ({err}); nobody's click counts "
                "until rollwright.yaml reads again",
            )
        app = self.github.app_for(request.repo)
        permission, teams = who_is(app, repo, request.actor, *policies.values())
        return decide_action(
            request.action,
            request.actor,
            repo=repo,
            permission=permission,
            teams=teams,
            policies=policies,
        )

    def policies(self, request: ActionRequest) -> dict[str, ReviewPolicy]:
        """The review policy of each root the click acts on, by root, at the revision asked
        (None: the default branch's tip, fetched now)."""
        repo = request.repo
        revision = request.revision
        if revision is None:
            revision = self.mirror.default_tip(repo)
        tree = GitTree(self.mirror.ensure(repo, revision), revision)
        if request.root is not None:
            roots = [request.root]
        elif request.patch_id and request.node:
            roots = promotion.roots_under(tree, request.patch_id, request.node)
        else:
            roots = []
        config = FleetConfig.load(tree)
        layout = detect_layout(tree, config) if roots else ""
        return {root: policy_for(config, root, layout, author=None) for root in roots}
