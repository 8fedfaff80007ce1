"""Who may click Unlock and a rollout's buttons: the real `judge_action` activity on real
parts. The example dimensions fleet (with its staged patch) in a real git repository the
worker's mirror clones and fetches, a `review:` section in its rollwright.yaml, and the GitHub
emulator over HTTP answering the collaborator permission and team membership APIs."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.authority import ActionJudge
from activities.github import GitHubAccess
from shared.contracts.deploy import RepoRef
from shared.contracts.governance import ActionRequest, GovernedAction, Verdict
from shared.devstack.emulator.server import GitHubEmulator
from shared.stores.gitmirror import GitMirror
from tests.support.github_app import app_settings
from tests.support.gitrepo import commit_all, git, init_repo, local_remote
from tests.support.paths import EXAMPLES

APP_ID, INSTALLATION = 4343, 78
PATCH = "hypershift-v4.18-rollout"  # the example fleet's staged patch
STAGE_ROOTS = [
    "management-cluster/stage/stage-sector-1/europe-west1",
    "management-cluster/stage/stage-sector-1/us-east1",
]
POLICY = """\
review:
  admins: [root-admin]
  rules:
    - environments: [stage, "prod*"]
      approvers: [{approvers}]
"""


class World:
    def __init__(self, tmp: Path, app_key: str) -> None:
        self.work = init_repo(tmp / "work")
        shutil.copytree(EXAMPLES / "dimensions-fleet", self.work, dirs_exist_ok=True)
        self.first = self.commit_policy("alice, '@acme/sre'")
        self.remote = tmp / "remote.git"
        git(tmp, "clone", "-q", "--bare", str(self.work), str(self.remote))
        self.emulator = GitHubEmulator(app_id=APP_ID, app_key=app_key)
        self.emulator.seed_repository("acme", "fleet", INSTALLATION, "main")
        for login in ("alice", "bob", "sam", "root-admin"):
            self.emulator.set_permission("acme", "fleet", login, "write")
        self.emulator.set_permission("acme", "fleet", "rita", "read")
        self.emulator.add_team_member("acme", "sre", "sam")
        self.emulator.start()
        self.access = GitHubAccess(app_settings(tmp / "data", self.emulator, APP_ID, app_key))
        self.repo = RepoRef(
            owner="acme", name="fleet", installation_id=INSTALLATION, clone_url=str(self.remote)
        )
        self.judge = ActionJudge(self.access, GitMirror(tmp / "git", remote_for=local_remote))

    def commit_policy(self, approvers: str, text: str | None = None) -> str:
        (self.work / "rollwright.yaml").write_text(text or POLICY.format(approvers=approvers))
        return commit_all(self.work, "review policy")

    def push(self) -> None:
        git(self.work, "push", "-q", str(self.remote), "main")

    def click(self, action: GovernedAction, by: str | None, **where: str | None) -> Verdict:
        request = ActionRequest(repo=self.repo, action=action, actor=by, **where)
        verdict: Verdict = asyncio.run(ActivityEnvironment().run(self.judge.judge_action, request))
        return verdict

    def close(self) -> None:
        self.access.close()
        self.emulator.stop()


@pytest.fixture
def world(tmp_path: Path, app_key: str) -> Iterator[World]:
    w = World(tmp_path, app_key)
    yield w
    w.close()


def test_unlock_is_judged_by_the_roots_policy_at_the_tip_of_the_default_branch(
    world: World,
) -> None:
    root = STAGE_ROOTS[1]
    rita = world.click("unlock", "rita", root=root)
    assert not rita.counts and rita.permission == "read"
    assert "@rita has read access to acme/fleet" in rita.reason
    bob = world.click("unlock", "bob", root=root)
    assert not bob.counts and bob.permission == "write"
    assert bob.reason == (
        f"@bob may not unlock `{root}` (review.rules[0]): only an approver: @alice, @acme/sre, "
        "@root-admin"
    )
    assert world.click("unlock", "sam", root=root).counts  # through @acme/sre
    assert world.click("unlock", "alice", root=root).counts
    assert world.click("unlock", "root-admin", root=root).counts
    # a root no rule matches: anyone with write access
    assert world.click(
        "unlock", "bob", root="management-cluster/integration/int-sector-1/us-central1"
    ).counts
    paths = {r.path for r in world.emulator.requests()}
    assert "/repos/acme/fleet/collaborators/sam/permission" in paths
    assert "/orgs/acme/teams/sre/memberships/sam" in paths

    # The policy in force is the tip's: a merged change to it applies to the next click.
    world.commit_policy("bob")
    world.push()
    assert world.click("unlock", "bob", root=root).counts
    assert not world.click("unlock", "alice", root=root).counts


def test_a_rollout_click_is_judged_by_the_roots_of_its_node(world: World) -> None:
    stage = world.click("promote", "bob", patch_id=PATCH, node="stage", revision=world.first)
    assert not stage.counts
    assert stage.reason.startswith(f"@bob may not promote the rollout to `{STAGE_ROOTS[0]}`")
    assert world.click(
        "promote", "alice", patch_id=PATCH, node="stage", revision=world.first
    ).counts
    # integration's roots have no rule: anyone with write access; never without it
    integration = {"patch_id": PATCH, "node": "integration", "revision": world.first}
    assert world.click("halt", "bob", **integration).counts
    refused = world.click("halt", "rita", **integration)
    assert (
        not refused.counts and "only people with write access may halt a rollout" in refused.reason
    )
    # a rollout on no node yet: write access is all it takes
    assert world.click("halt", "bob", patch_id=PATCH, node=None, revision=world.first).counts


def test_a_policy_that_cannot_be_read_refuses_every_click(world: World) -> None:
    world.commit_policy("", text="review:\n  rules: [{approvers: ['@acme']}]\n")
    world.push()
    verdict = world.click("unlock", "root-admin", root=STAGE_ROOTS[0])
    assert not verdict.counts
    assert verdict.reason.startswith("the review policy cannot be read (")
    assert "neither a GitHub login nor a team" in verdict.reason


def test_a_click_that_does_not_say_who_made_it_asks_nobody(world: World) -> None:
    verdict = world.click("unlock", None, root=STAGE_ROOTS[0])
    assert (verdict.counts, verdict.reason) == (False, "the click does not say who made it")
    assert world.emulator.requests() == []
