"""Promotion windows: when `rollout.windows` in rollwright.yaml lets a patch enter a node.

    rollout:
      timezone: Europe/Berlin
      windows:
        - allow: "0 9 * * 1-4"                      # cron: Mon-Thu 09:00 ...
          duration: 8h                              # ... until 17:00
        - deny: "RRULE:FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=20"
          duration: 14d                             # year-end freeze
          nodes: ["prod*"]

Each occurrence of a rule's schedule opens a window `[start, start + duration)`. Schedules are
read in the rule's time zone (wall-clock time, so 09:00 stays 09:00 across DST changes); a
start that falls into a DST gap moves forward by the gap, an ambiguous one takes its first
instant; durations are elapsed time. Deny beats allow; a node without allow rules is open
whenever no deny window is in force. The syntax is documented in docs/promotion.md.
"""

from __future__ import annotations

import fnmatch
import re
import zoneinfo
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from croniter import croniter
from dateutil import rrule

if TYPE_CHECKING:
    from shared.fleetconfig import PromotionWindow, RolloutSettings

# RRULE occurrences are counted from this local instant (a Monday): it fixes INTERVAL phases
# and is the default day and time of day (00:00) for the fields a rule leaves out.
RRULE_ANCHOR = datetime(2000, 1, 3)
_RRULE_FREQS = {"DAILY", "WEEKLY", "MONTHLY", "YEARLY"}
# Occurrences examined per rule and search horizon; every-minute crons over a year would be
# 500,000 starts, and such rules answer within the first horizon anyway.
_MAX_STARTS = 20_000
_HORIZONS = (timedelta(days=8), timedelta(days=64), timedelta(days=400))


@dataclass(frozen=True)
class WindowState:
    """Whether a node may be promoted to at one instant, and for how long that holds."""

    open: bool
    reason: str
    next_open: datetime | None = None  # closed: when it next opens (None: not within a year)
    closes_at: datetime | None = None  # open: when it next closes (None: not within a year)


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


def _aware(local: datetime, zone: zoneinfo.ZoneInfo) -> datetime:
    """A wall-clock time in `zone` as an instant. fold=0 picks the first of an ambiguous
    time and, for a time in a DST gap, the offset before the gap (so 02:30 → 03:30)."""
    return local.replace(tzinfo=zone, fold=0)


@dataclass(frozen=True)
class _Rule:
    kind: str
    expression: str
    zone: zoneinfo.ZoneInfo
    duration: timedelta
    schedule: Schedule

    @property
    def label(self) -> str:
        return f"{self.kind} window {self.expression!r} ({self.zone.key})"

    def intervals(self, a: datetime, b: datetime) -> list[tuple[datetime, datetime]]:
        """Windows of this rule that overlap [a, b), as (start, end) instants."""
        # Local bounds with a day of slack either side for offsets and DST gaps.
        lo = (a - self.duration).astimezone(self.zone).replace(tzinfo=None) - timedelta(days=1)
        hi = b.astimezone(self.zone).replace(tzinfo=None) + timedelta(days=1)
        out = []
        for n, local in enumerate(self.schedule(lo, hi)):
            if n >= _MAX_STARTS:
                break
            start = _aware(local, self.zone)
            end = start + self.duration
            if start < b and end > a:
                out.append((start, end))
        return out


def _rules(settings: RolloutSettings, node_path: str) -> list[_Rule]:
    from shared.fleetconfig import duration_seconds

    rules = []
    for window in settings.windows:
        if not any(fnmatch.fnmatchcase(node_path, glob) for glob in window.nodes):
            continue
        rules.append(_rule(window, settings.timezone, duration_seconds))
    return rules


def _rule(window: PromotionWindow, default_zone: str, seconds: Callable[[str], int]) -> _Rule:
    return _Rule(
        kind=window.kind,
        expression=window.expression,
        zone=zoneinfo.ZoneInfo(window.timezone or default_zone),
        duration=timedelta(seconds=seconds(window.duration)),
        schedule=parse_schedule(window.expression),
    )


def window_state(settings: RolloutSettings, node_path: str, now: datetime) -> WindowState:
    """The promotion window of `node_path` at `now` (timezone-aware)."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("window_state needs a timezone-aware `now`")
    rules = _rules(settings, node_path)
    if not rules:
        return WindowState(True, f"no promotion window applies to {node_path}")
    allows = [r for r in rules if r.kind == "allow"]
    denies = [r for r in rules if r.kind == "deny"]
    for horizon in _HORIZONS:
        table = [(r, r.intervals(now, now + horizon)) for r in rules]
        state = _is_open(table, allows, denies, now)
        boundaries = sorted(
            {t for _, spans in table for span in spans for t in span if now < t <= now + horizon}
        )
        change = next((t for t in boundaries if _is_open(table, allows, denies, t) != state), None)
        if change is not None or horizon == _HORIZONS[-1]:
            return _describe(
                state,
                change,
                _inside(table, allows, now),
                _inside(table, denies, now),
                rules[0].zone,
            )
    raise AssertionError("the last horizon always answers")


_Table = list[tuple[_Rule, list[tuple[datetime, datetime]]]]


def _inside(table: _Table, kinds: list[_Rule], t: datetime) -> list[tuple[_Rule, datetime]]:
    """Rules of `kinds` in force at t, with the end of their window."""
    return [
        (r, end) for r, spans in table if r in kinds for start, end in spans if start <= t < end
    ]


def _is_open(table: _Table, allows: list[_Rule], denies: list[_Rule], t: datetime) -> bool:
    return (not allows or bool(_inside(table, allows, t))) and not _inside(table, denies, t)


def _describe(
    state: bool,
    change: datetime | None,
    allowing: list[tuple[_Rule, datetime]],
    denying: list[tuple[_Rule, datetime]],
    zone: zoneinfo.ZoneInfo,
) -> WindowState:
    """The state in words; instants in the first rule's time zone, returned in UTC."""
    if change is not None:
        change = change.astimezone(UTC)
    if state:
        if allowing:
            rule, _end = max(allowing, key=lambda item: item[1])
            reason = f"open: inside the {rule.label}"
        else:
            reason = "open: no deny window in force and no allow window required"
        if change is not None:
            reason += f"; closes at {_show(change, zone)}"
        return WindowState(True, reason, None, change)
    if denying:
        rule, end = max(denying, key=lambda item: item[1])
        reason = f"closed: the {rule.label} is in force until {_show(end, rule.zone)}"
    else:
        reason = "closed: outside every allow window"
    if change is not None:
        reason += f"; opens at {_show(change, zone)}"
    else:
        reason += "; does not open within a year"
    return WindowState(False, reason, change, None)


def _show(t: datetime, zone: zoneinfo.ZoneInfo) -> str:
    """An instant in a rule's time zone, to the minute."""
    return t.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
