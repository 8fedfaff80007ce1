"""Activities of the PromotionWorkflow, and how the rest of the service reaches it.

Reading (the worker's git mirror, latest.json): where a patch stands at a revision
(`promotion_evaluate`), whether each root's latest deployment contains it
(`promotion_deployments`), which patches a push touched (`promotion_touched`).
Writing (GitHub, as the App): the promotion commit on the default branch and the graduation
pull request (shared.github.gitdata). Signalling (Temporal): DispatchWorkflow starts and feeds
promotion workflows (`promotion_signal`); the deploy side tells them about finished
deployments (`notify_promotions`), found through visibility by the RollwrightRepo attribute.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError
from temporalio import activity
from temporalio.client import Client
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.errors import fleet_mistakes, github_errors
from activities.github import GitHubAccess
from activities.heartbeat import beat, blocking
from shared.contracts.activityrefs import (
    ACT_NOTIFY_PROMOTIONS,
    ACT_PROMOTION_COMMIT,
    ACT_PROMOTION_DEPLOYMENTS,
    ACT_PROMOTION_EVALUATE,
    ACT_PROMOTION_GRADUATE,
    ACT_PROMOTION_ROLLBACK,
    ACT_PROMOTION_SIGNAL,
    ACT_PROMOTION_TOUCHED,
)
from shared.contracts.deploy import SA_REPO, LatestDeployment
from shared.contracts.promotion import (
    PROMOTION_WORKFLOW,
    SIGNAL_DEPLOYMENT_FINISHED,
    SIGNAL_PROMOTION_REVISION,
    CommitRequest,
    CommitResult,
    DeploymentsRequest,
    DeploymentsResult,
    EvaluateRequest,
    Evaluation,
    GraduateRequest,
    GraduateResult,
    NodeInfo,
    NotifyPromotionsRequest,
    PromotionInput,
    PromotionRevision,
    RollbackRequest,
    RollbackResult,
    RootDeployment,
    SignalPromotionsRequest,
    TouchedRequest,
    TouchedResult,
    WindowInfo,
    promotion_workflow_id,
)
from shared.engine.config.fleet import FleetConfig
from shared.engine.config.windows import window_state
from shared.engine.dimensions.patches import load_patch
from shared.engine.errors import FleetError
from shared.engine.tree import GitTree, Tree, changed_files, git
from shared.github.gitdata import (
    BranchMoved,
    branch_tip,
    commit_files,
    find_open_pull_request,
    open_pull_request,
)
from shared.notify.events import rollback_event
from shared.notify.notifier import Announcer
from shared.process import run
from shared.promotion import plan as promotion
from shared.settings import Settings
from shared.stores.blob import BlobStore, latest_key
from shared.stores.gitmirror import GitMirror, is_zero

ERR_PROMOTION = "PromotionRefused"
# The default branch moved under every attempt: retryable, unlike ERR_PROMOTION.
ERR_BRANCH_MOVING = "BranchKeptMoving"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree: "everything added"
# Another commit landing between reading the tip and moving it: plan again this many times.
COMMIT_ATTEMPTS = 5
GRADUATION_BRANCH = "rollwright/graduate-{patch}"


class PromotionActivities:
    """Reads the fleet at a revision (mirror) and writes promotions through GitHub. The sync
    parts run in `blocking()`'s thread, which heartbeats for them."""

    def __init__(
        self,
        mirror: GitMirror,
        blobs: BlobStore,
        github: GitHubAccess,
        announcer: Announcer | None = None,
    ) -> None:
        self.mirror = mirror
        self.blobs = blobs
        self.github = github
        self.announcer = announcer

    # --- reading ---------------------------------------------------------------------------

    @activity.defn(name=ACT_PROMOTION_EVALUATE.name)
    async def evaluate(self, request: EvaluateRequest) -> Evaluation:
        with fleet_mistakes():  # only a revision the repository lacks gets here
            ev = await blocking(self._evaluate, request)
        activity.logger.info(
            "promotion evaluated",
            extra={
                "repo": request.repo.full_name,
                "patch": request.patch_id,
                "revision": request.revision,
                "current": ev.current_node,
                "next": ev.next_node,
                "error": ev.error,
            },
        )
        return ev

    def _evaluate(self, request: EvaluateRequest) -> Evaluation:
        mirror = self.mirror.ensure(request.repo, request.revision)
        tree = GitTree(mirror, request.revision)
        try:
            return evaluate(tree, request.patch_id, request.now)
        except FleetError as err:
            # A broken fleet repo blocks the rollout (shown on its check run) until a new
            # revision fixes it: an answer, not a failed activity.
            return Evaluation(revision=tree.revision, error=str(err))

    @activity.defn(name=ACT_PROMOTION_DEPLOYMENTS.name)
    async def deployments(self, request: DeploymentsRequest) -> DeploymentsResult:
        return await blocking(self._deployments, request)

    def _deployments(self, request: DeploymentsRequest) -> DeploymentsResult:
        reported = {r.root: r for r in request.reported}
        trees: dict[str, Tree] = {}
        out = []
        for root in request.roots:
            found = reported.get(root)
            if found is not None:
                d = RootDeployment(
                    root=root,
                    revision=found.revision,
                    deployment_id=found.deployment_id,
                    state=found.state,
                    message=found.message,
                )
            else:
                latest = self._latest(request.repo.full_name, root)
                if latest is None:
                    out.append(RootDeployment(root=root))
                    continue
                d = RootDeployment(
                    root=root,
                    revision=latest.revision,
                    deployment_id=latest.deployment_id,
                    state=latest.state,
                    message=latest.message,
                )
            if d.revision not in trees:
                mirror = self.mirror.ensure(request.repo, d.revision)
                trees[d.revision] = GitTree(mirror, d.revision)
            try:
                d.contains_patch = promotion.patch_active_at_root(
                    trees[d.revision], request.patch_id, root
                )
            except FleetError:
                d.contains_patch = False  # that revision's fleet does not even read
            out.append(d)
        return DeploymentsResult(deployments=out)

    def _latest(self, repo: str, root: str) -> LatestDeployment | None:
        raw = self.blobs.get(latest_key(repo, root))
        if raw is None:
            return None
        try:
            return LatestDeployment.model_validate_json(raw)
        except ValidationError:
            activity.logger.error("unreadable latest deployment", extra={"root": root})
            return None

    @activity.defn(name=ACT_PROMOTION_TOUCHED.name)
    async def touched(self, request: TouchedRequest) -> TouchedResult:
        ids = await blocking(self._touched, request)
        activity.logger.info(
            "patches touched",
            extra={"repo": request.repo.full_name, "after": request.after, "patches": ids},
        )
        return TouchedResult(patch_ids=ids)

    def _touched(self, request: TouchedRequest) -> list[str]:
        if is_zero(request.after):
            return []
        mirror = self.mirror.ensure(request.repo, request.after)
        base = request.before
        if is_zero(base) or not self.mirror.has_commit(request.repo, base):
            # A new branch or an unknown base: every patch file counts as touched (starting a
            # rollout that has nothing to do costs one evaluation; missing one costs a rollout).
            base = EMPTY_TREE
        return touched_patches(mirror, base, request.after)

    # --- writing ---------------------------------------------------------------------------

    @activity.defn(name=ACT_PROMOTION_COMMIT.name)
    async def commit(self, request: CommitRequest) -> CommitResult:
        with github_errors(), fleet_mistakes():
            result = await blocking(self._commit, request)
        activity.logger.info(
            "promotion committed" if result.committed else "promotion not needed",
            extra={
                "repo": request.repo.full_name,
                "patch": request.patch_id,
                "node": request.to_node,
                "revision": result.revision,
                "reason": result.message,
            },
        )
        return result

    def _commit(self, request: CommitRequest) -> CommitResult:
        repo = request.repo
        app = self.github.app_for(repo)
        for _ in range(COMMIT_ATTEMPTS):
            tip = branch_tip(app, repo.full_name, repo.default_branch)
            tree = GitTree(self.mirror.ensure(repo, tip), tip)
            roots = promotion.roots_under(tree, request.patch_id, request.to_node)
            if roots and all(
                promotion.patch_active_at_root(tree, request.patch_id, r) for r in roots
            ):
                return CommitResult(
                    revision=tip,
                    committed=False,
                    message=f"already active under {request.to_node} at {tip[:12]}",
                )
            try:
                change = promotion.plan_promotion(
                    tree, request.patch_id, to=request.to_node, actor=request.actor
                )
            except promotion.PromotionError as err:
                raise ApplicationError(str(err), type=ERR_PROMOTION, non_retryable=True) from None
            try:
                sha = commit_files(
                    app,
                    repo.full_name,
                    repo.default_branch,
                    tip,
                    change.writes,
                    change.deletes,
                    change.message,
                )
            except BranchMoved:
                continue  # someone pushed meanwhile: plan again on the new tip
            return CommitResult(revision=sha)
        # Retryable (Temporal tries again after a backoff, when the pushes may have calmed
        # down); typed so the workflow's history says what happened.
        raise ApplicationError(
            f"promoting {request.patch_id} to {request.to_node}: branch "
            f"{repo.default_branch} of {repo.full_name} kept moving (another push landed "
            f"between reading its tip and updating it, {COMMIT_ATTEMPTS} attempts)",
            type=ERR_BRANCH_MOVING,
        )

    @activity.defn(name=ACT_PROMOTION_ROLLBACK.name)
    async def rollback(self, request: RollbackRequest) -> RollbackResult:
        with github_errors(), fleet_mistakes():
            result = await blocking(self._rollback, request)
        # A retry after the revert committed finds it "already reverted": announced again,
        # which adds nothing when the event is written (its id names the reverted promotion).
        if result.reverted and self.announcer is not None and self.announcer.sinks:
            event = rollback_event(
                request.repo.full_name,
                request.patch_id,
                request.node,
                result.reverted,
                request.by,
                datetime.now(UTC),
            )
            await blocking(self.announcer.add, event)
        activity.logger.info(
            "promotion rolled back" if result.committed else "promotion not rolled back",
            extra={
                "repo": request.repo.full_name,
                "patch": request.patch_id,
                "node": request.node,
                "reverted": result.reverted,
                "revision": result.revision,
                "reason": result.message,
            },
        )
        return result

    def _rollback(self, request: RollbackRequest) -> RollbackResult:
        """Commit the revert of the latest promotion commit of the patch to the node: every
        file it wrote gets its parent's content back (or goes, when it added it)."""
        repo = request.repo
        app = self.github.app_for(repo)
        for _ in range(COMMIT_ATTEMPTS):
            tip = branch_tip(app, repo.full_name, repo.default_branch)
            mirror = self.mirror.ensure(repo, tip)
            promoted = promotion_commit(mirror, tip, request.patch_id, request.node)
            if promoted is None:
                return RollbackResult(
                    revision=tip,
                    committed=False,
                    message=f"no promotion commit of {request.patch_id} to {request.node} "
                    f"on {repo.default_branch}",
                )
            writes, deletes = revert_change(mirror, promoted, tip)
            if not writes and not deletes:
                return RollbackResult(
                    revision=tip,
                    committed=False,
                    reverted=promoted,
                    message=f"the promotion {promoted[:12]} is already reverted at {tip[:12]}",
                )
            message = (
                f"roll back {request.patch_id} at {request.node}\n\n"
                f"Reverts {promoted[:12]} (promote {request.patch_id} to {request.node}): "
                f"{request.reason}\n\n"
                f"{promotion.TRAILER_PATCH}: {request.patch_id}\n"
                f"{TRAILER_ROLLBACK}: {promoted}\n"
            )
            try:
                sha = commit_files(
                    app, repo.full_name, repo.default_branch, tip, writes, deletes, message
                )
            except BranchMoved:
                continue
            return RollbackResult(revision=sha, reverted=promoted)
        raise ApplicationError(
            f"rolling back {request.patch_id} at {request.node}: branch "
            f"{repo.default_branch} of {repo.full_name} kept moving ({COMMIT_ATTEMPTS} attempts)",
            type=ERR_BRANCH_MOVING,
        )

    @activity.defn(name=ACT_PROMOTION_GRADUATE.name)
    async def graduate(self, request: GraduateRequest) -> GraduateResult:
        with github_errors(), fleet_mistakes():
            result = await blocking(self._graduate, request)
        activity.logger.info(
            "graduation pull request",
            extra={
                "repo": request.repo.full_name,
                "patch": request.patch_id,
                "number": result.number,
                "already_open": result.already_open,
            },
        )
        return result

    def _graduate(self, request: GraduateRequest) -> GraduateResult:
        repo = request.repo
        app = self.github.app_for(repo)
        branch = GRADUATION_BRANCH.format(patch=request.patch_id)
        tip = branch_tip(app, repo.full_name, repo.default_branch)
        tree = GitTree(self.mirror.ensure(repo, tip), tip)
        try:
            change = promotion.plan_graduation(tree, request.patch_id)
        except promotion.PromotionError as err:
            raise ApplicationError(str(err), type=ERR_PROMOTION, non_retryable=True) from None
        title, _, body = change.message.partition("\n")
        existing = find_open_pull_request(
            app, repo.full_name, head=branch, base=repo.default_branch
        )
        if existing is not None:
            return GraduateResult(
                number=existing.number, url=existing.url, branch=branch, already_open=True
            )
        commit_files(
            app,
            repo.full_name,
            branch,
            tip,
            change.writes,
            change.deletes,
            change.message,
            create_branch=True,
        )
        pr = open_pull_request(
            app,
            repo.full_name,
            head=branch,
            base=repo.default_branch,
            title=title,
            body=body.strip() + "\n\nOpened by rollwright: the rollout of this patch is done.",
        )
        return GraduateResult(
            number=pr.number, url=pr.url, branch=branch, already_open=pr.already_open
        )


class PromotionSignals:
    """Starts and signals promotion workflows (needs the Temporal client)."""

    def __init__(self, client: Client, settings: Settings) -> None:
        self.client = client
        self.settings = settings

    @activity.defn(name=ACT_PROMOTION_SIGNAL.name)
    async def signal_promotions(self, request: SignalPromotionsRequest) -> None:
        """Signal-with-start the touched patches' workflows with the new revision, and hand
        the revision to every other running rollout of the repository (they re-read it)."""
        repo = request.repo
        signal = PromotionRevision(revision=request.revision)
        for patch_id in request.start:
            await self.client.start_workflow(
                PROMOTION_WORKFLOW,
                PromotionInput(repo=repo, patch_id=patch_id, revision=request.revision),
                id=promotion_workflow_id(repo.full_name, patch_id),
                task_queue=self.settings.task_queue,
                start_signal=SIGNAL_PROMOTION_REVISION,
                start_signal_args=[signal],
                search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(SearchAttributeKey.for_keyword(SA_REPO), repo.full_name)]
                ),
                static_summary=f"rollout of patch {patch_id} in {repo.full_name}",
            )
            beat()
        started = {promotion_workflow_id(repo.full_name, p) for p in request.start}
        for workflow_id in await self._running(repo.full_name):
            if workflow_id not in started:
                await self._signal(workflow_id, SIGNAL_PROMOTION_REVISION, signal)
        activity.logger.info(
            "promotions signalled",
            extra={"repo": repo.full_name, "revision": request.revision, "started": request.start},
        )

    @activity.defn(name=ACT_NOTIFY_PROMOTIONS.name)
    async def notify_promotions(self, request: NotifyPromotionsRequest) -> int:
        """Tell every running rollout of the repository that a deployment finished; each
        ignores roots outside its current node. Returns how many were told."""
        told = 0
        for workflow_id in await self._running(request.repo.full_name):
            if await self._signal(workflow_id, SIGNAL_DEPLOYMENT_FINISHED, request.finished):
                told += 1
        activity.logger.info(
            "promotions notified",
            extra={
                "repo": request.repo.full_name,
                "root": request.finished.root,
                "state": request.finished.state,
                "workflows": told,
            },
        )
        return told

    async def _running(self, repo: str) -> list[str]:
        query = (
            f"WorkflowType = '{PROMOTION_WORKFLOW}' AND {SA_REPO} = '{_quote(repo)}' "
            "AND ExecutionStatus = 'Running'"
        )
        return sorted({wf.id async for wf in self.client.list_workflows(query)})

    async def _signal(self, workflow_id: str, name: str, arg: object) -> bool:
        try:
            await self.client.get_workflow_handle(workflow_id).signal(name, arg)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:  # finished since the listing
                return False
            raise
        beat()
        return True


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


# --- pure parts (tested directly) ------------------------------------------------------------


def evaluate(tree: Tree, patch_id: str, now: datetime) -> Evaluation:
    """Where `patch_id` stands in `tree` (a revision of the default branch) at `now`."""
    revision = str(getattr(tree, "revision", ""))
    try:
        statuses = promotion.rollout_status(tree, patch_id)
    except promotion.PatchNotFound:
        return Evaluation(revision=revision, found=False)
    status = statuses[0]
    plan = promotion.rollout_plan(tree)
    covered = _covered([n.path for n in plan], status.active_nodes)
    infos = {n.path: NodeInfo(path=n.path, gate=n.gate, soak_seconds=n.soak_seconds) for n in plan}
    # The current and next steps carry their own gate and soak (a step may enter or complete
    # several nodes): they replace the plan's defaults for those rows.
    current = status.current_node
    for step in (current, status.next_node):
        if step is not None:
            infos[step.path] = NodeInfo(
                path=step.path, gate=step.gate, soak_seconds=step.soak_seconds
            )
    window = WindowInfo()
    if status.next_node is not None:
        settings = FleetConfig.load(tree).rollout
        state = window_state(settings, status.next_node.path, now.astimezone(UTC))
        window = WindowInfo(
            open=state.open,
            reason=state.reason,
            next_open=state.next_open,
            closes_at=state.closes_at,
        )
    return Evaluation(
        revision=revision,
        rollback=FleetConfig.load(tree).rollout.rollback,
        plan=[infos[n.path] for n in plan],
        active_nodes=covered,
        current_node=current.path if current else None,
        next_node=status.next_node.path if status.next_node else None,
        roots=promotion.roots_under(tree, patch_id, current.path) if current else [],
        node_roots={n.path: promotion.roots_under(tree, patch_id, n.path) for n in plan},
        unmet_dependencies=list(status.unmet_dependencies),
        graduation_ready=status.graduated_ready,
        conflicts=list(status.conflicts),
        window=window,
    )


TRAILER_ROLLBACK = "Rollwright-Rollback-Of"


def promotion_commit(mirror: Path, tip: str, patch_id: str, node: str) -> str | None:
    """The newest commit reachable from `tip` that promoted `patch_id` to `node` (by the
    trailers promotion commits carry), or None."""
    out = git(
        mirror,
        "log",
        "--format=%H%x00%(trailers:only,unfold)%x1e",
        f"--grep={promotion.TRAILER_NODE}: {node}",
        "--fixed-strings",
        tip,
    )
    for record in out.split("\x1e"):
        sha, _, trailers = record.strip().partition("\0")
        lines = {line.strip() for line in trailers.splitlines()}
        if (
            sha
            and f"{promotion.TRAILER_PATCH}: {patch_id}" in lines
            and f"{promotion.TRAILER_NODE}: {node}" in lines
        ):
            return sha
    return None


def revert_change(mirror: Path, commit: str, tip: str) -> tuple[dict[str, bytes], list[str]]:
    """What makes the files `commit` changed at `tip` read as in its parent: (writes,
    deletes); both empty when `tip` already has the parent's content."""
    parent = f"{commit}^"
    writes: dict[str, bytes] = {}
    deletes: list[str] = []
    for path in sorted(changed_files(mirror, parent, commit)):
        before = _blob(mirror, parent, path)
        now = _blob(mirror, tip, path)
        if before == now:
            continue
        if before is None:
            deletes.append(path)
        else:
            writes[path] = before
    return writes, deletes


def _blob(mirror: Path, revision: str, path: str) -> bytes | None:
    proc = run(["git", "-C", str(mirror), "cat-file", "blob", f"{revision}:{path}"], timeout=None)
    return proc.stdout if proc.ok else None


def _covered(paths: list[str], copies: list[str]) -> list[str]:
    """Plan nodes the patch is active on: a copy's node, everything under it, and a node all
    of whose leaves are covered (say, an environment whose regions each got a copy)."""
    leaves = [p for p in paths if not any(q.startswith(f"{p}/") for q in paths)]

    def under(path: str, top: str) -> bool:
        return path == top or path.startswith(f"{top}/")

    def leaf_covered(leaf: str) -> bool:
        return any(under(leaf, c) for c in copies)

    out = []
    for path in paths:
        mine = [leaf for leaf in leaves if under(leaf, path)]
        if mine and all(leaf_covered(leaf) for leaf in mine):
            out.append(path)
    return out


def touched_patches(repo: Path, before: str, after: str) -> list[str]:
    """Ids of the patch files (staged or node copies) added or changed in before..after."""
    ids: set[str] = set()
    tree = GitTree(repo, after)
    for path in sorted(changed_files(repo, before, after)):
        parts = path.split("/")
        if len(parts) < 4 or parts[0] != "config" or "patches" not in parts[3:-1]:
            continue
        if not path.endswith((".yaml", ".yml")) or not tree.is_file(path):
            continue  # deleted: the rollout notices on its next revision
        try:
            ids.add(load_patch(tree.read_text(path), path).id)
        except FleetError:
            continue  # a broken patch file fails its deployments' check runs instead
    return sorted(ids)


__all__ = ["PromotionActivities", "PromotionSignals", "evaluate", "touched_patches"]
