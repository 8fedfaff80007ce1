"""Rendering many roots on several cores: worker processes, results in root order.

    fleet = Fleet.open(WorkTree(Path("fleet")))
    for render in parallel.render_all(fleet, roots, jobs=4):
        ...  # the same Render objects, in the same order, as fleet.render_all(roots)
    for root in parallel.render_into(fleet, roots, 4, Path("out"), reveal=False):
        ...  # out/<root>/ now holds exactly the root's files, as `rollwright render` writes

With `jobs` N, N-1 worker processes each open the fleet themselves and render chunks of
roots, and the parent renders chunks too (it is already started, with the fleet open); it
hands out chunks in order and gives results back in root order, so callers (the CLI, a
progress bar) see what the serial path gives. A fleet error in root k is raised when the
caller reaches root k, after every earlier root: the same error, at the same point, as the
serial loop; `render_into(..., failures=[...])` collects fleet errors and renders on.

`render_into` lets the workers write the files too (creating tens of thousands of files is
a good share of the work), each root into its own staging directory inside `out`;
the parent moves each finished root into place in root order with one rename, so `out`
changes root by root exactly as with the serial loop, and a failure leaves no root after
the failing one. The staging directory is removed on the way out.

Why processes: the Helm engine and the YAML work run under the GIL, so threads do not help.
Why new interpreters (not `fork()`): helm_python hosts a Go runtime, which does not survive
a fork. Workers run in their own session, so Ctrl-C reaches the parent alone, which stops
and terminates them; a worker whose parent died sees its socket close and exits.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.fleet import Fleet
from shared.engine.helm.engine import charts_unchanged
from shared.engine.render import Render
from shared.engine.secrets import redact
from shared.engine.tree import GitError, WorkTree

# Below this many roots per worker, starting processes (~0.3 s each: Python, the Go runtime,
# the fleet's discovery) costs about what it saves; render in process instead.
MIN_ROOTS_PER_WORKER = 32
MAX_CHUNK = 16
# Chunks handed out ahead of the first one not yet given back, per worker: bounds what is
# held (renders in memory, roots in staging) while one slow root holds up the ones after it.
AHEAD_PER_WORKER = 4


class WorkerError(RuntimeError):
    """A worker process failed outside fleet errors (crashed, killed, or a bug)."""


def worker_count(roots: int, jobs: int, min_roots_per_worker: int = MIN_ROOTS_PER_WORKER) -> int:
    """How many processes render `roots` roots, this one included (so one less is started);
    0 means render in process, the serial way."""
    workers = min(jobs, roots // max(1, min_roots_per_worker))
    return workers if workers >= 2 else 0


def write_root(target: Path, files: dict[str, bytes]) -> None:
    """Replace the directory `target` with exactly `files` (relative path → bytes)."""
    if target.exists():
        shutil.rmtree(target)
    if not files:
        return  # a root without files has no directory
    # Plain string paths, one mkdir per directory and unbuffered writes: a fleet render
    # writes tens of thousands of files in deep trees, and pathlib, a makedirs per file (its
    # stat of every parent) and buffered file objects added seconds.
    base = os.fspath(target)
    os.makedirs(base, exist_ok=True)
    made: set[str] = {""}  # below `base`, which is new: what is not in `made` is not there
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)  # as open("wb")
    for rel, data in files.items():
        directory = rel.rpartition("/")[0]
        if directory not in made:
            _make_below(base, directory, made)
        fd = os.open(os.path.join(base, rel), flags, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)


def _make_below(base: str, directory: str, made: set[str]) -> None:
    """Create `base/directory` and the parents of it not in `made` yet (all new)."""
    parts = directory.split("/")
    for end in range(1, len(parts) + 1):
        prefix = "/".join(parts[:end])
        if prefix not in made:
            path = os.path.join(base, prefix)
            try:
                os.mkdir(path)
            except FileExistsError:
                if not os.path.isdir(path):  # as makedirs(exist_ok=True): `a/./b`
                    raise
            made.add(prefix)


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
        for _, render in _serial(fleet, roots):
            if isinstance(render, Exception):
                raise render
            yield render
        return
    job = _Job(marker_key=redact.marker_key())
    pool: _Pool | None = None
    try:
        pool = _Pool(fleet.tree.root, workers - 1, job, _Worker("", job, fleet))
        for result in pool.run(roots):
            if isinstance(result, _Failed):
                raise result.error()
            assert result.files is not None
            yield Render.of(result.root, result.files, result.redacted)
        pool.close()
    finally:
        if pool is not None:
            pool.terminate()


def _serial(
    fleet: Fleet, roots: list[str], *, keep_going: bool = False
) -> Iterator[tuple[str, Render | Exception]]:
    """Each root's render, or what it raised, in order, rendered in this process. Chunks of
    roots render under one `charts_unchanged`, as a worker's do (a fleet's roots share their
    charts: fingerprinting them once a root cost as much as a few renders), never held open
    across a `yield`. A root that raises ends the chunk and the renders (with `keep_going`,
    only a fleet error does not)."""
    for start in range(0, len(roots), MAX_CHUNK):
        done: list[tuple[str, Render | Exception]] = []
        stop = False
        with charts_unchanged():
            for root in roots[start : start + MAX_CHUNK]:
                try:
                    done.append((root, fleet.render(root)))
                except Exception as err:
                    done.append((root, err))
                    stop = not keep_going or not isinstance(err, FleetError)
                    if stop:
                        break
        yield from done
        if stop:
            return


def render_into(
    fleet: Fleet,
    roots: list[str],
    jobs: int,
    out: Path,
    *,
    reveal: bool,
    min_roots_per_worker: int = MIN_ROOTS_PER_WORKER,
    failures: list[tuple[str, FleetError]] | None = None,
    written: dict[str, int] | None = None,
) -> Iterator[str]:
    """Write each root's files (redacted, or plaintext with `reveal`) to `out/<root>/`, in
    root order, yielding each root once its directory is in place; with `written`, the number
    of files written for it is set there first (root → files), so nobody walks the tree again.

    A fleet error in a root is raised when the caller reaches it; with `failures`, it is
    appended there instead (root, error) and the roots after it are rendered all the same.
    Either way a failed root's directory is not touched: nothing of it is written.
    """
    workers = worker_count(len(roots), jobs, min_roots_per_worker)
    if not workers or not isinstance(fleet.tree, WorkTree):
        for root, render in _serial(fleet, roots, keep_going=failures is not None):
            if isinstance(render, Exception):
                if failures is None or not isinstance(render, FleetError):
                    raise render
                failures.append((root, render))
                continue
            files = render.reveal() if reveal else render.files
            write_root(out / render.root, files)
            if written is not None:
                written[render.root] = len(files)
            yield render.root
        return
    made_out = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".rollwright-render-", dir=out))
    job = _Job(
        staging=str(staging),
        reveal=reveal,
        marker_key=redact.marker_key(),
        keep_going=failures is not None,
    )
    pool: _Pool | None = None
    try:
        pool = _Pool(fleet.tree.root, workers - 1, job, _Worker("", job, fleet))
        for result in pool.run(roots):
            if isinstance(result, _Failed):
                error = result.error()
                if failures is None or not isinstance(error, FleetError):
                    raise error
                failures.append((result.root, error))
                continue
            target = out / result.root
            if target.exists():
                shutil.rmtree(target)
            source = staging / str(result.index)
            if source.exists():  # a root without files has no directory, as in write_root
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(source, target)
            if written is not None:
                written[result.root] = result.written
            yield result.root
        pool.close()
    finally:
        if pool is not None:
            pool.terminate()
        shutil.rmtree(staging, ignore_errors=True)
        if made_out:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if nothing was placed: as if never written


# --- messages between the parent and a worker ------------------------------------------------
#
# parent → worker: (chunk index, [(root index, root), ...]), or None to stop.
# worker → parent: (chunk index, [_Done | _Failed, ...]); a chunk stops at its first failure.


@dataclass(frozen=True)
class _Job:
    """What workers do with a render: send it back, or write it under `staging`."""

    staging: str | None = None
    reveal: bool = False
    marker_key: bytes | None = None  # the parent's secret-marker key (redact.keyed_markers)
    # Render the roots after a failing one too (the CLI's render reports every failure).
    keep_going: bool = False


@dataclass(frozen=True)
class _Done:
    index: int
    root: str
    files: dict[str, bytes] | None = None  # plaintext; None when written to staging
    redacted: dict[str, bytes] | None = None  # None: the same as `files`
    written: int = 0  # the files written to staging


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
    """Renders roots in one process: a worker process, or the parent's own share."""

    def __init__(self, repo: str, job: _Job, fleet: Fleet | None = None) -> None:
        self.repo = repo
        self.job = job
        self.fleet = fleet

    def render_chunk(self, items: list[tuple[int, str]]) -> list[_Done | _Failed]:
        results: list[_Done | _Failed] = []
        with charts_unchanged():  # a chunk's roots share charts: fingerprint them once
            for index, root in items:
                result = self.render(index, root)
                results.append(result)
                if isinstance(result, _Failed) and not self.job.keep_going:
                    break  # the caller stops at the first failure, as the serial loop does
        return results

    def render(self, index: int, root: str) -> _Done | _Failed:
        try:
            if self.fleet is None:
                self.fleet = Fleet.open(WorkTree(Path(self.repo)))
            render = self.fleet.render(root)
            if self.job.staging is not None:
                files = render.reveal() if self.job.reveal else render.files
                write_root(Path(self.job.staging) / str(index), files)
                return _Done(index, root, written=len(files))
        except FleetErrors as err:
            return _Failed(root, "fleet-many", tuple(err.problems))
        except FleetError as err:
            return _Failed(root, "fleet", (err.problem,))
        except GitError as err:
            return _Failed(root, "git", text=str(err))
        except Exception:
            return _Failed(root, "bug", text=traceback.format_exc())
        # Plaintext goes to the parent, our own process, which rebuilds the same Render.
        return _Done(index, root, render.reveal(), render.files if render.redacted else None)


def worker_main(fd: int) -> None:
    """A worker process: read its fleet and job, then render chunks until told to stop or
    the parent goes away (its end of the socket closes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent alone answers Ctrl-C
    conn = Connection(fd)
    try:
        repo, job = conn.recv()
        worker = _Worker(repo, job)
        with redact.keyed_markers(job.marker_key):  # the parent's secret markers
            while True:
                message = conn.recv()
                if message is None:
                    return
                chunk, items = message
                conn.send((chunk, worker.render_chunk(items)))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the parent is gone


# How a worker starts: this interpreter, the parent's import path, `worker_main`.
_BOOT = (
    "import sys; sys.path[:0] = {path!r}; from shared.engine.parallel import worker_main; "
    "worker_main(int(sys.argv[1]))"
)


class _Pool:
    """Worker processes started with `subprocess` rather than `multiprocessing`: each in a
    session of its own, so a terminal's Ctrl-C (sent to the foreground process group)
    reaches the parent alone, even while a worker is still starting, when Python would
    print a KeyboardInterrupt traceback; and without re-running the caller's main module.
    Messages are pickled over a socket pair (multiprocessing's Connection framing)."""

    def __init__(self, repo: Path, workers: int, job: _Job, local: _Worker) -> None:
        self.local = local  # the parent renders too: it is started and has the fleet open
        self.procs: list[subprocess.Popen[bytes]] = []
        self.conns: list[Connection] = []
        boot = _BOOT.format(path=[p for p in sys.path if p])
        try:
            for _ in range(workers):
                parent_end, child_end = socket.socketpair()
                with child_end:
                    proc = subprocess.Popen(
                        [sys.executable, "-c", boot, str(child_end.fileno())],
                        pass_fds=[child_end.fileno()],
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                self.procs.append(proc)
                conn = Connection(parent_end.detach())
                self.conns.append(conn)
                conn.send((str(repo), job))
        except BaseException:
            self.terminate()
            raise

    def run(self, roots: list[str]) -> Iterator[_Done | _Failed]:
        """Results of `roots` in order, failures in their place (the caller raises them)."""
        workers = len(self.procs)
        size = max(1, min(MAX_CHUNK, len(roots) // ((workers + 1) * 8) or 1))
        items = list(enumerate(roots))
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        in_flight: dict[int, int] = {}  # worker → chunks it holds
        done: dict[int, list[_Done | _Failed]] = {}
        next_chunk = 0  # next to hand out
        next_yield = 0  # next to give to the caller
        ahead = AHEAD_PER_WORKER * (workers + 1)

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
                    yield result
                    if isinstance(result, _Failed) and not self.local.job.keep_going:
                        return  # a chunk stops at its first failure, and so do we
                next_yield += 1
            if next_yield >= len(chunks):
                break
            timeout = None
            if next_chunk < len(chunks) and next_chunk < next_yield + ahead:
                # Nothing to wait for while there is work: render the next chunk here.
                done[next_chunk] = self.local.render_chunk(chunks[next_chunk])
                next_chunk += 1
                timeout = 0.0
            for conn in wait(self.conns, timeout):
                w = self.conns.index(conn)  # type: ignore[arg-type]
                chunk, results = self._recv(w)
                in_flight[w] -= 1
                done[chunk] = results

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
        try:
            code: int | None = proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
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
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)

    def terminate(self) -> None:
        """Stop every worker now (an error, Ctrl-C, or the caller stopped early)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for conn in self.conns:
            conn.close()
