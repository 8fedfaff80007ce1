"""`make bench`, publishers: a 1,000-file root published to git and to S3.

- git: `GitPublisher` into a local bare repository whose `rendered` branch already holds 50
  other roots of the same size — the first publish of the root, a re-publish of a deployment
  that changed 10 files, and the no-op re-publish of the same deployment (trailer found).
- S3: `S3Publisher` into a SeaweedFS bucket started here (`weed server -s3` on 127.0.0.1) —
  the first publish, and a new deployment (a whole generation uploaded, the pointer swapped,
  the old generation pruned), and the no-op re-publish.

Both measure the publisher alone: the activity also re-renders the root on the worker, which
the render benchmark covers.

Run alone: `python -m tests.bench.run --only publish [--write docs/benchmarks.md]`.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from activities.publish_git import GitPublisher, GitTarget, commit_message
from activities.publish_s3 import S3Publisher
from shared.contracts.deploy import PublishRequest, RepoRef
from tests.bench.common import section_header
from tests.support.seaweed import seaweed_server

MARKER = "## Publishers"
FILES = 1000
OTHER_ROOTS = 20
SAMPLES = 3


def root_files(root: str, variant: int = 0, changed: int = FILES) -> dict[str, bytes]:
    """`FILES` ConfigMaps of about 600 bytes in 100 directories; the first `changed` files
    carry `variant` (so variant 1 with changed=10 differs from variant 0 in 10 files)."""
    files = {}
    for n in range(FILES):
        mark = variant if n < changed else 0
        body = "\n".join(f"  key{k}: value-{n}-{k}-{mark}-{'x' * 20}" for k in range(12))
        text = (
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{n}\n"
            f"  namespace: ns-{n % 100}\n  labels:\n    root: {root.replace('/', '-')}\n"
            f"data:\n{body}\n"
        )
        files[f"app-{n % 100}/release/ns-{n % 100}/ConfigMap_cm-{n}.yaml"] = text.encode()
    return files


def request(root: str, deployment: str) -> PublishRequest:
    return PublishRequest(
        repo=RepoRef(owner="bench", name="fleet", html_url="https://github.com/bench/fleet"),
        root=root,
        revision="0" * 39 + "1",
        deployment_id=deployment,
        trigger="merge",
        approved_by="@bench",
        blob_prefix="",
    )


Publish = Callable[[str, dict[str, bytes], str], object]  # (root, files, deployment)


def three_publishes(publish: Publish, root: str, out: dict[str, list[float]]) -> None:
    """First publish, a next deployment (10 files changed), the same deployment again."""
    first, changed = root_files(root), root_files(root, 1, 10)
    for name, files, deployment in (
        ("first", first, f"{root}-1"),
        ("change", changed, f"{root}-2"),
        ("again", changed, f"{root}-2"),
    ):
        start = time.perf_counter()
        publish(root, files, deployment.replace("/", "-"))
        out[name].append(time.perf_counter() - start)


def bench_git(work: Path) -> dict[str, float]:
    work.mkdir(parents=True, exist_ok=True)
    remote = work / "target.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    target = GitTarget(str(remote), "bench/target", "rendered", None)

    def publisher_of(worker: GitPublisher) -> Publish:
        def publish(root: str, files: dict[str, bytes], deployment: str) -> object:
            return worker.publish_tree(
                target,
                f"{root}/",
                files,
                deployment_id=deployment,
                message=commit_message(request(root, deployment), "bench"),
                root=root,
            )

        return publish

    seed = publisher_of(GitPublisher(work / "seed"))
    for n in range(OTHER_ROOTS):
        seed(f"other/c{n}", root_files(f"other/c{n}"), f"seed-{n}")
    out: dict[str, list[float]] = {"first": [], "change": [], "again": []}
    for sample in range(SAMPLES):
        # a fresh worker each time: its first publish there fetches the whole branch
        worker = publisher_of(GitPublisher(work / f"worker-{sample}"))
        three_publishes(worker, f"bench/c{sample}", out)
    return {k: statistics.median(v) for k, v in out.items()}


def bench_s3(work: Path) -> dict[str, float]:
    out: dict[str, list[float]] = {"first": [], "change": [], "again": []}
    with seaweed_server() as server:
        bucket = server.new_bucket("bench")
        s3 = S3Publisher(server.client())

        def publish(root: str, files: dict[str, bytes], deployment: str) -> object:
            return s3.publish_tree(
                bucket, f"{root}/", files, request(root, deployment), digest="sha256:bench"
            )

        for sample in range(SAMPLES):
            three_publishes(publish, f"bench/c{sample}", out)
    return {k: statistics.median(v) for k, v in out.items()}


def report(git: dict[str, float], s3: dict[str, float]) -> str:
    return f"""{MARKER}

{section_header("publish")}
One root of {FILES:,} files
(ConfigMaps of about 600 bytes in 100 directories); median of {SAMPLES} roots. The publisher
alone: the publish activity also renders the root again on the worker (see the render
engine section).

| target | first publish | next deployment | same deployment again |
|---|---|---|---|
| git (local bare repo, `rendered` holds {OTHER_ROOTS} other roots; next: 10 files changed) \
| {git["first"]:.2f} s | {git["change"]:.2f} s | {git["again"]:.2f} s |
| S3 (SeaweedFS on 127.0.0.1; next: a whole generation, pointer swap, prune) \
| {s3["first"]:.2f} s | {s3["change"]:.2f} s | {s3["again"]:.2f} s |

The git publisher builds the commit with one `git fast-import` (the root's subtree replaced in
the tip's tree, no checkout), so its cost is the files written plus one fetch and one push;
a scratch repository per target is kept on the worker, so only the first publish on a worker
fetches the whole branch. The S3 publisher writes every file of a deployment as a new object
(16 PUTs at once) before the pointer, then deletes the previous generation in batches of
1,000 keys: a deployment costs about two requests per file, whatever changed.
"""


def run(work: Path) -> str:
    """The section for docs/benchmarks.md (tests/bench/run.py calls this)."""
    git = bench_git(work / "git")
    s3 = bench_s3(work / "s3")
    return report(git, s3)
