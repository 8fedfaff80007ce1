"""`rollwright diff`: the PR preview report on a local checkout, for CI and pre-commit.

    rollwright diff BASE [HEAD] [--repo DIR] [--root ROOT ...] [--format markdown|unified|json]
                    [--color auto|always|never] [--merge-base] [--limit BYTES] [--jobs N]
    rollwright diff --check [--repo DIR] [--rendered DIR] [--root ROOT ...] [--jobs N]
                    [--format text|json]

Without HEAD, BASE is compared with the working tree (uncommitted and untracked files
included). Without --format, a terminal gets the unified diff in colour (people read it
there) and a pipe or file gets Markdown (what CI posts as a comment), as before.

Exit status: 0 no changes (or the rendered tree is up to date), 1 changes (or it is out of
date), 2 an error: a revision git does not know, a fleet that cannot be read, or a root that
fails to render on the HEAD side. Base-side render errors are warnings on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

# Start-up time: `shared.cli.main` builds this parser on every run, so the renderer and the
# preview report load only when `diff` runs (in `_diff`, `_check` and `_limit`).
from shared.engine.errors import FleetError, FleetErrors
from shared.engine.tree import GitError, WorkTree, git

EXIT_SAME = 0
EXIT_CHANGED = 1
EXIT_ERROR = 2


def add_parsers(sub: Any) -> None:
    """Register `diff` on the `rollwright` subparsers."""
    p = sub.add_parser(
        "diff",
        help="what a change renders differently (the PR preview), or --check a rendered/ tree",
        description=(
            "Render the roots affected between two git revisions (or a revision and the "
            "working tree) on both sides and print the redacted diff, as the pull request "
            "preview shows it: unified and coloured on a terminal, Markdown otherwise or "
            "with --format markdown. Exit 0 with no "
            "changes, 1 with changes, 2 on errors (a root that fails to render at HEAD "
            "included). With --check, render the working tree and compare it with a "
            "checked-in rendered tree instead (exit 1 when it is out of date)."
        ),
    )
    p.add_argument("base", nargs="?", metavar="BASE", help="base revision (e.g. origin/main)")
    p.add_argument(
        "head",
        nargs="?",
        metavar="HEAD",
        help="head revision (e.g. HEAD); without it, the working tree",
    )
    p.add_argument("--repo", default=os.curdir, help="fleet git repository (default: .)")
    p.add_argument(
        "--root",
        action="append",
        metavar="ROOT",
        help="only this root (repeatable); default: the roots the change affects",
    )
    p.add_argument(
        "--format",
        choices=["markdown", "unified", "json", "text"],
        help="markdown (what the PR comment shows, uncut unless --limit), unified, or json; "
        "default: unified on a terminal, markdown otherwise (with --check: text or json)",
    )
    p.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="colour the unified diff: auto (on a terminal, unless NO_COLOR is set)",
    )
    p.add_argument(
        "--merge-base",
        action="store_true",
        help="compare HEAD with its merge base with BASE (what the branch changes), not with "
        "BASE itself",
    )
    p.add_argument(
        "--limit",
        type=_limit,
        metavar="BYTES",
        help="cut the Markdown like GitHub does (65535 for a check run)",
    )
    p.add_argument(
        "--jobs",
        type=_positive,
        default=os.cpu_count() or 1,
        metavar="N",
        help="render on N processes (default: the number of CPUs)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="compare the working tree's render with the checked-in --rendered tree",
    )
    p.add_argument(
        "--rendered",
        default="rendered",
        metavar="DIR",
        help="with --check: the rendered tree, relative to --repo (default: rendered)",
    )
    p.set_defaults(func=cmd_diff)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _limit(text: str) -> int:
    from shared.review.markdown import MIN_LIMIT  # noqa: PLC0415 (start-up time, see the imports)

    value = _positive(text)
    if value < MIN_LIMIT:
        raise argparse.ArgumentTypeError(f"a preview needs at least {MIN_LIMIT} bytes")
    return value


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _terminal() -> bool:
    return sys.stdout.isatty()


def cmd_diff(args: argparse.Namespace) -> int:
    try:
        if args.check:
            if args.base or args.head:
                return _error("--check compares the working tree: it takes no revisions")
            if args.format not in (None, "text", "json"):
                return _error(f"--check prints text or json, not {args.format}")
            return _check(args)
        if not args.base:
            return _error(
                "diff needs a revision: BASE compares it with the working tree, "
                "BASE HEAD two revisions (or --check compares with rendered/)"
            )
        if args.format == "text":
            return _error("--format text is for --check; the diff is markdown, unified or json")
        return _diff(args)
    except FleetErrors as err:
        for problem in err.problems:
            print(problem, file=sys.stderr)
        return EXIT_ERROR
    except (FleetError, GitError) as err:
        return _error(str(err))


def _diff(args: argparse.Namespace) -> int:
    # Start-up time, see the imports.
    from shared.review import preview  # noqa: PLC0415
    from shared.review.markdown import report_markdown  # noqa: PLC0415
    from shared.review.report import report_json, report_unified, short_revision  # noqa: PLC0415

    repo = Path(args.repo)
    base = args.base
    if args.merge_base:
        base = git(repo, "merge-base", "--", args.base, args.head or "HEAD").strip()
    # No HEAD: the working tree (preview.build_preview reads it in place).
    report = preview.build_preview(repo, base, args.head, roots=args.root, jobs=args.jobs)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for item in report.base_errors:
        print(
            f"warning: root {item.root!r} does not render at the base revision "
            f"{report.base[:12]}: {item.base_error}",
            file=sys.stderr,
        )
    head = short_revision(report.head)
    if report.error is not None:
        print(f"error: the fleet cannot be read at {head}: {report.error}", file=sys.stderr)
    for item in report.head_errors:
        print(
            f"error: root {item.root!r} does not render at {head}: {item.head_error}",
            file=sys.stderr,
        )
    terminal = _terminal()
    output = args.format or ("unified" if terminal else "markdown")
    if output == "json":
        sys.stdout.write(json.dumps(report_json(report), indent=2) + "\n")
    elif output == "unified":
        text = report_unified(report)
        colour = args.color == "always" or (
            args.color == "auto" and terminal and not os.environ.get("NO_COLOR")
        )
        sys.stdout.write(colour_unified(text) if colour else text)
    else:
        sys.stdout.write(report_markdown(report, limit=args.limit))
    if report.failed:
        return EXIT_ERROR
    return EXIT_CHANGED if report.changed else EXIT_SAME


def _check(args: argparse.Namespace) -> int:
    # Start-up time, see the imports.
    from shared.engine import parallel  # noqa: PLC0415
    from shared.engine.fleet import Fleet  # noqa: PLC0415

    repo = Path(args.repo)
    if not repo.is_dir():
        return _error(f"--repo {args.repo!r} is not a directory")
    rendered = repo / args.rendered
    shown = args.rendered.rstrip("/")
    fleet = Fleet.open(WorkTree(repo))
    roots = args.root or fleet.roots()
    for root in roots:
        fleet.check_root(root)
    if not rendered.is_dir():
        # One hint, not a "missing" line per file of a tree that was never created.
        hint = (
            f"{shown}/ does not exist: create it with `rollwright render --out {shown}` "
            f"in {repo} and commit it, or point --rendered at the rendered tree"
        )
        if args.format == "json":
            document = {"rendered": shown, "exists": False, "up_to_date": False, "hint": hint}
            sys.stdout.write(json.dumps(document, indent=2) + "\n")
        print(f"error: {hint}", file=sys.stderr)
        return EXIT_CHANGED
    problems: dict[str, str] = {}
    expected: set[str] = set()
    files = 0
    for render in parallel.render_all(fleet, roots, args.jobs):
        # The checked-in tree can only hold the redacted render, so that is what is compared.
        for path, data in render.files.items():
            rel = f"{render.root}/{path}"
            expected.add(rel)
            files += 1
            target = rendered / rel
            if not target.is_file():
                problems[rel] = "missing"
            elif target.read_bytes() != data:
                problems[rel] = "out of date"
    scanned = [rendered / root for root in roots] if args.root else [rendered]
    for top in scanned:
        for path in sorted(top.rglob("*")) if top.is_dir() else []:
            rel = path.relative_to(rendered).as_posix()
            if not path.is_file() or rel in expected or _ignored(rel):
                continue
            problems[rel] = "not rendered any more"
    _collapse_missing_roots(problems, roots, rendered)
    if args.format == "json":
        document = {
            "rendered": shown,
            "exists": True,
            "up_to_date": not problems,
            "roots": len(roots),
            "files": files,
            "problems": [
                {"path": f"{shown}/{rel}", "problem": problems[rel]} for rel in sorted(problems)
            ],
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        for rel in sorted(problems):
            print(f"{shown}/{rel}: {problems[rel]}")
    if problems:
        print(
            f"{len(problems)} file(s) of {shown}/ out of date; update with `rollwright render "
            f"--out {shown}`{' --root …' if args.root else ''} and delete the files of roots "
            "that no longer render",
            file=sys.stderr,
        )
        return EXIT_CHANGED
    print(f"{shown}/ is up to date ({len(roots)} root(s), {files} file(s))", file=sys.stderr)
    return EXIT_SAME


def _collapse_missing_roots(problems: dict[str, str], roots: list[str], rendered: Path) -> None:
    """A root whose directory is missing altogether is one line (`<root>/: missing, N
    files`), not one per file: it was never rendered in, or was deleted."""
    for root in roots:
        if (rendered / root).is_dir():
            continue
        mine = [rel for rel in problems if rel.startswith(f"{root}/")]
        if len(mine) > 1:
            for rel in mine:
                del problems[rel]
            problems[f"{root}/"] = f"missing ({len(mine)} files)"


# SGR colours of `git diff --color`: headers bold, hunks cyan, removed red, added green; the
# report's own `#` lines (rollwright's comments, not the diff) yellow.
_COLOURS = (("--- ", "\x1b[1m"), ("+++ ", "\x1b[1m"), ("@@", "\x1b[36m"), ("#", "\x1b[33m"))
_RESET = "\x1b[m"


def colour_unified(text: str) -> str:
    """The unified report with terminal colours, as `git diff` shows it."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        end = line[len(body) :]
        colour = next((c for prefix, c in _COLOURS if body.startswith(prefix)), None)
        if colour is None and body.startswith("+"):
            colour = "\x1b[32m"
        elif colour is None and body.startswith("-"):
            colour = "\x1b[31m"
        out.append(f"{colour}{body}{_RESET}{end}" if colour and body else line)
    return "".join(out)


def _ignored(rel: str) -> bool:
    """Dotfiles anywhere (.gitkeep, .gitattributes) and files at the top of the rendered
    tree (a README) are not renders."""
    parts = rel.split("/")
    return len(parts) == 1 or any(part.startswith(".") for part in parts)
