"""Driving one fleet repository on a running embedded stack as people and GitHub would: commit a
values change, send the signed push, read the check runs back from the GitHub emulator, click
their buttons. Used by the benchmarks (`tests/bench/`) and the fault-injection suite
(`tests/chaos/`)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from shared.contracts.checkrun import check_run_name
from shared.devstack import fleetrepo
from shared.devstack.emulator.model import CheckRunRecord, WebhookDelivery
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.stack import DevStack
from tests.support.stack import wait_on

T = TypeVar("T")


class FleetDriver:
    """`owner/name` on `stack`'s GitHub emulator, backed by the git repository `repo`."""

    def __init__(
        self,
        stack: DevStack,
        owner: str,
        name: str,
        repo: Path,
        *,
        timeout: float = 60.0,
        poll: float = 0.02,
    ) -> None:
        self.stack = stack
        self.owner, self.name = owner, name
        self.repo = repo
        assert stack.emulator is not None
        self.emulator: GitHubEmulator = stack.emulator
        self.timeout = timeout
        # How often check runs are read back: each read copies all of the repository's, so a
        # repository with thousands of them is read seldom (the copying holds the emulator).
        self.poll = poll
        self.edits = 0

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def wait(
        self,
        what: str,
        probe: Callable[[], T | None],
        poll: float | None = None,
        timeout: float | None = None,
    ) -> T:
        return wait_on(
            self.stack, what, probe, timeout=timeout or self.timeout, poll=poll or self.poll
        )

    # --- driving

    def commit_change(self, root: str, key: str = "env.BENCH_EDIT") -> str:
        """Commit a new value of `key` in `root`'s cluster values (atlas layout); the sha."""
        self.edits += 1
        return fleetrepo.set_value(
            self.repo,
            f"deployments/{root}/cluster.values.yaml",
            key,
            str(self.edits),
            f"{root}: edit {self.edits}",
        )

    def push(self, before: str, after: str) -> WebhookDelivery:
        """Send the signed push of `before..after` to the gateway; it must be accepted."""
        delivery = self.emulator.send_push(self.owner, self.name, before, after)
        if delivery.status != 202:
            raise RuntimeError(f"push answered {delivery.status}: {delivery.response}")
        return delivery

    def push_change(self, root: str) -> tuple[str, float]:
        """Commit a change to `root`'s cluster values and send the push; (sha, sent at)."""
        before = fleetrepo.head(self.repo)
        after = self.commit_change(root)
        sent = time.perf_counter()
        self.push(before, after)
        return after, sent

    def api_deploy(self, root: str, revision: str, requested_by: str) -> str:
        """A manual deployment through `POST /api/deploy` by `requested_by`, with a GitHub
        token the emulator issued them (the gateway asks the emulator who that is); its
        deployment id."""
        body = {"repo": self.full_name, "root": root, "revision": revision}
        token = self.emulator.issue_user_token(requested_by)
        request = urllib.request.Request(
            f"{self.stack.urls.gateway}/api/deploy",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            if response.status != 202:
                raise RuntimeError(f"/api/deploy answered {response.status}")
            return str(json.loads(response.read())["deployment_id"])

    def click(self, run: CheckRunRecord, identifier: str, who: str) -> WebhookDelivery:
        delivery = self.emulator.click_action(run.id, identifier, who)
        if not 200 <= delivery.status < 300:
            raise RuntimeError(f"{identifier} answered {delivery.status}: {delivery.response}")
        return delivery

    def approve(self, run: CheckRunRecord, who: str = "bench") -> CheckRunRecord:
        """Click Approve and wait until the deployment's check run says it is published."""
        self.click(run, "approve", who)
        return self.finished(run.state["external_id"], {"success"})

    # --- observing

    def check_runs(self, root: str | None = None) -> list[CheckRunRecord]:
        """The repository's check runs (of `root` only, when given), oldest first."""
        runs = self.emulator.check_runs(self.owner, self.name)
        if root is None:
            return runs
        return [r for r in runs if r.name == check_run_name(root)]

    def deployment_runs(self, deployment_id: str) -> list[CheckRunRecord]:
        runs = self.emulator.check_runs(self.owner, self.name)
        return [r for r in runs if r.state.get("external_id") == deployment_id]

    def review(self, root: str, head: str, timeout: float | None = None) -> CheckRunRecord:
        """`root`'s check run at `head` once it asks for review with the diff in its text."""

        def probe() -> CheckRunRecord | None:
            for run in reversed(self.check_runs(root)):
                if (
                    run.state["head_sha"] == head
                    and run.conclusion == "action_required"
                    and (run.output.get("text") or "").strip()
                ):
                    return run
            return None

        return self.wait(f"review of {root}@{head[:12]}", probe, timeout=timeout)

    def finished(
        self, deployment_id: str, wanted: set[str], timeout: float | None = None
    ) -> CheckRunRecord:
        """The deployment's newest check run once its conclusion is one of `wanted`; another
        final conclusion (failure, cancelled, …) fails at once with its output."""

        def probe() -> CheckRunRecord | None:
            runs = self.deployment_runs(deployment_id)
            if not runs or runs[-1].status != "completed":
                return None
            last = runs[-1]
            if last.conclusion in wanted:
                return last
            if last.conclusion != "action_required":
                raise RuntimeError(f"deployment {deployment_id}: {last.conclusion} {last.output}")
            return None

        return self.wait(f"deployment {deployment_id} {sorted(wanted)}", probe, None, timeout)
