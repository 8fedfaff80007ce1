"""Whether `/rollwright hotfix` may deploy: the real `hotfix_judge` activity on real parts.
The example dimensions fleet in a real git repository the worker's mirror clones and
fetches (the pull request is a branch of it), rollwright.yaml's `hotfix` on the default
branch, and the GitHub emulator over HTTP answering the pull request, its reviews, its check
runs and statuses, the collaborator permission and team membership APIs. The sticky comment
is written through the emulator too."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.github import GitHubAccess
from activities.hotfix import HotfixActivities
from shared.contracts.deploy import RepoRef
from shared.contracts.hotfix import (
    HotfixCommand,
    HotfixCommentRequest,
    HotfixJudgeRequest,
    HotfixVerdict,
)
from shared.devstack.emulator.server import GitHubEmulator
from shared.settings import Settings
from shared.stores.gitmirror import GitMirror
from tests.support.github_app import app_settings
from tests.support.gitrepo import commit_all, git, init_repo, local_remote
from tests.support.paths import EXAMPLES

APP_ID, INSTALLATION, PR = 4344, 79, 12
ROOT = "management-cluster/stage/stage-sector-1/us-east1"
PROD = "management-cluster/prod/prod-sector-1/us-east1"
POLICY = """\
hotfix:
  roots: ["management-cluster/stage/*"]
  approvals: 1
  authorTeam: acme/sre
"""


class World:
    def __init__(self, tmp: Path, app_key: str, policy: str | None = POLICY) -> None:
        self.work = init_repo(tmp / "work")
        shutil.copytree(EXAMPLES / "dimensions-fleet", self.work, dirs_exist_ok=True)
        if policy is not None:
            (self.work / "rollwright.yaml").write_text(policy)
        commit_all(self.work, "fleet")
        # The pull request: a branch that also tries to loosen the rules it is judged by.
        git(self.work, "checkout", "-q", "-b", "fix")
        (self.work / "rollwright.yaml").write_text("hotfix:\n  approvals: 0\n  checks: false\n")
        self.head = commit_all(self.work, "a fix")
        git(self.work, "checkout", "-q", "main")
        self.remote = tmp / "remote.git"
        git(tmp, "clone", "-q", "--mirror", str(self.work), str(self.remote))
        self.emulator = GitHubEmulator(app_id=APP_ID, app_key=app_key)
        self.emulator.seed_repository("acme", "fleet", INSTALLATION, "main")
        self.emulator.set_pull(
            "acme", "fleet", PR, head_sha=self.head, head_ref="fix", user_login="sam"
        )
        for login in ("alice", "bob", "sam"):
            self.emulator.set_permission("acme", "fleet", login, "write")
        self.emulator.set_permission("acme", "fleet", "rita", "read")
        self.emulator.add_team_member("acme", "sre", "sam")
        self.emulator.start()
        settings: Settings = app_settings(tmp / "data", self.emulator, APP_ID, app_key)
        self.access = GitHubAccess(settings)
        self.repo = RepoRef(
            owner="acme", name="fleet", installation_id=INSTALLATION, clone_url=str(self.remote)
        )
        mirror = GitMirror(tmp / "git", remote_for=local_remote)
        self.hotfixes = HotfixActivities(self.access, mirror, None, settings)  # type: ignore[arg-type]

    def judge(self, by: str, *roots: str) -> HotfixVerdict:
        request = HotfixJudgeRequest(
            repo=self.repo, pr=PR, command=HotfixCommand(by=by, roots=list(roots))
        )
        verdict: HotfixVerdict = asyncio.run(
            ActivityEnvironment().run(self.hotfixes.hotfix_judge, request)
        )
        return verdict

    def close(self) -> None:
        self.access.close()
        self.emulator.stop()


@pytest.fixture
def world(tmp_path: Path, app_key: str) -> Iterator[World]:
    w = World(tmp_path, app_key)
    yield w
    w.close()


def test_a_hotfix_is_allowed_once_every_requirement_holds(world: World) -> None:
    emulator = world.emulator
    # Not approved yet, CI still running, a required status failed.
    emulator.add_foreign_check_run("acme", "fleet", world.head, "ci/test", conclusion=None)
    emulator.set_status("acme", "fleet", world.head, "ci/lint", "failure")
    first = world.judge("alice", ROOT)
    assert not first.allowed
    assert first.head_sha == world.head
    assert first.reasons == [
        f"1 approving review(s) of the head `{world.head[:12]}` by others than its author are "
        "needed; it has 0 (approvals of an earlier head do not count)",
        "check run `ci/test` on the head is queued",
        "status `ci/lint` on the head is failure",
    ]
    # The author's own approval does not count; another reviewer's does.
    emulator.add_review("acme", "fleet", PR, "sam", "APPROVED")
    emulator.add_review("acme", "fleet", PR, "bob", "APPROVED")
    emulator.add_foreign_check_run("acme", "fleet", world.head, "ci/test", conclusion="success")
    emulator.set_status("acme", "fleet", world.head, "ci/lint", "success")
    # rollwright's own check runs on the head (its preview) are not the pull request's checks
    emulator.add_foreign_check_run(
        "acme", "fleet", world.head, "rollwright/preview", conclusion="failure", app_id=APP_ID
    )
    verdict = world.judge("alice", ROOT)
    assert verdict.allowed, verdict.reasons
    assert verdict.met == [
        "@alice has write access",
        "the head is a branch of the repository, not a fork",
        "every root named exists at the head and may be hotfixed",
        "approved on the head by @bob",
        "the author @sam is in @acme/sre",
        "2 check(s) on the head are green",
    ]
    assert verdict.url.endswith(f"/acme/fleet/pull/{PR}")
    paths = {r.path for r in emulator.requests()}
    assert f"/repos/acme/fleet/commits/{world.head}/check-runs" in paths
    assert f"/repos/acme/fleet/commits/{world.head}/status" in paths
    assert "/orgs/acme/teams/sre/memberships/sam" in paths

    # Its sticky comment is the App's, edited in place.
    body = "<!-- rollwright:hotfix -->\nqueued"
    request = HotfixCommentRequest(repo=world.repo, pr=PR, body=body)
    env = ActivityEnvironment()
    first_id = asyncio.run(env.run(world.hotfixes.hotfix_comment, request))
    again = HotfixCommentRequest(repo=world.repo, pr=PR, body=body.replace("queued", "refused"))
    assert asyncio.run(env.run(world.hotfixes.hotfix_comment, again)) == first_id
    [comment] = emulator.comments("acme", "fleet", PR)
    assert comment.bodies[-1].endswith("refused")


def test_what_is_not_met_is_listed_whole(world: World) -> None:
    emulator = world.emulator
    emulator.add_review("acme", "fleet", PR, "bob", "APPROVED", commit_id="0" * 40)  # old head
    emulator.add_review("acme", "fleet", PR, "alice", "CHANGES_REQUESTED")
    emulator.set_pull(
        "acme", "fleet", PR, head_sha=world.head, head_ref="fix", user_login="mallory"
    )
    verdict = world.judge("rita", ROOT, PROD, "management-cluster/stage/nowhere")
    assert not verdict.allowed
    assert verdict.reasons == [
        "@rita has read access to acme/fleet: a hotfix needs write access",
        f"root `{PROD}` is not one hotfixes may deploy to (`management-cluster/stage/*`)",
        f"root `management-cluster/stage/nowhere` does not exist at the head `{world.head[:12]}`",
        "@alice requested changes",
        f"1 approving review(s) of the head `{world.head[:12]}` by others than its author are "
        "needed; it has 0 (approvals of an earlier head do not count)",
        "the author @mallory is not in @acme/sre",
    ]


def test_a_fork_or_a_closed_pull_request_is_refused(world: World) -> None:
    emulator = world.emulator
    emulator.add_review("acme", "fleet", PR, "bob", "APPROVED")
    emulator.set_pull(
        "acme",
        "fleet",
        PR,
        head_sha=world.head,
        head_ref="fix",
        user_login="sam",
        fork="mallory/fleet",
    )
    forked = world.judge("alice", ROOT)
    assert f"pull request #{PR} comes from a fork (mallory/fleet): only branches of the " in (
        " ".join(forked.reasons)
    )
    emulator.set_pull(
        "acme", "fleet", PR, head_sha=world.head, head_ref="fix", user_login="sam", state="closed"
    )
    assert f"pull request #{PR} is closed" in world.judge("alice", ROOT).reasons


def test_without_a_hotfix_section_on_the_default_branch_nobody_may(
    tmp_path: Path, app_key: str
) -> None:
    w = World(tmp_path, app_key, policy=None)
    try:
        verdict = w.judge("alice", ROOT)
    finally:
        w.close()
    # The pull request's own rollwright.yaml has a section: it does not count.
    assert not verdict.allowed
    assert verdict.reasons == [
        "hotfixes are off in acme/fleet: rollwright.yaml on `main` has no `hotfix` section"
    ]
