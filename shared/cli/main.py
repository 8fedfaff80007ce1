"""The `rollwright` command line: render, inspect and validate a fleet checkout locally.

    rollwright roots [--repo DIR] [--changed BASE..HEAD] [--format text|json]
    rollwright values ROOT [--repo DIR] [--release DEPLOYMENT/RELEASE] [--reveal[=force]]
                      [--format yaml|json]
    rollwright render [--repo DIR] --out OUT [--root ROOT ...] [--jobs N] [--reveal[=force]]
                      [--format text|json]
    rollwright validate [--repo DIR] [--strict] [--format text|json]
    rollwright policies [--repo DIR] [ROOT ...] [--format text|json]  (shared/cli/policies.py)

Bad input never shows a traceback: fleet mistakes print `path:line: message` and exit 1.
`render` and `validate` end with a one-line summary on stderr, in a terminal or a pipe, so a
script's log says what happened; `--format json` puts the structured result on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

# Start-up time: every run imports this module and builds every subcommand's parser, so it
# and the parser modules below import only argparse-level code, the error classes `main`
# catches and the tree's GitError; each command imports the engine parts it uses when it runs
# (`rollwright --help` loads no fleet model or renderer; `roots --changed` no renderer).
from shared.cli import db as dbcommands
from shared.cli import deploy as deploycommand
from shared.cli import dev as devstack_commands
from shared.cli import diff as preview_cli
from shared.cli import policies as policy_cli
from shared.cli import rollout as rollout_cli
from shared.engine.errors import ROOTS_NAMED, FleetError, FleetErrors, Problem, by_root
from shared.engine.tree import GitError, WorkTree

if TYPE_CHECKING:
    from shared.engine.fleet import Fleet


def _fleet(args: argparse.Namespace) -> Fleet:
    from shared.engine.fleet import Fleet  # noqa: PLC0415 (start-up time, see the imports)

    repo = Path(args.repo)
    if not repo.is_dir():
        raise FleetError(f"--repo {args.repo!r} is not a directory")
    return Fleet.open(WorkTree(repo))


def cmd_roots(args: argparse.Namespace) -> int:
    if args.changed:
        base, sep, head = args.changed.partition("..")
        if not sep or not base or not head:
            raise FleetError(f"--changed wants BASE..HEAD, got {args.changed!r}")
        # Start-up time: only the fleet model, not the renderer or the other commands.
        from shared.engine.affected import affected_between  # noqa: PLC0415

        roots = affected_between(Path(args.repo), base, head)
    else:
        roots = _fleet(args).require_roots()
    if args.format == "json":
        sys.stdout.write(json.dumps(list(roots), indent=2) + "\n")
        return 0
    for root in roots:
        print(root)
    return 0


def _reveal_refused(args: argparse.Namespace) -> bool:
    """`--reveal` prints plaintext secrets: only to a terminal, unless `--reveal=force`."""
    if args.reveal == "tty" and not sys.stdout.isatty():
        print(
            "error: --reveal shows plaintext secrets and stdout is not a terminal; "
            "use --reveal=force to write them anyway",
            file=sys.stderr,
        )
        return True
    return False


def cmd_values(args: argparse.Namespace) -> int:
    if _reveal_refused(args):
        return 2
    fleet = _fleet(args)
    from shared.engine import yamldoc  # noqa: PLC0415 (start-up time, see the imports)

    values = fleet.values(args.root, args.release, reveal=bool(args.reveal))
    if args.format == "json":
        sys.stdout.write(json.dumps(values, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(yamldoc.dumps(values))
    return 0


class _Progress:
    """A one-line progress bar on a terminal (nothing in a pipe); `close` replaces it with the
    summary line, which is printed in a pipe too."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.enabled = sys.stderr.isatty() and total > 0
        self.started = time.monotonic()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / self.total)
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} {label[:40]:<40}")
        sys.stderr.flush()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def close(self, summary: str) -> None:
        """Replace the bar with `summary`; "" only clears the bar (what follows says more)."""
        if self.enabled:
            sys.stderr.write(f"\r{summary}{' ' * 90}\r{summary}")
            sys.stderr.write("\n" if summary else "")
        elif summary:
            sys.stderr.write(summary + "\n")


def cmd_render(args: argparse.Namespace) -> int:
    from shared.engine import parallel  # noqa: PLC0415 (start-up time, see the imports)

    if _reveal_refused(args):
        return 2
    fleet = _fleet(args)
    roots = args.root or fleet.require_roots()
    known = set(fleet.roots())
    for root in roots:
        if root not in known:
            fleet.check_root(root)  # raises the usual error
    out = Path(args.out)
    progress = _Progress(len(roots))
    # Every root that renders is written; the ones that fail are reported together at the
    # end, each mistake once with its roots, and nothing of them is written.
    failures: list[tuple[str, FleetError]] = []
    done: list[str] = []
    written: dict[str, int] = {}
    try:
        for root in parallel.render_into(
            fleet,
            roots,
            args.jobs,
            out,
            reveal=bool(args.reveal),
            failures=failures,
            written=written,
        ):
            done.append(root)
            progress.step(root)
    except parallel.WorkerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    files = sum(written[root] for root in done)
    elapsed = progress.elapsed
    problems = by_root(failures, name_roots=len(roots) > 1)
    if failures:
        progress.close("")
        for problem in problems:
            print(problem, file=sys.stderr)
        failed = ", ".join(root for root, _ in failures[:ROOTS_NAMED])
        more = f" and {len(failures) - ROOTS_NAMED} more" if len(failures) > ROOTS_NAMED else ""
        summary = (
            f"rendered {len(done)} of {len(roots)} root(s), {files} file(s) into {out} in "
            f"{elapsed:.1f}s; {len(failures)} failed ({failed}{more}), nothing written for them"
        )
        print(summary, file=sys.stderr)
    else:
        summary = f"rendered {len(roots)} root(s), {files} file(s) into {out} in {elapsed:.1f}s"
        progress.close(summary)
    if args.format == "json":
        document = {
            "out": str(out),
            "roots": done,
            "files": files,
            "seconds": elapsed,
            "failed": [root for root, _ in failures],
            "problems": [_problem_json(p) for p in problems],
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    return 1 if failures else 0


def _problem_json(problem: Problem) -> dict[str, object]:
    return {
        "path": problem.path,
        "line": problem.line,
        "severity": "warning" if problem.hygiene else "error",
        "message": problem.message,
    }


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of processes, got {text!r}")
    return jobs


def cmd_validate(args: argparse.Namespace) -> int:
    from shared.engine.validate import check_fleet  # noqa: PLC0415 (start-up time, see the imports)

    result = check_fleet(WorkTree(Path(args.repo)))
    problems = result.problems
    errors = sum(1 for p in problems if not p.hygiene)
    warnings = len(problems) - errors
    code = 1 if errors or (warnings and args.strict) else 0
    if args.format == "json":
        document = {
            "ok": code == 0,
            "roots": result.roots,
            "errors": errors,
            "warnings": warnings,
            "problems": [_problem_json(p) for p in problems],
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        for problem in problems:
            print(problem)
    found = [f"{errors} problem(s)"] if errors else []
    found += [f"{warnings} warning(s)"] if warnings else []
    checked = f"{result.roots} root(s) checked" if result.roots is not None else "fleet checked"
    print(f"{checked}: {' and '.join(found) or 'no problems'} found", file=sys.stderr)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rollwright", description="Render, diff and roll out GitOps fleets."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def repo_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--repo", default=os.curdir, help="fleet repo checkout (default: .)")

    def reveal_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--reveal",
            nargs="?",
            const="tty",
            choices=["tty", "force"],
            help="plaintext secrets instead of the redacted form (default); refused when "
            "stdout is not a terminal unless --reveal=force",
        )

    def format_arg(p: argparse.ArgumentParser, json_help: str = "") -> None:
        p.add_argument("--format", choices=["text", "json"], default="text", help=json_help or None)

    p = sub.add_parser("roots", help="list root ids, or those affected between two revisions")
    repo_arg(p)
    p.add_argument("--changed", metavar="BASE..HEAD", help="only roots affected by these commits")
    format_arg(p)
    p.set_defaults(func=cmd_roots)

    p = sub.add_parser("values", help="print the merged values of a root or release")
    p.add_argument("root")
    repo_arg(p)
    p.add_argument("--release", metavar="DEPLOYMENT/RELEASE")
    reveal_arg(p)
    p.add_argument("--format", choices=["yaml", "json"], default="yaml")
    p.set_defaults(func=cmd_values)

    p = sub.add_parser("render", help="render roots into OUT/<root>/")
    repo_arg(p)
    p.add_argument("--out", required=True)
    p.add_argument("--root", action="append", metavar="ROOT", help="repeatable; default: all")
    p.add_argument(
        "--jobs",
        type=_jobs,
        default=os.cpu_count() or 1,
        metavar="N",
        help="render on N processes (default: the number of CPUs)",
    )
    reveal_arg(p)
    format_arg(p, "json: a summary on stdout (out, roots, files, seconds)")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("validate", help="check the fleet repo; one path:line: message per problem")
    repo_arg(p)
    p.add_argument(
        "--strict", action="store_true", help="warnings fail too (exit 1), not only problems"
    )
    format_arg(
        p, "json: {ok, roots, errors, warnings, problems: [{path, line, severity, message}]}"
    )
    p.set_defaults(func=cmd_validate)

    devstack_commands.add_parsers(sub)

    preview_cli.add_parsers(sub)

    policy_cli.add_parsers(sub)

    rollout_cli.add_parsers(sub)

    deploycommand.add_parsers(sub)

    dbcommands.add_parsers(sub)
    return parser


def local_marker_key() -> bytes | None:
    """Local renders key their secret markers with `ROLLWRIGHT_REDACTION_KEY` when it is set
    (a team that checks in rendered trees shares it); otherwise they are unkeyed."""
    text = os.environ.get("ROLLWRIGHT_REDACTION_KEY")
    if not text:
        return None
    return hashlib.sha256(b"rollwright local redaction key\0" + text.encode()).digest()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Start-up time: `--help` and usage errors exit before the secrets module loads.
    from shared.engine.secrets.redact import keyed_markers  # noqa: PLC0415

    try:
        with keyed_markers(local_marker_key()):
            code: int = args.func(args)
    except FleetErrors as err:
        for problem in err.problems:
            print(problem, file=sys.stderr)
        return 1
    except FleetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except GitError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 1
    except KeyboardInterrupt:
        return 130
    return code
