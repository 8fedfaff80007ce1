"""The check_run activity against the GitHub emulator over HTTP (PyGithub, App auth)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.github import GitHubAccess, GitHubActivities
from shared.contracts import checkrun
from shared.contracts.deploy import CheckRunRef, CheckRunRequest, RepoRef
from shared.devstack.emulator.server import GitHubEmulator
from shared.settings import Settings

APP_ID = 4242
INSTALLATION = 77
SHA = "c0ffee" + "0" * 34
REPO = RepoRef(owner="acme", name="fleet", installation_id=INSTALLATION)


@pytest.fixture
def emulator(app_key: str) -> Iterator[GitHubEmulator]:
    emu = GitHubEmulator(app_id=APP_ID, app_key=app_key)
    emu.seed_repository("acme", "fleet", INSTALLATION, "main")
    with emu:
        yield emu


@pytest.fixture
def activities(
    emulator: GitHubEmulator, app_key: str, tmp_path: Path
) -> Iterator[GitHubActivities]:
    settings = Settings(
        data_dir=tmp_path,
        github_api_url=emulator.url,
        github_app_id=str(APP_ID),
        github_private_key=SecretStr(app_key),
        public_url="http://rollwright.test",
    )
    access = GitHubAccess(settings)
    yield GitHubActivities(settings, access)
    access.close()


def call(acts: GitHubActivities, request: CheckRunRequest) -> CheckRunRef:
    result: CheckRunRef = asyncio.run(ActivityEnvironment().run(acts.check_run, request))
    return result


def request(check_run_id: int | None = None, **overrides: object) -> CheckRunRequest:
    fields: dict[str, object] = {
        "repo": REPO,
        "check_run_id": check_run_id,
        "name": "rollwright/g/c1",
        "head_sha": SHA,
        "external_id": "dep-1",
        "status": "queued",
        "title": "Queued",
        "summary": "**Queued** — root `g/c1`",
    }
    fields.update(overrides)
    return CheckRunRequest.model_validate(fields)


def test_create_then_full_updates(activities: GitHubActivities, emulator: GitHubEmulator) -> None:
    ref = call(activities, request())
    run = emulator.check_run(ref.check_run_id)
    assert (run.name, run.status, run.state["external_id"]) == (
        "rollwright/g/c1",
        "queued",
        "dep-1",
    )
    assert run.state["details_url"] == "http://rollwright.test/jobs/dep-1"

    rendering = call(activities, request(ref.check_run_id, status="in_progress", title="Rendering"))
    assert rendering.check_run_id == ref.check_run_id
    assert rendering.html_url.endswith(f"/acme/fleet/runs/{ref.check_run_id}")
    review = call(
        activities,
        request(
            ref.check_run_id,
            status="completed",
            conclusion="action_required",
            title="Review: 1 added",
            text="```diff\n+a\n```\n",
            actions=[checkrun.APPROVE, checkrun.REJECT],
        ),
    )
    assert review.check_run_id == ref.check_run_id
    run = emulator.check_run(ref.check_run_id)
    assert (run.status, run.conclusion) == ("completed", "action_required")
    assert [a["identifier"] for a in run.actions] == ["approve", "reject"]
    assert run.output["text"] == "```diff\n+a\n```\n"
    # every update sends the complete output and the buttons
    last = run.history[-1].request
    assert set(last) >= {"output", "actions"} and set(last["output"]) >= {"title", "summary"}


def test_completed_run_asked_back_in_progress_is_replaced(
    activities: GitHubActivities, emulator: GitHubEmulator
) -> None:
    first = call(
        activities,
        request(
            status="completed",
            conclusion="action_required",
            title="Review",
            actions=[checkrun.APPROVE, checkrun.REJECT],
        ),
    )
    diff = "```diff\n+a\n```\n"
    publishing = call(
        activities, request(first.check_run_id, status="in_progress", title="Pub", text=diff)
    )
    assert publishing.check_run_id != first.check_run_id
    new = emulator.check_run(publishing.check_run_id)
    assert (new.name, new.status, new.state["external_id"]) == (
        "rollwright/g/c1",
        "in_progress",
        "dep-1",
    )
    assert new.output["title"] == "Pub"
    old = emulator.check_run(first.check_run_id)
    assert (old.status, old.conclusion, old.actions) == ("completed", "neutral", [])
    assert old.output["title"] == "Superseded"
    # It keeps the diff that was reviewed and points at the job page, where things go on.
    assert old.output["text"] == diff
    assert old.output["summary"] == (
        f"This deployment continues in check run {publishing.check_run_id}. Its job page has "
        "the timeline, the log and the full diff: http://rollwright.test/jobs/dep-1"
    )
    assert old.state["details_url"] == "http://rollwright.test/jobs/dep-1"
    # from then on the new run is the one updated
    done = call(
        activities,
        request(publishing.check_run_id, status="completed", conclusion="success", title="Done"),
    )
    assert done.check_run_id == publishing.check_run_id
    assert emulator.check_run(done.check_run_id).conclusion == "success"


def test_deleted_run_is_created_again(
    activities: GitHubActivities, emulator: GitHubEmulator
) -> None:
    first = call(activities, request())
    emulator.fail_next("PATCH", r"/check-runs/", 404, message="Not Found")
    again = call(activities, request(first.check_run_id, status="in_progress"))
    assert again.check_run_id != first.check_run_id
    assert emulator.check_run(again.check_run_id).status == "in_progress"


def test_server_errors_and_rate_limits_are_retried(
    activities: GitHubActivities, emulator: GitHubEmulator
) -> None:
    emulator.fail_next("POST", r"/check-runs$", 502, message="Server Error")
    with pytest.raises(ApplicationError) as info:
        call(activities, request())
    assert not info.value.non_retryable and "502" in info.value.message

    emulator.fail_next(
        "POST",
        r"/check-runs$",
        403,
        message="You have exceeded a secondary rate limit",
        headers={"Retry-After": "7"},
    )
    with pytest.raises(ApplicationError) as info:
        call(activities, request())
    assert not info.value.non_retryable
    assert info.value.next_retry_delay is not None
    assert info.value.next_retry_delay.total_seconds() == 7
    assert call(activities, request()).check_run_id > 0  # and then it works


def test_client_errors_are_not_retried(
    activities: GitHubActivities, emulator: GitHubEmulator
) -> None:
    emulator.fail_next("POST", r"/check-runs$", 422, message="Validation Failed")
    with pytest.raises(ApplicationError) as info:
        call(activities, request())
    assert info.value.non_retryable and "422" in info.value.message

    unknown = request(repo=RepoRef(owner="acme", name="other", installation_id=INSTALLATION))
    with pytest.raises(ApplicationError) as info:
        call(activities, unknown)
    assert info.value.non_retryable


def test_oversized_output_is_cut_not_refused(
    activities: GitHubActivities, emulator: GitHubEmulator
) -> None:
    ref = call(activities, request(text="+line\n" * 20_000))
    text = emulator.check_run(ref.check_run_id).output["text"]
    assert len(text.encode()) <= 65535 and "exceeds the limit" in text


def test_without_a_github_app(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    acts = GitHubActivities(settings, GitHubAccess(settings))
    with pytest.raises(ApplicationError, match="no GitHub App configured") as info:
        call(acts, request())
    assert info.value.non_retryable


def test_installation_token_for_https_fetches(
    activities: GitHubActivities, emulator: GitHubEmulator
) -> None:
    https = RepoRef(owner="acme", name="fleet", clone_url="https://github.invalid/acme/fleet.git")

    def token_requests() -> int:
        return sum(r.path.endswith("/access_tokens") for r in emulator.requests())

    token = activities.github.token_for(https)
    assert token and token.startswith("ghs_")
    issued = token_requests()
    assert issued == 1
    assert activities.github.token_for(https) == token  # cached until near expiry
    assert token_requests() == issued


def test_every_kind_of_check_run_links_a_page_of_its_own(
    activities: GitHubActivities, emulator: GitHubEmulator
) -> None:
    """The Details link is chosen by the kind of check run, not left to what a workflow sent:
    the revision summary (Approve all) → the revision page, a rollout → its rollout page
    (not the repository), a preview → its head's report, a root → its job page."""
    public = "http://rollwright.test"
    kinds = [
        (
            checkrun.unreadable_fleet(REPO, SHA, "rollwright.yaml:1: bad").model_copy(
                update={"status": "in_progress", "conclusion": None}
            ),
            f"{public}/revisions/acme/fleet/{SHA}",
        ),
        (
            request(
                name="rollwright/promote: cert-manager-v1.14",
                external_id="promote:acme/fleet:cert-manager-v1.14",
                details_url="https://github.com/acme/fleet",
            ),
            f"{public}/rollouts/acme/fleet/cert-manager-v1.14",
        ),
        (
            request(name="rollwright/preview", external_id=f"preview:12:{SHA}"),
            f"{public}/previews/acme/fleet/12/{SHA}",
        ),
        (request(), f"{public}/jobs/dep-1"),
    ]
    for made, url in kinds:
        ref = call(activities, made)
        assert emulator.check_run(ref.check_run_id).state["details_url"] == url, made.name
        # an update keeps the link (GitHub would otherwise keep whatever was there)
        again = call(activities, made.model_copy(update={"check_run_id": ref.check_run_id}))
        assert emulator.check_run(again.check_run_id).state["details_url"] == url, made.name
