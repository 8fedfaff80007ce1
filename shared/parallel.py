"""Rendering many roots on several cores: worker processes, results in root order.

    fleet = Fleet.open(WorkTree(Path("fleet")))
    for render in parallel.render_all(fleet, roots, jobs=4):
        ...  # the same Render objects, in the same order, as Fleet.render_all(roots)

Each worker process opens the fleet itself and renders chunks of roots; the parent hands out
chunks in order and yields the renders in root order, so callers (the CLI writing files, a
progress bar) see exactly what the serial path gives. A fleet error in root k is raised when
the caller reaches root k, after every earlier root was yielded: the same error, at the same
point, as the serial loop.

Why processes: the Helm engine and the YAML work run under the GIL, so threads do not help.
Why `spawn`: helm_python hosts a Go runtime, which does not survive `fork()`.
Workers ignore SIGINT (Ctrl-C reaches the whole process group): the parent alone stops, and
terminates them; a worker whose parent died sees its pipe close and exits.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from shared.errors import FleetError, FleetErrors, Problem
from shared.fleet import Fleet
from shared.render import Render
from shared.tree import GitError, WorkTree

# Below this many roots per worker, starting processes (~0.3 s each: Python, the Go runtime,
# the fleet's discovery) costs about what it saves; render in process instead.
MIN_ROOTS_PER_WORKER = 32
MAX_CHUNK = 16
# Chunks handed out ahead of the first one not yet yielded, per worker: bounds the renders
# held in memory while one slow root holds up the ones after it.
AHEAD_PER_WORKER = 4


class WorkerError(RuntimeError):
    """A worker process failed outside fleet errors (crashed, killed, or a bug)."""


def default_jobs() -> int:
    return os.cpu_count() or 1


def worker_count(roots: int, jobs: int, min_roots_per_worker: int = MIN_ROOTS_PER_WORKER) -> int:
    """How many worker processes to start for `roots` roots; 0 means render in process."""
    workers = min(jobs, roots // max(1, min_roots_per_worker))
    return workers if workers >= 2 else 0


def render_all(
    fleet: Fleet,
    roots: list[str],
    jobs: int,
    *,
    min_roots_per_worker: int = MIN_ROOTS_PER_WORKER,
) -> Iterator[Render]:
    """`fleet.render_all(roots)` on up to `jobs` processes: the same renders, in order.

    Workers open the same checkout themselves; fleets not read from a checkout on disk
    (a git revision read in place), few roots, or `jobs` 1 render in this process.
    """
    workers = worker_count(len(roots), jobs, min_roots_per_worker)
    if not workers or not isinstance(fleet.tree, WorkTree):
        yield from fleet.render_all(roots)
        return
    pool = _Pool(fleet.tree.root, workers)
    try:
        yield from pool.run(roots)
        pool.close()
    finally:
        pool.terminate()


# --- messages between the parent and a worker ------------------------------------------------
#
# parent → worker: (chunk index, [root, ...]), or None to stop.
# worker → parent: (chunk index, [_Done | _Failed, ...]); a chunk stops at its first failure.


@dataclass(frozen=True)
class _Done:
    root: str
    plain: dict[str, bytes]
    redacted: dict[str, bytes] | None  # None: the same as `plain` (nothing to redact)

    def render(self) -> Render:
        return Render.of(self.root, self.plain, self.redacted)


@dataclass(frozen=True)
class _Failed:
    root: str
    kind: str  # "fleet", "fleet-many", "git" or "bug"
    problems: tuple[Problem, ...] = ()
    text: str = ""

    def error(self) -> Exception:
        if self.kind == "fleet":
            (problem,) = self.problems
            return FleetError(problem.message, path=problem.path, line=problem.line)
        if self.kind == "fleet-many":
            return FleetErrors(list(self.problems))
        if self.kind == "git":
            return GitError(self.text)
        return WorkerError(f"rendering root {self.root!r} failed in a worker process:\n{self.text}")


class _Worker:
    """The fleet a worker renders from, opened on first use."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        self.fleet: Fleet | None = None

    def render(self, root: str) -> _Done | _Failed:
        try:
            if self.fleet is None:
                self.fleet = Fleet.open(WorkTree(Path(self.repo)))
            render = self.fleet.render(root)
        except FleetErrors as err:
            return _Failed(root, "fleet-many", tuple(err.problems))
        except FleetError as err:
            return _Failed(root, "fleet", (err.problem,))
        except GitError as err:
            return _Failed(root, "git", text=str(err))
        except Exception:
            return _Failed(root, "bug", text=traceback.format_exc())
        # Plaintext goes to the parent, our own process, which rebuilds the same Render.
        return _Done(root, render.reveal(), render.files if render.redacted else None)


def _worker(conn: Connection, repo: str) -> None:
    """A worker's main loop: render chunks until told to stop or the parent goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    worker = _Worker(repo)
    try:
        while True:
            message = conn.recv()
            if message is None:
                return
            index, roots = message
            results: list[_Done | _Failed] = []
            for root in roots:
                result = worker.render(root)
                results.append(result)
                if isinstance(result, _Failed):
                    break  # the parent stops at the first failure, as the serial loop does
            conn.send((index, results))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the parent is gone


class _Pool:
    def __init__(self, repo: Path, workers: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.procs: list[Any] = []
        self.conns: list[Connection] = []
        # Children start with SIGINT blocked and ignore it before unblocking: a Ctrl-C during
        # their start-up never prints a KeyboardInterrupt traceback from a worker.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for _ in range(workers):
                parent_end, child_end = ctx.Pipe()
                proc = ctx.Process(
                    target=_worker, args=(child_end, str(repo)), name="rollwright-render"
                )
                proc.daemon = True  # never outlive the parent, whatever happens
                proc.start()
                child_end.close()
                self.procs.append(proc)
                self.conns.append(parent_end)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def run(self, roots: list[str]) -> Iterator[Render]:
        workers = len(self.procs)
        size = max(1, min(MAX_CHUNK, len(roots) // (workers * 8) or 1))
        chunks = [roots[i : i + size] for i in range(0, len(roots), size)]
        in_flight: dict[int, int] = {}  # worker → chunks it holds
        done: dict[int, list[_Done | _Failed]] = {}
        next_chunk = 0  # next to hand out
        next_yield = 0  # next to give to the caller
        ahead = AHEAD_PER_WORKER * workers

        while next_yield < len(chunks):
            # Hand out chunks, in order, to workers holding fewer than two.
            for w in range(workers):
                while (
                    next_chunk < len(chunks)
                    and next_chunk < next_yield + ahead
                    and in_flight.get(w, 0) < 2
                ):
                    self._send(w, (next_chunk, chunks[next_chunk]))
                    in_flight[w] = in_flight.get(w, 0) + 1
                    next_chunk += 1
            while next_yield in done:
                for result in done.pop(next_yield):
                    if isinstance(result, _Failed):
                        raise result.error()
                    yield result.render()
                next_yield += 1
            if next_yield >= len(chunks):
                break
            for conn in wait(self.conns):
                w = self.conns.index(conn)  # type: ignore[arg-type]
                index, results = self._recv(w)
                in_flight[w] -= 1
                done[index] = results

    def _send(self, w: int, message: Any) -> None:
        try:
            self.conns[w].send(message)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise self._died(w) from None

    def _recv(self, w: int) -> Any:
        try:
            return self.conns[w].recv()
        except (EOFError, ConnectionResetError):
            raise self._died(w) from None

    def _died(self, w: int) -> WorkerError:
        proc = self.procs[w]
        proc.join(timeout=1)
        code = proc.exitcode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else "exited"
        return WorkerError(
            f"render worker process {proc.pid} {how} unexpectedly (exit code {code})"
        )

    def close(self) -> None:
        """Stop the workers once they are idle (after a complete run)."""
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.send(None)
        for proc in self.procs:
            proc.join(timeout=5)

    def terminate(self) -> None:
        """Stop every worker now (an error, Ctrl-C, or the caller stopped early)."""
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self.conns:
            conn.close()
