"""End to end: a promotion halted by a Degraded node and rolled back with
`rollout.rollback: auto`, on the embedded stack.

The real Temporal dev server, worker and gateway processes, the GitHub emulator serving a git
repository of examples/dimensions-fleet, and the stack's fake Argo CD, whose Application of the
first integration root follows the `rendered` branch the worker publishes to. The staged patch
is promoted to that root; its deployment is approved, published to git and verified: Argo CD
syncs the published commit and reports Degraded, so the deployment ends `unhealthy`, the
rollout halts and commits the revert of its promotion through the App. The revert's push
deploys the previous render, which (the Application healthy again) verifies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from shared.contracts.promotion import promotion_check_run_name
from shared.devstack import fleetrepo
from shared.devstack.emulator.model import CheckRunRecord
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.stack import DEV_ARGOCD_TOKEN_VAR, DevStack
from shared.stores.blob import FileBlobStore, latest_key
from tests.support.paths import EXAMPLES
from tests.support.stack import approve_waiting, serving_fleet, wait_on

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

OWNER, NAME = "acme", "dimensions-fleet"
REPO = f"{OWNER}/{NAME}"
PATCH = "cert-manager-v1.14"
PATCH_FILE = "config/management-cluster/cert-manager/patches/patch-002-cert-manager-v1.14.yaml"
PATCH_TEXT = """\
metadata:
  id: cert-manager-v1.14
  description: Upgrade cert-manager to v1.14.0
patch:
  cert-manager:
    source:
      targetRevision: v1.14.0
"""
NODE = "integration/int-sector-1/us-central1"
ROOT = f"management-cluster/{NODE}"
APP = ROOT.replace("/", "-")
T = TypeVar("T")


class World:
    def __init__(self, stack: DevStack, repo_dir: Path) -> None:
        self.stack = stack
        self.repo_dir = repo_dir
        assert stack.emulator is not None and stack.argocd is not None
        self.emulator: GitHubEmulator = stack.emulator
        self.argocd = stack.argocd
        self.blobs = FileBlobStore(stack.data_dir / "blobs")
        self.approved: set[tuple[int, str]] = set()

    def approve_reviews(self) -> None:
        approve_waiting(self.emulator, OWNER, NAME, self.approved)

    def wait_for(self, what: str, probe: Callable[[], T | None]) -> T:
        return wait_on(self.stack, what, probe, timeout=120, poll=0.2, each=self.approve_reviews)

    def commit(self, subject: str) -> str | None:
        out = fleetrepo.git(self.repo_dir, "log", "--format=%H%x00%s", "refs/heads/main")
        return next(
            (line.split("\x00")[0] for line in out.splitlines() if line.endswith(subject)), None
        )

    def latest(self, revision: str, state: str) -> dict[str, object] | None:
        raw = self.blobs.get(latest_key(REPO, ROOT))
        if raw is None:
            return None
        latest = dict(json.loads(raw))
        return latest if (latest["revision"], latest["state"]) == (revision, state) else None

    def deployment_run(self, revision: str, conclusion: str) -> CheckRunRecord | None:
        runs = [
            r
            for r in self.emulator.check_runs(OWNER, NAME)
            if r.name == f"rollwright/{ROOT}"
            and r.state["head_sha"] == revision
            and r.conclusion == conclusion
        ]
        return runs[-1] if runs else None

    def rollout_halted(self) -> CheckRunRecord | None:
        runs = [
            r
            for r in self.emulator.check_runs(OWNER, NAME)
            if r.name == promotion_check_run_name(PATCH)
            and "Rolled back" in (r.output.get("summary") or "")
        ]
        return runs[-1] if runs else None


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("e2e-rollback")
    with serving_fleet(base, EXAMPLES / "dimensions-fleet", OWNER, NAME) as (stack, repo_dir):
        yield World(stack, repo_dir)


def test_a_degraded_node_halts_the_rollout_and_auto_rollback_reverts_it(world: World) -> None:
    (world.repo_dir / "rollwright.yaml").write_text(
        "publish:\n"
        "  target: git\n"
        "verify:\n"
        "  - timeout: 90s\n"
        "    interval: 1s\n"
        "    argocd:\n"
        f"      server: {world.argocd.url}\n"
        f"      tokenEnv: {DEV_ARGOCD_TOKEN_VAR}\n"
        '      selector: "rollwright.dev/root={root}"\n'
        "rollout:\n"
        "  rollback: auto\n"
    )
    before = fleetrepo.commit_all(world.repo_dir, "publish to git, verified, rollback auto")
    world.argocd.add_application(
        APP,
        path=ROOT,
        repo_url=str(world.repo_dir),
        target_revision="rendered",
        labels={"rollwright.dev/root": APP},
        behaviour="degraded",
    )
    (world.repo_dir / PATCH_FILE).parent.mkdir(parents=True, exist_ok=True)
    (world.repo_dir / PATCH_FILE).write_text(PATCH_TEXT)
    staged = fleetrepo.commit_all(world.repo_dir, f"stage {PATCH}")
    delivery = world.emulator.send_push(OWNER, NAME, before, staged)
    assert delivery.status == 202, delivery.response

    promoted = world.wait_for("the promotion", lambda: world.commit(f"promote {PATCH} to {NODE}"))
    unhealthy = world.wait_for(
        "the unhealthy deployment", lambda: world.deployment_run(promoted, "failure")
    )
    assert unhealthy.output.get("title") == "Unhealthy"
    summary = unhealthy.output.get("summary") or ""
    assert f"`{APP}` is Degraded at" in summary and "progress deadline" in summary
    assert world.latest(promoted, "unhealthy") is not None

    reverted = world.wait_for("the revert", lambda: world.commit(f"roll back {PATCH} at {NODE}"))
    body = fleetrepo.git(world.repo_dir, "log", "-1", "--format=%B%x00%an", reverted)
    assert f"Rollwright-Rollback-Of: {promoted}" in body and body.endswith("\x00rollwright[bot]")
    # the revert leaves the patch staged only: the node's copy is gone
    assert fleetrepo.git(world.repo_dir, "diff", "--name-only", staged, reverted).strip() == ""
    halted = world.wait_for("the halted rollout", world.rollout_halted)
    assert halted.conclusion == "failure" and f"Halted at {NODE}" in (
        halted.output.get("title") or ""
    )
    assert "unhealthy" in (halted.output.get("summary") or "")

    # The Application recovers; the revert's deployment (the previous render) verifies.
    world.argocd.set_behaviour(APP, "healthy")
    world.wait_for("the revert verified", lambda: world.latest(reverted, "verified"))
    green = world.wait_for("its green check run", lambda: world.deployment_run(reverted, "success"))
    assert green.output.get("title") == "Verified"
    status = world.argocd.application(APP)["status"]
    assert (status["sync"]["status"], status["health"]["status"]) == ("Synced", "Healthy")
