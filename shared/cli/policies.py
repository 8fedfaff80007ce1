"""`rollwright policies [ROOT ...]`: run the fleet's policy sets (rollwright.yaml `policies`,
docs/governance.md) on a checkout's renders, as a deployment would before its review.

    rollwright policies [--repo DIR] [ROOT ...] [--format text|json]

Each root a set checks is rendered (redacted, as deployments store it) and every finding is
printed, `root: deny|warn set object: message (rule)`. Exit 0 without failing denies, 2 with
some (a deployment of those roots would wait for the sets' owners), 1 on a fleet mistake (a
policy file that does not compile, at its file and line) or when no set checks any root asked
for.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from shared.engine.errors import FleetError
from shared.engine.tree import WorkTree


def add_parsers(sub: Any) -> None:
    """Register `policies` on the `rollwright` subparsers."""
    p = sub.add_parser(
        "policies", help="run the policy sets on the roots' renders; exit 2 on a failing deny"
    )
    p.add_argument("root", nargs="*", help="roots to check (default: every root a set checks)")
    p.add_argument("--repo", default=".", help="fleet repo checkout (default: .)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_policies)


def cmd_policies(args: argparse.Namespace) -> int:
    # `shared.cli.main` builds this parser on every run; the renderer and the policy engine
    # load only when `policies` runs, for start-up time.
    from shared.engine.fleet import Fleet  # noqa: PLC0415
    from shared.engine.policies.sets import check_root, sets_for  # noqa: PLC0415
    from shared.review.policies import findings_of  # noqa: PLC0415

    repo = Path(args.repo)
    if not repo.is_dir():
        raise FleetError(f"--repo {args.repo!r} is not a directory")
    tree = WorkTree(repo)
    fleet = Fleet.open(tree)
    if not fleet.config.policies:
        raise FleetError("rollwright.yaml has no policy sets (`policies`): nothing to check")
    for root in args.root:
        fleet.check_root(root)  # an unknown root is the usual error
    asked = args.root or fleet.require_roots()
    roots = [root for root in asked if sets_for(fleet.config, root)]
    if not roots:
        raise FleetError(f"no policy set checks {', '.join(asked)}: nothing to check")
    results: dict[str, list[dict[str, Any]]] = {}
    denies = warnings = 0
    for root in roots:
        render = fleet.render(root)
        findings = findings_of(check_root(tree, fleet.config, root, render.files))
        results[root] = [f.model_dump() for f in findings]
        for f in findings:
            denies += f.level == "deny"
            warnings += f.level == "warn"
            if args.format == "text":
                print(f"{root}: {f.level} {f.policy_set} {f.subject()}: {f.message} ({f.policy})")
    if args.format == "json":
        document = {"roots": results, "denies": denies, "warnings": warnings}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    print(f"{len(roots)} root(s) checked: {denies} denied, {warnings} warning(s)", file=sys.stderr)
    return 2 if denies else 0
