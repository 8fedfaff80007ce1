"""Running a command with a deadline: the one subprocess runner of git, sops and kubectl calls.

Output is captured, the exit status is the caller's to judge (nothing raises on a non-zero
exit), and a command that outlives `timeout` is killed and raises `CommandTimedOut`, whose
message names only the program and the deadline (arguments may carry paths or URLs).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


class CommandTimedOut(Exception):
    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what} did not finish within {seconds:g}s")
        self.what = what
        self.seconds = seconds


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def detail(self, lines: int = 3) -> str:
        """The last lines of what the command said (stderr, else stdout), on one line."""
        said = (self.err.strip() or self.out.strip()).splitlines()
        return " ".join(said[-lines:])


def run(
    argv: Sequence[str],
    *,
    timeout: float | None,
    what: str | None = None,
    input: bytes | str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
) -> Finished:
    """Run `argv` to completion within `timeout` seconds (None: no deadline). `what` names it
    in the timeout's message (default: the program's name)."""
    data = input.encode("utf-8") if isinstance(input, str) else input
    try:
        proc = subprocess.run(
            list(argv),
            input=data,
            stdin=None if data is not None else subprocess.DEVNULL,
            capture_output=True,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise CommandTimedOut(what or Path(argv[0]).name, timeout or 0) from None
    return Finished(proc.returncode, proc.stdout, proc.stderr)
