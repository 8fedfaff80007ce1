"""`rollwright dev` and `rollwright demo`: argument parsing and the foreground loop.

Kept light at import time (argparse alone) because `shared.cli.main`
builds every subcommand's parser on each run; the stack itself is imported when one of these
commands runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any


def add_parsers(sub: Any) -> None:
    """Register `dev` and `demo` on the `rollwright` subparsers."""
    p = sub.add_parser(
        "dev",
        help="run the embedded stack: Temporal dev server, worker, gateway, GitHub emulator",
        description=(
            "Start a Temporal dev server (UI included), a worker, the gateway, SQLite and a "
            "filesystem blob store under the data directory, and - unless a GitHub App is "
            "configured through ROLLWRIGHT_GITHUB_APP_ID / _PRIVATE_KEY(_FILE) - the local "
            "GitHub emulator. Ctrl-C stops everything."
        ),
    )
    _stack_arguments(p, ephemeral=False)
    p.add_argument(
        "--temporal-address",
        metavar="HOST:PORT",
        help="use this Temporal instead of starting a dev server (rollwright's search "
        "attributes are registered there when missing)",
    )
    p.add_argument(
        "--repo",
        action="append",
        default=[],
        metavar="OWNER/NAME=PATH",
        help="install the emulated App on OWNER/NAME backed by the git repo at PATH (repeatable)",
    )
    p.set_defaults(func=cmd_dev)

    p = sub.add_parser(
        "demo",
        help="end to end on the embedded stack: push, review, approve, publish",
        description=(
            "Start the embedded stack on free ports, create a git fleet repo from an example, "
            "push a change, wait for the check run to ask for review with a diff, click "
            "Approve through the emulator, and check the deployment was published and "
            "recorded. Exits 0 only when every step happened."
        ),
    )
    _stack_arguments(p, ephemeral=True)
    p.add_argument(
        "--fleet",
        type=Path,
        default=None,
        help="example fleet to copy, any layout (default: examples/atlas-fleet of this "
        "checkout; examples/dimensions-fleet and examples/helmfile-fleet work too)",
    )
    p.add_argument(
        "--keep", action="store_true", help="leave the stack running afterwards, until Ctrl-C"
    )
    p.add_argument(
        "--step-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="give up on a step after this long (default: 120)",
    )
    p.set_defaults(func=cmd_demo)


def _stack_arguments(p: argparse.ArgumentParser, *, ephemeral: bool) -> None:
    hint = " (default: a free port)" if ephemeral else ""
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=(
            "state directory (default: a temporary directory, or .rollwright/demo with --keep)"
            if ephemeral
            else "state directory (default: ROLLWRIGHT_DATA_DIR or .rollwright)"
        ),
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    default = 0 if ephemeral else None
    for flag, port, what in (
        ("--temporal-port", 7233, "Temporal frontend gRPC"),
        ("--ui-port", 8233, "Temporal UI"),
        ("--port", 8000, "gateway"),
        ("--emulator-port", 9100, "GitHub emulator"),
    ):
        p.add_argument(
            flag,
            type=int,
            default=default if default is not None else port,
            help=f"{what} port{hint or f' (default: {port})'}",
        )


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """SIGTERM (systemd, docker, a test harness) stops the stack like Ctrl-C does."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


def cmd_dev(args: argparse.Namespace) -> int:
    # Start-up time: the dev stack (Temporal client, emulator) loads only for `dev` / `demo`.
    from shared.devstack.processes import ChildExited  # noqa: PLC0415
    from shared.devstack.stack import DevStack, StackError, options_from_args  # noqa: PLC0415

    data_dir = args.data_dir or Path(os.environ.get("ROLLWRIGHT_DATA_DIR") or ".rollwright")
    repos = [_parse_repo(spec) for spec in args.repo]
    stop_on_sigterm()
    stack = DevStack(options_from_args(args, data_dir))
    try:
        print("rollwright dev: starting the embedded stack", flush=True)
        stack.start()
        for owner, name, path in repos:
            stack.add_repository(owner, name, path)
        print(stack.banner(), flush=True)
        for owner, name, path in repos:
            print(f"  repository       {owner}/{name} → {path}", flush=True)
        print("Ctrl-C stops everything.", flush=True)
        stack.wait()
    except KeyboardInterrupt:
        print("\nrollwright dev: stopping", flush=True)
        return 0
    except (StackError, ChildExited) as err:
        print(f"rollwright dev: {err}", file=sys.stderr, flush=True)
        return 1
    finally:
        stack.stop()
    return 0


def _parse_repo(spec: str) -> tuple[str, str, Path]:
    name, sep, path = spec.partition("=")
    owner, slash, repo = name.partition("/")
    if not sep or not slash or not owner or not repo or not path:
        raise SystemExit(f"rollwright dev: --repo wants OWNER/NAME=PATH, got {spec!r}")
    git_dir = Path(path).resolve()
    if not (git_dir / ".git").exists() and not (git_dir / "HEAD").exists():
        raise SystemExit(f"rollwright dev: --repo {spec!r}: {git_dir} is not a git repository")
    return owner, repo, git_dir


def cmd_demo(args: argparse.Namespace) -> int:
    # Start-up time: the dev stack (Temporal client, emulator) loads only for `dev` / `demo`.
    from shared.devstack.demo import run_demo  # noqa: PLC0415

    stop_on_sigterm()
    return run_demo(args)
