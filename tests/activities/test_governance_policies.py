"""Policy sets: the real `review_policy` activity on a copy of the atlas example fleet, its
render stored in a file blob store, runs the fleet's Rego (regopy) and the
ValidatingAdmissionPolicy its render carries (CEL), and the deployment waits for an owner of
each set with a failing deny; an admin or anyone else approving does not let it through."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.github import GitHubAccess
from activities.governance import GovernanceActivities
from activities.joblog import JobLog
from activities.render import render_checkout
from activities.store import save_render
from shared.contracts.deploy import ERR_FLEET, RepoRef
from shared.contracts.governance import ReviewPolicy, ReviewPolicyRequest
from shared.settings import Settings
from shared.stores.blob import FileBlobStore
from tests.support.deploy_world import World, harness, latest, sha, until
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.paths import EXAMPLES
from tests.support.policies import ADMISSION, SECURITY

REPO = RepoRef(owner="acme", name="fleet", installation_id=7)
ROOT = "staging/cluster-a"
A, L = sha("a"), sha("1")

POLICIES = [
    {
        "name": "security",
        "path": "policies/security",
        "owners": ["sec-lead", "@acme/security"],
        "roots": ["staging/*"],
    },
    {"name": "cluster", "rendered": True, "owners": ["@acme/platform"]},
]


def fleet(tmp_path: Path, *, rego: str = SECURITY) -> Path:
    """A git repository: the example fleet, then a commit adding the policy sets (a root's
    first deployment compares the sets with the deployed commit's parent)."""
    target = tmp_path / "fleet"
    shutil.copytree(EXAMPLES / "atlas-fleet", target)
    commit_all(init_repo(target), "fleet")
    (target / "policies" / "security").mkdir(parents=True)
    (target / "policies" / "security" / "debug.rego").write_text(rego)
    (target / "templates" / "debug-tools" / "manifests" / "admission.yaml").write_text(ADMISSION)
    config = {"review": {"admins": ["root"]}, "policies": POLICIES}
    (target / "rollwright.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    commit_all(target, "policy sets")
    return target


def policy_of(
    tmp_path: Path, checkout: Path, base: str | None = None
) -> tuple[ReviewPolicy, list[dict[str, object]]]:
    """The activity's policy; `base`: the revision of the root's last published render (its
    files are this render's: only the revision matters to the policy sets)."""
    blobs = FileBlobStore(tmp_path / "blobs")
    prefix = f"renders/acme/fleet/{ROOT}/new/"
    rendered = render_checkout(checkout, ROOT)
    save_render(blobs, prefix, "new", rendered)
    old_prefix = None
    if base is not None:
        old_prefix = f"renders/acme/fleet/{ROOT}/old/"
        save_render(blobs, old_prefix, base, rendered)
    settings = Settings(data_dir=tmp_path / "state")
    jobs = JobLog(blobs)
    governance = GovernanceActivities(GitHubAccess(settings), blobs, jobs)
    request = ReviewPolicyRequest(
        repo=REPO,
        root=ROOT,
        revision="r",
        checkout_path=str(checkout),
        deployment_id="d-1",
        author="carol",
        new_prefix=prefix,
        old_prefix=old_prefix,
    )
    policy: ReviewPolicy = asyncio.run(ActivityEnvironment().run(governance.review_policy, request))
    return policy, jobs.read("d-1")


def test_rego_and_the_rendered_admission_policy_make_requirements(tmp_path: Path) -> None:
    policy, log = policy_of(tmp_path, fleet(tmp_path))
    assert policy.requirements() == ["policy", "policy-set:security", "policy-set:cluster"]
    assert [(p.policy_set, p.owners, p.denies) for p in policy.policy_sets] == [
        ("security", ["sec-lead", "@acme/security"], 1),
        ("cluster", ["@acme/platform"], 1),
    ]
    assert policy.whose("policy-set:security") == (
        "an owner of policy set `security` (1 failing deny): @sec-lead, @acme/security"
    )
    checks = policy.checks
    assert checks is not None and checks.sets == ["security", "cluster"]
    assert (checks.denies, checks.warnings) == (2, 2)
    shown = [(f.level, f.policy_set, f.subject(), f.message) for f in checks.findings]
    netshoot = (
        "Deployment debug/netshoot (debug-tools/debug-tools/debug/Deployment.apps_netshoot.yaml)"
    )
    assert shown == [
        ("deny", "cluster", netshoot, "debug deployment netshoot must be scaled to zero"),
        ("deny", "security", netshoot, "debug deployment netshoot may not run on staging"),
        ("warn", "security", "ConfigMap web/api-env (web/api/web/ConfigMap_api-env.yaml)",
         "ConfigMap api-env: prefer a mounted Secret"),
        ("warn", "security",
         "ConfigMap web/frontend-env (web/frontend/web/ConfigMap_frontend-env.yaml)",
         "ConfigMap frontend-env: prefer a mounted Secret"),
    ]  # fmt: skip
    assert checks.findings[0].policy == "ValidatingAdmissionPolicy debug-replicas: validations[0]"
    assert checks.findings[1].policy == "data.main.deny"
    lines = [line for line in log if line["message"].startswith("policy ")]
    assert [line["message"] for line in lines] == [
        "policy deny",
        "policy deny",
        "policy warn",
        "policy warn",
        "policy checks done",
    ]
    assert lines[-1]["denies"] == 2 and lines[-1]["warnings"] == 2


def test_a_policy_file_that_does_not_compile_is_a_fleet_error_at_its_line(tmp_path: Path) -> None:
    broken = SECURITY.replace('namespace == "debug"', 'namespace == == "debug"')
    with pytest.raises(ApplicationError) as caught:
        policy_of(tmp_path, fleet(tmp_path, rego=broken))
    assert caught.value.type == ERR_FLEET and caught.value.non_retryable
    assert caught.value.message.startswith(
        "policies/security/debug.rego:7: policy set 'security': Rego:"
    )


# --- the deployment waits for an owner of each set ------------------------------------------


def test_a_failing_deny_waits_for_an_owner_of_its_set(tmp_path: Path) -> None:
    policy, _ = policy_of(tmp_path, fleet(tmp_path))

    async def scenario() -> None:
        world = World(
            latest={ROOT: latest(L)},
            review={"admins": ["root"]},
            teams={"@acme/platform": {"pia"}, "@acme/security": {"sid"}},
            policy_sets=policy.policy_sets,
            checks=policy.checks,
        )
        async with harness(world) as h:
            await h.push(ROOT, A, by="carol")
            deployment_id = await h.awaiting_review(ROOT, A)

            def summary() -> str:
                return world.last(world.check_run_of(deployment_id)).summary

            text = summary()
            assert (
                "- an owner of policy set `security` (1 failing deny): @sec-lead, @acme/security"
            ) in text
            assert "an owner of policy set `cluster` (1 failing deny): @acme/platform" in text
            assert "**Policy checks** (`security`, `cluster`): 2 denied, 2 warning(s)." in text
            assert (
                "- ❌ deny `security` Deployment debug/netshoot (debug-tools/debug-tools/debug/"
                "Deployment.apps_netshoot.yaml): debug deployment netshoot may not run on staging"
            ) in text
            assert "- ⚠️ warn `security` ConfigMap web/api-env" in text
            # An admin, then anyone with write access: the rule is met, the sets are not.
            await h.click(deployment_id, "approve", "root")
            await h.click(deployment_id, "approve", "mallory")
            await until(lambda: "Approved so far by @root, @mallory" in summary(), "both shown")
            needed = summary().split("still needed")[1]
            assert "policy set `security`" in needed and "policy set `cluster`" in needed
            assert "anyone with write access" not in needed
            await h.click(deployment_id, "approve", "sid")  # through @acme/security
            await until(lambda: "@sid" in summary(), "sid's approval shown")
            assert "policy set `security`" not in summary().split("still needed")[1]
            result = await h.review(deployment_id, "approve", "pia")  # through @acme/platform
            assert result.state == "published"
            assert result.approved_by == "@root, @mallory, @sid, @pia"
            assert [a.counted for a in world.audits] == [True, True, True, True]

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_review_never_and_warnings_only(tmp_path: Path) -> None:
    """`review: never` does not waive a deny; warnings alone do not hold a deployment, and
    its check run still shows them."""
    policy, _ = policy_of(tmp_path, fleet(tmp_path))
    warnings_only = policy.checks.model_copy(  # type: ignore[union-attr]
        update={"findings": [f for f in policy.checks.findings if f.level == "warn"], "denies": 0}  # type: ignore[union-attr]
    )

    async def scenario() -> None:
        world = World(
            latest={ROOT: latest(L)},
            review={"rules": [{"review": "never"}]},
            policy_sets=policy.policy_sets[:1],
            checks=policy.checks,
        )
        async with harness(world) as h:
            await h.push(ROOT, A, by="carol")
            deployment_id = await h.awaiting_review(ROOT, A)
            summary = world.last(world.check_run_of(deployment_id)).summary
            assert "an owner of policy set `security`" in summary
            assert "anyone with write access" not in summary.split("still needed")[1]
            result = await h.review(deployment_id, "approve", "sec-lead")
            assert result.state == "published" and result.approved_by == "@sec-lead"
        calm = World(
            latest={ROOT: latest(L)}, review={"rules": [{"review": "never"}]}, checks=warnings_only
        )
        async with harness(calm) as h:
            await h.push(ROOT, A, by="carol")
            await until(lambda: any(r.state == "published" for r in calm.records), "published")
            runs = [r for runs in calm.check_runs.values() for r in runs]
            publishing = next(r for r in runs if r.title.startswith("Publishing"))
            assert "0 denied, 2 warning(s)" in publishing.summary
            assert "⚠️ warn `security` ConfigMap web/api-env" in publishing.summary

    asyncio.run(asyncio.wait_for(scenario(), 60))


# --- a revision that changes a policy set -----------------------------------------------------

HARMLESS = """package main

import rego.v1

deny contains msg if {
  input.kind == "Namespace-that-never-is"
  msg := "never"
}
"""


def _requirements(policy: ReviewPolicy) -> list[tuple[str, list[str], int, str]]:
    return [(p.policy_set, p.owners, p.denies, p.changed) for p in policy.policy_sets]


def test_a_revision_that_changes_a_policy_set_needs_its_owners(tmp_path: Path) -> None:
    """The sets are compared with the last published revision's: editing a set's files, its
    entry (owners, roots) or removing it needs the base's owners, whatever the sets find."""
    checkout = fleet(tmp_path)
    base = git(checkout, "rev-parse", "HEAD")
    security = ["sec-lead", "@acme/security"]

    def changed(edit: Callable[[], None]) -> ReviewPolicy:
        git(checkout, "reset", "-q", "--hard", base)
        edit()
        commit_all(checkout)
        return policy_of(tmp_path, checkout, base)[0]

    rego = checkout / "policies" / "security" / "debug.rego"
    policy = changed(lambda: rego.write_text(HARMLESS))
    assert _requirements(policy) == [
        ("security", security, 0, "files in policies/security/ changed"),
        ("cluster", ["@acme/platform"], 1, ""),
    ]
    assert policy.whose("policy-set:security") == (
        "an owner of policy set `security` (the policy set itself changed: files in "
        "policies/security/ changed): @sec-lead, @acme/security"
    )

    def entry(**update: object) -> Callable[[], None]:
        def edit() -> None:
            sets = [{**POLICIES[0], **update}, POLICIES[1]]
            config = {"review": {"admins": ["root"]}, "policies": sets}
            (checkout / "rollwright.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

        return edit

    # New owners approve nothing yet: the base's do, the deny too.
    policy = changed(entry(owners=["mallory"]))
    assert _requirements(policy)[0] == (
        "security",
        security,
        1,
        "its rollwright.yaml entry changed",
    )
    # Out of the set's roots now: still the set's to approve.
    policy = changed(entry(roots=["prod/*"]))
    assert _requirements(policy) == [
        ("cluster", ["@acme/platform"], 1, ""),
        ("security", security, 0, "its rollwright.yaml entry changed"),
    ]

    def removed() -> None:
        (checkout / "rollwright.yaml").write_text("review:\n  admins: [root]\n")
        shutil.rmtree(checkout / "policies")

    policy = changed(removed)
    gone = "it is removed from rollwright.yaml; files in policies/security/ changed"
    assert _requirements(policy) == [
        ("security", security, 0, gone),
        ("cluster", ["@acme/platform"], 0, "it is removed from rollwright.yaml"),
    ]
    assert policy.requirements() == ["policy", "policy-set:security", "policy-set:cluster"]

    # A change elsewhere: only the denies ask.
    policy = changed(lambda: (checkout / "README.md").write_text("fleet\n"))
    assert [(p.policy_set, p.changed) for p in policy.policy_sets] == [
        ("security", ""),
        ("cluster", ""),
    ]
    # A base the repository does not have: nothing is known, every set asks.
    policy, log = policy_of(tmp_path, checkout, "f" * 40)
    unknown = "its state at the compared revision ffffffffffff cannot be read"
    assert [(p.policy_set, p.changed) for p in policy.policy_sets] == [
        ("security", unknown),
        ("cluster", unknown),
    ]
    assert [line["policy_set"] for line in log if line["message"] == "policy set changed"][-2:] == [
        "security",
        "cluster",
    ]


def test_a_root_s_first_deployment_compares_the_sets_with_the_commit_s_parent(
    tmp_path: Path,
) -> None:
    """No render was published: what the deployed commit itself does to the sets counts."""
    checkout = fleet(tmp_path)
    (checkout / "policies" / "security" / "debug.rego").write_text(HARMLESS)
    commit_all(checkout, "switch the security set off")
    policy, _ = policy_of(tmp_path, checkout)
    assert _requirements(policy) == [
        ("security", ["sec-lead", "@acme/security"], 0, "files in policies/security/ changed"),
        ("cluster", ["@acme/platform"], 1, ""),
    ]
    # A checkout git cannot read (no parent to compare with): every set asks.
    shutil.rmtree(checkout / ".git")
    policy, _ = policy_of(tmp_path, checkout)
    unknown = (
        "its state at the deployed commit's parent (the root's first deployment) cannot be read"
    )
    assert [p.changed for p in policy.policy_sets] == [unknown, unknown]


def test_a_changed_policy_set_holds_even_review_never_and_an_empty_diff(tmp_path: Path) -> None:
    checkout = fleet(tmp_path)
    base = git(checkout, "rev-parse", "HEAD")
    (checkout / "policies" / "security" / "debug.rego").write_text(HARMLESS)
    commit_all(checkout, "switch the security set off")
    policy, _ = policy_of(tmp_path, checkout, base)

    async def scenario() -> None:
        world = World(
            latest={ROOT: latest(L)},
            review={"rules": [{"review": "never"}]},
            policy_sets=policy.policy_sets[:1],
            empty_diffs={A},
        )
        async with harness(world) as h:
            await h.push(ROOT, A, by="carol")
            deployment_id = await h.awaiting_review(ROOT, A)
            summary = world.last(world.check_run_of(deployment_id)).summary
            assert (
                "an owner of policy set `security` (the policy set itself changed: files in "
                "policies/security/ changed): @sec-lead, @acme/security"
            ) in summary
            await h.click(deployment_id, "approve", "mallory")
            result = await h.review(deployment_id, "approve", "sec-lead")
            assert result.state == "published" and result.approved_by == "@mallory, @sec-lead"

    asyncio.run(asyncio.wait_for(scenario(), 60))
