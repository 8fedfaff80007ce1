"""Case 5: hostile gateway input — bodies far over the limit, JSON nested too deep, and a
signed Approve click that names another root's deployment."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from shared.devstack import fleetrepo
from shared.stores.sql.audit import AuditStore
from tests.bench.common import rss_kib
from tests.chaos.rawhttp import Connection, webhook_headers
from tests.chaos.report import CaseResult
from tests.support.cluster import Cluster

NUMBER = 5
KEY = "hostile"
TITLE = "Hostile gateway input"
SETUP = """
Unsigned `POST /events` bodies of 512 MiB, sent by a bare client 1 MiB at a time until the
gateway answers (or 60 s pass): once declared with `Content-Length`, once chunked with no
length at all. The gateway process's RSS is sampled from `/proc/<pid>/status` every 10 ms
from before the request until a second after it. Then, on one keep-alive connection, a signed
`push` whose JSON nests 2,000 objects deep, followed by a signed `ping` and `GET /healthz`.
Last, two roots of one repository wait for review; the `check_run.requested_action` (approve)
GitHub sends for a click on root B's check run is sent, correctly signed, with root A's
deployment id in `check_run.external_id`; then A's own Approve is clicked.
"""
HUGE = 512 << 20
RSS_GROWTH_LIMIT_MIB = 64  # the limit is 25 MiB: a body held whole would show


@contextmanager
def rss_sampled(pid: int) -> Iterator[list[int]]:
    """Sample the process's RSS (KiB) every 10 ms while the block runs, and for 1 s after."""
    samples = [rss_kib(pid)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            samples.append(rss_kib(pid))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
        stop.wait(1.0)
    finally:
        stop.set()
        thread.join()
        samples.append(rss_kib(pid))


def run(chaos: Cluster, result: CaseResult) -> None:
    url = urlsplit(chaos.stack.urls.gateway)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    secret = chaos.stack.webhook_secret
    pid = chaos.gateway_pid

    for chunked in (False, True):
        how = "chunked, no length" if chunked else "`Content-Length: 536870912`"
        with rss_sampled(pid) as samples, Connection(host, port) as conn:
            streamed = conn.stream(
                "/events",
                webhook_headers("push", None, b""),
                total=HUGE,
                chunked=chunked,
                deadline=60.0,
            )
        status = streamed.answer.status if streamed.answer else None
        result.check(
            f"unsigned 512 MiB POST, {how}: answer",
            status or "connection closed without an answer",
            "413",
            status == 413,
        )
        result.note(
            "  body sent before the answer",
            f"{streamed.body_bytes_sent >> 20} MiB in {streamed.seconds:.2f} s",
        )
        growth = (max(samples) - samples[0]) / 1024
        result.check(
            "  gateway RSS: before → peak → 1 s after (peak growth)",
            f"{samples[0] / 1024:.0f} → {max(samples) / 1024:.0f} → {samples[-1] / 1024:.0f} MiB "
            f"({growth:+.1f} MiB; {len(samples)} samples)",
            f"growth < {RSS_GROWTH_LIMIT_MIB} MiB",
            growth < RSS_GROWTH_LIMIT_MIB,
        )

    depth = 2000
    nested = b'{"a":' * depth + b"0" + b"}" * depth
    with Connection(host, port) as conn:
        first = conn.request("POST", "/events", webhook_headers("push", secret, nested), nested)
        result.check(
            f"signed push, JSON nested {depth:,} deep: answer",
            first.status,
            "400",
            first.status == 400,
        )
        kept = conn.alive() and first.headers.get("connection", "").lower() != "close"
        ping = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
        second = conn.request("POST", "/events", webhook_headers("ping", secret, ping), ping)
        health = conn.request("GET", "/healthz", {})
        result.check(
            "  the same keep-alive connection afterwards: signed ping, GET /healthz",
            f"{'open' if kept else 'closed'}; {second.status}, {health.status}",
            "open; 200, 200",
            kept and second.status == 200 and health.status == 200,
        )

    forged_click(chaos, result)


def forged_click(chaos: Cluster, result: CaseResult) -> None:
    fleet = chaos.fleet("hostile", groups=1, clusters_per_group=2)
    target, other = fleet.roots
    base = fleetrepo.head(fleet.repo)
    fleet.commit_change(target)
    head = fleet.commit_change(other)
    fleet.push(base, head)
    target_run = fleet.review(target, head)
    other_run = fleet.review(other, head)
    deployment = target_run.state["external_id"]

    payload = fleet.emulator.requested_action_payload(other_run.id, "approve", "mallory")
    payload["check_run"]["external_id"] = deployment
    delivery = fleet.emulator.send_webhook("check_run", payload)
    result.check(
        f"signed approve clicked on {other}'s check run, naming {target}'s deployment: answer",
        delivery.status,
        "202 (accepted: the deployment decides)",
        delivery.status == 202,
    )

    def refused() -> list[str] | None:
        rows = AuditStore(chaos.database).of_deployment(deployment)
        found = [f"counted={r.counted}, actor={r.actor}, reason: {r.reason}" for r in rows]
        return found or None

    audit = fleet.wait("the audit row of the forged click", refused, poll=0.2, timeout=60)
    result.check(
        "  audit_events rows of the target deployment",
        "; ".join(audit),
        "one, counted=False, actor mallory",
        len(audit) == 1 and audit[0].startswith("counted=False, actor=mallory"),
    )
    state = chaos.temporal.query(deployment, "deployment_state", str)
    runs = fleet.deployment_runs(deployment)
    waiting = bool(runs) and runs[-1].conclusion == "action_required"
    buttons = [a["identifier"] for a in runs[-1].actions] if runs else []
    result.check(
        "  the target deployment afterwards (workflow state; its check run)",
        f"{state}; {runs[-1].conclusion if runs else None} with buttons {buttons}",
        "awaiting_review; action_required with approve, reject",
        state == "awaiting_review" and waiting and "approve" in buttons,
    )

    fleet.click(target_run, "approve", "alice")
    published = fleet.finished(deployment, {"success"})
    rows = AuditStore(chaos.database).of_deployment(deployment)
    result.check(
        "  then its own Approve: check run; audit rows (counted)",
        f"{published.conclusion}; {[r.counted for r in rows]}",
        "success; [False, True]",
        published.conclusion == "success" and [r.counted for r in rows] == [False, True],
    )
