"""Notifications end to end below Temporal: recorded state changes become one event each,
delivered signed to a real HTTP sink over the network (and in Slack's shape), retried with
backoff when the sink fails, given up on a refusal, never repeated; reminders once per span,
only within the configured hours."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from temporalio.testing import ActivityEnvironment

from activities.store import StoreActivities
from shared.contracts.deploy import DeploymentRecord, LockState
from shared.devstack.sink import NotificationSink
from shared.github.app import webhook_signature
from shared.notify.events import deployment_kind, event_id
from shared.notify.notifier import (
    MAX_ATTEMPTS,
    Announcer,
    Notifier,
    NotifyConfigError,
    backoff,
)
from shared.notify.sinks import SlackSink, WebhookSink
from shared.settings import Settings
from shared.stores.blob import FileBlobStore
from shared.stores.sql.deployments import DeploymentStore, StateChange
from shared.stores.sql.engine import Database
from shared.stores.sql.locks import RootLockStore
from shared.stores.sql.notifications import NewEvent, NotificationStore
from worker.logs import configure_logging

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday


def settings_for(sink: NotificationSink, **more: str) -> Settings:
    return Settings(
        notify_webhook_url=sink.webhook_url,
        notify_webhook_secret=sink.secret,  # type: ignore[arg-type]
        notify_slack_url=sink.slack_url,  # type: ignore[arg-type]
        public_url="http://rollwright.test",
        **more,  # type: ignore[arg-type]
    )


def record(state: str, minutes: int, deployment_id: str = "d-1", **fields: str) -> DeploymentRecord:
    return DeploymentRecord(
        deployment_id=deployment_id,
        repo="acme/fleet",
        root="prod/eu",
        revision="a" * 40,
        trigger="merge",
        state=state,  # type: ignore[arg-type]
        at=T0 + timedelta(minutes=minutes),
        **fields,  # type: ignore[arg-type]
    )


def announce(database: Database, announcer: Announcer, *records: DeploymentRecord) -> None:
    store = DeploymentStore(database)
    for r in records:
        change = store.record(r)
        if change is not None:
            announcer.deployment(r, change)


@pytest.mark.parametrize(
    ("previous", "state", "kind"),
    [
        (None, "queued", "deployment.queued"),
        ("queued", "rendering", None),
        ("rendering", "awaiting_review", "deployment.awaiting_review"),
        ("awaiting_review", "publishing", "deployment.approved"),
        ("awaiting_review", "approved", "deployment.approved"),
        ("approved", "publishing", None),
        ("publishing", "published", "deployment.published"),
        ("published", "verifying", None),
        ("publishing", "verifying", "deployment.published"),
        ("verifying", "unhealthy", "deployment.unhealthy"),
        ("awaiting_review", "rejected", "deployment.rejected"),
    ],
)
def test_which_state_changes_are_events(previous: str | None, state: str, kind: str) -> None:
    assert deployment_kind(StateChange(previous, state)) == kind


def test_a_long_event_id_is_hashed_to_fit() -> None:
    assert event_id("reminder.lock", "acme/fleet", "x") == "reminder.lock:acme/fleet:x"
    long = event_id("reminder.lock", "acme/fleet", "r" * 300)
    assert long.startswith("reminder.lock:sha256:") and len(long) <= 160


def test_each_state_change_reaches_the_sinks_once_signed(
    database: Database, sink: NotificationSink
) -> None:
    settings = settings_for(sink)
    notifier = Notifier(database, settings)
    try:
        announce(
            database,
            notifier.announcer,
            record("queued", 0),
            record("queued", 0),  # a retried activity: the same change, nothing new
            record("rendering", 1),
            record("awaiting_review", 2),
            record("publishing", 30, approved_by="@dave"),
            record("published", 31, approved_by="@dave"),
        )
        assert notifier.deliver_due(T0 + timedelta(hours=1)) == 8  # 4 events × 2 sinks
        assert notifier.deliver_due(T0 + timedelta(hours=1)) == 0
    finally:
        notifier.close()
    events = sink.events()
    assert [e["type"] for e in events] == [
        "deployment.queued",
        "deployment.awaiting_review",
        "deployment.approved",
        "deployment.published",
    ]
    assert events[2]["summary"] == (
        "acme/fleet `prod/eu`: deployment of `aaaaaaaaaaaa` approved by @dave"
    )
    assert events[0]["url"] == "http://rollwright.test/jobs/d-1"
    snapshot = sink.snapshot()
    assert snapshot["refused"] == 0 and snapshot["repeats"] == {}
    assert snapshot["slack"][1].startswith("acme/fleet `prod/eu`: deployment of")
    listed = NotificationStore(database).of_deployment("d-1")
    assert {(n.kind, n.sink, n.state) for n in listed} == {
        (e["type"], s, "sent") for e in events for s in ("slack", "webhook")
    }


def test_the_signature_is_what_a_receiver_checks() -> None:
    sent = WebhookSink("http://x.test/hook", "k").request(
        "e-1", "deployment.queued", '{"id":"e-1"}'
    )
    assert sent.headers["X-Rollwright-Signature-256"] == webhook_signature("k", b'{"id":"e-1"}')
    assert sent.headers["X-Rollwright-Event-Id"] == "e-1"
    slack = SlackSink("http://x.test/slack").request("e-1", "k", '{"summary":"s","url":"u"}')
    assert json.loads(slack.body) == {"text": "s (<u|details>)"}


def test_a_failing_sink_is_retried_with_backoff_and_then_given_up(
    database: Database, sink: NotificationSink
) -> None:
    failing = "http://127.0.0.1:9/nothing-listens-here"
    settings = settings_for(sink)
    notifier = Notifier(database, settings, sinks=[WebhookSink(failing, "k", name="webhook")])
    try:
        announce(database, notifier.announcer, record("queued", 0))
        now = T0
        tried = []
        for _ in range(MAX_ATTEMPTS + 3):
            notifier.deliver_due(now)
            row = NotificationStore(database).of_deployment("d-1")[0]
            tried.append(row.attempts)
            if row.state == "failed":
                break
            now += timedelta(seconds=backoff(row.attempts))
            assert notifier.deliver_due(now - timedelta(seconds=1)) == 0  # not yet due
    finally:
        notifier.close()
    assert tried == list(range(1, MAX_ATTEMPTS + 1))
    assert row.state == "failed" and "ConnectError sending to the webhook sink" in row.last_error
    assert "127.0.0.1:9" not in row.last_error  # never the URL (Slack's is a secret)
    assert [backoff(n) for n in (1, 2, 3, 9, 12)] == [5.0, 10.0, 20.0, 900.0, 900.0]


def test_a_refusal_is_final_and_a_server_error_is_retried(
    database: Database, sink: NotificationSink
) -> None:
    answers = iter([httpx.Response(503), httpx.Response(200)])
    transport = httpx.MockTransport(lambda request: next(answers))
    refusing = httpx.MockTransport(lambda request: httpx.Response(410))
    settings = settings_for(sink)
    for client, states in ((transport, ["pending", "sent"]), (refusing, ["failed"])):
        notifier = Notifier(
            database,
            settings,
            sinks=[WebhookSink("http://sink.test/hook", "k")],
            client=httpx.Client(transport=client),
        )
        deployment = f"d-{len(states)}"
        announce(database, notifier.announcer, record("queued", 0, deployment))
        seen = []
        now = T0
        for _ in states:
            notifier.deliver_due(now)
            seen.append(NotificationStore(database).of_deployment(deployment)[0].state)
            now += timedelta(hours=1)
        notifier.close()
        assert seen == states


def test_reminders_once_per_span_and_only_within_the_hours(
    database: Database, sink: NotificationSink
) -> None:
    settings = settings_for(
        sink,
        remind_review_after="4h",
        remind_lock_after="1d",
        remind_hours="0 9 * * 1-5",
        remind_hours_duration="8h",
        remind_timezone="UTC",
    )
    notifier = Notifier(database, settings)
    try:
        announce(database, notifier.announcer, record("awaiting_review", 0, "r-1"))
        RootLockStore(database).set(
            "acme/fleet", "prod/us", LockState(locked=True, by_deployment="m-1", since=T0), T0
        )
        assert notifier.remind(T0 + timedelta(hours=3)) == 0  # not yet 4 h
        assert notifier.remind(T0 + timedelta(hours=4, minutes=1)) == 1  # the review, once
        assert notifier.remind(T0 + timedelta(hours=5)) == 0  # the same span
        assert notifier.remind(T0 + timedelta(hours=8, minutes=1)) == 0  # 18:01: after hours
        # Tuesday 10:30: the review's 6th span and the lock's first day, once each
        tuesday = T0 + timedelta(hours=24, minutes=30)
        assert notifier.remind(tuesday) == 2
        assert notifier.remind(tuesday + timedelta(minutes=1)) == 0
        notifier.deliver_due(tuesday)
    finally:
        notifier.close()
    reminders = [e for e in sink.events() if e["type"].startswith("reminder.")]
    assert [e["type"] for e in reminders] == [
        "reminder.review",
        "reminder.review",
        "reminder.lock",
    ]
    assert reminders[0]["summary"] == (
        "acme/fleet `prod/eu` has waited for review for 4 h (deployment `r-1`)"
    )
    assert reminders[2]["summary"].startswith("acme/fleet `prod/us` has been locked for 24 h")


def test_the_worker_logs_never_carry_a_sinks_url(
    database: Database, sink: NotificationSink, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Slack incoming webhook's URL is a secret: the HTTP client's request lines, which name
    it, are not logged at the worker's levels (worker/logs.py)."""
    settings = settings_for(sink)
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    configure_logging("debug")
    try:
        notifier = Notifier(database, settings)
        announce(database, notifier.announcer, record("queued", 0))
        assert notifier.deliver_due(T0 + timedelta(hours=1)) == 2
        notifier.close()
    finally:
        root.handlers[:] = saved
        root.setLevel(level)
    logged = capsys.readouterr().err
    assert "notification sent" in logged  # the notifier's own lines are there
    assert sink.slack_url not in logged and "/slack" not in logged


class FailsOnce(Announcer):
    """An announcer whose first write fails (the database away for a moment)."""

    failed = False

    def add(self, event: NewEvent, at: datetime | None = None) -> bool:
        if not self.failed:
            self.failed = True
            raise OSError("database went away")
        return super().add(event, at)


def test_a_retried_record_still_announces_its_change(
    tmp_path: Path, database: Database, sink: NotificationSink
) -> None:
    """The state change commits, then writing its event fails: the retried activity finds no
    change to record but announces the newest one, once."""
    announcer = FailsOnce(database, settings_for(sink))
    store = StoreActivities(FileBlobStore(tmp_path / "blobs"), database, announcer=announcer)
    queued = record("queued", 0)

    def run() -> None:
        asyncio.run(ActivityEnvironment().run(store.record_deployment, queued))

    with pytest.raises(OSError):
        run()
    run()  # Temporal's retry
    run()  # and another: nothing new
    listed = NotificationStore(database).of_deployment("d-1")
    assert sorted((n.kind, n.sink) for n in listed) == [
        ("deployment.queued", "slack"),
        ("deployment.queued", "webhook"),
    ]


def test_a_notifier_whose_lease_ran_out_cannot_mark_the_row(
    database: Database, sink: NotificationSink
) -> None:
    notifier = Notifier(database, settings_for(sink))
    announce(database, notifier.announcer, record("queued", 0))
    store = NotificationStore(database)
    (slow,) = store.claim(T0, lease=timedelta(seconds=60))
    (fast,) = store.claim(T0 + timedelta(seconds=61), lease=timedelta(seconds=60))
    assert (slow.event_id, slow.sink) == (fast.event_id, fast.sink)
    assert store.sent(fast, T0 + timedelta(seconds=62)) is True
    assert store.retry(slow, "timed out", T0 + timedelta(seconds=70)) is False  # too late
    states = {n.sink: n.state for n in store.of_deployment("d-1")}
    assert states[fast.sink] == "sent"
    notifier.close()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"notify_webhook_url": "http://x.test/hook"},
            "ROLLWRIGHT_NOTIFY_WEBHOOK_URL is set without ROLLWRIGHT_NOTIFY_WEBHOOK_SECRET",
        ),
        ({"remind_review_after": "4 hours"}, "ROLLWRIGHT_REMIND_REVIEW_AFTER: '4 hours' is not"),
        ({"remind_hours": "not a cron"}, "ROLLWRIGHT_REMIND_HOURS / _TIMEZONE"),
        (
            {"remind_hours": "0 9 * * 1-5", "remind_timezone": "Mars/Olympus"},
            "unknown time zone 'Mars/Olympus'",
        ),
    ],
    ids=["unsigned-webhook", "bad-span", "bad-hours", "bad-zone"],
)
def test_settings_the_notifier_could_only_fail_on_are_refused_at_start(
    database: Database, settings: dict[str, str], message: str
) -> None:
    with pytest.raises(NotifyConfigError) as refused:
        Notifier(database, Settings(**settings))  # type: ignore[arg-type]
    assert message in str(refused.value)
