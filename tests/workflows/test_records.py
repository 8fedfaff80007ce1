"""What a deployment writes down: latest.json, its history rows, the parent's update."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.contracts.deploy import LatestDeployment, ReviewSignal
from tests.support.deployment_inputs import REPO, ROOT, deployment_input, diff
from workflows.deployment.records import Progress, audit_record

START = datetime(2025, 1, 1, tzinfo=UTC)
END = datetime(2025, 1, 2, tzinfo=UTC)
PREVIOUS = LatestDeployment(
    deployment_id="dep-0",
    revision="b" * 40,
    trigger="merge",
    state="published",
    published_prefix="renders/b",
    published_revision="b" * 40,
)


def test_a_published_attempt_becomes_the_diff_base() -> None:
    progress = Progress(deployment_input(latest=PREVIOUS, locks_queue=True), digest="d")
    latest = progress.latest("published", "@ann", "renders/a", started_at=START, finished_at=END)
    assert (latest.published_prefix, latest.published_revision) == ("renders/a", "a" * 40)
    assert (latest.state, latest.render_digest, latest.approved_by) == ("published", "d", "@ann")
    assert (latest.started_at, latest.finished_at, latest.locks_queue) == (START, END, True)


def test_a_failed_apply_keeps_the_previous_published_render() -> None:
    progress = Progress(deployment_input(latest=PREVIOUS))
    latest = progress.latest("failed", "@ann", None, started_at=START, finished_at=END)
    assert (latest.published_prefix, latest.published_revision) == ("renders/b", "b" * 40)
    first = Progress(deployment_input()).latest(
        "failed", None, None, started_at=START, finished_at=END
    )
    assert (first.published_prefix, first.published_revision) == (None, None)


def test_a_record_carries_the_diff_counts_once_there_is_a_diff() -> None:
    progress = Progress(deployment_input(requested_by="carol"), check_run_id=7)
    before = progress.record("rendering", "", None, at=START)
    assert (before.added, before.removed, before.changed) == (None, None, None)
    progress.diff = diff(added=1, changed=2)
    after = progress.record("published", "done", "@ann", at=END)
    assert (after.added, after.removed, after.changed) == (1, 0, 2)
    assert (after.repo, after.root, after.requested_by, after.check_run_id) == (
        REPO.full_name,
        ROOT,
        "carol",
        7,
    )


def test_the_parent_hears_the_latest_json_only_at_the_end() -> None:
    progress = Progress(deployment_input())
    progress.persisted = PREVIOUS
    assert progress.update("publishing", "", "@ann").latest is None
    assert progress.update("published", "", "@ann").latest == PREVIOUS
    result = progress.result("published", "done", "@ann", published=True)
    assert result.published and result.latest == PREVIOUS


def test_an_audit_row_says_whether_the_click_counted() -> None:
    click = ReviewSignal(decision="reject", by="rita", source="page")
    row = audit_record(deployment_input(), click, counted=False, reason="read only", at=START)
    assert (row.action, row.actor, row.source, row.counted, row.reason) == (
        "reject",
        "rita",
        "page",
        False,
        "read only",
    )
