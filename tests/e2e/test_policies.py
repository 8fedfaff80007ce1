"""End to end on the embedded stack: policy sets owned by teams. The fleet (a copy of the
atlas example) has a Rego set owned by `@acme/security` and a set of the
ValidatingAdmissionPolicy its render carries, owned by `@acme/platform`; the real worker runs
both (regopy, CEL) after the render. A merge waits for review; an approval by someone with
write access who owns neither set does not let it through; an owner of each set does. The
check run, the job page and its log show the findings.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.devstack import fleetrepo
from shared.devstack.emulator.model import CheckRunRecord
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.stack import DevStack
from tests.support.paths import EXAMPLES
from tests.support.policies import ADMISSION, SECURITY
from tests.support.stack import serving_fleet, wait_on

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

OWNER, NAME = "acme", "policed-fleet"
ROOT = "staging/cluster-a"

CONFIG = {
    "policies": [
        {"name": "security", "path": "policies/security", "owners": ["@acme/security"]},
        {"name": "cluster", "rendered": True, "owners": ["@acme/platform"]},
    ]
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevStack, Path]]:
    base = tmp_path_factory.mktemp("policies")
    source = base / "source"
    shutil.copytree(EXAMPLES / "atlas-fleet", source)
    (source / "policies" / "security").mkdir(parents=True)
    (source / "policies" / "security" / "debug.rego").write_text(SECURITY)
    (source / "templates" / "debug-tools" / "manifests" / "admission.yaml").write_text(ADMISSION)
    (source / "rollwright.yaml").write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    with serving_fleet(base, source, OWNER, NAME) as served:
        yield served


def test_a_failing_deny_waits_for_an_owner_of_each_set(served: tuple[DevStack, Path]) -> None:
    stack, repo_dir = served
    emulator = stack.emulator
    assert emulator is not None
    emulator.add_team_member("acme", "security", "sid")
    emulator.add_team_member("acme", "platform", "pia")
    before = fleetrepo.head(repo_dir)
    after = fleetrepo.set_value(
        repo_dir,
        f"deployments/{ROOT}/cluster.values.yaml",
        "env.REGION",
        "eu-central-1",
        "region",
    )
    assert emulator.send_push(OWNER, NAME, before, after).status == 202

    review = asking(stack, emulator, after, lambda run: True)
    summary = review.output["summary"]
    assert "an owner of policy set `security` (1 failing deny): @acme/security" in summary
    assert "an owner of policy set `cluster` (1 failing deny): @acme/platform" in summary
    assert "**Policy checks** (`security`, `cluster`): 2 denied, 2 warning(s)." in summary
    assert "debug deployment netshoot must be scaled to zero" in summary
    assert "debug deployment netshoot may not run on staging" in summary
    deployment_id = str(review.state["external_id"])

    # Write access and no set: the review rule is met, the sets are not.
    click(emulator, review, "alice")
    again = asking(
        stack, emulator, after, lambda run: "Approved so far by @alice" in summary_of(run)
    )
    needed = summary_of(again).split("still needed")[1]
    assert "policy set `security`" in needed and "policy set `cluster`" in needed

    click(emulator, again, "sid")
    last = asking(stack, emulator, after, lambda run: "@alice, @sid" in summary_of(run))
    assert "policy set `security`" not in summary_of(last).split("still needed")[1]
    click(emulator, last, "pia")

    def finished() -> CheckRunRecord | None:
        runs = [
            r
            for r in emulator.check_runs(OWNER, NAME)
            if r.state.get("external_id") == deployment_id
        ]
        return runs[-1] if runs and runs[-1].conclusion in ("success", "failure") else None

    final = wait_on(stack, "the deployment's end", finished, timeout=90, poll=0.2)
    assert final.conclusion == "success", final.output

    def recorded() -> dict[str, Any] | None:  # the SQL record follows the check run
        job: dict[str, Any] = json.loads(get(stack, f"/api/jobs/{deployment_id}"))
        return job if job["state"] == "published" else None

    job = wait_on(stack, "the published job", recorded, timeout=60, poll=0.2)
    assert job["approved_by"] == "@alice, @sid, @pia"
    waiting = [e["message"] for e in job["timeline"] if e["state"] == "awaiting_review"]
    assert any("debug deployment netshoot may not run on staging" in m for m in waiting)
    audited = {(a["actor"], a["counted"]) for a in job["audit"]}
    assert audited == {("alice", True), ("sid", True), ("pia", True)}
    log = json.loads(get(stack, f"/api/jobs/{deployment_id}/log"))["lines"]
    denies = [line for line in log if line["message"] == "policy deny"]
    assert {line["policy_set"] for line in denies} == {"security", "cluster"}
    assert all(line["object"].startswith("Deployment debug/netshoot") for line in denies)
    page = get(stack, f"/jobs/{deployment_id}")
    assert "Policy checks" in page and "may not run on staging" in page


def summary_of(run: CheckRunRecord) -> str:
    return str(run.output.get("summary") or "")


def asking(stack: DevStack, emulator: GitHubEmulator, head: str, wanted: object) -> CheckRunRecord:
    """The root's check run at `head` once it asks for review and `wanted(run)` holds."""

    def probe() -> CheckRunRecord | None:
        for run in reversed(emulator.check_runs(OWNER, NAME)):
            if (
                run.name == f"rollwright/{ROOT}"
                and run.state["head_sha"] == head
                and run.conclusion == "action_required"
                and "approve" in [a["identifier"] for a in run.actions]
                and wanted(run)  # type: ignore[operator]
            ):
                return run
        return None

    return wait_on(stack, f"{ROOT} asking for review", probe, timeout=90, poll=0.2)


def click(emulator: GitHubEmulator, run: CheckRunRecord, who: str) -> None:
    delivery = emulator.click_action(run.id, "approve", who)
    assert 200 <= delivery.status < 300, delivery.response


def get(stack: DevStack, path: str) -> str:
    request = urllib.request.Request(
        f"{stack.urls.gateway}{path}", headers={"Authorization": f"Bearer {stack.api_token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return str(answer.read().decode())
