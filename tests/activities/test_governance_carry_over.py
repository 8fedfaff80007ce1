"""Approvals carried over from the pull request: the real `carry_over`
activity against the GitHub emulator over HTTP (the commit's pull requests, their reviews,
permissions and teams) and a file blob store holding the deployment's renders and the
fingerprints the preview stored for the pull request's last head."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio.testing import ActivityEnvironment

from activities.github import GitHubAccess
from activities.governance import GovernanceActivities
from activities.store import save_render
from shared.contracts.deploy import RepoRef
from shared.contracts.governance import (
    CarryOver,
    CarryOverRequest,
    OwnersRequirement,
    ReviewPolicy,
)
from shared.contracts.preview import preview_fingerprints_key
from shared.devstack.credentials import new_app_key
from shared.devstack.emulator.server import GitHubEmulator
from shared.engine.render import Render
from shared.review.diff import fingerprint
from shared.settings import Settings
from shared.stores.blob import FileBlobStore

REPO = RepoRef(owner="acme", name="fleet", installation_id=5)
ROOT = "staging/cluster-a"
HEAD, OLD_HEAD, MERGED = "a" * 40, "b" * 40, "c" * 40
OLD_FILES = {"web/web/web/ConfigMap_a.yaml": b"a: 1\n", "web/web/web/ConfigMap_b.yaml": b"b: 1\n"}
NEW_FILES = {"web/web/web/ConfigMap_a.yaml": b"a: 2\n", "web/web/web/ConfigMap_c.yaml": b"c: 1\n"}


class Setup:
    def __init__(
        self, emulator: GitHubEmulator, blobs: FileBlobStore, governance: GovernanceActivities
    ):
        self.emulator, self.blobs, self.governance = emulator, blobs, governance
        self.old = self.store("old", OLD_FILES)
        self.new = self.store("new", NEW_FILES)

    def store(self, label: str, files: dict[str, bytes]) -> str:
        prefix = f"renders/acme/fleet/{ROOT}/{label}/"
        save_render(self.blobs, prefix, label, Render(ROOT, files, files))
        return prefix

    def previewed(self, pr: int, head: str, old: dict[str, bytes], new: dict[str, bytes]) -> None:
        """What the preview stores for a pull request's head: each root's fingerprint."""
        digests = [Render(ROOT, f, f).file_digests for f in (old, new)]
        prints = {ROOT: fingerprint(*digests)}
        self.blobs.put(
            preview_fingerprints_key("acme/fleet", pr, head), json.dumps(prints).encode()
        )

    def carry(self, policy: ReviewPolicy | None = None) -> CarryOver:
        request = CarryOverRequest(
            repo=REPO,
            root=ROOT,
            revision=MERGED,
            deployment_id="d",
            policy=policy or ReviewPolicy(author="mergebot"),
            new_prefix=self.new,
            old_prefix=self.old,
        )
        result: CarryOver = asyncio.run(
            ActivityEnvironment().run(self.governance.carry_over, request)
        )
        return result


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    key = new_app_key()
    with GitHubEmulator(app_id=11, app_key=key) as emulator:
        emulator.seed_repository("acme", "fleet", 5)
        for login in ("alice", "bob", "olga", "carol"):
            emulator.set_permission("acme", "fleet", login, "write")
        emulator.set_permission("acme", "fleet", "rita", "read")
        emulator.set_pull(
            "acme",
            "fleet",
            12,
            head_sha=HEAD,
            state="closed",
            merged=True,
            merge_commit_sha=MERGED,
            user_login="carol",
        )
        settings = Settings(
            data_dir=tmp_path / "state",
            github_api_url=emulator.url,
            github_app_id="11",
            github_private_key=SecretStr(key),
        )
        access = GitHubAccess(settings)
        blobs = FileBlobStore(tmp_path / "blobs")
        try:
            yield Setup(emulator, blobs, GovernanceActivities(access, blobs))
        finally:
            access.close()


def test_an_approval_of_the_last_head_carries_over_when_the_diffs_match(setup: Setup) -> None:
    setup.previewed(12, HEAD, OLD_FILES, NEW_FILES)
    setup.emulator.add_review("acme", "fleet", 12, "alice", "APPROVED", commit_id=HEAD)
    setup.emulator.add_review("acme", "fleet", 12, "bob", "APPROVED", commit_id=OLD_HEAD)
    setup.emulator.add_review("acme", "fleet", 12, "rita", "APPROVED", commit_id=HEAD)
    setup.emulator.add_review("acme", "fleet", 12, "dan", "COMMENTED", commit_id=HEAD)
    carried = setup.carry()
    # bob approved an older head; rita cannot write
    assert (carried.pr, carried.approvers, carried.satisfies, carried.reason) == (
        12,
        ["alice"],
        ["policy"],
        "",
    )


def test_nothing_carries_over_when_the_diff_is_not_the_previewed_one(setup: Setup) -> None:
    setup.previewed(12, HEAD, OLD_FILES, {**NEW_FILES, "web/web/web/ConfigMap_c.yaml": b"c: 9\n"})
    setup.emulator.add_review("acme", "fleet", 12, "alice", "APPROVED", commit_id=HEAD)
    carried = setup.carry()
    assert carried.approvers == [] and "differs from the one previewed for #12" in carried.reason
    # nor without a preview of that head
    setup.blobs.delete(preview_fingerprints_key("acme/fleet", 12, HEAD))
    assert "was not previewed for this root at its last head" in setup.carry().reason


def test_a_withdrawn_approval_and_a_direct_push_carry_nothing(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup.previewed(12, HEAD, OLD_FILES, NEW_FILES)
    setup.emulator.add_review("acme", "fleet", 12, "alice", "APPROVED", commit_id=HEAD)
    setup.emulator.add_review("acme", "fleet", 12, "alice", "CHANGES_REQUESTED", commit_id=HEAD)
    assert setup.carry().reason == "#12 has no approval of its last head"
    monkeypatch.setattr("activities.governance.PULLS_SECONDS", 0.0)  # GitHub asked again
    setup.emulator.set_pull(
        "acme", "fleet", 12, head_sha=HEAD, state="closed", merged=True, merge_commit_sha="d" * 40
    )
    assert setup.carry().reason == "this commit did not come from a merged pull request"


def test_the_roots_of_a_commit_ask_github_for_its_pull_requests_once(setup: Setup) -> None:
    """A fleet-wide merge checks every root's carry-over: GitHub's list of the commit's pull
    requests is read once a minute, not once a root."""
    setup.previewed(12, HEAD, OLD_FILES, NEW_FILES)
    setup.emulator.add_review("acme", "fleet", 12, "alice", "APPROVED", commit_id=HEAD)
    before = len(setup.emulator.requests())
    outcomes = {setup.carry().reason for _ in range(5)}
    asked = [r for r in setup.emulator.requests()[before:] if r.path.endswith("/pulls")]
    assert len(outcomes) == 1 and len(asked) == 1


def test_a_commit_not_yet_linked_to_its_pull_request_is_asked_about_again(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitHub links a merge commit to its pull request within moments: an empty list is kept
    for a few seconds only, so the next root's carry-over sees the pull request."""
    monkeypatch.setattr("activities.governance.NO_PULLS_SECONDS", 0.0)
    setup.previewed(12, HEAD, OLD_FILES, NEW_FILES)
    setup.emulator.add_review("acme", "fleet", 12, "alice", "APPROVED", commit_id=HEAD)
    merged = {"head_sha": HEAD, "state": "closed", "merged": True}
    setup.emulator.set_pull("acme", "fleet", 12, **merged, merge_commit_sha="d" * 40)
    assert setup.carry().reason == "this commit did not come from a merged pull request"
    setup.emulator.set_pull("acme", "fleet", 12, **merged, merge_commit_sha=MERGED)
    assert setup.carry().reason != "this commit did not come from a merged pull request"


def test_approvals_meet_only_what_their_authors_may_approve(setup: Setup) -> None:
    setup.previewed(12, HEAD, OLD_FILES, NEW_FILES)
    for login in ("alice", "carol", "olga"):
        setup.emulator.add_review("acme", "fleet", 12, login, "APPROVED", commit_id=HEAD)
    owners = OwnersRequirement(
        name="owners:web", application="web", path="apps/web/OWNERS", owners=["olga"]
    )
    policy = ReviewPolicy(approvers=["carol", "bob"], distinct_approver=True, owners=[owners])
    carried = setup.carry(policy)
    # carol wrote the pull request: with distinctApprover her approval does not count
    assert carried.approvers == ["olga"] and carried.satisfies == ["owners:web"]
    assert "do not cover: an approver: @carol, @bob" in carried.reason
    assert "wants a distinct approver" in carried.reason
