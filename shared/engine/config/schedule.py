"""Schedules of promotion windows: a cron expression or an `RRULE:` line → the local
wall-clock starts it has in a range. `shared.engine.config.windows` turns them into windows;
`shared.engine.config.rollout` checks the expressions when rollwright.yaml is read."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from croniter import croniter
from dateutil import rrule

# RRULE occurrences are counted from this local instant (a Monday): it fixes INTERVAL phases
# and is the default day and time of day (00:00) for the fields a rule leaves out.
RRULE_ANCHOR = datetime(2000, 1, 3)
_RRULE_FREQS = {"DAILY", "WEEKLY", "MONTHLY", "YEARLY"}

# A schedule maps a local wall-clock range [a, b) to its occurrences (naive, ascending).
Schedule = Callable[[datetime, datetime], Iterator[datetime]]


def parse_schedule(text: str) -> Schedule:
    """A cron expression (5 fields) or an `RRULE:` rule; ValueError says what is wrong."""
    text = text.strip()
    if text.upper().startswith(("RRULE:", "FREQ=")):
        return _rrule_schedule(text)
    fields = text.split()
    if len(fields) != 5:
        raise ValueError(
            f"{text!r} is neither a cron expression (5 fields: minute hour day-of-month "
            "month day-of-week) nor an RRULE:FREQ=... rule"
        )
    if not croniter.is_valid(text):
        raise ValueError(f"{text!r} is not a valid cron expression")

    def starts(a: datetime, b: datetime) -> Iterator[datetime]:
        it = croniter(text, a - timedelta(seconds=1))
        while True:
            start: datetime = it.get_next(datetime)
            if start >= b:
                return
            yield start

    return starts


def _rrule_schedule(text: str) -> Schedule:
    body = text if text.upper().startswith("RRULE:") else f"RRULE:{text}"
    upper = body.upper()
    if "DTSTART" in upper or "\n" in body:
        raise ValueError(f"{text!r}: write one RRULE line without DTSTART")
    if re.search(r"UNTIL=[0-9T]+Z", upper):
        raise ValueError(f"{text!r}: write UNTIL in the rule's local time, without Z")
    try:
        rule = rrule.rrulestr(body, dtstart=RRULE_ANCHOR)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{text!r} is not a valid RRULE: {err}") from None
    freq = re.search(r"FREQ=([A-Z]+)", upper)
    if not isinstance(rule, rrule.rrule) or not freq or freq.group(1) not in _RRULE_FREQS:
        raise ValueError(f"{text!r}: FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY")

    def starts(a: datetime, b: datetime) -> Iterator[datetime]:
        for start in rule.xafter(a, inc=True):
            if start >= b:
                return
            yield start

    return starts
