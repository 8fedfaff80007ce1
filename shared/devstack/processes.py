"""Child processes of the embedded stack: started in order, stopped in reverse, none orphaned.

Each child runs in its own session so a Ctrl-C in the terminal reaches only the supervisor,
which then stops the children in a known order (gateway and worker before the Temporal server
they talk to). On Linux each child also gets PR_SET_PDEATHSIG, so even a supervisor killed with
SIGKILL takes its children with it. Output goes to one log file per child.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1


class ChildExited(RuntimeError):
    """A child process stopped while the stack was supposed to be running."""

    def __init__(self, name: str, code: int | None, log: Path) -> None:
        tail = log_tail(log)
        super().__init__(
            f"{name} exited with code {code} (log: {log})" + (f"\n{tail}" if tail else "")
        )
        self.name = name
        self.code = code
        self.log = log


def log_tail(log: Path, lines: int = 30) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc_name = ctypes.util.find_library("c")
    if sys.platform.startswith("linux") and libc_name:
        libc = ctypes.CDLL(libc_name, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass
class Child:
    name: str
    argv: list[str]
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None


class Supervisor:
    """Starts named children with their output in `log_dir/<name>.log`."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[Child] = []

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path | None = None,
        first: bool = False,
    ) -> Child:
        """Start `argv` as child `name`. `first`: a server the other children depend on,
        started again after they were (a restart): it is still stopped after them."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # only prctl: nothing that could deadlock
            )
        child = Child(name, list(argv), proc, log)
        if first:
            self.children.insert(0, child)
        else:
            self.children.append(child)
        return child

    def child(self, name: str) -> Child:
        """The running child started as `name`."""
        for child in self.children:
            if child.name == name:
                return child
        raise KeyError(f"no child named {name!r}")

    def kill(self, child: Child) -> int:
        """SIGKILL the child's whole process group — a crash, not a stop: nothing gets to
        clean up — and forget it (`check` no longer reports it). Returns its exit code."""
        _signal_group(child, signal.SIGKILL)
        code = child.proc.wait(timeout=10)
        if child in self.children:
            self.children.remove(child)
        return code

    def terminate(self, child: Child, timeout: float = 15.0) -> int:
        """SIGTERM the child's process group — a stop: it may finish what it is doing —
        SIGKILL it if it outlives `timeout`, and forget it. Returns its exit code."""
        _signal_group(child, signal.SIGTERM)
        try:
            code = child.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(child, signal.SIGKILL)
            code = child.proc.wait(timeout=5)
        # anything the child left behind in its group goes too
        _signal_group(child, signal.SIGKILL)
        if child in self.children:
            self.children.remove(child)
        return code

    def check(self) -> None:
        """Raise ChildExited for the first child that is no longer running."""
        for child in self.children:
            code = child.proc.poll()
            if code is not None:
                raise ChildExited(child.name, code, child.log)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM each child's process group, newest first; SIGKILL what outlives `timeout`."""
        for child in list(reversed(self.children)):
            self.terminate(child, timeout)
        self.children.clear()

    def wait_any(self, poll: float = 0.5) -> None:
        """Block until a child exits (then raise ChildExited)."""
        while True:
            self.check()
            time.sleep(poll)


def _signal_group(child: Child, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.proc.pid, sig)
