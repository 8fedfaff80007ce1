"""Prometheus metrics of a worker: what its activities did, deployments by outcome and by the
phase they ended in, how long reviews took, activity retries, and the GitHub quota each
installation has left.

One registry per worker (`WorkerMetrics.registry`), served by the worker process
(worker/telemetry.py, `ROLLWRIGHT_WORKER_METRICS_ADDRESS`). Counters count what this worker did,
so a fleet's figure is their sum over workers; the state of queues and locks is read from SQL by
the gateway's /metrics instead (gateway/fleetmetrics.py), so it is the same whichever worker
runs a root. Labels are bounded: activity names are the registered ones, states and phases a
fixed set, installations the App's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from shared.contracts.deploy import TERMINAL_STATES
from shared.stores.sql.deployments import StateChange

# Activities last from milliseconds (a store write) to minutes (a render of a big root).
ACTIVITY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
# A review waits minutes to days (the gate times out after 7 days).
REVIEW_BUCKETS = (60, 300, 900, 1800, 3600, 4 * 3600, 8 * 3600, 86400, 3 * 86400, 7 * 86400)

# installation id → (requests remaining, limit) as GitHub's last answer said
Quota = Callable[[], dict[int, tuple[int, int]]]


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        if registry is None:
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                self.registry.register(collector)
        self.transitions = Counter(
            "rollwright_deployment_transitions",
            "Deployment state changes recorded by this worker, by the state entered.",
            ["state"],
            registry=self.registry,
        )
        self.finished = Counter(
            "rollwright_deployments_finished",
            "Deployments that reached an end state (published, verified, unhealthy, rejected, "
            "timed_out, skipped, failed, cancelled), by that state and the state they left "
            "(`phase`: where a failure happened). A deployment with a verify rule counts "
            "published, then verified or unhealthy.",
            ["outcome", "phase"],
            registry=self.registry,
        )
        self.review_wait = Histogram(
            "rollwright_review_wait_seconds",
            "Time a deployment waited at the review gate, until approved, rejected, timed out "
            "or cancelled.",
            ["outcome"],
            buckets=REVIEW_BUCKETS,
            registry=self.registry,
        )
        self.activity_seconds = Histogram(
            "rollwright_worker_activity_duration_seconds",
            "Activity executions on this worker by activity and outcome (completed, failed, "
            "cancelled): render_root and publish are the render and publish durations.",
            ["activity", "outcome"],
            buckets=ACTIVITY_BUCKETS,
            registry=self.registry,
        )
        self.activity_retries = Counter(
            "rollwright_worker_activity_retries",
            "Activity attempts after the first (Temporal retried them), by activity.",
            ["activity"],
            registry=self.registry,
        )

    def state_changed(self, change: StateChange) -> None:
        """One recorded state change (`DeploymentStore.record` reports each once)."""
        self.transitions.labels(change.state).inc()
        if change.state in TERMINAL_STATES:
            self.finished.labels(change.state, change.previous or "none").inc()
        if change.review_wait_seconds is not None:
            # an approved deployment goes on to publish at once
            outcome = "approved" if change.state in ("approved", "publishing") else change.state
            self.review_wait.labels(outcome).observe(change.review_wait_seconds)

    def watch_github(self, quota: Quota) -> None:
        """Export the GitHub quota left per installation, read at each scrape."""
        self.registry.register(_GitHubQuota(quota))


class _GitHubQuota(Collector):
    def __init__(self, quota: Quota) -> None:
        self._quota = quota

    def collect(self) -> Iterator[GaugeMetricFamily]:
        remaining = GaugeMetricFamily(
            "rollwright_github_rate_limit_remaining",
            "Requests GitHub's last answer said the installation has left this hour.",
            labels=["installation"],
        )
        limit = GaugeMetricFamily(
            "rollwright_github_rate_limit",
            "The installation's hourly request limit, as GitHub's last answer said.",
            labels=["installation"],
        )
        for installation, (left, most) in sorted(self._quota().items()):
            remaining.add_metric([str(installation)], left)
            limit.add_metric([str(installation)], most)
        yield remaining
        yield limit

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())
