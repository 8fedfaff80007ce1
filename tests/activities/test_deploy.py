"""The deploy activities on real git repositories, the real render engine, a filesystem blob
store and SQLite, run in Temporal's ActivityEnvironment (heartbeats, cancellation)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import heartbeat
from activities.dispatch import QueueActivities
from activities.errors import fleet_error as to_application_error
from activities.git import GitActivities
from activities.joblog import JobLog
from activities.publish import BlobPublisher, PublishActivities, marker_key
from activities.render import RenderActivities, full_diff_key
from activities.store import StoreActivities, load_render
from shared.contracts.deploy import (
    ERR_FLEET,
    AffectedRequest,
    CheckoutRequest,
    CheckoutResult,
    DeploymentRecord,
    DiffRequest,
    FleetRoots,
    LatestDeployment,
    LoadLatestRequest,
    PersistLatestRequest,
    PublishRequest,
    RelationRequest,
    RenderRequest,
    RenderSummary,
    RepoRef,
)
from shared.engine.secrets import sops
from shared.engine.secrets.sops import SopsError
from shared.settings import Settings
from shared.stores.blob import FileBlobStore, fleet_roots_key, latest_key
from shared.stores.gitmirror import GitMirror
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from tests.support.age import AgeKey, encrypt_yaml, generate_key
from tests.support.atlas import make_fleet, one_app
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo, local_remote

ROOTS = ["g/c1", "g/c2", "solo"]


def fleet_files() -> dict[str, Any]:
    return {
        "deployments/g/group.values.yaml": {"group": "g"},
        "deployments/g/c1/cluster.values.yaml": {"greeting": "hello"},
        "deployments/g/c1/apps/app/deployment.yaml": one_app(),
        "deployments/g/c2/apps/app/deployment.yaml": one_app(),
        "deployments/solo/apps/app/deployment.yaml": one_app(),
    }


@dataclasses.dataclass
class World:
    repo: Path
    ref: RepoRef
    settings: Settings
    blobs: FileBlobStore
    mirror: GitMirror
    git: GitActivities
    render: RenderActivities
    env: ActivityEnvironment

    def commit(self, files: dict[str, Any], message: str = "change") -> str:
        write_files(self.repo, files)
        return commit_all(self.repo, message)

    def head(self) -> str:
        return git(self.repo, "rev-parse", "HEAD")

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return asyncio.run(self.env.run(fn, *args))

    def in_workflow(self, workflow_id: str) -> None:
        self.env.info = dataclasses.replace(self.env.info, workflow_id=workflow_id)

    def render_at(self, revision: str, root: str, deployment: str) -> RenderSummary:
        self.in_workflow(deployment)
        checkout: CheckoutResult = self.run(
            self.git.checkout, CheckoutRequest(repo=self.ref, revision=revision)
        )
        try:
            summary: RenderSummary = self.run(
                self.render.render_root,
                RenderRequest(
                    repo=self.ref,
                    root=root,
                    revision=checkout.revision,
                    checkout_path=checkout.path,
                    deployment_id=deployment,
                ),
            )
        finally:
            self.run(self.git.cleanup_checkout, checkout)
        return summary


@pytest.fixture
def world(tmp_path: Path) -> World:
    repo = init_repo(tmp_path / "origin")
    make_fleet(repo, fleet_files())
    commit_all(repo, "fleet")
    settings = Settings(
        data_dir=tmp_path / "state", public_url="http://rollwright.test", worker_id="w1"
    )
    blobs = FileBlobStore(tmp_path / "state" / "blobs")
    mirror = GitMirror(settings.git_dir, remote_for=local_remote)
    return World(
        repo=repo,
        ref=RepoRef(owner="acme", name="fleet", clone_url=str(repo)),
        settings=settings,
        blobs=blobs,
        mirror=mirror,
        git=GitActivities(mirror, JobLog(blobs), blobs),
        render=RenderActivities(settings, blobs),
        env=ActivityEnvironment(),
    )


def fleet_error(info: pytest.ExceptionInfo[ApplicationError]) -> str:
    err = info.value
    assert err.type == ERR_FLEET and err.non_retryable
    return err.message


# --- affected roots ----------------------------------------------------------------------------


def test_affected_roots_between_two_pushes(world: World) -> None:
    before = world.head()
    after = world.commit({"deployments/g/c1/cluster.values.yaml": {"greeting": "hi"}})
    result = world.run(
        world.git.affected_roots, AffectedRequest(repo=world.ref, before=before, after=after)
    )
    assert (result.roots, result.all_roots) == (["g/c1"], False)
    group = world.commit({"deployments/g/group.values.yaml": {"group": "G"}})
    result = world.run(
        world.git.affected_roots, AffectedRequest(repo=world.ref, before=after, after=group)
    )
    assert result.roots == ["g/c1", "g/c2"]
    # every root of the pushed revision is noted for the fleet page, deployed or not
    noted = FleetRoots.model_validate_json(world.blobs.get(fleet_roots_key("acme/fleet")) or b"")
    assert (noted.revision, noted.roots) == (group, ROOTS)


@pytest.mark.parametrize(
    ("case", "reason"),
    [("forced", "forced push"), ("new-branch", "new branch"), ("unknown", "is unknown")],
)
def test_affected_roots_falls_back_to_every_root(world: World, case: str, reason: str) -> None:
    before = world.head()
    after = world.commit({"deployments/solo/cluster.values.yaml": {"x": 1}})
    request = AffectedRequest(
        repo=world.ref,
        before={"forced": before, "new-branch": "0" * 40, "unknown": "3" * 40}[case],
        after=after,
        forced=case == "forced",
    )
    result = world.run(world.git.affected_roots, request)
    assert result.roots == ROOTS
    assert result.all_roots
    assert reason in result.reason


def test_affected_roots_of_a_broken_fleet_is_a_fleet_error(world: World) -> None:
    before = world.head()
    after = world.commit({"rollwright.yaml": "layout: [not, a, layout]\n"})
    with pytest.raises(ApplicationError) as info:
        world.run(
            world.git.affected_roots, AffectedRequest(repo=world.ref, before=before, after=after)
        )
    assert "rollwright.yaml" in fleet_error(info)


def test_revision_relation(world: World) -> None:
    first = world.head()
    second = world.commit({"README.md": "two\n"})
    relation = world.git.revision_relation
    assert world.run(relation, RelationRequest(repo=world.ref, base=None, head=first)) == "first"
    assert world.run(relation, RelationRequest(repo=world.ref, base=first, head=second)) == "ahead"
    assert world.run(relation, RelationRequest(repo=world.ref, base=second, head=first)) == "behind"


# --- checkout, render, diff, publish -----------------------------------------------------------


def test_render_diff_and_publish(world: World) -> None:
    first = world.head()
    one = world.render_at(first, "g/c1", "dep-1")
    assert one.blob_prefix == f"renders/acme/fleet/g/c1/{first}/"
    assert one.file_count == 1 and one.digest.startswith("sha256:")
    meta = json.loads(world.blobs.get(one.blob_prefix + "digest.json") or b"")
    assert meta["digest"] == one.digest and meta["revision"] == first
    (name,) = meta["files"]
    assert name == "app/echo/app/ConfigMap_echo-values.yaml"
    assert b"hello" in (world.blobs.get(one.blob_prefix + "files/" + name) or b"")
    # the checkout was a worktree named after the deployment, and is gone after cleanup
    assert not (world.settings.git_dir / "checkouts" / "dep-1").exists()

    diff = world.run(
        world.render.diff_render,
        DiffRequest(
            repo=world.ref,
            root="g/c1",
            new_prefix=one.blob_prefix,
            old_prefix=None,
            deployment_id="dep-1",
        ),
    )
    assert (diff.added, diff.removed, diff.changed, diff.empty) == (1, 0, 0, False)

    second = world.commit({"deployments/g/c1/cluster.values.yaml": {"greeting": "bonjour"}})
    two = world.render_at(second, "g/c1", "dep-2")
    diff = world.run(
        world.render.diff_render,
        DiffRequest(
            repo=world.ref,
            root="g/c1",
            new_prefix=two.blob_prefix,
            old_prefix=one.blob_prefix,
            deployment_id="dep-2",
        ),
    )
    assert (diff.added, diff.removed, diff.changed) == (0, 0, 1)
    assert diff.full_key == full_diff_key("dep-2") == "jobs/dep-2/diff.md"
    assert "[Full diff](http://rollwright.test/jobs/dep-2)" in diff.text
    assert "bonjour" in diff.text and "hello" in diff.text
    assert (world.blobs.get(diff.full_key) or b"").decode().count("bonjour") >= 1

    same = world.run(
        world.render.diff_render,
        DiffRequest(
            repo=world.ref,
            root="g/c1",
            new_prefix=two.blob_prefix,
            old_prefix=two.blob_prefix,
            deployment_id="dep-3",
        ),
    )
    assert same.empty

    publish = PublishActivities(BlobPublisher(world.blobs, "file:///blobs"), JobLog(world.blobs))

    def request(deployment: str, summary: RenderSummary, revision: str) -> PublishRequest:
        return PublishRequest(
            repo=world.ref,
            root="g/c1",
            revision=revision,
            deployment_id=deployment,
            trigger="merge",
            approved_by="@octocat",
            checkout_path="/nowhere",
            blob_prefix=summary.blob_prefix,
        )

    result = world.run(publish.publish, request("dep-2", two, second))
    assert result.target == "file:///blobs/published/acme/fleet/g/c1/"
    assert not result.already_published
    published = world.blobs.get("published/acme/fleet/g/c1/" + name) or b""
    assert b"bonjour" in published
    marker = json.loads(world.blobs.get(marker_key("acme/fleet", "g/c1")) or b"")
    assert marker["deployment_id"] == "dep-2" and marker["files"] == [name]
    # the same deployment again (a retry after a timeout): nothing happens
    world.blobs.delete("published/acme/fleet/g/c1/" + name)
    again = world.run(publish.publish, request("dep-2", two, second))
    assert again.already_published
    assert not world.blobs.exists("published/acme/fleet/g/c1/" + name)
    # the job page's log of deployment dep-2, step by step
    log = JobLog(world.blobs).read("dep-2")
    assert [line["message"] for line in log] == [
        "checking out",
        "checked out",
        "render started",
        "rendered",
        "checkout removed",
        "diffed",
        "publishing",
        "published",
        "publishing",
        "published",
    ]
    assert log[1]["revision"] == second and log[5]["changed"] == 1
    assert all("activity" in line for line in log)  # the test environment names none
    assert all(log[i]["seconds"] >= 0 for i in (1, 3, 5))
    assert log[-1]["already_published"] is True

    # deleting the root deploys an empty render, which unpublishes its files
    third = _delete_root(world, "g/c1")
    empty = world.render_at(third, "g/c1", "dep-4")
    assert empty.file_count == 0
    assert load_render(world.blobs, empty.blob_prefix).files == {}
    world.blobs.put("published/acme/fleet/g/c1/" + name, published)
    result = world.run(publish.publish, request("dep-4", empty, third))
    assert not result.already_published
    assert list(world.blobs.list("published/acme/fleet/g/c1/")) == []


def _delete_root(world: World, root: str) -> str:
    git(world.repo, "rm", "-r", "-q", f"deployments/{root}")
    return commit_all(world.repo, f"remove {root}")


def test_an_unexpected_render_error_keeps_its_message_out(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Nothing real raises a non-fleet error on demand: a bug in the engine could, quoting the
    # value it choked on. Temporal stores the message and the check run shows it.
    secret = "hunter2-plaintext"

    def broken(path: Path, root: str, **_: object) -> None:
        raise KeyError(secret)  # the traceback shows source lines: keep the value out of them

    monkeypatch.setattr("activities.render.render_with_warnings", broken)
    head = world.commit({"deployments/solo/apps/app/deployment.yaml": one_app("web")})
    with caplog.at_level("DEBUG"), pytest.raises(ApplicationError) as info:
        world.render_at(head, "solo", "dep-odd")
    assert info.value.type == "KeyError" and not info.value.non_retryable
    assert "hunter2" not in str(info.value) and info.value.__cause__ is None
    assert "rendering root 'solo': an unexpected KeyError" in info.value.message
    assert "hunter2" not in caplog.text
    logged = [
        r for r in caplog.records if r.getMessage().startswith("activity raised an unexpected")
    ]
    assert len(logged) == 1 and "KeyError: (message withheld)" in logged[0].__dict__["traceback"]
    assert "hunter2" not in logged[0].__dict__["traceback"]
    failed = JobLog(world.blobs).read("dep-odd")[3]
    assert failed["message"] == "render failed" and "hunter2" not in failed["error"]


def test_render_of_a_broken_root_is_a_fleet_error(world: World) -> None:
    bad = world.commit({"deployments/solo/apps/app/deployment.yaml": one_app("no-such-template")})
    with pytest.raises(ApplicationError) as info:
        world.render_at(bad, "solo", "dep-bad")
    message = fleet_error(info)
    assert "no-such-template" in message
    assert "deployments/solo/apps/app/deployment.yaml" in message
    assert not world.blobs.exists(f"renders/acme/fleet/solo/{bad}/digest.json")
    failed = JobLog(world.blobs).read("dep-bad")[3]
    assert failed["message"] == "render failed" and failed["error"] == message
    assert not (world.settings.git_dir / "checkouts" / "dep-bad").exists()


def test_checkout_of_an_unknown_revision_is_not_retried(world: World) -> None:
    with pytest.raises(ApplicationError) as info:
        world.run(world.git.checkout, CheckoutRequest(repo=world.ref, revision="4" * 40))
    assert info.value.non_retryable and info.value.type == "RevisionNotFound"


def test_cleanup_refuses_foreign_paths(world: World, tmp_path: Path) -> None:
    with pytest.raises(ApplicationError) as info:
        world.run(world.git.cleanup_checkout, CheckoutResult(path=str(tmp_path), revision="x"))
    assert info.value.non_retryable
    assert tmp_path.exists()


def test_diff_of_a_missing_render_is_not_retried(world: World) -> None:
    with pytest.raises(ApplicationError) as info:
        world.run(
            world.render.diff_render,
            DiffRequest(
                repo=world.ref,
                root="solo",
                new_prefix="renders/acme/fleet/solo/nope/",
                old_prefix=None,
                deployment_id="d",
            ),
        )
    assert info.value.non_retryable and "no stored render" in info.value.message


# --- secrets never reach the blob store --------------------------------------------------------


@pytest.fixture
def age_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgeKey:
    for name in ("SOPS_AGE_KEY", "SOPS_AGE_KEY_CMD", "SOPS_AGE_SSH_PRIVATE_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    key = generate_key(tmp_path / "keys")
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key.key_file))
    sops.clear_cache()
    return key


def test_secret_rotation_is_stored_redacted_and_shows_in_the_diff(
    world: World, age_key: AgeKey
) -> None:
    secret_file = "deployments/solo/cluster.values.sops.yaml"
    first = world.commit(
        {secret_file: encrypt_yaml({"dbPassword": "hunter2-correct-horse"}, [age_key.recipient])}
    )
    old = world.render_at(first, "solo", "dep-s1")
    second = world.commit(
        {secret_file: encrypt_yaml({"dbPassword": "wombat7-staples-fence"}, [age_key.recipient])}
    )
    new = world.render_at(second, "solo", "dep-s2")
    assert old.digest != new.digest  # the plaintext changed
    diff = world.run(
        world.render.diff_render,
        DiffRequest(
            repo=world.ref,
            root="solo",
            new_prefix=new.blob_prefix,
            old_prefix=old.blob_prefix,
            deployment_id="dep-s2",
        ),
    )
    # same shape, so the redacted text is identical: only the plaintext digests tell
    assert diff.changed == 1 and not diff.empty
    assert "Redacted values changed (not shown): `/0/data/values.json`" in diff.text
    # every object rollwright wrote: renders, digests, the full diff
    stored = b"".join(f.read_bytes() for f in world.blobs.root.rglob("*") if f.is_file())
    assert b'"dbPassword":"REDACTE-REDACTE-REDAC"' in stored
    for plaintext in (b"hunter2-correct-horse", b"wombat7-staples-fence", b"hunter2", b"wombat"):
        assert plaintext not in stored
        assert plaintext.decode() not in diff.text


def test_a_render_publishing_would_refuse_fails_before_review(
    world: World, age_key: AgeKey
) -> None:
    """Secret values, a git target and `publish.secrets: refuse` (the default): the render
    fails with rollwright.yaml's line, before a reviewer is asked to approve what publishing
    would refuse; with `secrets: sops` it renders."""
    refusing = world.commit(
        {
            "rollwright.yaml": {"publish": {"target": "git"}},
            "deployments/solo/cluster.values.sops.yaml": encrypt_yaml(
                {"dbPassword": "hunter2-correct-horse"}, [age_key.recipient]
            ),
        }
    )
    with pytest.raises(ApplicationError) as info:
        world.render_at(refusing, "solo", "dep-refused")
    message = fleet_error(info)
    assert message.startswith('rollwright.yaml:2: root "solo" renders secret values in 1 file(s)')
    assert "`publish.secrets: sops`" in message and "hunter2" not in message
    assert JobLog(world.blobs).read("dep-refused")[-2]["message"] == "render failed"
    # a root without secrets renders as before; so does this one once sops re-encrypts
    world.render_at(refusing, "g/c2", "dep-plain")
    allowed = world.commit({"rollwright.yaml": {"publish": {"target": "git", "secrets": "sops"}}})
    assert world.render_at(allowed, "solo", "dep-sops").file_count


# --- latest.json and SQL -----------------------------------------------------------------------


def test_latest_round_trip(world: World, tmp_path: Path) -> None:
    store = StoreActivities(world.blobs, Database(f"sqlite:///{tmp_path / 'db.sqlite'}"))
    lookup = LoadLatestRequest(repo=world.ref, root="g/c1")
    assert world.run(store.load_latest, lookup).latest is None
    latest = LatestDeployment(
        deployment_id="dep-1",
        revision="a" * 40,
        trigger="manual",
        state="published",
        finished_at=datetime(2025, 1, 2, tzinfo=UTC),
        published_prefix="renders/x/",
        locks_queue=True,
    )
    world.run(
        store.persist_latest, PersistLatestRequest(repo=world.ref, root="g/c1", latest=latest)
    )
    assert world.blobs.exists(latest_key("acme/fleet", "g/c1"))
    assert world.run(store.load_latest, lookup).latest == latest

    world.blobs.put(latest_key("acme/fleet", "g/c1"), b'{"deployment_id": 3}')
    with pytest.raises(RuntimeError, match="not a valid latest deployment") as info:
        world.run(store.load_latest, lookup)
    assert not isinstance(info.value, ApplicationError)  # retried until someone repairs it


def test_record_deployment(world: World, sql_url: str) -> None:
    database = Database(sql_url)
    store = StoreActivities(world.blobs, database)
    record = DeploymentRecord(
        deployment_id="dep-1",
        repo="acme/fleet",
        root="g/c1",
        revision="a" * 40,
        trigger="merge",
        state="awaiting_review",
        added=1,
        removed=0,
        changed=2,
        at=datetime(2025, 1, 2, tzinfo=UTC),
    )
    world.run(store.record_deployment, record)
    world.run(store.record_deployment, record.model_copy(update={"state": "published"}))
    world.run(store.record_deployment, record.model_copy(update={"state": "published"}))
    deployments = DeploymentStore(database)
    (row,) = deployments.in_repo("acme/fleet")
    assert (row.deployment_id, row.state, row.changed) == ("dep-1", "published", 2)
    assert row.finished_at is not None
    assert [e.state for e in deployments.events("dep-1")] == ["awaiting_review", "published"]
    database.close()


def test_worker_task_queue(world: World) -> None:
    queues = QueueActivities(world.settings, cast(Client, None))  # no Temporal call here
    assert world.run(queues.worker_task_queue) == "rollwright/w1"


# --- heartbeats and cancellation ---------------------------------------------------------------


def test_blocking_work_heartbeats() -> None:
    env = ActivityEnvironment()
    beats: list[Any] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    release = threading.Event()

    def work() -> str:
        release.wait(5)
        return "done"

    async def activity_body() -> str:
        asyncio.get_running_loop().call_later(0.35, release.set)
        return await heartbeat.blocking(work, interval=0.05)

    assert asyncio.run(env.run(activity_body)) == "done"
    assert len(beats) >= 4  # one at the start, then every 50 ms while the thread works


def test_blocking_work_is_cancellable() -> None:
    env = ActivityEnvironment()
    release = threading.Event()
    finished = threading.Event()

    def work() -> None:
        release.wait(5)
        finished.set()

    async def activity_body() -> None:
        await heartbeat.blocking(work, interval=0.05)

    async def scenario() -> None:
        task = asyncio.ensure_future(env.run(activity_body))
        await asyncio.sleep(0.2)
        env.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()  # the thread finishes on its own, its outcome discarded
        await asyncio.to_thread(finished.wait, 5)

    asyncio.run(scenario())
    assert finished.is_set()


def test_heartbeat_outside_an_activity_is_a_no_op() -> None:
    assert asyncio.run(heartbeat.blocking(lambda: 7, interval=0.01)) == 7


def test_sops_outage_is_retried_but_a_bad_file_is_not() -> None:
    timeout = SopsError("sops did not finish", path="x.sops.yaml", retryable=True)
    assert not to_application_error(timeout.within('rendering root "a"')).non_retryable
    broken = SopsError("cannot decrypt", path="x.sops.yaml")
    wrapped = to_application_error(broken.within('rendering root "a"'))
    assert wrapped.non_retryable and wrapped.type == ERR_FLEET
    assert wrapped.message == 'x.sops.yaml: rendering root "a": cannot decrypt'
