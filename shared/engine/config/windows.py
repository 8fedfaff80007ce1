"""Promotion windows: when `rollout.windows` in rollwright.yaml lets a patch enter a node.

    rollout:
      timezone: Europe/Berlin
      windows:
        - allow: "0 9 * * 1-4"                      # cron: Mon-Thu 09:00 ...
          duration: 8h                              # ... until 17:00
        - deny: "RRULE:FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=20"
          duration: 14d                             # year-end freeze
          nodes: ["prod*"]

Each occurrence of a rule's schedule (`shared.engine.config.schedule`) opens a window
`[start, start + duration)`. Schedules are read in the rule's time zone (wall-clock time, so 09:00
stays 09:00 across DST changes); a start that falls into a DST gap moves forward by the gap, an
ambiguous one takes its first instant; durations are elapsed time. Deny beats allow; a node
without allow rules is open whenever no deny window is in force. The syntax is documented in
docs/promotion.md.
"""

from __future__ import annotations

import bisect
import fnmatch
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from shared.engine.config.durations import duration_seconds
from shared.engine.config.rollout import PromotionWindow, RolloutSettings
from shared.engine.config.schedule import Schedule, parse_schedule

# Occurrences examined per rule and look-ahead: an every-minute cron over a year would be
# 500,000 starts; a denser rule is only known (and answered for) as far as its first 5,000.
_MAX_STARTS = 5_000
_HORIZONS = (timedelta(days=8), timedelta(days=64), timedelta(days=400))


@dataclass(frozen=True)
class WindowState:
    """Whether a node may be promoted to at one instant, and for how long that holds."""

    open: bool
    reason: str
    next_open: datetime | None = None  # closed: when it next opens (None: not within a year)
    closes_at: datetime | None = None  # open: when it next closes (None: not within a year)


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

    def intervals(self, a: datetime, b: datetime) -> tuple[list[_Span], datetime]:
        """Windows of this rule that overlap [a, b), as (start, end) instants, and how far
        they are known: `b`, or the last start examined when a dense schedule hit the cap."""
        # Local bounds with a day of slack either side for offsets and DST gaps.
        lo = (a - self.duration).astimezone(self.zone).replace(tzinfo=None) - timedelta(days=1)
        hi = b.astimezone(self.zone).replace(tzinfo=None) + timedelta(days=1)
        out = []
        known = b
        for n, local in enumerate(self.schedule(lo, hi)):
            # In UTC: arithmetic on zoneinfo datetimes is wall-clock, durations are elapsed.
            start = _aware(local, self.zone).astimezone(UTC)
            if n >= _MAX_STARTS:
                known = min(b, start)
                break
            end = start + self.duration
            if start < b and end > a:
                out.append((start, end))
        return out, known


_Span = tuple[datetime, datetime]


def _rules(settings: RolloutSettings, node_path: str) -> list[_Rule]:
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
    has_allows = any(r.kind == "allow" for r in rules)
    for horizon in _HORIZONS:
        known = now + horizon
        spans: dict[str, list[_Span]] = {"allow": [], "deny": []}
        found: list[tuple[_Rule, _Span]] = []
        for r in rules:
            intervals, until = r.intervals(now, now + horizon)
            known = min(known, until)
            spans[r.kind] += intervals
            found += [(r, span) for span in intervals]
        allowed, denied = _union(spans["allow"]), _union(spans["deny"])

        def is_open(
            t: datetime, allowed: list[_Span] = allowed, denied: list[_Span] = denied
        ) -> bool:
            return (not has_allows or _covers(allowed, t) is not None) and _covers(
                denied, t
            ) is None

        state = is_open(now)
        boundaries = sorted({t for span in (*allowed, *denied) for t in span if now < t <= known})
        change = next((t for t in boundaries if is_open(t) != state), None)
        if change is not None or known < now + horizon or horizon == _HORIZONS[-1]:
            in_force = [(r, span) for r, span in found if span[0] <= now < span[1]]
            return _describe(state, change, in_force, _covers(denied, now), known, rules[0].zone)
    raise AssertionError("the last horizon always answers")


def _union(spans: list[_Span]) -> list[_Span]:
    """Sorted, disjoint spans covering the same instants."""
    out: list[_Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _covers(spans: list[_Span], t: datetime) -> _Span | None:
    """The span of sorted disjoint `spans` holding t, if any."""
    i = bisect.bisect_right(spans, (t, _FAR)) - 1
    return spans[i] if i >= 0 and spans[i][0] <= t < spans[i][1] else None


_FAR = datetime.max.replace(tzinfo=UTC)


def _describe(
    state: bool,
    change: datetime | None,
    in_force: list[tuple[_Rule, _Span]],
    denied: _Span | None,
    known: datetime,
    zone: zoneinfo.ZoneInfo,
) -> WindowState:
    """The state in words; instants in the first rule's time zone, returned in UTC."""
    if change is not None:
        change = change.astimezone(UTC)
    allowing = [r for r, _ in in_force if r.kind == "allow"]
    denying = [r for r, _ in in_force if r.kind == "deny"]
    if state:
        if allowing:
            reason = f"open: inside the {allowing[0].label}"
        else:
            reason = "open: no deny window in force and no allow window required"
        if change is not None:
            reason += f"; closes at {_show(change, zone)}"
        return WindowState(True, reason, None, change)
    if denying and denied is not None:
        rule = denying[0]
        reason = f"closed: the {rule.label} is in force until {_show(denied[1], rule.zone)}"
    else:
        reason = "closed: outside every allow window"
    if change is not None:
        reason += f"; opens at {_show(change, zone)}"
    else:
        reason += f"; does not open before {_show(known, zone)}"
    return WindowState(False, reason, change, None)


def _show(t: datetime, zone: zoneinfo.ZoneInfo) -> str:
    """An instant in a rule's time zone, to the minute."""
    return t.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
