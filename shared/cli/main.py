"""The `rollwright` command line: render, inspect and validate a fleet checkout locally.

    rollwright roots [--repo DIR] [--changed BASE..HEAD]
    rollwright values ROOT [--repo DIR] [--release DEPLOYMENT/RELEASE] [--reveal[=force]]
    rollwright render [--repo DIR] --out OUT [--root ROOT ...] [--jobs N] [--reveal[=force]]
    rollwright validate [--repo DIR] [--strict]

Bad input never shows a traceback: fleet mistakes print `path:line: message` and exit 1.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from shared.cli import db as dbcommands
from shared.cli import deploy as deploycommand
from shared.cli import dev as devstack_commands
from shared.cli import diff as preview_cli
from shared.cli import rollout as rollout_cli
from shared.engine import parallel, yamldoc
from shared.engine.affected import affected_between
from shared.engine.errors import FleetError, FleetErrors
from shared.engine.fleet import Fleet
from shared.engine.secrets.redact import keyed_markers
from shared.engine.tree import GitError, WorkTree
from shared.engine.validate import validate_fleet


def _fleet(args: argparse.Namespace) -> Fleet:
    repo = Path(args.repo)
    if not repo.is_dir():
        raise FleetError(f"--repo {args.repo!r} is not a directory")
    return Fleet.open(WorkTree(repo))


def cmd_roots(args: argparse.Namespace) -> int:
    if args.changed:
        base, sep, head = args.changed.partition("..")
        if not sep or not base or not head:
            raise FleetError(f"--changed wants BASE..HEAD, got {args.changed!r}")
        roots = affected_between(Path(args.repo), base, head)
    else:
        roots = _fleet(args).roots()
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
    values = fleet.values(args.root, args.release, reveal=bool(args.reveal))
    sys.stdout.write(yamldoc.dumps(values))
    return 0


class _Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

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

    def close(self) -> None:
        if self.enabled:
            elapsed = time.monotonic() - self.started
            sys.stderr.write(f"\rrendered {self.done} root(s) in {elapsed:.1f}s{' ' * 50}\n")


def cmd_render(args: argparse.Namespace) -> int:
    if _reveal_refused(args):
        return 2
    fleet = _fleet(args)
    roots = args.root or fleet.roots()
    known = set(fleet.roots())
    for root in roots:
        if root not in known:
            fleet.check_root(root)  # raises the usual error
    out = Path(args.out)
    progress = _Progress(len(roots))

    try:
        for root in parallel.render_into(fleet, roots, args.jobs, out, reveal=bool(args.reveal)):
            progress.step(root)
    except parallel.WorkerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    progress.close()
    return 0


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of processes, got {text!r}")
    return jobs


def cmd_validate(args: argparse.Namespace) -> int:
    problems = validate_fleet(WorkTree(Path(args.repo)))
    for problem in problems:
        print(problem)
    errors = sum(1 for p in problems if not p.hygiene)
    warnings = len(problems) - errors
    found = [f"{errors} problem(s)"] if errors else []
    found += [f"{warnings} warning(s)"] if warnings else []
    if found:
        print(f"{' and '.join(found)} found", file=sys.stderr)
    return 1 if errors or (warnings and args.strict) else 0


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

    p = sub.add_parser("roots", help="list root ids, or those affected between two revisions")
    repo_arg(p)
    p.add_argument("--changed", metavar="BASE..HEAD", help="only roots affected by these commits")
    p.set_defaults(func=cmd_roots)

    p = sub.add_parser("values", help="print the merged values of a root or release")
    p.add_argument("root")
    repo_arg(p)
    p.add_argument("--release", metavar="DEPLOYMENT/RELEASE")
    reveal_arg(p)
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
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("validate", help="check the fleet repo; one path:line: message per problem")
    repo_arg(p)
    p.add_argument(
        "--strict", action="store_true", help="warnings fail too (exit 1), not only problems"
    )
    p.set_defaults(func=cmd_validate)

    devstack_commands.add_parsers(sub)

    preview_cli.add_parsers(sub)

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
