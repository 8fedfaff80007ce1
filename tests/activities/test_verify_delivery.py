"""The real `verify_delivery` activity against the fake Argo CD over HTTP, its applications
following a real git branch several roots publish to: Argo CD reports the branch's tip, so a
later commit that leaves the root's directory as published still counts; one that changes it
does not."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.verify import DeliveryVerifier
from shared.contracts.deploy import RepoRef
from shared.contracts.verify import (
    ArgoCDPlan,
    PublishedSource,
    VerifyPlan,
    VerifyRequest,
    VerifyResult,
)
from shared.devstack.argocd import FakeArgoCD
from shared.stores.gitmirror import GitMirror
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo, local_remote

TOKEN, TOKEN_ENV = "t0ken-for-argocd", "TEST_ARGOCD_TOKEN"


def publish(repo: Path, files: dict[str, str]) -> str:
    """A commit on the `rendered` branch (what the git publisher makes)."""
    git(repo, "checkout", "-q", "rendered")
    write_files(repo, files)
    return commit_all(repo, "publish")


def verify(repo: Path, fake: FakeArgoCD, commit: str, tmp: Path, timeout: int = 4) -> VerifyResult:
    ref = RepoRef(owner="acme", name="fleet", clone_url=str(repo))
    plan = VerifyPlan(
        root="prod/a",
        revision="f" * 40,
        commit=commit,
        source=PublishedSource(repo=ref, path="prod/a/"),
        timeout_seconds=timeout,
        interval_seconds=1,
        argocd=ArgoCDPlan(server=fake.url, token_env=TOKEN_ENV, applications="prod-a"),
    )
    verifier = DeliveryVerifier(
        environ={TOKEN_ENV: TOKEN}, mirror=GitMirror(tmp / "git", remote_for=local_remote)
    )
    request = VerifyRequest(repo=ref, deployment_id="dep-1", plan=plan)
    result: VerifyResult = asyncio.run(ActivityEnvironment().run(verifier.verify_delivery, request))
    return result


def fleet(tmp: Path) -> tuple[Path, FakeArgoCD]:
    repo = init_repo(tmp / "fleet")
    commit_all(repo, "fleet")
    git(repo, "checkout", "-q", "-b", "rendered")
    fake = FakeArgoCD(token=TOKEN, git_dir=repo).start()
    fake.add_application("prod-a", path="prod/a", target_revision="rendered")
    return repo, fake


def test_a_later_commit_of_another_root_still_holds_the_render(tmp_path: Path) -> None:
    repo, fake = fleet(tmp_path)
    try:
        ours = publish(repo, {"prod/a/cm.yaml": "a: 1\n"})
        theirs = publish(repo, {"prod/b/cm.yaml": "b: 1\n"})  # before Argo CD looked
        result = verify(repo, fake, ours, tmp_path)
        assert result.verdict == "verified", result.reason
        status = fake.application("prod-a")["status"]
        assert status["sync"]["revision"] == theirs  # Argo CD is at the tip, not at ours
    finally:
        fake.stop()


@pytest.mark.slow
def test_a_later_commit_that_changed_the_root_does_not_count(tmp_path: Path) -> None:
    repo, fake = fleet(tmp_path)
    try:
        ours = publish(repo, {"prod/a/cm.yaml": "a: 1\n"})
        later = publish(repo, {"prod/a/cm.yaml": "a: 2\n"})  # the root's next publish
        result = verify(repo, fake, ours, tmp_path, timeout=3)
        assert result.verdict == "unhealthy"
        assert "Not verified within 3 s" in result.reason
        assert later[:12] in result.reason
    finally:
        fake.stop()
