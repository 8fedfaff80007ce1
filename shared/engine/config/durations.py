"""Durations as rollwright.yaml writes them: `0`, `45s`, `30m`, `2h`, `1d`, `1w`, `1h30m`."""

from __future__ import annotations

import re

DURATION_PATTERN = r"^(0|([0-9]+[smhdw])+)$"
_DURATION_PART = re.compile(r"([0-9]+)([smhdw])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration_seconds(text: str) -> int:
    """Seconds of a duration such as `0`, `45s`, `30m`, `2h`, `1d`, `1w`, `1h30m`."""
    if not re.match(DURATION_PATTERN, text):
        raise ValueError(f"{text!r} is not a duration (like 30m, 2h, 1d or 1h30m)")
    return sum(int(n) * _DURATION_UNITS[unit] for n, unit in _DURATION_PART.findall(text))
