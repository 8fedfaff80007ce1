"""`make bench`, PR previews: push to sticky comment on a 1,000-root fleet.

A generated atlas fleet of 1,000 roots × 10 releases in a real git repository, served by the
embedded stack (Temporal dev server, worker and gateway processes, the GitHub emulator with
real `refs/pull/N/head` and `refs/pull/N/merge`). A pull request changes one cluster's values;
GitHub's own `pull_request` payloads (opened, then synchronize for each new push) are signed
and sent to the gateway, and the time is taken from sending the webhook until the sticky
comment shows the new head and the `rollwright/preview` check run is completed. The check
run's summary says how many roots were rendered: the target is only the affected one.

For comparison, the engine alone (`shared.review.preview.build_preview` on the same repository,
base against the merge commit, in this process) is timed too.

Run alone: `python -m tests.bench.run --only preview [--write docs/benchmarks.md]`.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from shared.contracts.preview import PREVIEW_CHECK_NAME
from shared.devstack import fleetrepo
from shared.devstack.emulator.model import CheckRunRecord, CommentRecord
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.stack import DevStack
from shared.review.preview import build_preview
from tests.bench.common import section_header
from tests.bench.service import fleet_and_stack
from tests.support.pull_requests import OPENED, SYNCHRONIZE, pr_payload
from tests.support.stack import wait_on

MARKER = "## PR previews"
OWNER, NAME = "bench", "previews"
PR = 7
INSTALLATION = 1  # DevStack.add_repository's default
BRANCH = "change-one-cluster"
SAMPLES = 5
STEP_TIMEOUT = 180.0
T = TypeVar("T")


class _PullRequest:
    def __init__(self, stack: DevStack, repo: Path) -> None:
        self.stack = stack
        self.repo = repo
        assert stack.emulator is not None
        self.emulator: GitHubEmulator = stack.emulator
        self.edits = 0
        self.head: str | None = None

    def wait(self, what: str, probe: Callable[[], T | None]) -> T:
        return wait_on(self.stack, what, probe, timeout=STEP_TIMEOUT, poll=0.02)

    def push(self, root: str) -> tuple[str, float]:
        """Commit a change of `root`'s values on the PR branch and send the webhook."""
        self.edits += 1
        git = fleetrepo.git
        git(self.repo, "checkout", "-q", *([] if self.head else ["-b"]), BRANCH)
        try:
            head = fleetrepo.set_value(
                self.repo,
                f"deployments/{root}/cluster.values.yaml",
                "env.PREVIEW_EDIT",
                str(self.edits),
                f"{root}: preview edit {self.edits}",
            )
        finally:
            git(self.repo, "checkout", "-q", "main")
        before, self.head = self.head, head
        self.emulator.set_pull(OWNER, NAME, PR, head_sha=head, head_ref=BRANCH, base_ref="main")
        payload = pr_payload(
            SYNCHRONIZE if before else OPENED,
            repo=f"{OWNER}/{NAME}",
            clone_url=self.stack.clone_url(OWNER, NAME),
            installation=INSTALLATION,
            number=PR,
            head=head,
            branch=BRANCH,
            base=fleetrepo.head(self.repo),
            before=before,
        )
        sent = time.perf_counter()
        delivery = self.emulator.send_webhook("pull_request", payload)
        if delivery.status != 202:
            raise RuntimeError(f"pull_request answered {delivery.status}: {delivery.response}")
        return head, sent

    def reported(self, head: str) -> tuple[CheckRunRecord, CommentRecord]:
        def probe() -> tuple[CheckRunRecord, CommentRecord] | None:
            runs = [
                r
                for r in self.emulator.check_runs(OWNER, NAME)
                if r.name == PREVIEW_CHECK_NAME
                and r.state["head_sha"] == head
                and r.status == "completed"
            ]
            comments = [c for c in self.emulator.comments(OWNER, NAME, PR) if head[:12] in c.body]
            return (runs[-1], comments[-1]) if runs and comments else None

        return self.wait(f"preview of {head[:12]}", probe)


def _rendered_roots(run: CheckRunRecord) -> int:
    found = re.search(r"Roots rendered: (\d+)", run.output.get("summary") or "")
    if found is None:
        raise RuntimeError(f"no root count in the check run: {run.output}")
    return int(found.group(1))


def bench_preview(work: Path) -> dict[str, Any]:
    repo, roots, stack = fleet_and_stack(work, "fleet-1000", groups=10, clusters_per_group=100)
    latencies: list[float] = []
    rendered: list[int] = []
    try:
        stack.add_repository(OWNER, NAME, repo)
        pull = _PullRequest(stack, repo)
        # every push changes the same cluster: the PR touches one root throughout
        root = "g004/c004-042"
        # warm-up: the worker's first mirror clone and first renders happen here
        head, _ = pull.push(root)
        pull.reported(head)
        for _ in range(SAMPLES):
            head, sent = pull.push(root)
            run, _ = pull.reported(head)
            latencies.append(time.perf_counter() - sent)
            rendered.append(_rendered_roots(run))
            if run.conclusion != "success" or root not in (run.output.get("text") or ""):
                raise RuntimeError(f"{root}: unexpected preview: {run.output}")
        comments = stack.emulator.comments(OWNER, NAME, PR) if stack.emulator else []
        if len(comments) != 1 or len(comments[0].bodies) != SAMPLES + 1:
            raise RuntimeError(f"expected one comment edited {SAMPLES + 1} times: {comments}")
        merge = fleetrepo.git(repo, "rev-parse", f"refs/pull/{PR}/merge")
        base = fleetrepo.head(repo)
        started = time.perf_counter()
        report = build_preview(repo, base, merge)
        engine = time.perf_counter() - started
        stack.check()
    finally:
        stack.stop()
    return {
        "roots": roots,
        "median": statistics.median(latencies),
        "max": max(latencies),
        "rendered": sorted(set(rendered)),
        "engine": engine,
        "engine_roots": report.counts.roots,
    }


def report(result: dict[str, Any]) -> str:
    only_affected = result["rendered"] == [1]
    rows = [
        (
            f"push to sticky comment + completed check run, PR touching one cluster of a "
            f"{result['roots']:,}-root fleet (median of {SAMPLES} pushes)",
            f"{result['median']:.2f} s (max {result['max']:.2f} s)",
            "—",
            "",
        ),
        (
            "roots rendered per preview (from the check run summary)",
            ", ".join(str(n) for n in result["rendered"]),
            "only the affected root (1)",
            "met" if only_affected else "**missed**",
        ),
        (
            "the engine alone: `build_preview` base → merge commit, in process",
            f"{result['engine']:.2f} s, {result['engine_roots']} root(s)",
            "—",
            "",
        ),
    ]
    table = "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows)
    return f"""{MARKER}

{section_header("preview")}
Embedded stack (`rollwright dev`: Temporal dev server, worker and gateway processes, GitHub
emulator) on loopback; GitHub's own `pull_request` payloads, signed. The time
includes the gateway's outbox, the workflow, the git fetch of the pull refs into the worker's
mirror, rendering both sides of the affected roots, storing the report, writing the comment
and completing the check run.

| measure | result | target | |
|---|---|---|---|
{table}
"""


def run(work: Path) -> str:
    return report(bench_preview(work))
