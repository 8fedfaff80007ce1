"""The notifier: writes events for the configured sinks (`Announcer`, called by the activity
that records a state change) and delivers them (`Notifier`, a task of each worker process):
due rows are leased, POSTed, and marked sent; a sink that does not answer 2xx is tried again
with exponential backoff (a 4xx other than 408 and 429 is final), and given up after
MAX_ATTEMPTS. Several workers share the table: a row's lease keeps them apart.

Reminders: every SWEEP seconds the notifier looks for deployments waiting for review and roots
locked beyond their thresholds and adds one reminder per threshold span passed (its id names
the span, so several workers add it once), only within the configured hours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx

from shared.contracts.deploy import DeploymentRecord
from shared.engine.config.durations import duration_seconds
from shared.engine.config.rollout import PromotionWindow, RolloutSettings
from shared.engine.config.windows import window_state
from shared.notify import events
from shared.notify.sinks import Sink, configured_sinks
from shared.settings import Settings
from shared.stores.sql.deployments import DeploymentStore, StateChange
from shared.stores.sql.engine import Database
from shared.stores.sql.locks import RootLockStore
from shared.stores.sql.notifications import Due, NewEvent, NotificationStore

MAX_ATTEMPTS = 12  # 5 s doubling to 15 min: about two hours of trying
FIRST_BACKOFF = 5.0
MAX_BACKOFF = 900.0
LEASE = timedelta(seconds=60)
SWEEP = 60.0
POLL = 1.0

log = logging.getLogger("rollwright.notify")


class Announcer:
    """Writes the events of what happened for each configured sink (nothing without one)."""

    def __init__(self, database: Database, settings: Settings) -> None:
        self.store = NotificationStore(database)
        self.settings = settings
        self.sinks = [sink.name for sink in configured_sinks(settings)]

    def deployment(self, record: DeploymentRecord, change: StateChange) -> None:
        if not self.sinks:
            return
        url = self.settings.job_url(record.deployment_id)
        event = events.deployment_event(record, change, url)
        if event is not None:
            self.add(event, record.at)  # when it happened: due from then

    def add(self, event: NewEvent, at: datetime | None = None) -> bool:
        """Write the event for every sink unless its id is known; whether it was new."""
        return self.store.add(event, self.sinks, at or datetime.now(UTC)) > 0


def backoff(attempts: int) -> float:
    return float(min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** max(0, attempts - 1)))


class Notifier:
    def __init__(
        self,
        database: Database,
        settings: Settings,
        *,
        sinks: list[Sink] | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.database = database
        self.settings = settings
        self.store = NotificationStore(database)
        self.sinks = {s.name: s for s in (configured_sinks(settings) if sinks is None else sinks)}
        self.client = client or httpx.Client(timeout=10.0, follow_redirects=False)
        self.announcer = Announcer(database, settings)
        self.announcer.sinks = list(self.sinks)

    def close(self) -> None:
        self.client.close()

    # --- delivery ---------------------------------------------------------------------------

    def deliver_due(self, now: datetime, *, most: int = 50) -> int:
        """Deliver what is due, one row claimed at a time (up to `most` this turn); how many
        rows were sent. A row that fails unexpectedly is left to its lease and the next turn;
        the others go on."""
        sent = 0
        for _ in range(most):
            claimed = self.store.claim(now, lease=LEASE)
            if not claimed:
                break
            try:
                sent += self._deliver(claimed[0], now)
            except Exception as err:  # the database away mid-row: its lease expires
                log.warning(
                    "notification not delivered",
                    extra={"event": claimed[0].event_id, "error": f"{type(err).__name__}: {err}"},
                )
        return sent

    def _deliver(self, due: Due, now: datetime) -> int:
        sink = self.sinks.get(due.sink)
        if sink is None:  # configured once, not any more
            self.store.failed(due, f"sink {due.sink!r} is not configured")
            return 0
        request = sink.request(due.event_id, due.kind, due.body)
        try:
            answer = self.client.post(request.url, content=request.body, headers=request.headers)
        except httpx.HTTPError as err:
            # never the URL (a Slack webhook URL is a secret): the error's kind only
            self._again(due, now, f"{type(err).__name__} sending to the {due.sink} sink")
            return 0
        if 200 <= answer.status_code < 300:
            if not self.store.sent(due, now):
                log.warning("notification lease lost", extra={"event": due.event_id})
                return 0
            log.info("notification sent", extra={"event": due.event_id, "sink": due.sink})
            return 1
        error = f"the {due.sink} sink answered HTTP {answer.status_code}"
        if 400 <= answer.status_code < 500 and answer.status_code not in (408, 429):
            self.store.failed(due, error)
            log.warning("notification refused", extra={"event": due.event_id, "error": error})
            return 0
        self._again(due, now, error)
        return 0

    def _again(self, due: Due, now: datetime, error: str) -> None:
        if due.attempts >= MAX_ATTEMPTS:
            self.store.failed(due, f"{error} (gave up after {due.attempts})")
            log.warning("notification given up", extra={"event": due.event_id, "error": error})
            return
        at = now + timedelta(seconds=backoff(due.attempts))
        self.store.retry(due, error, at)

    # --- reminders --------------------------------------------------------------------------

    def remind(self, now: datetime) -> int:
        """Add the reminders due at `now`; how many were new."""
        if not self.sinks or not self.within_hours(now):
            return 0
        added = 0
        review = _span(self.settings.remind_review_after)
        if review:
            for waiting in DeploymentStore(self.database).awaiting_review():
                added += self._remind(
                    "reminder.review",
                    now,
                    waiting.since,
                    review,
                    repo=waiting.repo,
                    root=waiting.root,
                    deployment_id=waiting.deployment_id,
                    what="has waited for review",
                )
        lock = _span(self.settings.remind_lock_after)
        if lock:
            for held in RootLockStore(self.database).held():
                if held.since is None:
                    continue
                added += self._remind(
                    "reminder.lock",
                    now,
                    held.since,
                    lock,
                    repo=held.repo,
                    root=held.root,
                    deployment_id=held.deployment_id,
                    what="has been locked",
                )
        return added

    def _remind(
        self,
        kind: str,
        now: datetime,
        since: datetime,
        span: float,
        *,
        repo: str,
        root: str,
        deployment_id: str,
        what: str,
    ) -> int:
        spans = int((now - since).total_seconds() // span)
        if spans < 1:
            return 0
        waited = _words(now - since)
        event = events.reminder_event(
            kind,
            (repo, root, deployment_id, str(spans)),
            repo=repo,
            root=root,
            deployment_id=deployment_id,
            since=since,
            summary=f"{repo} `{root}` {what} for {waited} (deployment `{deployment_id}`)",
            url=self.settings.job_url(deployment_id),
        )
        return 1 if self.announcer.add(event, now) else 0

    def within_hours(self, now: datetime) -> bool:
        if not self.settings.remind_hours:
            return True
        hours = RolloutSettings(
            timezone=self.settings.remind_timezone,
            windows=[
                PromotionWindow(
                    allow=self.settings.remind_hours,
                    duration=self.settings.remind_hours_duration,
                )
            ],
        )
        return window_state(hours, "reminders", now).open

    # --- the loop ---------------------------------------------------------------------------

    async def run(
        self, stop: asyncio.Event, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        """Deliver and remind until `stop` is set; a failure is logged and the loop goes on."""
        now = clock or (lambda: datetime.now(UTC))
        swept = 0.0
        while not stop.is_set():
            try:
                if time.monotonic() - swept >= SWEEP:
                    swept = time.monotonic()
                    await asyncio.to_thread(self.remind, now())
                await asyncio.to_thread(self.deliver_due, now())
            except Exception as err:  # the database away: try again on the next turn
                log.warning("notifier turn failed", extra={"error": f"{type(err).__name__}"})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), POLL)


def _span(text: str | None) -> float:
    return float(duration_seconds(text)) if text else 0.0


def _words(delta: timedelta) -> str:
    hours = int(delta.total_seconds() // 3600)
    if hours >= 48:
        return f"{hours // 24} days"
    if hours >= 1:
        return f"{hours} h"
    return f"{int(delta.total_seconds() // 60)} min"
