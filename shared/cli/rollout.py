"""`rollwright promote` and `rollwright rollout status`: patch promotion on a checkout.

    rollwright promote PATCH_ID [--to NODE] [--force] [--graduate] [--repo DIR]
                       [--no-commit] [--message-only]
    rollwright rollout status [--repo DIR] [--format text|json] [--patch ID]

`promote` writes the plan of `shared.promotion.plan` into the checkout and commits exactly those
paths with git (never pushes). Exit codes: 0 done, 1 refused (a gap, unmet dependencies, a
conflict, a closed window, a dirty checkout), 2 error (bad repo, unknown patch or node).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.engine.errors import FleetError, FleetErrors
from shared.engine.tree import GitError, WorkTree, git

EXIT_OK, EXIT_REFUSED, EXIT_ERROR = 0, 1, 2


def add_parsers(sub: Any) -> None:
    """Register `promote` and `rollout` on the `rollwright` subparsers."""
    p = sub.add_parser(
        "promote",
        help="commit the next promotion step of a patch (or its graduation) to the checkout",
        description=(
            "Copy a staged patch into the next node of the rollout sequence (or --to NODE) "
            "and commit it. Refused (exit 1) when it would skip a node (unless --force, "
            "recorded in the commit message), when its dependencies do not hold there, when "
            "it would overlap another patch, or when the node's promotion window is closed "
            "(unless --force). Never pushes."
        ),
    )
    p.add_argument("patch_id", metavar="PATCH_ID")
    p.add_argument("--to", metavar="NODE", help="promote to this node, e.g. prod/prod-canary")
    p.add_argument(
        "--force",
        action="store_true",
        help="skip nodes before --to, or promote outside the promotion window (recorded)",
    )
    p.add_argument(
        "--graduate",
        action="store_true",
        help="the patch is active everywhere: fold it into values.yaml, delete its files",
    )
    p.add_argument("--repo", default=os.curdir, help="fleet repo checkout (default: .)")
    p.add_argument(
        "--no-commit", action="store_true", help="write the files, leave committing to you"
    )
    p.add_argument(
        "--message-only",
        action="store_true",
        help="print the commit message of the plan; change nothing",
    )
    p.set_defaults(func=cmd_promote)

    p = sub.add_parser("rollout", help="patch rollouts: where each patch stands")
    rollout = p.add_subparsers(dest="rollout_command", required=True)
    s = rollout.add_parser(
        "status",
        help="per patch: active nodes, next node, gate, window, dependencies, conflicts",
    )
    s.add_argument("--repo", default=os.curdir, help="fleet repo checkout (default: .)")
    s.add_argument("--format", choices=["text", "json"], default="text")
    s.add_argument("--patch", metavar="ID", help="only this patch")
    s.set_defaults(func=cmd_rollout_status)


def _tree(repo: str) -> Any:
    path = Path(repo)
    if not path.is_dir():
        raise FleetError(f"--repo {repo!r} is not a directory")
    return WorkTree(path)


def cmd_promote(args: argparse.Namespace) -> int:
    # Start-up time: the promotion engine (croniter, ruamel.yaml) loads only for its commands.
    from shared.promotion import plan as promotion  # noqa: PLC0415

    try:
        tree = _tree(args.repo)
        if args.graduate:
            change = promotion.plan_graduation(tree, args.patch_id)
        else:
            change = promotion.plan_promotion(
                tree, args.patch_id, to=args.to, force=args.force, now=datetime.now(UTC)
            )
        if args.message_only:
            sys.stdout.write(change.message)
            return EXIT_OK
        return _apply(Path(args.repo), change, commit=not args.no_commit)
    except promotion.PromotionError as err:
        print(f"refused: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except FleetErrors as err:
        for problem in err.problems:
            print(problem, file=sys.stderr)
        return EXIT_ERROR
    except (FleetError, GitError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR


def _apply(repo: Path, change: Any, *, commit: bool) -> int:
    paths: list[str] = change.paths
    git(repo, "rev-parse", "--is-inside-work-tree")  # GitError outside a git checkout
    dirty = git(repo, "status", "--porcelain", "--untracked-files=all", "--", *paths)
    if dirty.strip():
        shown = ", ".join(line[3:] for line in dirty.splitlines())
        print(
            f"refused: the checkout has uncommitted changes to {shown}; commit or stash them first",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    for rel, data in change.writes.items():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for rel in change.deletes:
        (repo / rel).unlink(missing_ok=True)
    if not commit:
        print(f"{change.title}: wrote {', '.join(paths)} (not committed)")
        return EXIT_OK
    git(repo, "add", "-A", "--", *paths)
    git(repo, "commit", "-q", "-F", "-", "--", *paths, input_text=change.message)
    sha = git(repo, "rev-parse", "--short", "HEAD").strip()
    print(f"[{sha}] {change.title}")
    return EXIT_OK


def cmd_rollout_status(args: argparse.Namespace) -> int:
    # Start-up time: the promotion engine (croniter, ruamel.yaml) loads only for its commands.
    from shared.engine.config.fleet import FleetConfig  # noqa: PLC0415
    from shared.engine.config.windows import window_state  # noqa: PLC0415
    from shared.promotion import plan as promotion  # noqa: PLC0415

    now = datetime.now(UTC)
    try:
        tree = _tree(args.repo)
        rollouts = promotion.rollout_status(tree, args.patch)
        settings = FleetConfig.load(tree).rollout
    except FleetErrors as err:
        for problem in err.problems:
            print(problem, file=sys.stderr)
        return EXIT_ERROR
    except (FleetError, GitError, promotion.PromotionError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    reports = []
    for r in rollouts:
        window = window_state(settings, r.next_node.path, now) if r.next_node else None
        soak = promotion.duration_text(r.current_node.soak_seconds) if r.current_node else ""
        reports.append((r, window, soak))
    if args.format == "json":
        out = []
        for r, window, _ in reports:
            item = asdict(r)
            item["window"] = None
            if window is not None:
                item["window"] = {
                    "open": window.open,
                    "reason": window.reason,
                    "next_open": window.next_open.isoformat() if window.next_open else None,
                    "closes_at": window.closes_at.isoformat() if window.closes_at else None,
                }
            out.append(item)
        print(json.dumps(out, indent=2))
        return EXIT_OK
    if not reports:
        print("no patches")
    for i, (r, window, soak) in enumerate(reports):
        if i:
            print()
        sys.stdout.write(_text(r, window, soak))
    return EXIT_OK


def _text(r: Any, window: Any, soak: str) -> str:
    """One patch's status; `soak` is how long its current node soaks, in words."""
    lines = [f"{r.patch_id}  ({r.cluster_type}/{r.app})  {r.description}".rstrip()]

    def row(label: str, value: str) -> None:
        lines.append(f"  {label + ':':<14}{value}")

    row("staged", r.staged_path or "(no staged file; copies only)")
    stuck = {b.node for b in r.blocked}
    active = [f"{n} (blocked)" if n in stuck else n for n in r.active_nodes]
    row("active on", ", ".join(active) or "nothing yet (staged only)")
    for blocked in r.blocked:
        row(
            "blocked",
            f"{blocked.node}: {blocked.reason}; the patch is not applied there and those roots "
            "refuse to render until it is met",
        )
    for warning in r.shadowed_pins:
        row("warning", warning)
    if r.skipped_nodes:
        row("skipped", ", ".join(r.skipped_nodes) + " (forced past)")
    if r.current_node is not None:
        row("current", f"{r.current_node.path} (soak {soak})")
    if r.next_node is not None:
        row("next", f"{r.next_node.path} (gate {r.next_node.gate})")
        for warning in r.next_shadowed_pins:
            row("would warn", warning)
        if window is not None:
            row("window", window.reason)
        row(
            "dependencies",
            "met" if not r.unmet_dependencies else "; ".join(r.unmet_dependencies),
        )
    else:
        row("next", "none: active on every node")
    row("conflicts", "; ".join(r.conflicts) or "none")
    row(
        "graduation",
        f"due: rollwright promote {r.patch_id} --graduate" if r.graduated_ready else "not yet",
    )
    return "\n".join(lines) + "\n"
