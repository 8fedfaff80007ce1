"""OWNERS files: the real `review_policy` activity on a checkout of the
example fleets, with real renders stored in a file blob store, names the owners of exactly
the applications the rendered diff touches; a deployment under OWNERS waits until every
owner group (or an admin) approved, and its check run says whose approval is still needed."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.github import GitHubAccess
from activities.governance import GovernanceActivities
from activities.render import render_checkout
from activities.store import save_render
from shared.contracts.deploy import RepoRef
from shared.contracts.governance import OwnersRequirement, ReviewPolicy, ReviewPolicyRequest
from shared.engine.config.fleet import FleetConfig
from shared.engine.tree import WorkTree
from shared.review.owners import owners_for
from shared.settings import Settings
from shared.stores.blob import FileBlobStore
from tests.support.deploy_world import World, harness, latest, sha, until
from tests.support.paths import EXAMPLES

REPO = RepoRef(owner="acme", name="fleet", installation_id=7)
DIM_ROOT = "management-cluster/prod/prod-sector-1/us-east1"


def fleet_copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target)
    return target


def stored(blobs: FileBlobStore, checkout: Path, root: str, label: str) -> str:
    prefix = f"renders/acme/fleet/{root}/{label}/"
    save_render(blobs, prefix, label, render_checkout(checkout, root))
    return prefix


def policy_of(tmp_path: Path, checkout: Path, root: str, new: str, old: str | None) -> ReviewPolicy:
    settings = Settings(data_dir=tmp_path / "state")
    governance = GovernanceActivities(GitHubAccess(settings), FileBlobStore(tmp_path / "blobs"))
    request = ReviewPolicyRequest(
        repo=REPO,
        root=root,
        revision="r",
        checkout_path=str(checkout),
        deployment_id="d",
        author="carol",
        new_prefix=new,
        old_prefix=old,
    )
    policy: ReviewPolicy = asyncio.run(ActivityEnvironment().run(governance.review_policy, request))
    return policy


def test_dimensions_owners_of_the_changed_application_only(tmp_path: Path) -> None:
    fleet = fleet_copy(tmp_path, "dimensions-fleet")
    blobs = FileBlobStore(tmp_path / "blobs")
    before = stored(blobs, fleet, DIM_ROOT, "v1")
    values = fleet / "config/management-cluster/prometheus/values.yaml"
    values.write_text(values.read_text().replace("58.2.1", "58.3.0"))
    after = stored(blobs, fleet, DIM_ROOT, "v2")

    policy = policy_of(tmp_path, fleet, DIM_ROOT, after, before)
    assert [(o.name, o.path, o.owners) for o in policy.owners] == [
        (
            "owners:prometheus",
            "config/management-cluster/prometheus/OWNERS",
            ["observability-leads"],
        )
    ]
    assert policy.requirements() == ["policy", "owners:prometheus"]
    # Nothing changed: no owner is asked.
    assert policy_of(tmp_path, fleet, DIM_ROOT, after, after).owners == []
    # A first deployment touches every application that has an OWNERS file.
    first = policy_of(tmp_path, fleet, DIM_ROOT, before, None)
    assert {o.name for o in first.owners} >= {"owners:prometheus", "owners:cert-manager"}


def test_atlas_owners_next_to_the_deployment_and_its_template(tmp_path: Path) -> None:
    fleet = fleet_copy(tmp_path, "atlas-fleet")
    (fleet / "deployments/apps/web/OWNERS").write_text("approvers: [web-team, '@acme/web']\n")
    (fleet / "templates/web/OWNERS").write_text("approvers: [template-keeper]\n")
    (fleet / "templates/node-metrics/OWNERS").write_text("approvers: [metrics-owner]\n")
    tree, config = WorkTree(fleet), FleetConfig()
    found = owners_for(
        tree, config, "atlas", "staging/cluster-a", {"web/web/web/ConfigMap_x.yaml"}, _no_read
    )
    assert [(o.name, o.path, o.owners) for o in found] == [
        ("owners:template web", "templates/web/OWNERS", ["template-keeper"]),
        ("owners:web", "deployments/apps/web/OWNERS", ["web-team", "@acme/web"]),
    ]
    monitoring = owners_for(
        tree, config, "atlas", "staging/cluster-a", {"monitoring/a/b.yaml"}, _no_read
    )
    assert [o.name for o in monitoring] == ["owners:template node-metrics"]
    # A pattern that does not start with {deployment}/ cannot attribute files: every
    # deployment of the root is touched.
    other = FleetConfig.model_validate(
        {"output": {"pattern": "{release}/{deployment}/{namespace}/{kind}_{name}.yaml"}}
    )
    everything = owners_for(tree, other, "atlas", "staging/cluster-a", {"x.yaml"}, _no_read)
    assert {o.name for o in everything} == {
        "owners:web",
        "owners:template web",
        "owners:template node-metrics",
    }


def _no_read(side: str, path: str) -> bytes | None:
    return None


# --- the deployment waits for every owner group -------------------------------------------

ROOT = "staging/cluster-a"
A, L = sha("a"), sha("1")
OWNED = [
    OwnersRequirement(
        name="owners:web", application="web", path="deployments/apps/web/OWNERS", owners=["olga"]
    ),
    OwnersRequirement(
        name="owners:template web",
        application="template web",
        path="templates/web/OWNERS",
        owners=["@acme/web"],
    ),
]


@pytest.mark.parametrize("admin", [False, True])
def test_a_deployment_waits_for_each_owner_group(admin: bool) -> None:
    async def scenario() -> None:
        world = World(
            latest={ROOT: latest(L)},
            review={"rules": [{"approvers": ["alice"]}], "admins": ["root"]},
            teams={"@acme/web": {"wendy"}},
            owners=OWNED,
        )
        async with harness(world) as h:
            await h.push(ROOT, A, by="carol")
            deployment_id = await h.awaiting_review(ROOT, A)

            def summary() -> str:
                return world.last(world.check_run_of(deployment_id)).summary

            assert "an owner of `web` (deployments/apps/web/OWNERS): @olga, @root" in summary()
            if admin:
                result = await h.review(deployment_id, "approve", "root")
                assert result.state == "published" and result.approved_by == "@root"
                return
            await h.click(deployment_id, "approve", "olga")
            await until(lambda: "Approved so far by @olga" in summary(), "olga's approval shown")
            assert "deployments/apps/web/OWNERS" not in summary().split("still needed")[1]
            assert "an approver: @alice, @root" in summary()
            await h.click(deployment_id, "approve", "alice")
            await until(lambda: "Approved so far by @olga, @alice" in summary(), "two shown")
            assert "an owner of `template web`" in summary().split("still needed")[1]
            result = await h.review(deployment_id, "approve", "wendy")
            assert result.state == "published"
            assert result.approved_by == "@olga, @alice, @wendy"
            assert [a.counted for a in world.audits] == [True, True, True]

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_review_never_still_asks_the_owners_of_what_changed() -> None:
    async def scenario() -> None:
        world = World(
            latest={ROOT: latest(L)},
            review={"rules": [{"review": "never", "approvers": ["alice"]}]},
            teams={"@acme/web": {"wendy"}},
            owners=OWNED[:1],
        )
        async with harness(world) as h:
            await h.push(ROOT, A, by="carol")
            deployment_id = await h.awaiting_review(ROOT, A)
            summary = world.last(world.check_run_of(deployment_id)).summary
            assert "an owner of `web`" in summary and "an approver" not in summary
            result = await h.review(deployment_id, "approve", "olga")
            assert result.state == "published" and result.approved_by == "@olga"

    asyncio.run(asyncio.wait_for(scenario(), 60))
