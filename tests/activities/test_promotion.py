"""The promotion activities on real parts: the example dimensions fleet in a real git
repository served by the GitHub emulator (git data API over HTTP, PyGithub with App auth),
the worker's git mirror and a file blob store. Pushes the emulator sends are received by a
small HTTP server on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.github import GitHubAccess
from activities.promotion import (
    COMMIT_ATTEMPTS,
    ERR_BRANCH_MOVING,
    PromotionActivities,
    evaluate,
    touched_patches,
)
from shared.contracts.deploy import LatestDeployment, RepoRef
from shared.contracts.promotion import (
    CommitRequest,
    DeploymentFinished,
    DeploymentsRequest,
    GraduateRequest,
    RollbackRequest,
    TouchedRequest,
)
from shared.devstack.emulator.server import GitHubEmulator
from shared.engine.tree import GitTree
from shared.github.app import GitHubRequestError
from shared.github.gitdata import BranchMoved, branch_tip, commit_files
from shared.settings import Settings
from shared.stores.blob import FileBlobStore, latest_key
from shared.stores.gitmirror import GitMirror
from tests.support.gitrepo import commit_all, git, init_repo, local_remote
from tests.support.paths import EXAMPLES

APP_ID = 4242
INSTALLATION = 77
PATCH = "hypershift-v4.18-rollout"
STAGED = "config/management-cluster/hypershift-operator/patches/patch-001-hypershift-v4.18.yaml"
INT_COPY = (
    "config/management-cluster/hypershift-operator/integration/patches/"
    "patch-001-hypershift-v4.18.yaml"
)
APP_DIR = "config/management-cluster/hypershift-operator"


class Receiver:
    """Webhooks the emulator delivers, as (event, payload)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.arrived = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.received.append((self.headers["X-GitHub-Event"], json.loads(body)))
                owner.arrived.set()
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/events"

    def pushes(self) -> list[dict[str, Any]]:
        return [p for event, p in self.received if event == "push"]


class World:
    def __init__(self, tmp: Path, app_key: str) -> None:
        self.work = init_repo(tmp / "work")
        for source in (EXAMPLES / "dimensions-fleet").rglob("*"):
            if source.is_file():
                dest = self.work / source.relative_to(EXAMPLES / "dimensions-fleet")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(source.read_bytes())
        # Only the staged file: the rollout starts from nothing active.
        (self.work / INT_COPY).unlink()
        self.first = commit_all(self.work, "fleet with a staged patch")
        self.remote = tmp / "remote.git"
        git(tmp, "clone", "-q", "--bare", str(self.work), str(self.remote))
        self.receiver = Receiver()
        self.emulator = GitHubEmulator(
            app_id=APP_ID, app_key=app_key, webhook_url=self.receiver.url, webhook_secret="s"
        )
        self.emulator.seed_repository("acme", "fleet", INSTALLATION, "main", git_dir=self.remote)
        self.emulator.start()
        self.settings = Settings(
            data_dir=tmp / "data",
            github_api_url=self.emulator.url,
            github_app_id=str(APP_ID),
            github_private_key=SecretStr(app_key),
        )
        self.repo = RepoRef(
            owner="acme", name="fleet", installation_id=INSTALLATION, clone_url=str(self.remote)
        )
        self.access = GitHubAccess(self.settings)
        self.mirror = GitMirror(tmp / "git", remote_for=local_remote)
        self.blobs = FileBlobStore(tmp / "blobs")
        self.acts = PromotionActivities(self.mirror, self.blobs, self.access)

    def tip(self) -> str:
        return git(self.remote, "rev-parse", "refs/heads/main")

    def run(self, fn: Any, arg: Any) -> Any:
        return asyncio.run(ActivityEnvironment().run(fn, arg))

    def close(self) -> None:
        self.access.close()
        self.emulator.stop()
        self.receiver.server.shutdown()


@pytest.fixture
def world(tmp_path: Path, app_key: str) -> Iterator[World]:
    w = World(tmp_path, app_key)
    yield w
    w.close()


def test_promotion_commit_lands_on_the_default_branch_as_the_app(world: World) -> None:
    result = world.run(
        world.acts.commit,
        CommitRequest(
            repo=world.repo,
            patch_id=PATCH,
            to_node="integration/int-sector-1/us-central1",
            expected_revision=world.first,
        ),
    )
    assert result.committed and result.revision == world.tip()
    assert git(world.remote, "rev-parse", f"{result.revision}^") == world.first
    copy = f"{APP_DIR}/integration/int-sector-1/us-central1/patches/patch-001-hypershift-v4.18.yaml"
    shown = git(world.remote, "show", f"{result.revision}:{copy}")
    assert shown == git(world.remote, "show", f"{world.first}:{STAGED}")
    author = git(world.remote, "log", "-1", "--format=%an", result.revision)
    assert author == "rollwright[bot]"
    message = git(world.remote, "log", "-1", "--format=%B", result.revision)
    assert message.startswith(f"promote {PATCH} to integration/int-sector-1/us-central1")
    # GitHub sends a push for the moved branch; so does the emulator
    assert world.receiver.arrived.wait(10)
    push = world.receiver.pushes()[0]
    assert (push["before"], push["after"], push["ref"]) == (
        world.first,
        result.revision,
        "refs/heads/main",
    )
    assert push["pusher"]["name"] == "rollwright[bot]"
    assert copy in push["head_commit"]["added"]
    # the same promotion again: nothing to do, no second commit
    again = world.run(
        world.acts.commit,
        CommitRequest(
            repo=world.repo, patch_id=PATCH, to_node="integration/int-sector-1/us-central1"
        ),
    )
    assert not again.committed and again.revision == result.revision


def test_stale_parent_is_refused_as_a_moved_branch(world: World) -> None:
    app = world.access.app_for(world.repo)
    ahead = commit_files(app, "acme/fleet", "main", world.first, {"a.txt": b"a\n"}, [], "a")
    assert branch_tip(app, "acme/fleet", "main") == ahead
    with pytest.raises(BranchMoved):
        commit_files(app, "acme/fleet", "main", world.first, {"b.txt": b"b\n"}, [], "b")
    assert world.tip() == ahead
    # the activity plans on the tip it reads, so a moved branch still promotes
    result = world.run(
        world.acts.commit,
        CommitRequest(
            repo=world.repo, patch_id=PATCH, to_node="integration/int-sector-1/us-central1"
        ),
    )
    assert result.committed and git(world.remote, "rev-parse", f"{result.revision}^") == ahead


MAIN_REF = r"^/repos/acme/fleet/git/refs/heads/main$"
INT_NODE = "integration/int-sector-1/us-central1"
INT_US_COPY = f"{APP_DIR}/{INT_NODE}/patches/patch-001-hypershift-v4.18.yaml"


def _push_meanwhile(world: World, pushed: list[str]) -> Any:
    """A teammate's push that lands after the activity read the tip and before it moves the
    ref: each one edits the staged patch file (so the promotion's copy must be planned on it)."""

    def push() -> None:
        with (world.work / STAGED).open("a") as f:
            f.write(f"# edited meanwhile ({len(pushed) + 1})\n")
        pushed.append(commit_all(world.work, f"edit {len(pushed) + 1}"))
        git(world.work, "push", "-q", str(world.remote), "HEAD:main")

    return push


def _promotion_commits(world: World) -> list[str]:
    log = git(world.remote, "log", "--format=%H %s", f"{world.first}..main")
    return [line.split()[0] for line in log.splitlines() if line.split()[1] == "promote"]


def test_branch_moved_mid_commit_replans_on_the_new_tip(world: World) -> None:
    pushed: list[str] = []
    world.emulator.before_next("PATCH", MAIN_REF, _push_meanwhile(world, pushed))
    result = world.run(
        world.acts.commit, CommitRequest(repo=world.repo, patch_id=PATCH, to_node=INT_NODE)
    )
    # the first ref update was refused (the push landed in between), the second went through
    updates = [r.status for r in world.emulator.requests() if r.method == "PATCH"]
    assert updates == [422, 200]
    assert len(pushed) == 1 and result.committed and result.revision == world.tip()
    # a fast-forward on top of the other push: nothing lost, one promotion commit
    assert git(world.remote, "rev-parse", f"{result.revision}^") == pushed[0]
    assert _promotion_commits(world) == [result.revision]
    assert git(world.remote, "rev-list", "--count", f"{world.first}..main") == "2"
    # planned again on the new tip: the copy is the staged file as the other push left it
    edited = git(world.remote, "show", f"{pushed[0]}:{STAGED}")
    assert "edited meanwhile (1)" in edited
    assert git(world.remote, "show", f"{result.revision}:{INT_US_COPY}") == edited


def test_branch_that_keeps_moving_gives_up_retryably(world: World) -> None:
    pushed: list[str] = []
    world.emulator.before_next(
        "PATCH", MAIN_REF, _push_meanwhile(world, pushed), times=COMMIT_ATTEMPTS
    )
    request = CommitRequest(repo=world.repo, patch_id=PATCH, to_node=INT_NODE)
    with pytest.raises(ApplicationError) as err:
        world.run(world.acts.commit, request)
    assert not err.value.non_retryable and err.value.type == ERR_BRANCH_MOVING
    assert f"promoting {PATCH} to {INT_NODE}" in err.value.message
    assert f"{COMMIT_ATTEMPTS} attempts" in err.value.message
    # every attempt planned on a fresh tip and was refused; nothing of ours landed
    assert len(pushed) == COMMIT_ATTEMPTS and world.tip() == pushed[-1]
    assert _promotion_commits(world) == []
    # Temporal retries the activity: once the branch is quiet it lands on the newest tip
    result = world.run(world.acts.commit, request)
    assert git(world.remote, "rev-parse", f"{result.revision}^") == pushed[-1]
    assert _promotion_commits(world) == [result.revision]


def test_refused_promotion_is_a_non_retryable_error(world: World) -> None:
    with pytest.raises(ApplicationError) as err:
        world.run(
            world.acts.commit,
            CommitRequest(repo=world.repo, patch_id=PATCH, to_node="prod/prod-canary/us-east1"),
        )
    assert err.value.non_retryable and "would skip" in err.value.message


def test_emulator_validates_git_data_requests(world: World) -> None:
    token = world.emulator.issue_token(INSTALLATION)
    headers = {"Authorization": f"token {token}"}
    api = f"{world.emulator.url}/repos/acme/fleet"
    # bodies GitHub's schema refuses: answered 422 like GitHub, nothing reaches git
    missing = requests.post(f"{api}/git/refs", json={"ref": "refs/heads/x"}, headers=headers)
    assert missing.status_code == 422 and "sha" in json.dumps(missing.json()["errors"])
    bad_mode = requests.post(
        f"{api}/git/trees",
        json={"tree": [{"path": "a", "mode": "644", "type": "blob", "sha": world.first}]},
        headers=headers,
    )
    assert bad_mode.status_code == 422
    # GitHub's own refusals
    unknown = requests.post(
        f"{api}/git/refs", json={"ref": "refs/heads/x", "sha": "1" * 40}, headers=headers
    )
    assert unknown.status_code == 422 and "Object does not exist" in unknown.json()["message"]
    app = world.access.app_for(world.repo)
    with pytest.raises(GitHubRequestError) as gone:
        commit_files(app, "acme/fleet", "main", "2" * 40, {}, [], "unknown parent")
    assert gone.value.status == 404
    assert world.tip() == world.first


def test_graduation_opens_one_pull_request(world: World) -> None:
    # every environment gets a copy: active everywhere
    for env in ("integration", "stage", "prod"):
        dest = world.work / APP_DIR / env / "patches" / "patch-001-hypershift-v4.18.yaml"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes((world.work / STAGED).read_bytes())
    head = commit_all(world.work, "active everywhere")
    git(world.work, "push", "-q", str(world.remote), "main")
    first = world.run(world.acts.graduate, GraduateRequest(repo=world.repo, patch_id=PATCH))
    assert not first.already_open and first.branch == f"rollwright/graduate-{PATCH}"
    pull = world.emulator.pulls("acme", "fleet")[first.number]
    assert (pull["head_ref"], pull["base_ref"]) == (first.branch, "main")
    assert pull["title"].startswith(f"graduate {PATCH}")
    branch = git(world.remote, "rev-parse", f"refs/heads/{first.branch}")
    assert git(world.remote, "rev-parse", f"{branch}^") == head
    changed = git(world.remote, "diff", "--name-status", head, branch).splitlines()
    assert f"D\t{STAGED}" in changed and f"M\t{APP_DIR}/values.yaml" in changed
    second = world.run(world.acts.graduate, GraduateRequest(repo=world.repo, patch_id=PATCH))
    assert second.already_open and second.number == first.number


def test_touched_patches_and_evaluation(world: World) -> None:
    result = world.run(
        world.acts.commit,
        CommitRequest(
            repo=world.repo, patch_id=PATCH, to_node="integration/int-sector-1/us-central1"
        ),
    )
    mirror = world.mirror.ensure(world.repo, result.revision)
    assert touched_patches(mirror, world.first, result.revision) == [PATCH]
    touched = world.run(
        world.acts.touched,
        TouchedRequest(repo=world.repo, before=world.first, after=result.revision),
    )
    assert touched.patch_ids == [PATCH]
    new_branch = world.run(
        world.acts.touched,
        TouchedRequest(repo=world.repo, before="0" * 40, after=world.first),
    )
    assert new_branch.patch_ids == [PATCH]  # unknown base: every patch file counts
    ev = evaluate(GitTree(mirror, result.revision), PATCH, datetime.now(UTC))
    assert ev.current_node == "integration/int-sector-1/us-central1"
    assert ev.next_node == "integration/int-sector-1/europe-west1"
    assert ev.roots == ["management-cluster/integration/int-sector-1/us-central1"]
    assert "integration/int-sector-1/us-central1" in ev.active_nodes
    assert "integration" not in ev.active_nodes  # only one of its regions so far
    assert ev.window.open and not ev.conflicts and not ev.graduation_ready
    gone = evaluate(GitTree(mirror, result.revision), "no-such-patch", datetime.now(UTC))
    assert gone.found is False


def test_deployments_contain_the_patch_only_where_active(world: World) -> None:
    result = world.run(
        world.acts.commit,
        CommitRequest(
            repo=world.repo, patch_id=PATCH, to_node="integration/int-sector-1/us-central1"
        ),
    )
    root = "management-cluster/integration/int-sector-1/us-central1"
    before = LatestDeployment(
        deployment_id="d0", revision=world.first, trigger="merge", state="published"
    )
    world.blobs.put(latest_key("acme/fleet", root), before.model_dump_json().encode())
    found = world.run(
        world.acts.deployments, DeploymentsRequest(repo=world.repo, patch_id=PATCH, roots=[root])
    )
    assert found.deployments[0].state == "published"
    assert found.deployments[0].contains_patch is False  # deployed before the promotion
    reported = DeploymentFinished(
        root=root, revision=result.revision, deployment_id="d1", state="failed", message="boom"
    )
    found = world.run(
        world.acts.deployments,
        DeploymentsRequest(repo=world.repo, patch_id=PATCH, roots=[root], reported=[reported]),
    )
    d = found.deployments[0]
    assert (d.deployment_id, d.state, d.contains_patch, d.failed) == ("d1", "failed", True, True)


def test_rollback_reverts_the_promotion_commit_as_the_app(world: World) -> None:
    """`rollback: auto`: the revert of the node's promotion commit lands on the
    default branch like a promotion (through the App); done twice, it commits nothing."""
    node = "integration/int-sector-1/us-central1"
    copy = f"{APP_DIR}/{node}/patches/patch-001-hypershift-v4.18.yaml"
    promoted = world.run(
        world.acts.commit,
        CommitRequest(repo=world.repo, patch_id=PATCH, to_node=node, expected_revision=world.first),
    )
    app = world.access.app_for(world.repo)
    # someone else pushes meanwhile: the revert goes on top and keeps their change
    other = commit_files(app, "acme/fleet", "main", promoted.revision, {"x.txt": b"x\n"}, [], "x")
    request = RollbackRequest(
        repo=world.repo, patch_id=PATCH, node=node, reason="`mc/x`: deployment unhealthy"
    )
    result = world.run(world.acts.rollback, request)
    assert result.committed and result.reverted == promoted.revision
    assert result.revision == world.tip()
    assert git(world.remote, "rev-parse", f"{result.revision}^") == other
    files = git(world.remote, "ls-tree", "-r", "--name-only", result.revision).split()
    assert copy not in files and "x.txt" in files
    assert git(world.remote, "diff", "--name-only", world.first, result.revision).split() == [
        "x.txt"
    ]
    message = git(world.remote, "log", "-1", "--format=%B", result.revision)
    assert message.startswith(f"roll back {PATCH} at {node}")
    assert (
        "deployment unhealthy" in message
        and f"Rollwright-Rollback-Of: {promoted.revision}" in message
    )
    assert git(world.remote, "log", "-1", "--format=%an", result.revision) == "rollwright[bot]"
    again = world.run(world.acts.rollback, request)
    assert not again.committed and again.revision == result.revision
    assert "already reverted" in again.message
    never = world.run(
        world.acts.rollback, request.model_copy(update={"node": "stage/stage-sector-1"})
    )
    assert not never.committed and "no promotion commit" in never.message
