"""The fleet's state as Prometheus gauges, read from SQL at each scrape of the gateway's
/metrics: per root, the deployments queued and awaiting review (how many, and since when the
oldest waits) and the queue lock (since when). SQL holds them whichever worker runs a root, so
every gateway answers the same (`max without (instance)` in a query merges replicas).

A scrape replaces the whole snapshot: a root that stopped waiting disappears from the series
instead of keeping its last value. When the database does not answer, the last snapshot
stays and `rollwright_gateway_fleet_state_age_seconds` grows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from shared.stores.sql.deployments import DeploymentStore, Waiting
from shared.stores.sql.engine import Database
from shared.stores.sql.locks import HeldLock, RootLockStore


@dataclass(frozen=True)
class FleetState:
    waiting: list[Waiting] = field(default_factory=list)
    locks: list[HeldLock] = field(default_factory=list)
    read_at: float = 0.0  # time.time() of the read; 0: never read


def read_fleet_state(database: Database) -> FleetState:
    return FleetState(
        waiting=DeploymentStore(database).waiting(),
        locks=RootLockStore(database).held(),
        read_at=time.time(),
    )


class FleetCollector(Collector):
    """Yields the gauges of the last `FleetState` it was given."""

    def __init__(self) -> None:
        self.state = FleetState()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state = self.state
        labels = ["repo", "root"]
        families = {
            ("queued", "count"): GaugeMetricFamily(
                "rollwright_root_queue_depth",
                "Deployments queued behind the root's running one (roots with none are absent).",
                labels=labels,
            ),
            ("queued", "oldest"): GaugeMetricFamily(
                "rollwright_root_queue_oldest_timestamp_seconds",
                "When the root's longest-queued deployment was queued (Unix time).",
                labels=labels,
            ),
            ("awaiting_review", "count"): GaugeMetricFamily(
                "rollwright_root_awaiting_review",
                "Deployments of the root waiting at the review gate.",
                labels=labels,
            ),
            ("awaiting_review", "oldest"): GaugeMetricFamily(
                "rollwright_root_review_oldest_timestamp_seconds",
                "When the root's longest-waiting review started (Unix time).",
                labels=labels,
            ),
        }
        for waiting in state.waiting:
            key = [waiting.repo, waiting.root]
            families[(waiting.state, "count")].add_metric(key, waiting.count)
            families[(waiting.state, "oldest")].add_metric(key, waiting.oldest.timestamp())
        yield from families.values()
        locked = GaugeMetricFamily(
            "rollwright_root_locked_since_timestamp_seconds",
            "Roots whose queue a manual deployment locks, and since when (Unix time; 0 when the "
            "deployment did not say). Absent: not locked.",
            labels=labels,
        )
        for lock in state.locks:
            since = lock.since.timestamp() if lock.since is not None else 0.0
            locked.add_metric([lock.repo, lock.root], since)
        yield locked
        age = GaugeMetricFamily(
            "rollwright_gateway_fleet_state_age_seconds",
            "Age of the fleet state these gauges show (the database unanswered grows it).",
        )
        age.add_metric([], time.time() - state.read_at if state.read_at else float("inf"))
        yield age

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())
