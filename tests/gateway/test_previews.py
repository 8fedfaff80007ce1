"""The gateway's side of PR previews, without Temporal:

- routing: GitHub's own `pull_request` and `check_run` payloads → preview actions, which
  survive the outbox's JSON; `rollwright/preview` and rollouts are never a root;
- the preview page: the stored report rendered, raw HTML from a PR escaped.

The activities behind a preview are in tests/activities/test_preview.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from gateway.actions import ACTION, PreviewClosed, PreviewHead
from gateway.app import create_app
from gateway.previews import render_markdown
from gateway.webhooks import Ignore, route_event
from shared.contracts.checkrun import root_from_check_run_name
from shared.contracts.preview import (
    PreviewPointer,
    PullRequestClosed,
    parse_preview_external_id,
    preview_external_id,
    preview_latest_key,
    preview_prefix,
    preview_workflow_id,
)
from shared.settings import Settings
from shared.stores.blob import FileBlobStore
from tests.support.machine import MACHINE_HEADERS, MACHINE_SECRET
from tests.support.webhooks import load


def route(event: str, payload: dict[str, Any]) -> object:
    return route_event(event, payload, app_id="7", delivery_id="d-1")


# --------------------------------------------------------------------------- routing


def test_opened_and_synchronize_fixtures_preview_their_head() -> None:
    opened = route("pull_request", load("pull_request.opened.12.json"))
    assert isinstance(opened, PreviewHead)
    assert opened.target == preview_workflow_id("Codertocat/Hello-World", 2)
    assert opened.repo_ref.installation_id == 1
    assert opened.signal.head_sha == "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
    assert (opened.signal.base_ref, opened.signal.head_ref) == ("master", "changes")
    assert (opened.signal.action, opened.signal.sender) == ("opened", "Codertocat")
    assert opened.signal.delivery_id == "d-1"
    sync = route("pull_request", load("pull_request.synchronize.22.json"))
    assert isinstance(sync, PreviewHead) and sync.signal.action == "synchronize"


@pytest.mark.parametrize("action", ["reopened", "ready_for_review"])
def test_reopened_and_ready_for_review_preview_too(action: str) -> None:
    payload = load("pull_request.opened.12.json")
    payload["action"] = action
    routed = route("pull_request", payload)
    assert isinstance(routed, PreviewHead) and routed.signal.action == action


def test_drafts_are_previewed() -> None:
    payload = load("pull_request.opened.12.json")
    payload["pull_request"]["draft"] = True
    routed = route("pull_request", payload)
    assert isinstance(routed, PreviewHead) and routed.signal.draft


def test_closed_signals_without_starting() -> None:
    payload = load("pull_request.synchronize.22.json")
    payload["action"] = "closed"
    payload["pull_request"]["merged"] = True
    routed = route("pull_request", payload)
    assert routed == PreviewClosed(
        repo="Codertocat/Hello-World",
        pr=2,
        signal=PullRequestClosed(merged=True, sender="Codertocat", delivery_id="d-1"),
    )


def test_a_new_base_branch_previews_again_other_edits_do_not() -> None:
    payload = load("pull_request.opened.12.json")
    payload["action"] = "edited"
    payload["changes"] = {"title": {"from": "old title"}}
    assert isinstance(route("pull_request", payload), Ignore)
    payload["changes"] = {"base": {"ref": {"from": "develop"}, "sha": {"from": "a" * 40}}}
    routed = route("pull_request", payload)
    assert isinstance(routed, PreviewHead) and routed.signal.action == "edited"
    payload["action"] = "labeled"
    assert isinstance(route("pull_request", payload), Ignore)


def test_pull_requests_from_forks_are_not_previewed() -> None:
    payload = load("pull_request.opened.12.json")
    payload["pull_request"]["head"]["repo"]["full_name"] = "mallory/Hello-World"
    routed = route("pull_request", payload)
    assert isinstance(routed, Ignore) and "fork" in routed.reason
    payload["pull_request"]["head"]["repo"] = None  # the fork was deleted
    assert isinstance(route("pull_request", payload), Ignore)


def test_preview_actions_survive_the_outbox() -> None:
    closed = load("pull_request.synchronize.22.json")
    closed["action"] = "closed"
    for action in (
        route("pull_request", load("pull_request.opened.12.json")),
        route("pull_request", closed),
    ):
        assert isinstance(action, PreviewHead | PreviewClosed)
        assert action.repo == "Codertocat/Hello-World"
        stored = ACTION.validate_json(action.model_dump_json())
        assert stored == action and type(stored) is type(action)


def test_rerun_of_the_preview_check_run_previews_that_head_again() -> None:
    payload = load("check_run.rerequested.7.json")
    run = payload["check_run"]
    head = run["head_sha"]
    run.update({"name": "rollwright/preview", "external_id": preview_external_id(5, head)})
    run["app"]["id"] = 7
    run["pull_requests"] = [
        {
            "url": "https://api.github.com/repos/github/hello-world/pulls/5",
            "id": 1,
            "number": 5,
            "head": {"ref": "feature", "sha": head, "repo": {"id": 1, "url": "u", "name": "n"}},
            "base": {"ref": "release", "sha": "b" * 40, "repo": {"id": 1, "url": "u", "name": "n"}},
        }
    ]
    routed = route("check_run", payload)
    assert isinstance(routed, PreviewHead)
    assert routed.target == preview_workflow_id("github/hello-world", 5)
    assert (routed.signal.head_sha, routed.signal.base_ref) == (head, "release")
    assert routed.signal.action == "rerequested"
    run["pull_requests"] = []  # GitHub leaves it empty for some runs: the default branch
    routed = route("check_run", payload)
    assert isinstance(routed, PreviewHead) and routed.signal.base_ref == "master"
    # it has no buttons; a click (from an older run, say) is ignored, never a root's
    payload["action"] = "requested_action"
    payload["requested_action"] = {"identifier": "approve"}
    assert isinstance(route("check_run", payload), Ignore)
    run["app"]["id"] = 8  # another app's run of the same name
    payload["action"] = "rerequested"
    assert isinstance(route("check_run", payload), Ignore)


def test_preview_and_rollout_check_runs_are_never_roots() -> None:
    assert root_from_check_run_name("rollwright/preview") is None
    assert root_from_check_run_name("rollwright/promote: bump-web") is None
    assert root_from_check_run_name("rollwright/prod/eu") == "prod/eu"
    assert root_from_check_run_name("rollwright/previews/eu") == "previews/eu"


def test_external_ids_round_trip() -> None:
    assert parse_preview_external_id(preview_external_id(12, "c" * 40)) == (12, "c" * 40)
    for other in (None, "", "3f2a-uuid", "preview:x:abc", "preview:12:", "deploy:1:a"):
        assert parse_preview_external_id(other) is None


# --------------------------------------------------------------------------- page


def test_the_preview_page_renders_the_report_and_escapes_markup(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, webhook_secret=SecretStr("s"), api_token=MACHINE_SECRET)
    blobs = FileBlobStore(tmp_path / "blobs")
    head = "c" * 40
    prefix = preview_prefix("acme/fleet", 9, head)
    report = (
        "### rollwright preview\n\n"
        "<details>\n<summary><code>g/c1</code> — changed</summary>\n\n"
        "```diff\n-<script>alert(1)</script>\n+ok\n```\n\n</details>\n\n"
        '<img src=x onerror="alert(2)">\n\n'
        "a [link](javascript:alert(3)) and <b>bold</b> and <span onclick=x>span</span>\n"
    )
    blobs.put(f"{prefix}report.md", report.encode())
    blobs.put(f"{prefix}report.json", json.dumps({"base": "b" * 40, "failed": True}).encode())
    blobs.put(f"{prefix}report.diff", b"--- a/x\n+++ b/x\n")
    pointer = PreviewPointer.model_validate(
        {
            "pr": 9,
            "head_sha": head,
            "prefix": prefix,
            "conclusion": "failure",
            "at": "2026-01-01T00:00:00Z",
        }
    )
    blobs.put(preview_latest_key("acme/fleet", 9), pointer.model_dump_json().encode())
    with TestClient(create_app(settings), headers=MACHINE_HEADERS) as client:
        page = client.get("/previews/acme/fleet/9")
        assert page.status_code == 200
        html = page.text
        assert "<details>" in html and "<summary><code>g/c1</code> — changed</summary>" in html
        assert "&lt;script&gt;" in html and "<script>" not in html
        assert "<img" not in html and "&lt;img" in html
        assert 'href="javascript:' not in html
        assert "<b>bold</b>" in html and "&lt;span onclick=x&gt;" in html
        assert "<span onclick" not in html
        assert "fails to render on the PR side" in html
        assert client.get(f"/previews/acme/fleet/9/{head}").text == html
        raw = client.get(f"/previews/acme/fleet/9/{head}/report.diff")
        assert raw.status_code == 200 and raw.text.startswith("--- a/x")
        assert client.get(f"/previews/acme/fleet/9/{head}/secrets.txt").status_code == 404
        assert client.get("/previews/acme/fleet/10").status_code == 404
        pending = client.get(f"/previews/acme/fleet/9/{'d' * 40}")  # a head not reported yet
        assert pending.status_code == 200 and 'id="pending"' in pending.text
        assert "g/c1" not in pending.text
        # a path that names nothing that could exist is not found, like one that does not exist
        assert client.get("/previews/acme/fleet/9/not-a-sha").status_code == 404
        assert client.get("/previews/..%2F..%2Fetc/fleet/9").status_code == 404


def test_render_markdown_keeps_entities_and_tables() -> None:
    html = render_markdown("| a | b |\n|--|--|\n| `x` | 1 |\n\n<summary>a &amp; b</summary>\n")
    assert "<table>" in html and "<code>x</code>" in html
    assert "a &amp; b" in html and "&amp;amp;" not in html
