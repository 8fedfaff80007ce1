"""The gateway's routing decisions and helpers, without a server: what a payload becomes."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from gateway.actions import (
    ACTION,
    HotfixRequested,
    QueueRevision,
    Review,
    StartDispatch,
    Unlock,
)
from gateway.metrics import GatewayMetrics, event_label
from gateway.outbox import OutboxOptions
from gateway.webhooks import Acknowledge, Ignore, parse_body, route_event
from shared.contracts.deploy import RepoRef, ReviewSignal, UnlockSignal, deploy_workflow_id
from shared.github.urls import web_base
from tests.support.vendored import GITHUB_WEBHOOKS


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GITHUB_WEBHOOKS / name).read_text())
    return data


def route(event: str, payload: dict[str, Any], app_id: str | None = "7") -> object:
    return route_event(event, payload, app_id=app_id, delivery_id="d-1")


def ours(fixture: str, name: str = "rollwright/prod/eu", app: int = 7) -> dict[str, Any]:
    payload = load(fixture)
    payload["check_run"]["name"] = name
    payload["check_run"]["app"]["id"] = app
    return payload


def test_push_fixture_as_github_sent_it_is_a_merge() -> None:
    # The untouched fixture is a push creating master, the default branch.
    routed = route("push", load("push.event.4.json"))
    assert isinstance(routed, StartDispatch)
    assert routed.workflow_id == (
        "dispatch:Codertocat/Hello-World:6113728f27ae82c7b1a177c8d03f9e96e0adf246"
    )
    assert routed.inp.before == "0" * 40
    assert routed.inp.repo.installation_id == 1


def test_the_fixture_buttons_of_another_app_are_ignored() -> None:
    # electron's "API Review" run with an `lgtm|26764` button: not a rollwright check run.
    assert isinstance(route("check_run", load("check_run.requested_action.6.json")), Ignore)
    assert isinstance(route("check_run", load("check_run.rerequested.7.json")), Ignore)
    assert isinstance(route("check_suite", load("check_suite.rerequested.7.json")), Ignore)


def test_button_routes() -> None:
    payload = ours("check_run.requested_action.6.json")
    payload["check_run"]["external_id"] = "dep-1"
    payload["requested_action"]["identifier"] = "reject"
    assert route("check_run", payload) == Review(
        repo="electron/electron",
        deployment_id="dep-1",
        signal=ReviewSignal(
            decision="reject",
            by="codebytere",
            repo="electron/electron",
            check_run_name=payload["check_run"]["name"],
            head_sha=payload["check_run"]["head_sha"],
        ),
    )
    payload["requested_action"]["identifier"] = "unlock"
    unlock = route("check_run", payload)
    # with the check run clicked (a refusal is shown there) and the repository (a finished
    # queue is started by the Unlock)
    assert unlock == Unlock(
        repo="electron/electron",
        root="prod/eu",
        signal=UnlockSignal(by="codebytere", check_run_id=payload["check_run"]["id"]),
        repo_ref=RepoRef(
            owner="electron",
            name="electron",
            installation_id=payload["installation"]["id"],
            clone_url=payload["repository"]["clone_url"],
            default_branch=payload["repository"]["default_branch"],
            html_url=payload["repository"]["html_url"],
        ),
    )
    assert unlock.describe() == "signal-with-start unlock"
    # a row stored before the repository was part of it only signals a running queue
    stored = Unlock.model_validate_json(
        '{"kind": "unlock", "repo": "electron/electron", "root": "prod/eu", "signal": {}}'
    )
    assert stored.repo_ref is None and stored.describe() == "signal unlock"


def test_actions_survive_the_outbox_and_name_their_repository_and_target() -> None:
    # What the outbox stores is the action's JSON: it must come back equal, as its own kind.
    push = route("push", load("push.event.4.json"))
    review = ours("check_run.requested_action.6.json")
    review["check_run"]["external_id"] = "dep-1"
    review["requested_action"]["identifier"] = "approve"
    unlock = ours("check_run.requested_action.6.json")
    unlock["requested_action"]["identifier"] = "unlock"
    rerun = ours("check_run.rerequested.7.json")
    expected = [
        (
            push,
            StartDispatch,
            "Codertocat/Hello-World",
            "dispatch:Codertocat/Hello-World:6113728f27ae82c7b1a177c8d03f9e96e0adf246",
        ),
        (route("check_run", review), Review, "electron/electron", "dep-1"),
        (
            route("check_run", unlock),
            Unlock,
            "electron/electron",
            deploy_workflow_id("electron/electron", "prod/eu"),
        ),
        (
            route("check_run", rerun),
            QueueRevision,
            rerun["repository"]["full_name"],
            deploy_workflow_id(rerun["repository"]["full_name"], "prod/eu"),
        ),
    ]
    for action, kind, repo, target in expected:
        assert isinstance(action, kind)
        assert isinstance(action, StartDispatch | Review | Unlock | QueueRevision)
        assert (action.repo, action.target) == (repo, target)
        stored = action.model_dump_json()
        assert ACTION.validate_json(stored) == action
        assert type(ACTION.validate_json(stored)) is kind


def test_retry_delays_double_up_to_the_cap() -> None:
    options = OutboxOptions(backoff=0.5, backoff_max=30)
    assert [options.retry_delay(n) for n in (1, 2, 3, 4, 7, 8, 50)] == [
        0.5,
        1,
        2,
        4,
        30,
        30,
        30,
    ]


def test_without_a_configured_app_id_any_apps_rollwright_runs_count() -> None:
    payload = ours("check_run.rerequested.7.json", app=999)
    assert isinstance(route("check_run", payload, app_id="7"), Ignore)
    routed = route("check_run", payload, app_id=None)
    assert isinstance(routed, QueueRevision)
    assert routed.root == "prod/eu"
    assert routed.revision.revision == payload["check_run"]["head_sha"]


def test_bare_rollwright_prefix_is_not_a_root() -> None:
    payload = ours("check_run.rerequested.7.json", name="rollwright/")
    assert isinstance(route("check_run", payload), Ignore)


@pytest.mark.parametrize(
    "event", ["installation", "installation_repositories", "installation_target", "ping"]
)
def test_acknowledged(event: str) -> None:
    assert isinstance(route(event, {"action": "created"}), Acknowledge)


def test_parse_body_reads_json_and_form_encoding() -> None:
    payload = {"zen": "Keep it logically awesome."}
    assert parse_body(json.dumps(payload).encode(), "application/json") == payload
    form = urlencode({"payload": json.dumps(payload)}).encode()
    assert parse_body(form, "application/x-www-form-urlencoded; charset=utf-8") == payload
    with pytest.raises(ValueError):
        parse_body(b"[1, 2]", "application/json")


@pytest.mark.parametrize(
    ("api", "web"),
    [
        ("https://api.github.com", "https://github.com"),
        ("https://api.github.com/", "https://github.com"),
        ("https://ghe.example/api/v3", "https://ghe.example"),
        ("http://127.0.0.1:9100", "http://127.0.0.1:9100"),
    ],
)
def test_web_base(api: str, web: str) -> None:
    assert web_base(api) == web


def test_metric_labels_stay_bounded() -> None:
    assert event_label("push") == "push"
    assert event_label("x" * 500) == "other"
    assert event_label(None) == "other"
    metrics = GatewayMetrics()
    metrics.webhook("evil\n{label}", "ignored", 0.001)
    body, _ = metrics.exposition()
    assert b'rollwright_gateway_webhooks_total{event="other",outcome="ignored"} 1.0' in body
    assert b"evil" not in body


def test_approve_all_on_the_revision_summary_goes_to_its_workflow() -> None:
    """Approve all on the `rollwright` check run becomes a review click made on that check
    run, sent to the revision's RevisionReviewWorkflow (which passes it on to each root)."""
    payload = ours("check_run.requested_action.6.json", name="rollwright")
    payload["requested_action"] = {"identifier": "approve_all"}
    routed = route("check_run", payload)
    assert isinstance(routed, Review)
    repo, sha = payload["repository"]["full_name"], payload["check_run"]["head_sha"]
    assert routed.target == f"revision:{repo}:{sha}"
    assert routed.signal == ReviewSignal(
        decision="approve",
        by=payload["sender"]["login"],
        repo=repo,
        check_run_name="rollwright",
        head_sha=sha,
    )
    assert ACTION.validate_json(routed.model_dump_json()) == routed
    payload["requested_action"] = {"identifier": "approve"}
    assert isinstance(route("check_run", payload), Ignore)
    foreign = ours("check_run.requested_action.6.json", name="rollwright", app=9)
    foreign["requested_action"] = {"identifier": "approve_all"}
    assert isinstance(route("check_run", foreign), Ignore)


# --------------------------------------------------------------------------- hotfix commands


def comment(body: str, *, on_pull: bool = True, user_type: str = "User") -> dict[str, Any]:
    """GitHub's own issue_comment.created example, its issue made a pull request."""
    payload = load("issue_comment.created.0.json")
    payload["comment"]["body"] = body
    payload["comment"]["user"]["type"] = user_type
    if on_pull:
        number = payload["issue"]["number"]
        api = payload["repository"]["url"]
        payload["issue"]["pull_request"] = {
            "url": f"{api}/pulls/{number}",
            "html_url": f"{payload['repository']['html_url']}/pull/{number}",
        }
    return payload


def test_a_hotfix_command_on_a_pull_request_goes_to_its_hotfix_workflow() -> None:
    routed = route("issue_comment", comment("/rollwright hotfix prod/eu, prod/us prod/eu\nplease"))
    assert isinstance(routed, HotfixRequested)
    assert routed.target == "hotfix:Codertocat/Hello-World:1"
    assert routed.command.by == "Codertocat"
    assert routed.command.roots == ["prod/eu", "prod/us"]
    assert routed.command.problem == ""
    assert routed.command.comment_id == 492700400
    assert ACTION.validate_json(ACTION.dump_json(routed)) == routed  # survives the outbox


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("/rollwright hotfix ../etc", "`../etc` is not a root id"),
        ("/rollwright hotfix " + " ".join(f"r{i}" for i in range(21)), "at most 20 roots"),
    ],
)
def test_a_malformed_hotfix_command_is_answered_with_what_is_wrong(body: str, problem: str) -> None:
    routed = route("issue_comment", comment(body))
    assert isinstance(routed, HotfixRequested)
    assert routed.command.roots == [] and problem in routed.command.problem


@pytest.mark.parametrize(
    "payload",
    [
        comment("/rollwright hotfix prod/eu", on_pull=False),  # an issue
        comment("/rollwright hotfix prod/eu", user_type="Bot"),  # a bot, rollwright itself too
        comment("lgtm\n/rollwright hotfix prod/eu"),  # not on the first line
        comment("/rollwright hotfixes prod/eu"),
        {**comment("/rollwright hotfix prod/eu"), "action": "edited"},
    ],
)
def test_other_comments_are_no_commands(payload: dict[str, Any]) -> None:
    assert isinstance(route("issue_comment", payload), Ignore)
