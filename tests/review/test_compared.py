"""Reviews name their base: the check run and the job page say what the diff compares
("compared with <revision> (deployment <id>, published <when>)" or "first deployment of this
root: everything is new") and show the deployed commit's subject, author and link. The render,
diff and store activities on a real git repository, the real engine and a file blob store; the
job page on the real gateway app."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from temporalio.testing import ActivityEnvironment

from activities.git import GitActivities
from activities.joblog import JobLog
from activities.render import RenderActivities
from activities.store import StoreActivities
from gateway.app import create_app
from gateway.dispatcher import Dispatcher
from shared.contracts.deploy import (
    CheckoutRequest,
    DeploymentRecord,
    DiffRequest,
    DiffSummary,
    LatestDeployment,
    PersistLatestRequest,
    RenderRequest,
    RenderSummary,
    RepoRef,
)
from shared.review.compared import ReviewContext, context_key
from shared.settings import Settings
from shared.stores.blob import FileBlobStore, job_log_key, latest_key
from shared.stores.gitmirror import GitMirror
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from shared.stores.sql.jobs import JobStore
from tests.support.atlas import make_fleet, one_app
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo, local_remote
from tests.support.machine import MACHINE_HEADERS, MACHINE_SECRET
from tests.support.pages import QueueRecorder

ROOT = "solo"
WEB = "https://github.example/acme/fleet"
T1 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


class World:
    def __init__(self, tmp: Path) -> None:
        self.repo = init_repo(tmp / "origin")
        make_fleet(self.repo, {"deployments/solo/apps/app/deployment.yaml": one_app()})
        self.settings = Settings(
            data_dir=tmp / "state", public_url="http://rollwright.test", api_token=MACHINE_SECRET
        )
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.blobs = FileBlobStore(tmp / "state" / "blobs")
        self.database = Database(self.settings.database)
        self.git = GitActivities(
            GitMirror(self.settings.git_dir, remote_for=local_remote), JobLog(self.blobs)
        )
        self.render = RenderActivities(self.settings, self.blobs)
        self.store = StoreActivities(self.blobs, self.database)
        self.env = ActivityEnvironment()
        self.ref = RepoRef(owner="acme", name="fleet", clone_url=str(self.repo), html_url=WEB)

    def run(self, fn: Any, *args: Any) -> Any:
        return asyncio.run(self.env.run(fn, *args))

    def commit(self, files: dict[str, Any], subject: str, author: str) -> str:
        write_files(self.repo, files)
        git(self.repo, "add", "-A")
        git(self.repo, "-c", f"user.name={author}", "commit", "-q", "-m", subject, "-m", "body")
        return git(self.repo, "rev-parse", "HEAD")

    def deploy(
        self, revision: str, deployment: str, old: str | None
    ) -> tuple[RenderSummary, DiffSummary]:
        checkout = self.run(self.git.checkout, CheckoutRequest(repo=self.ref, revision=revision))
        summary: RenderSummary = self.run(
            self.render.render_root,
            RenderRequest(
                repo=self.ref,
                root=ROOT,
                revision=revision,
                checkout_path=checkout.path,
                deployment_id=deployment,
            ),
        )
        self.run(self.git.cleanup_checkout, checkout)
        diff: DiffSummary = self.run(
            self.render.diff_render,
            DiffRequest(
                repo=self.ref,
                root=ROOT,
                new_prefix=summary.blob_prefix,
                old_prefix=old,
                deployment_id=deployment,
            ),
        )
        return summary, diff

    def persist(self, **fields: Any) -> None:
        latest = LatestDeployment(root=ROOT, trigger="merge", **fields)
        self.run(
            self.store.persist_latest, PersistLatestRequest(repo=self.ref, root=ROOT, latest=latest)
        )

    def latest(self) -> LatestDeployment:
        raw = self.blobs.get(latest_key(self.ref.full_name, ROOT))
        assert raw is not None
        return LatestDeployment.model_validate_json(raw)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_first_then_compared_with_the_published_deployment(world: World) -> None:
    first = world.commit({}, "Add the solo cluster", "Ada Lovelace")
    one, diff = world.deploy(first, "dep-1", None)
    assert diff.text.startswith(
        f"**Commit** [`{first[:12]}`]({WEB}/commit/{first}) Add the solo cluster — Ada Lovelace"
        "\n\n**First deployment of this root: everything is new.**\n\n"
    )
    world.persist(
        deployment_id="dep-1",
        revision=first,
        state="published",
        finished_at=T1,
        published_prefix=one.blob_prefix,
        published_revision=first,
    )
    assert (world.latest().published_deployment_id, world.latest().published_at) == ("dep-1", T1)

    second = world.commit(
        {"deployments/solo/cluster.values.yaml": {"greeting": "hi"}},
        "Say hi on solo",
        "Grace Hopper",
    )
    _, diff = world.deploy(second, "dep-2", one.blob_prefix)
    assert (
        f"**Compared with** [`{first[:12]}`]({WEB}/commit/{first}) (deployment `dep-1`, "
        "published 2026-03-01 09:30 UTC): the render published last."
    ) in diff.text
    assert "Say hi on solo — Grace Hopper" in diff.text
    context = ReviewContext.model_validate_json(world.blobs.get(context_key("dep-2")) or b"")
    assert context.comparison() == (
        f"compared with {first[:12]} (deployment dep-1, published 2026-03-01 09:30 UTC)"
    )
    assert any(
        line.get("compared", "").startswith("compared with")
        for line in JobLog(world.blobs).read("dep-2")
    )

    # A failed publish becomes latest but keeps the published base, and who published it.
    world.persist(
        deployment_id="dep-2",
        revision=second,
        state="failed",
        finished_at=T1,
        published_prefix=one.blob_prefix,
        published_revision=first,
    )
    assert world.latest().published_deployment_id == "dep-1"
    _, diff = world.deploy(second, "dep-3", one.blob_prefix)
    assert "(deployment `dep-1`, published 2026-03-01 09:30 UTC)" in diff.text


def test_nothing_published_yet_names_the_last_attempt(world: World) -> None:
    first = commit_all(world.repo, "fleet")
    world.persist(deployment_id="dep-0", revision=first, state="rejected")
    _, diff = world.deploy(first, "dep-1", None)
    assert (
        "**Nothing of this root has been published yet (its last deployment dep-0 ended "
        "rejected): everything is new.**"
    ) in diff.text


def test_the_job_page_shows_the_commit_and_the_base(world: World, tmp_path: Path) -> None:
    first = world.commit({}, "First", "Ada Lovelace")
    one, _ = world.deploy(first, "dep-1", None)
    world.persist(
        deployment_id="dep-1",
        revision=first,
        state="published",
        finished_at=T1,
        published_prefix=one.blob_prefix,
        published_revision=first,
    )
    second = world.commit({"deployments/solo/cluster.values.yaml": {"x": 1}}, "Second <b>", "Grace")
    world.deploy(second, "dep-2", one.blob_prefix)
    for dep, revision in (("dep-1", first), ("dep-2", second)):
        DeploymentStore(world.database).record(
            DeploymentRecord(
                deployment_id=dep,
                repo="acme/fleet",
                root=ROOT,
                revision=revision,
                trigger="merge",
                state="awaiting_review",
                at=T1,
            )
        )
        JobStore(world.database).start(dep, dep, "deployment", job_log_key(dep))
    app = create_app(
        world.settings, dispatcher=cast(Dispatcher, QueueRecorder()), database=world.database
    )
    with TestClient(app, headers=MACHINE_HEADERS) as client:
        page = client.get("/jobs/dep-2").text
        first_page = client.get("/jobs/dep-1").text
        api = client.get("/api/jobs/dep-2").json()
    assert '<dd id="commit">Second &lt;b&gt; <span class="muted">— Grace</span></dd>' in page
    assert f'<a href="{WEB}/commit/{first}"><code>{first[:12]}</code></a>' in page
    assert (
        '(deployment <a href="http://rollwright.test/jobs/dep-1"><code>dep-1</code></a>, published'
    ) in page
    assert "first deployment of this root: everything is new" in first_page
    assert api["review"]["base"]["deployment_id"] == "dep-1"
    assert api["review"]["commit"]["subject"] == "Second <b>"
