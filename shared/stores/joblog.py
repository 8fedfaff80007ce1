"""The job log's line format, shared by the activities that write it and the gateway that
shows it (`jobs/<deployment-id>/log` in the blob store).

One compact JSON object per line: `{"time","message",...fields}` with `time` in UTC to the
millisecond. A line is appended whole; a reader that finds a torn last line (an append in
progress on a file store) or a line that is not JSON keeps it as plain text.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any


def log_line(message: str, **fields: Any) -> bytes:
    """One line: the time, the message, then `fields` (None values left out)."""
    line: dict[str, Any] = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "message": message,
    }
    line.update((key, value) for key, value in fields.items() if value is not None)
    return (json.dumps(line, separators=(",", ":"), default=str) + "\n").encode()


def parse_log(raw: bytes | None) -> list[dict[str, Any]]:
    """The lines of a stored job log, oldest first."""
    lines: list[dict[str, Any]] = []
    for text in (raw or b"").decode("utf-8", errors="replace").splitlines():
        if not text.strip():
            continue
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        lines.append(parsed if isinstance(parsed, dict) else {"message": text})
    return lines
