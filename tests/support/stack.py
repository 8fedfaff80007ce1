"""The embedded stack for end-to-end tests: free ports, quiet, serving one fleet repository."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from shared.devstack import fleetrepo
from shared.devstack.demo import approvers_needed
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.stack import DevStack, StackOptions

T = TypeVar("T")


def inherited_env() -> dict[str, str]:
    """This process's environment minus ROLLWRIGHT_*: the stack's own values win, and a
    developer's GitHub App must not leak in."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ROLLWRIGHT_")}


@contextmanager
def serving_fleet(
    base: Path, source: Path, owner: str, name: str, **options: Any
) -> Iterator[tuple[DevStack, Path]]:
    """A started stack (state under `base/state`, `options` for StackOptions) serving a copy
    of the fleet at `source` as `owner/name` from `base/fleet`; stopped on exit."""
    settings = StackOptions(data_dir=base / "state", env=inherited_env(), **options)
    stack = DevStack(settings.with_free_ports(), out=lambda line: None)
    stack.start()
    try:
        repo_dir = base / "fleet"
        fleetrepo.create_fleet_repo(source, repo_dir)
        stack.add_repository(owner, name, repo_dir)
        yield stack, repo_dir
    finally:
        stack.stop()


def wait_on(
    stack: DevStack,
    what: str,
    probe: Callable[[], T | None],
    *,
    timeout: float = 60.0,
    poll: float = 0.1,
    each: Callable[[], None] | None = None,
) -> T:
    """Poll `probe` until it returns something other than None. A stack child that crashed
    fails at once with its log; `each` runs before every probe (say, a reviewer approving)."""
    deadline = time.monotonic() + timeout
    while True:
        stack.check()
        if each is not None:
            each()
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:.0f}s; logs: {stack.data_dir}")
        time.sleep(poll)


def approve_waiting(
    emulator: GitHubEmulator, owner: str, name: str, approved: set[tuple[int, str]]
) -> None:
    """Click Approve on every check run of `owner/name` that asks for review, once as each
    approval it still needs (an owner of what it changes, where the fleet has OWNERS files);
    `approved` remembers the clicks made."""
    for run in emulator.check_runs(owner, name):
        if run.conclusion != "action_required":
            continue
        if "approve" not in [a["identifier"] for a in run.actions]:
            continue
        for login in approvers_needed(run.output.get("summary") or "", "reviewer"):
            if (run.id, login) in approved:
                continue
            delivery = emulator.click_action(run.id, "approve", login)
            assert delivery.status == 202, delivery.response
            approved.add((run.id, login))


def details_links(emulator: GitHubEmulator, owner: str, name: str) -> dict[str, str]:
    """Every Details link the emulator recorded on `owner/name`'s check runs, at each create
    and update, with the name of a check run that carried it ("" for a run without one)."""
    links: dict[str, str] = {}
    for run in emulator.check_runs(owner, name):
        for update in run.history:
            links.setdefault(str(update.state.get("details_url") or ""), run.name)
    return links
