"""The activities behind PR previews, against real parts but without Temporal:

- `preview_revisions` on real git repositories behind the GitHub emulator's pull refs: the
  merge ref, a conflicting PR (no merge ref), a merge ref that is out of date;
- `preview_build` failing on an unexpected error: neither the error nor the log quotes it;
- `preview_comment` over HTTP (PyGithub → emulator): one comment, edited in place, found past
  the first page of comments, not taken over from a human or another bot, and a retry
  creates nothing.

Routing of the payloads and the preview page are in tests/gateway/test_previews.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.github import GitHubAccess
from activities.preview import PreviewActivities
from shared.contracts.deploy import RepoRef
from shared.contracts.preview import (
    PreviewBuildRequest,
    PreviewCommentRequest,
    PreviewPointer,
    PreviewRevisions,
    PreviewRevisionsRequest,
    preview_fingerprints_key,
    preview_latest_key,
    preview_prefix,
)
from shared.devstack.emulator.server import GitHubEmulator
from shared.settings import Settings
from shared.stores.blob import FileBlobStore
from shared.stores.gitmirror import GitMirror
from tests.support.gitrepo import git, local_remote
from tests.support.preview import commit, web_repo

APP_ID = 4242
INSTALLATION = 77


# --------------------------------------------------------------------------- revisions


@pytest.fixture
def emulator(app_key: str) -> Iterator[GitHubEmulator]:
    with GitHubEmulator(app_id=APP_ID, app_key=app_key) as emu:
        yield emu


@pytest.fixture
def settings(tmp_path: Path, emulator: GitHubEmulator, app_key: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "state",
        github_api_url=emulator.url,
        github_app_id=str(APP_ID),
        github_private_key=SecretStr(app_key),
        public_url="http://rollwright.test",
    )


@pytest.fixture
def previews(settings: Settings) -> Iterator[PreviewActivities]:
    access = GitHubAccess(settings)
    mirror = GitMirror(settings.git_dir, remote_for=local_remote)
    blobs = FileBlobStore(settings.data_dir / "blobs")
    yield PreviewActivities(settings, mirror, blobs, access, merge_attempts=2, merge_wait=0.01)
    access.close()


def seeded(emulator: GitHubEmulator, tmp_path: Path) -> tuple[Path, RepoRef]:
    repo = web_repo(tmp_path / "fleet")
    emulator.seed_repository("acme", "fleet", INSTALLATION, "main", git_dir=repo)
    ref = RepoRef(owner="acme", name="fleet", installation_id=INSTALLATION, clone_url=str(repo))
    return repo, ref


def branch(repo: Path, name: str, files: dict[str, Any]) -> str:
    git(repo, "checkout", "-q", "-b", name)
    try:
        return commit(repo, files, message=name)
    finally:
        git(repo, "checkout", "-q", "main")


def revisions(acts: PreviewActivities, repo: RepoRef, head: str) -> PreviewRevisions:
    request = PreviewRevisionsRequest(repo=repo, pr=3, head_sha=head, base_ref="main")
    result: PreviewRevisions = asyncio.run(
        ActivityEnvironment().run(acts.preview_revisions, request)
    )
    return result


def test_the_merge_ref_is_rendered_against_its_first_parent(
    previews: PreviewActivities, emulator: GitHubEmulator, tmp_path: Path
) -> None:
    repo, ref = seeded(emulator, tmp_path)
    head = branch(repo, "feature", {"deployments/g/c1/cluster.values.yaml": {"x": 1}})
    commit(repo, {"deployments/g/c2/cluster.values.yaml": {"y": 2}}, message="main moves")
    emulator.set_pull("acme", "fleet", 3, head_sha=head, head_ref="feature")
    merge = git(repo, "rev-parse", "refs/pull/3/merge").strip()
    assert git(repo, "rev-parse", f"{merge}^2").strip() == head
    got = revisions(previews, ref, head)
    tip = git(repo, "rev-parse", "main").strip()
    assert got == PreviewRevisions(
        base_sha=tip, head_sha=merge, pr_head_sha=head, base_tip_sha=tip, merge_sha=merge
    )


def test_without_a_merge_ref_the_head_is_rendered_against_its_merge_base(
    previews: PreviewActivities, emulator: GitHubEmulator, tmp_path: Path
) -> None:
    repo, ref = seeded(emulator, tmp_path)
    fork_point = git(repo, "rev-parse", "main").strip()
    head = branch(repo, "feature", {"deployments/g/c1/cluster.values.yaml": {"x": 1}})
    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"x": 2}}, message="conflicts")
    pull = emulator.set_pull("acme", "fleet", 3, head_sha=head, head_ref="feature")
    assert pull["mergeable"] is False and pull["merge_commit_sha"] is None
    got = revisions(previews, ref, head)
    assert (got.base_sha, got.head_sha, got.merge_sha) == (fork_point, head, None)
    (warning,) = got.warnings
    assert warning.startswith("merge ref missing (conflicts?)") and head[:12] in warning


def test_an_out_of_date_merge_ref_is_not_rendered(
    previews: PreviewActivities, emulator: GitHubEmulator, tmp_path: Path
) -> None:
    repo, ref = seeded(emulator, tmp_path)
    first = branch(repo, "feature", {"deployments/g/c1/cluster.values.yaml": {"x": 1}})
    emulator.set_pull("acme", "fleet", 3, head_sha=first, head_ref="feature")
    # the branch moves on, GitHub has not recomputed the merge yet
    git(repo, "checkout", "-q", "feature")
    second = commit(repo, {"deployments/g/c1/cluster.values.yaml": {"x": 3}}, message="more")
    git(repo, "checkout", "-q", "main")
    got = revisions(previews, ref, second)
    assert got.head_sha == second and got.merge_sha is None
    assert got.warnings[0].startswith("merge ref out of date")


LEAKED = "-".join(["hunter2", "s3cr3t"])  # not in any source line a traceback shows


class LeakyBlobs(FileBlobStore):
    """A blob store whose error quotes what it was given: an unexpected exception whose
    message holds a secret (nothing real raises one on purpose)."""

    def put(self, key: str, data: bytes, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"cannot store {key}: {data[:200]!r} token={LEAKED}")


def test_an_unexpected_error_in_the_build_leaves_its_message_out(
    previews: PreviewActivities,
    emulator: GitHubEmulator,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    repo, ref = seeded(emulator, tmp_path)
    head = branch(repo, "feature", {"deployments/g/c1/cluster.values.yaml": {"x": 1}})
    emulator.set_pull("acme", "fleet", 3, head_sha=head, head_ref="feature")
    rev = revisions(previews, ref, head)
    previews.blobs = LeakyBlobs(tmp_path / "leaky")
    request = PreviewBuildRequest(repo=ref, pr=3, revisions=rev, base_ref="main")
    with caplog.at_level(logging.DEBUG), pytest.raises(ApplicationError) as raised:
        asyncio.run(ActivityEnvironment().run(previews.preview_build, request))
    err = raised.value
    assert err.type == "RuntimeError" and not err.non_retryable  # retried, like before
    assert LEAKED not in err.message and "unexpected RuntimeError" in err.message
    assert err.__cause__ is None and err.__suppress_context__  # nothing for Temporal to keep
    # the worker log has where it happened, not what it said
    unexpected = "activity raised an unexpected error"
    (logged,) = [r for r in caplog.records if r.getMessage().startswith(unexpected)]
    assert vars(logged)["error_type"] == "RuntimeError"
    assert "in put" in vars(logged)["traceback"]
    assert LEAKED not in caplog.text
    assert all(LEAKED not in str(vars(r)) for r in caplog.records)


def test_a_preview_stores_each_roots_fingerprint_for_carried_over_approvals(
    previews: PreviewActivities, emulator: GitHubEmulator, tmp_path: Path
) -> None:
    """What a deployment's diff is compared with before a pull request's approval carries
    over (docs/governance.md): every changed file of each root, with its digests."""
    repo, ref = seeded(emulator, tmp_path)
    change = {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "greeting": "hi"}}
    head = branch(repo, "feature", change)
    emulator.set_pull("acme", "fleet", 3, head_sha=head, head_ref="feature")
    rev = revisions(previews, ref, head)
    request = PreviewBuildRequest(repo=ref, pr=3, revisions=rev, base_ref="main")
    asyncio.run(ActivityEnvironment().run(previews.preview_build, request))
    raw = previews.blobs.get(preview_fingerprints_key("acme/fleet", 3, head))
    assert raw is not None
    prints = json.loads(raw)
    assert list(prints) == ["g/c1"]
    assert prints["g/c1"], "the changed root has changed files"
    for old, new in prints["g/c1"].values():
        assert old != new and (new or "").startswith("sha256:")


def test_the_preview_check_run_names_the_owners_to_approve_and_whether_they_did(
    previews: PreviewActivities, emulator: GitHubEmulator, tmp_path: Path
) -> None:
    """OWNERS on a pull request: the preview's summary lists the OWNERS
    files the change touches and whether the PR's reviews of its head already approve."""
    repo = web_repo(
        tmp_path / "fleet",
        {
            "deployments/apps/web/OWNERS": {"approvers": ["olga", "@acme/web"]},
            "templates/web/OWNERS": {"approvers": ["tess"]},
        },
    )
    emulator.seed_repository("acme", "fleet", INSTALLATION, "main", git_dir=repo)
    ref = RepoRef(owner="acme", name="fleet", installation_id=INSTALLATION, clone_url=str(repo))
    change = {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "greeting": "hi"}}
    head = branch(repo, "feature", change)
    emulator.set_pull("acme", "fleet", 3, head_sha=head, head_ref="feature")
    request = PreviewBuildRequest(
        repo=ref, pr=3, revisions=revisions(previews, ref, head), base_ref="main"
    )

    def summary() -> str:
        outcome = asyncio.run(ActivityEnvironment().run(previews.preview_build, request))
        return outcome.summary

    before = summary()
    assert "### OWNERS" in before
    assert "| `web` | `deployments/apps/web/OWNERS` | @olga, @acme/web | not yet |" in before
    assert "| `template web` | `templates/web/OWNERS` | @tess | not yet |" in before

    emulator.set_permission("acme", "fleet", "olga", "write")
    emulator.set_permission("acme", "fleet", "tess", "read")  # cannot approve anything
    emulator.add_review("acme", "fleet", 3, "olga", "APPROVED", commit_id=head)
    emulator.add_review("acme", "fleet", 3, "tess", "APPROVED", commit_id=head)
    after = summary()
    assert "| `web` | `deployments/apps/web/OWNERS` | @olga, @acme/web | yes, by @olga |" in after
    assert "| `template web` | `templates/web/OWNERS` | @tess | not yet |" in after


def test_a_missing_base_branch_or_head_is_a_clear_error(
    previews: PreviewActivities, emulator: GitHubEmulator, tmp_path: Path
) -> None:
    _, ref = seeded(emulator, tmp_path)
    request = PreviewRevisionsRequest(repo=ref, pr=3, head_sha="e" * 40, base_ref="nope")
    with pytest.raises(Exception, match="the base branch 'nope' is not in the repository"):
        asyncio.run(ActivityEnvironment().run(previews.preview_revisions, request))
    request = PreviewRevisionsRequest(repo=ref, pr=3, head_sha="e" * 40, base_ref="main")
    with pytest.raises(Exception, match=f"revision {'e' * 40} is not in acme/fleet"):
        asyncio.run(ActivityEnvironment().run(previews.preview_revisions, request))


# --------------------------------------------------------------------------- comment


def comment(acts: PreviewActivities, body: str, **fields: Any) -> int:
    key = "previews/acme/fleet/3/x/comment.md"
    acts.blobs.put(key, body.encode())
    request = PreviewCommentRequest(
        repo=RepoRef(owner="acme", name="fleet", installation_id=INSTALLATION),
        pr=3,
        body_key=key,
        **fields,
    )
    ref = asyncio.run(ActivityEnvironment().run(acts.preview_comment, request))
    return ref.comment_id


def test_one_sticky_comment_found_past_the_first_page_and_never_a_humans(
    previews: PreviewActivities, emulator: GitHubEmulator, tmp_path: Path
) -> None:
    emulator.seed_repository("acme", "fleet", INSTALLATION, "main")
    emulator.set_pull("acme", "fleet", 3, head_sha="a" * 40)
    # a human quotes the marker: not the App's comment
    emulator.add_comment(
        "acme", "fleet", 3, "<!-- rollwright:preview -->\nhijack", user_login="mallory"
    )
    first = comment(previews, "<!-- rollwright:preview -->\nfirst body\n")
    for i in range(120):  # the App's comment is on the second page of 100 now
        emulator.add_comment("acme", "fleet", 3, f"comment {i}", user_login="octocat")
    second = comment(previews, "<!-- rollwright:preview -->\nsecond body\n")
    again = comment(previews, "<!-- rollwright:preview -->\nsecond body\n")  # a retry
    assert first == second == again
    ours = [c for c in emulator.comments("acme", "fleet", 3) if c.id == first]
    (only,) = ours
    assert only.body.endswith("second body\n")
    assert only.bodies == [
        "<!-- rollwright:preview -->\nfirst body\n",
        "<!-- rollwright:preview -->\nsecond body\n",
    ]  # the retry did not even edit
    bot = [c for c in emulator.comments("acme", "fleet", 3) if c.user_login.endswith("[bot]")]
    assert len(bot) == 1


def test_another_bots_comment_with_the_marker_is_left_alone(
    previews: PreviewActivities, emulator: GitHubEmulator
) -> None:
    emulator.seed_repository("acme", "fleet", INSTALLATION, "main")
    emulator.set_pull("acme", "fleet", 3, head_sha="a" * 40)
    # another App quotes the marker (GitHub would refuse us the edit with a 403)
    quoted = "<!-- rollwright:preview -->\nquoted by another bot"
    other = emulator.add_comment("acme", "fleet", 3, quoted, user_login="other-app[bot]")
    first = comment(previews, "<!-- rollwright:preview -->\nfirst body\n")
    second = comment(previews, "<!-- rollwright:preview -->\nsecond body\n")
    assert first == second != other
    by_id = {c.id: c for c in emulator.comments("acme", "fleet", 3)}
    assert by_id[other].bodies == [quoted]
    assert by_id[first].user_login == "rollwright[bot]"
    assert by_id[first].bodies[-1].endswith("second body\n")
    # the App's identity is asked once per process, not per comment
    asked = [r for r in emulator.requests() if (r.method, r.path) == ("GET", "/app")]
    assert len(asked) == 1
    # knowing which comment is ours, GitHub refusing its edit is an error, not a new comment
    emulator.fail_next("PATCH", rf"/issues/comments/{first}$", 403, message="Forbidden")
    with pytest.raises(Exception, match="403 Forbidden"):
        comment(previews, "<!-- rollwright:preview -->\nthird body\n")
    assert len(emulator.comments("acme", "fleet", 3)) == 2


def test_without_the_apps_identity_a_comment_github_will_not_let_us_edit_is_passed_over(
    previews: PreviewActivities, emulator: GitHubEmulator
) -> None:
    emulator.seed_repository("acme", "fleet", INSTALLATION, "main")
    emulator.set_pull("acme", "fleet", 3, head_sha="a" * 40)
    emulator.fail_next("GET", r"^/app$", 404, message="Not Found")
    quoted = "<!-- rollwright:preview -->\nquoted by another bot"
    other = emulator.add_comment("acme", "fleet", 3, quoted, user_login="other-app[bot]")
    # what GitHub answers when an App edits a comment that is not its own
    emulator.fail_next(
        "PATCH",
        rf"/issues/comments/{other}$",
        403,
        message="Resource not accessible by integration",
        times=2,
    )
    first = comment(previews, "<!-- rollwright:preview -->\nfirst body\n")
    second = comment(previews, "<!-- rollwright:preview -->\nsecond body\n")
    assert first == second != other
    by_id = {c.id: c for c in emulator.comments("acme", "fleet", 3)}
    assert by_id[other].bodies == [quoted]
    assert by_id[first].bodies[-1].endswith("second body\n")
    assert len(by_id) == 2


def test_the_comment_points_the_preview_page_at_its_head(
    previews: PreviewActivities, emulator: GitHubEmulator, settings: Settings
) -> None:
    emulator.seed_repository("acme", "fleet", INSTALLATION, "main")
    emulator.set_pull("acme", "fleet", 3, head_sha="a" * 40)
    prefix = preview_prefix("acme/fleet", 3, "a" * 40)
    comment(previews, "body", head_sha="a" * 40, prefix=prefix, conclusion="success")
    raw = previews.blobs.get(preview_latest_key("acme/fleet", 3))
    assert raw is not None
    pointer = PreviewPointer.model_validate_json(raw)
    assert (pointer.head_sha, pointer.prefix, pointer.conclusion) == ("a" * 40, prefix, "success")


POLICY = """package main

import rego.v1

deny contains msg if {
  input.kind == "Deployment"
  input.spec.replicas > 2
  msg := sprintf("%s asks for %d replicas", [input.metadata.name, input.spec.replicas])
}

warn contains "a ConfigMap" if input.kind == "ConfigMap"
"""


def test_policy_findings_reach_the_check_run_and_the_comment(
    previews: PreviewActivities, emulator: GitHubEmulator, tmp_path: Path
) -> None:
    repo, ref = seeded(emulator, tmp_path)
    change = {
        "rollwright.yaml": {
            "policies": [{"name": "capacity", "path": "policies/cap", "owners": ["@acme/sre"]}]
        },
        "policies/cap/limits.rego": POLICY,
        "deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 3},
    }
    head = branch(repo, "feature", change)
    emulator.set_pull("acme", "fleet", 3, head_sha=head, head_ref="feature")
    rev = revisions(previews, ref, head)
    request = PreviewBuildRequest(repo=ref, pr=3, revisions=rev, base_ref="main")
    outcome = asyncio.run(ActivityEnvironment().run(previews.preview_build, request))
    assert outcome.conclusion == "success"
    assert (
        "- Policy checks: 1 denied, 2 warning(s) (deployments wait for an owner of each set)"
        in outcome.summary
    )
    deny = "- ❌ deny `capacity` Deployment default/web (web/web/default/Deployment.apps_web.yaml)"
    assert f"{deny}: web asks for 3 replicas" in outcome.text
    comment = previews.blobs.get(outcome.comment_key)
    assert comment is not None and f"{deny}: web asks for 3 replicas" in comment.decode()
