"""Delivery verification after publish (docs/verification.md).

`verify_plan` reads the root's `verify:` rule of `rollwright.yaml` at the deployment's revision
and fills in its templates. `verify_delivery` carries the plan out: it asks Argo CD for the
root's Applications until every one is `Synced` at the published commit and `Healthy`, then
runs the HTTP check, all within the plan's timeout. It heartbeats every poll; a worker that
dies mid-way is replaced by a retry on another worker, which keeps the first attempt's
deadline (carried in the heartbeat details), so a restart neither loses nor extends it.

Verdicts are results, not errors: `unhealthy` says why (Degraded, a failed sync, the timeout,
a refused token) with every Application's sync, health and conditions. The Argo CD token is
read from the worker's environment by the name the plan gives and goes nowhere but the
`Authorization` header: not into results, logs, heartbeats or exception messages.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import os
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from temporalio import activity

from activities.errors import fleet_mistakes
from activities.heartbeat import blocking
from activities.joblog import JobLog
from activities.publish_git import published_repo
from shared.contracts.activityrefs import (
    ACT_VERIFY_DELIVERY,
    ACT_VERIFY_PLAN,
)
from shared.contracts.verify import (
    ApplicationHealth,
    ArgoCDPlan,
    HttpPlan,
    PublishedSource,
    VerifyPlan,
    VerifyPlanRequest,
    VerifyPlanResult,
    VerifyRequest,
    VerifyResult,
)
from shared.engine.config.durations import duration_seconds
from shared.engine.config.fleet import FleetConfig
from shared.engine.config.publish import target_path
from shared.engine.tree import GitTree
from shared.process import run
from shared.stores.gitmirror import GitMirror, GitMirrorError, RevisionNotFound

log = logging.getLogger(__name__)

# One Argo CD or HTTP-check request; a slow answer is a missed poll, not a verdict.
REQUEST_TIMEOUT = 20.0
# Heartbeats while waiting between polls (the heartbeat timeout is a minute).
BEAT_SECONDS = 5.0
_FAILED_PHASES = ("Failed", "Error")


def plan_for(config: FleetConfig, req: VerifyPlanRequest) -> VerifyPlan | None:
    """The verify plan of `req.root`, or None when no rule applies to it."""
    rule = config.verify_rule(req.root)
    if rule is None:
        return None
    name = req.root.replace("/", "-")  # Kubernetes names and label values have no '/'
    argocd = None
    if rule.argocd is not None:
        argocd = ArgoCDPlan(
            server=rule.argocd.server.rstrip("/"),
            token_env=rule.argocd.token_env,
            applications=_fill(rule.argocd.applications, name),
            selector=_fill(rule.argocd.selector, name),
        )
    http = None
    if rule.http is not None:
        url = (
            rule.http.url.replace("{root}", urllib.parse.quote(req.root, safe="/"))
            .replace("{revision}", req.revision)
            .replace("{commit}", req.commit or "")
        )
        http = HttpPlan(
            url=url,
            status=rule.http.status,
            retries=rule.http.retries,
            interval_seconds=duration_seconds(rule.http.interval),
        )
    return VerifyPlan(
        root=req.root,
        revision=req.revision,
        commit=req.commit,
        source=_source(config, req),
        timeout_seconds=rule.timeout_seconds,
        interval_seconds=rule.interval_seconds,
        argocd=argocd,
        http=http,
    )


def _source(config: FleetConfig, req: VerifyPlanRequest) -> PublishedSource | None:
    """The published branch's repository when the App can read it (the fleet repo, or one of
    its owner's): a URL target is pushed with the worker's own credentials, and the
    installation token must not go there, so only its exact commit counts."""
    if config.publish.target != "git" or not req.commit:
        return None
    settings = config.publish.git
    try:
        published = published_repo(req.repo, settings)
    except ValueError:
        return None  # refused at publish already
    if published is None:
        return None
    return PublishedSource(repo=published, path=target_path(settings.path, req.root))


def _fill(template: str | None, name: str) -> str | None:
    return None if template is None else template.replace("{root}", name)


class VerifyPlans:
    """The `verify_plan` activity: `rollwright.yaml` at the revision, from the git mirror."""

    def __init__(self, mirror: GitMirror) -> None:
        self.mirror = mirror

    @activity.defn(name=ACT_VERIFY_PLAN.name)
    async def verify_plan(self, req: VerifyPlanRequest) -> VerifyPlanResult:
        with fleet_mistakes():
            return await blocking(self._plan, req)

    def _plan(self, req: VerifyPlanRequest) -> VerifyPlanResult:
        path = self.mirror.ensure(req.repo, req.revision)
        config = FleetConfig.load(GitTree(path, req.revision))
        return VerifyPlanResult(plan=plan_for(config, req))


class _Unreachable(Exception):
    """Argo CD or the check did not answer usefully (retried until the deadline)."""


class _Refused(Exception):
    """A definite no that waiting cannot change (a missing or refused token)."""


@dataclass
class _Watch:
    """What the last poll of Argo CD found."""

    applications: list[ApplicationHealth] = field(default_factory=list)
    verdict: VerifyResult | None = None  # set when the wait is over
    waiting_for: str = ""


class DeliveryVerifier:
    """The `verify_delivery` activity. `environ`: where tokens are looked up (the worker's
    environment; tests pass their own)."""

    def __init__(
        self,
        jobs: JobLog | None = None,
        environ: Mapping[str, str] | None = None,
        *,
        mirror: GitMirror | None = None,
    ):
        self.jobs = jobs or JobLog(None)
        self.environ = os.environ if environ is None else environ
        # Reads the published branch: is a later commit still the root's render?
        self.mirror = mirror

    @activity.defn(name=ACT_VERIFY_DELIVERY.name)
    async def verify_delivery(self, req: VerifyRequest) -> VerifyResult:
        plan = req.plan
        deadline = self._deadline(plan)
        self.jobs.write(req.deployment_id, "verifying", plan=plan.describe())
        result = await self._verify(plan, deadline)
        log.info(
            "delivery verification finished",
            extra={
                "root": plan.root,
                "revision": plan.revision,
                "deployment": req.deployment_id,
                "verdict": result.verdict,
                "reason": result.reason,
            },
        )
        self.jobs.write(
            req.deployment_id,
            f"verification: {result.verdict}",
            reason=result.reason,
            applications=[a.model_dump() for a in result.applications],
            http_status=result.http_status,
        )
        return result

    def _deadline(self, plan: VerifyPlan) -> float:
        """Wall-clock deadline (epoch seconds): an earlier attempt's, from its heartbeats, so
        a retry on another worker waits only for what is left."""
        details = activity.info().heartbeat_details if activity.in_activity() else ()
        if details and isinstance(details[0], dict) and "deadline" in details[0]:
            return float(details[0]["deadline"])
        return time.time() + plan.timeout_seconds

    def _beat(self, deadline: float, note: str) -> None:
        if activity.in_activity():
            activity.heartbeat({"deadline": deadline, "waiting_for": note})

    async def _verify(self, plan: VerifyPlan, deadline: float) -> VerifyResult:
        applications: list[ApplicationHealth] = []
        if plan.argocd is not None:
            watch = await self._argocd(plan, plan.argocd, deadline)
            if watch.verdict is not None:
                return watch.verdict
            applications = watch.applications
        if plan.http is not None:
            result = await self._http(plan.http, deadline)
            result.applications = applications
            return result
        return VerifyResult(
            verdict="verified",
            reason=f"Every Application ({len(applications)}) is Synced at "
            f"`{(plan.commit or '')[:12]}` and Healthy.",
            applications=applications,
        )

    # --- Argo CD ------------------------------------------------------------------------------

    async def _argocd(self, plan: VerifyPlan, argo: ArgoCDPlan, deadline: float) -> _Watch:
        token = self.environ.get(argo.token_env, "")
        if not token:
            return _Watch(
                verdict=VerifyResult(
                    verdict="unhealthy",
                    reason=f"Cannot ask Argo CD at {argo.server}: the worker's environment "
                    f"variable {argo.token_env} (verify.argocd.tokenEnv) is not set.",
                )
            )
        watch = _Watch(waiting_for="the first answer from Argo CD")
        problem = ""
        carries: dict[str, bool] = {}  # revision → holds the root's published render
        async with httpx.AsyncClient(
            base_url=argo.server,
            headers={"Authorization": f"Bearer {token}"},
            timeout=REQUEST_TIMEOUT,
        ) as client:
            while True:
                try:
                    items = await self._list(client, argo)
                    problem = ""
                    carried = await self._carried(plan, items, carries)
                    watch = _judge(plan, argo, items, carried)
                except _Refused as err:
                    return _Watch(verdict=VerifyResult(verdict="unhealthy", reason=str(err)))
                except _Unreachable as err:
                    problem = str(err)
                    log.warning("argo cd poll failed", extra={"root": plan.root, "error": problem})
                if watch.verdict is not None:
                    return watch
                if watch.waiting_for == "" and not problem:
                    return watch  # everything Synced and Healthy
                if time.time() >= deadline:
                    why = problem or f"still waiting for {watch.waiting_for}"
                    return _Watch(
                        verdict=VerifyResult(
                            verdict="unhealthy",
                            reason=f"Not verified within {_minutes(plan.timeout_seconds)}: {why}.",
                            applications=watch.applications,
                        )
                    )
                await self._pause(plan.interval_seconds, deadline, watch.waiting_for or problem)

    async def _list(self, client: httpx.AsyncClient, argo: ArgoCDPlan) -> list[dict[str, Any]]:
        params = {"selector": argo.selector} if argo.selector is not None else {}
        try:
            response = await client.get("/api/v1/applications", params=params)
        except httpx.HTTPError as err:
            # The exception's text names the URL only (the token is in a header).
            raise _Unreachable(
                f"listing Applications at {argo.server}: {type(err).__name__}"
            ) from None
        if response.status_code in (401, 403):
            raise _Refused(
                f"Argo CD at {argo.server} refused the token in {argo.token_env} "
                f"({response.status_code}): it needs `applications, get` on the root's "
                "Applications."
            )
        if response.status_code != 200:
            raise _Unreachable(
                f"listing Applications at {argo.server}: answer {response.status_code}"
            )
        try:
            body = response.json()
        except ValueError:
            raise _Unreachable(f"listing Applications at {argo.server}: not JSON") from None
        items = (body.get("items") or []) if isinstance(body, dict) else []
        if argo.applications is not None:
            pattern = argo.applications
            items = [i for i in items if fnmatch.fnmatchcase(_name(i), pattern)]
        return [i for i in items if isinstance(i, dict)]

    async def _carried(
        self, plan: VerifyPlan, items: list[dict[str, Any]], known: dict[str, bool]
    ) -> set[str]:
        """Revisions Applications are Synced at that are not the published commit and yet
        hold the root's render: commits on top of it (other roots publishing to the same
        branch) that leave the root's directory as the commit has it. Argo CD reports the
        branch's tip, so without this a busy branch would never verify."""
        source, commit = plan.source, plan.commit
        if source is None or not commit or self.mirror is None:
            return set()
        for item in items:
            revision = str(_dig(item, "status", "sync", "revision") or "")
            if revision and revision != commit and revision not in known:
                known[revision] = await asyncio.to_thread(self._holds, source, commit, revision)
        return {r for r, held in known.items() if held}

    def _holds(self, source: PublishedSource, commit: str, revision: str) -> bool:
        assert self.mirror is not None
        try:
            mirror = self.mirror.ensure(source.repo, commit, revision)
        except (GitMirrorError, RevisionNotFound) as err:
            log.warning("published branch not readable", extra={"error": str(err)})
            return False
        ancestor = run(
            ["git", "-C", str(mirror), "merge-base", "--is-ancestor", commit, revision],
            timeout=60,
        )
        if not ancestor.ok:
            return False
        path = source.path.rstrip("/")
        trees = [
            run(["git", "-C", str(mirror), "rev-parse", f"{rev}:{path}"], timeout=60)
            for rev in (commit, revision)
        ]
        return all(t.ok for t in trees) and trees[0].out.strip() == trees[1].out.strip()

    async def _pause(self, seconds: float, deadline: float, note: str) -> None:
        end = min(time.monotonic() + seconds, time.monotonic() + max(0.0, deadline - time.time()))
        while True:
            self._beat(deadline, note)
            left = end - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(BEAT_SECONDS, left))

    # --- HTTP check ---------------------------------------------------------------------------

    async def _http(self, check: HttpPlan, deadline: float) -> VerifyResult:
        status: int | None = None
        problem = ""
        async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT) as client:
            for attempt in range(check.retries + 1):
                self._beat(deadline, f"HTTP check, attempt {attempt + 1}")
                try:
                    status = (await client.get(check.url)).status_code
                    problem = f"answered {status}, expected {check.status}"
                except httpx.HTTPError as err:
                    status, problem = None, f"no answer ({type(err).__name__})"
                if status == check.status:
                    return VerifyResult(
                        verdict="verified",
                        reason=f"The HTTP check `{check.url}` answered {status}.",
                        http_status=status,
                    )
                if attempt == check.retries or time.time() >= deadline:
                    break
                await self._pause(check.interval_seconds, deadline, "the HTTP check")
        tries = f"{attempt + 1} attempt" + ("s" if attempt else "")
        return VerifyResult(
            verdict="unhealthy",
            reason=f"The HTTP check `{check.url}` failed after {tries}: {problem}.",
            http_status=status,
        )


def _judge(
    plan: VerifyPlan, argo: ArgoCDPlan, items: list[dict[str, Any]], carried: set[str]
) -> _Watch:
    """Where the root's Applications stand: a verdict, or what is still awaited ("" for
    nothing: all Synced at the commit, or at a later one that `carried` it, and Healthy)."""
    apps = [_health(item) for item in sorted(items, key=_name)]
    if not apps:
        which = argo.applications or argo.selector
        return _Watch(waiting_for=f"an Application matching `{which}` (none exists)")
    commit = plan.commit or ""
    for app, item in zip(apps, sorted(items, key=_name), strict=True):
        operation = _dig(item, "status", "operationState") or {}
        op_revision = _dig(operation, "syncResult", "revision") or _dig(
            operation, "operation", "sync", "revision"
        )
        if operation.get("phase") in _FAILED_PHASES and op_revision == commit:
            return _Watch(
                applications=apps,
                verdict=VerifyResult(
                    verdict="unhealthy",
                    reason=f"Argo CD's sync of `{app.name}` to `{commit[:12]}` failed: "
                    f"{operation.get('message') or operation.get('phase')}.",
                    applications=apps,
                ),
            )
        at_commit = app.sync == "Synced" and (app.revision == commit or app.revision in carried)
        if at_commit and app.health == "Degraded":
            return _Watch(
                applications=apps,
                verdict=VerifyResult(
                    verdict="unhealthy",
                    reason=f"`{app.name}` is Degraded at `{commit[:12]}`"
                    + (f": {app.health_message}" if app.health_message else "."),
                    applications=apps,
                ),
            )
    pending = [
        a
        for a in apps
        if not (a.sync == "Synced" and (a.revision == commit or a.revision in carried))
    ]
    if pending:
        names = ", ".join(f"`{a.name}` ({a.sync} at `{a.revision[:12]}`)" for a in pending)
        return _Watch(applications=apps, waiting_for=f"a sync to `{commit[:12]}`: {names}")
    unhealthy = [a for a in apps if a.health != "Healthy"]
    if unhealthy:
        names = ", ".join(f"`{a.name}` ({a.health})" for a in unhealthy)
        return _Watch(applications=apps, waiting_for=f"Healthy: {names}")
    return _Watch(applications=apps)


def _health(item: dict[str, Any]) -> ApplicationHealth:
    status = item.get("status") or {}
    operation = status.get("operationState") or {}
    op = operation.get("phase") or ""
    if op and operation.get("message"):
        op += f": {operation['message']}"
    return ApplicationHealth(
        name=_name(item),
        sync=_dig(status, "sync", "status") or "Unknown",
        revision=_dig(status, "sync", "revision") or "",
        health=_dig(status, "health", "status") or "Unknown",
        health_message=_dig(status, "health", "message") or "",
        operation=op,
        conditions=[
            f"{c.get('type', '')}: {c.get('message', '')}"
            for c in status.get("conditions") or []
            if isinstance(c, dict)
        ],
    )


def _name(item: dict[str, Any]) -> str:
    return str(_dig(item, "metadata", "name") or "")


def _dig(node: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _minutes(seconds: int) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds} s"
