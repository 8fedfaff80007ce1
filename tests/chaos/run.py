"""`make chaos`: the fault-injection suite, results in docs/reliability.md.

    python -m tests.chaos.run [--write docs/reliability.md] [--only KEY ...] [--keep]

Starts the embedded stack with two workers (tests/support/cluster.py) and runs each case
against it; a case that fails gets its processes stopped and the next case a fresh stack, so
one failure does not spoil the others. Exits 1 when any case failed. Not part of `make test`
(pytest collects `test_*.py` only; nothing here is named so): it needs a quiet machine for
about ten minutes.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import FrameType, ModuleType

from tests.chaos import (
    burst,
    hostile,
    long_queue,
    publish_race,
    rolling,
    temporal_restart,
    workers,
)
from tests.chaos.report import CaseResult, load_average, render
from tests.support.cluster import Cluster

# Report order is the cases' own (NUMBER); run order puts the quick cases first and the one
# that leaves a thousand-item queue behind last.
CASES: list[ModuleType] = [
    hostile,
    publish_race,
    burst,
    workers,
    rolling,
    temporal_restart,
    long_queue,
]
COMMAND = "make chaos"


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # SystemExit unwinds through the `finally` blocks that stop every process.
    sys.exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.run")
    parser.add_argument("--write", metavar="FILE", help="write the report to FILE")
    parser.add_argument(
        "--only", action="append", choices=[c.KEY for c in CASES], help="run only this case"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    selected = [c for c in CASES if not args.only or c.KEY in args.only]
    work = Path(tempfile.mkdtemp(prefix="rollwright-chaos-"))
    print(f"chaos: work directory {work}", flush=True)
    started = time.monotonic()
    results: list[CaseResult] = []
    chaos: Cluster | None = None
    try:
        for case in selected:
            if chaos is None:
                chaos = Cluster(work / f"stack-{len(results) + 1}", owner="chaos")
                chaos.start()
            result = CaseResult(case.NUMBER, case.KEY, case.TITLE, case.SETUP)
            print(f"chaos: case {case.NUMBER} ({case.KEY}): {case.TITLE}", flush=True)
            case_started = time.monotonic()
            try:
                case.run(chaos, result)
            except Exception as err:
                result.error = f"{type(err).__name__}: {err}"
                traceback.print_exc()
            result.seconds = time.monotonic() - case_started
            results.append(result)
            for check in result.checks:
                mark = {True: "ok  ", False: "FAIL", None: "    "}[check.ok]
                print(f"  {mark} {check.measure}: {check.result}", flush=True)
            verdict = "passed" if result.passed else f"FAILED {result.error or ''}"
            print(f"chaos: case {case.NUMBER} {verdict} ({result.seconds:.0f} s)", flush=True)
            if not result.passed:
                # a fresh stack for the next case; this one's logs stay in the work directory
                chaos.stop()
                chaos = None
    finally:
        if chaos is not None:
            chaos.stop()
    seconds = time.monotonic() - started
    results.sort(key=lambda r: r.number)
    report = render(results, command=COMMAND, seconds=seconds, load=load_average())
    if args.write:
        Path(args.write).write_text(report)
        print(f"chaos: wrote {args.write}", flush=True)
    else:
        print(report)
    failed = [r.key for r in results if not r.passed]
    print(
        f"chaos: {len(results) - len(failed)} passed, {len(failed)} failed "
        f"in {seconds / 60:.1f} min",
        flush=True,
    )
    if failed or args.keep:
        print(f"chaos: logs kept in {work}", flush=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
