"""End to end: a version patch walks the example dimensions fleet on the embedded stack.

The real Temporal dev server, worker and gateway processes, a real git repository of
examples/dimensions-fleet served by the GitHub emulator. A staged patch is pushed (signed
webhook); DispatchWorkflow starts its PromotionWorkflow, which commits the patch node by node
through the emulator's git data API (the emulator sends the pushes, as GitHub does); every
promotion commit deploys the roots under its node; each deployment is approved by clicking
Approve on its check run (first deployments and non-empty diffs always ask), and its outcome
reaches the rollout as a signal. Integration is automated; stage is manual: a reader's Promote
is refused (judged by the rollout, audited, listed on its check run), then the test clicks
Promote as a writer and sees the stage commit and its deployment.
"""

from __future__ import annotations

import asyncio
import functools
import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from shared.contracts.promotion import (
    QUERY_ROLLOUT,
    RolloutView,
    promotion_check_run_name,
    promotion_workflow_id,
)
from shared.devstack import fleetrepo
from shared.devstack.emulator.model import CheckRunRecord
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.signin import open_signed_in
from shared.devstack.stack import DevStack
from shared.stores.blob import FileBlobStore, latest_key
from tests.support.paths import EXAMPLES
from tests.support.stack import approve_waiting, details_links, serving_fleet, wait_on

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

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
INTEGRATION = [
    "integration/int-sector-1/us-central1",
    "integration/int-sector-1/europe-west1",
    "integration/int-sector-2/us-central1",
]
STAGE = "stage/stage-sector-1/us-east1"
STEP_TIMEOUT = 90.0
T = TypeVar("T")


class World:
    def __init__(self, stack: DevStack, repo_dir: Path) -> None:
        self.stack = stack
        self.repo_dir = repo_dir
        assert stack.emulator is not None
        self.emulator: GitHubEmulator = stack.emulator
        self.blobs = FileBlobStore(stack.data_dir / "blobs")
        self.approved: set[tuple[int, str]] = set()

    def approve_reviews(self) -> None:
        approve_waiting(self.emulator, OWNER, NAME, self.approved)

    def wait_for(self, what: str, probe: Callable[[], T | None]) -> T:
        return wait_on(
            self.stack, what, probe, timeout=STEP_TIMEOUT, poll=0.2, each=self.approve_reviews
        )

    def promotion_commits(self) -> list[tuple[str, str, str]]:
        """(sha, subject, author) of the promotion commits on main, oldest first."""
        out = fleetrepo.git(
            self.repo_dir, "log", "--reverse", "--format=%H%x00%s%x00%an", "refs/heads/main"
        )
        commits = [line.split("\x00") for line in out.splitlines()]
        return [(c[0], c[1], c[2]) for c in commits if c[1].startswith(f"promote {PATCH} to ")]

    def commit_to(self, node: str) -> tuple[str, str, str] | None:
        return next((c for c in self.promotion_commits() if c[1].endswith(f" to {node}")), None)

    def published_at(self, root: str, revision: str) -> dict[str, object] | None:
        raw = self.blobs.get(latest_key(REPO, f"management-cluster/{root}"))
        if raw is None:
            return None
        latest = dict(json.loads(raw))
        return latest if latest["revision"] == revision and latest["state"] == "published" else None

    def rollout_run(self, identifier: str) -> CheckRunRecord | None:
        runs = [
            r
            for r in self.emulator.check_runs(OWNER, NAME)
            if r.name == promotion_check_run_name(PATCH)
            and identifier in [a["identifier"] for a in r.actions]
        ]
        return runs[-1] if runs else None

    def audit(self, actor: str, count: int) -> list[dict[str, Any]] | None:
        """`actor`'s clicks in the gateway's audit trail (newest first), once there are
        `count`."""
        request = urllib.request.Request(
            f"{self.stack.urls.gateway}/api/audit?actor={actor}",
            headers={"Authorization": f"Bearer {self.stack.api_token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            events: list[dict[str, Any]] = json.loads(answer.read())["events"]
        return events if len(events) == count else None

    def rollout(self) -> RolloutView:
        async def query() -> RolloutView:
            client = await self.stack.async_client()
            handle = client.get_workflow_handle(promotion_workflow_id(REPO, PATCH))
            view: RolloutView = await handle.query(QUERY_ROLLOUT, result_type=RolloutView)
            return view

        return asyncio.run(query())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("e2e-promotion")
    with serving_fleet(base, EXAMPLES / "dimensions-fleet", OWNER, NAME) as (stack, repo_dir):
        yield World(stack, repo_dir)


def test_staged_patch_walks_integration_and_waits_for_promote_at_stage(world: World) -> None:
    before = fleetrepo.head(world.repo_dir)
    (world.repo_dir / PATCH_FILE).parent.mkdir(parents=True, exist_ok=True)
    (world.repo_dir / PATCH_FILE).write_text(PATCH_TEXT)
    staged = fleetrepo.commit_all(world.repo_dir, f"stage {PATCH}")
    delivery = world.emulator.send_push(OWNER, NAME, before, staged)
    assert delivery.status == 202, delivery.response

    # integration, region by region, automated: each commit deploys its root, then the next
    for node in INTEGRATION:
        sha, _, author = world.wait_for(
            f"the promotion to {node}", functools.partial(world.commit_to, node)
        )
        assert author == "rollwright[bot]"
        world.wait_for(
            f"{node} published at {sha[:12]}", functools.partial(world.published_at, node, sha)
        )

    # stage is manual: the rollout's check run asks, on the default branch's tip
    gate = world.wait_for("the Promote button", lambda: world.rollout_run("promote"))
    assert gate.conclusion == "action_required"
    assert STAGE in (gate.output.get("title") or "")
    assert gate.state["head_sha"] == world.commit_to(INTEGRATION[-1])[0]  # type: ignore[index]
    table = gate.output.get("summary") or ""
    assert "| node | state | since |" in table
    assert f"| `{STAGE}` | awaiting promote |" in table
    assert "| `integration` | passed |" in table
    view = world.rollout()
    assert view.next_node == STAGE and view.gate == "manual" and view.phase == "gate"
    assert world.commit_to(STAGE) is None
    assert [c[1].rsplit(" to ", 1)[1] for c in world.promotion_commits()] == INTEGRATION

    # a reader's Promote does not count: the rollout judges it, lists it and stays at the gate
    world.emulator.set_permission(OWNER, NAME, "rita", "read")
    assert world.emulator.click_action(gate.id, "promote", "rita").status == 202
    refused = world.wait_for("the reader's Promote judged", lambda: world.audit("rita", 2))
    assert [e["counted"] for e in refused] == [False, None]  # newest first
    assert "@rita has read access" in refused[0]["reason"]
    assert refused[0]["root"] == f"rollout:{PATCH}"

    def listing() -> CheckRunRecord | None:
        run = world.rollout_run("promote")
        return run if run and "@rita clicked Promote" in run.output.get("summary", "") else None

    listed = world.wait_for("the refusal on the rollout's check run", listing)
    assert listed.conclusion == "action_required" and world.commit_to(STAGE) is None

    delivery = world.emulator.click_action(gate.id, "promote", "alice")
    assert delivery.status == 202, delivery.response
    sha, _, _ = world.wait_for("the promotion to stage", lambda: world.commit_to(STAGE))
    body = fleetrepo.git(world.repo_dir, "log", "-1", "--format=%B", sha)
    assert "Rollwright-Promoted-By: alice" in body
    world.wait_for(f"{STAGE} published", lambda: world.published_at(STAGE, sha))

    def green() -> CheckRunRecord | None:
        runs = [
            r
            for r in world.emulator.check_runs(OWNER, NAME)
            if r.name == f"rollwright/management-cluster/{STAGE}"
            and r.state["head_sha"] == sha
            and r.conclusion == "success"
        ]
        return runs[-1] if runs else None

    # latest.json is written before the check run turns green
    world.wait_for("the stage deployment's green check run", green)

    # every Details link the emulator recorded opens a page of the gateway, for a reader
    links = details_links(world.emulator, OWNER, NAME)
    assert "" not in links, f"{links['']} has no Details link"
    names = set(links.values())
    assert {"rollwright", promotion_check_run_name(PATCH)} <= names, names
    assert f"rollwright/management-cluster/{STAGE}" in names, names
    world.emulator.set_permission(OWNER, NAME, "rita-reader", "read")
    gateway = world.stack.urls.gateway
    with httpx.Client(timeout=30) as http:
        for url, name in sorted(links.items()):
            assert url.startswith(f"{gateway}/"), (name, url)
            answer = open_signed_in(http, url, "rita-reader")
            assert answer.status_code == 200, (name, url, answer.text[:300])
            assert answer.headers["content-type"].startswith("text/html"), (name, url)
            if name == "rollwright":
                assert 'id="roots"' in answer.text, url  # its roots' deployments
            elif name == promotion_check_run_name(PATCH):
                assert f"Rollout of {PATCH}" in answer.text, url
