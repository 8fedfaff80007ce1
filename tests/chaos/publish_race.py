"""Case 6: two roots publishing to one git branch at the same moment."""

from __future__ import annotations

import threading

from shared.contracts.activityrefs import (
    ACT_PUBLISH,
)
from shared.devstack import fleetrepo
from shared.devstack.emulator.model import CheckRunRecord
from tests.chaos import gitrepo
from tests.chaos.report import CaseResult
from tests.support.cluster import Cluster, Fleet

NUMBER = 6
KEY = "publish_race"
TITLE = "Two roots publishing to one git branch at once"
SETUP = """
A fleet whose `rollwright.yaml` publishes to the git branch `rendered` of the fleet
repository itself, with a `pre-receive` hook that logs every push and holds it for 2 s, so
that two pushes arriving within that time are both built on the same tip. One commit changes
two roots; both wait for review; both Approve clicks are sent at the same instant from two
threads. Publish runs on the shared task queue, so the two publishes may go to one worker
(which takes them in turn: a file lock on its scratch repository) or to both; rounds repeat,
up to eight, until one round had its publishes on two workers. The branch's reflog then shows
every update the repository accepted.
"""
# Where a publish runs is Temporal's choice: about one round in two puts them on two workers.
ROUNDS = 8
HOLD = """log="$(git rev-parse --git-dir)/chaos-pushes.log"
while read old new ref; do echo "$old $new $ref" >> "$log"; done
sleep 2
"""


def run(chaos: Cluster, result: CaseResult) -> None:
    fleet = chaos.fleet("publishrace", groups=1, clusters_per_group=2, settings=_GIT)
    fleetrepo.git(fleet.repo, "config", "core.logAllRefUpdates", "always")
    gitrepo.install_hook(fleet.repo, "pre-receive", HOLD)
    first, second = fleet.roots
    workers_used: set[str] = set()
    published: list[str] = []
    for round_ in range(1, ROUNDS + 1):
        base = fleetrepo.head(fleet.repo)
        fleet.commit_change(first)
        head = fleet.commit_change(second)
        fleet.push(base, head)
        runs = [fleet.review(first, head), fleet.review(second, head)]
        _approve_at_once(fleet, runs)
        done = [fleet.finished(r.state["external_id"], {"success"}) for r in runs]
        result.require(
            f"round {round_}: both deployments' check runs",
            ", ".join(str(r.conclusion) for r in done),
            "success, success",
            all(r.conclusion == "success" for r in done),
        )
        ids = [r.state["external_id"] for r in runs]
        published += ids
        workers_used = set()
        for deployment in ids:
            for publish in chaos.temporal.activity_runs(deployment, ACT_PUBLISH.name):
                workers_used.add(chaos.worker_of(publish.identity) or publish.identity)
        result.note(f"round {round_}: workers that ran the two publishes", sorted(workers_used))
        if len(workers_used) > 1:
            break

    pushes = (fleet.repo / ".git" / "chaos-pushes.log").read_text().splitlines()
    updates = gitrepo.ref_updates(fleet.repo)
    result.note(
        "pushes received (pre-receive) / branch updates accepted",
        f"{len(pushes)} / {len(updates)}: {len(pushes) - len(updates)} refused because the "
        "branch had moved meanwhile (the publisher re-applies its root on the new tip and "
        "pushes again)",
    )
    result.check(
        "a round with the two publishes on different workers (a real race across workers)",
        "yes" if len(workers_used) > 1 else f"no, in {ROUNDS} rounds",
        "yes",
        len(workers_used) > 1,
    )
    trailers = gitrepo.published_deployments(fleet.repo)
    counts = {d: trailers.count(d) for d in published}
    result.check(
        "commits on `rendered` per deployment (trailer `Rollwright-Deployment`)",
        f"{len(published)} deployments: {sorted(set(counts.values()))} commit(s) each; "
        f"{len(trailers)} commits in all",
        "exactly 1 each, nothing else",
        all(n == 1 for n in counts.values()) and len(trailers) == len(published),
    )
    zero = "0" * 40
    forced = [
        (old, new)
        for old, new in updates
        if old != zero and not gitrepo.is_ancestor(fleet.repo, old, new)
    ]
    tip = fleetrepo.git(fleet.repo, "rev-parse", "rendered")
    lost = [new for _, new in updates if not gitrepo.is_ancestor(fleet.repo, new, tip)]
    result.check(
        "branch updates that were not fast-forwards (force-pushes)",
        len(forced),
        "0",
        not forced,
    )
    result.check(
        "commits ever on the branch that are not in its final history (lost)",
        len(lost),
        "0",
        not lost,
    )
    tree = fleetrepo.git(fleet.repo, "ls-tree", "--name-only", "rendered")
    expected = sorted({r.split("/")[0] for r in fleet.roots})
    files = {
        root: fleetrepo.git(fleet.repo, "ls-tree", "-r", "--name-only", "rendered", f"{root}/")
        for root in fleet.roots
    }
    result.check(
        "the final tree: both roots' rendered files present",
        f"top level {tree.split()}; files per root {[len(f.split()) for f in files.values()]}",
        f"{expected}; both non-empty",
        tree.split() == expected and all(files.values()),
    )


_GIT = {"publish": {"target": "git", "git": {"branch": "rendered"}}}


def _approve_at_once(fleet: Fleet, runs: list[CheckRunRecord]) -> None:
    """Send the Approve clicks of `runs` from one thread each, released together."""
    barrier = threading.Barrier(len(runs))
    errors: list[BaseException] = []

    def approve(run: CheckRunRecord) -> None:
        barrier.wait()
        try:
            fleet.click(run, "approve", "alice")
        except BaseException as err:  # reported below, in the case's thread
            errors.append(err)

    threads = [threading.Thread(target=approve, args=(r,)) for r in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
