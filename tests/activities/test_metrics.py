"""The worker's metrics: state changes counted once from what the SQL store reports, review
waits, the queue locks' copy in SQL, the gateway's per-root gauges from SQL, the worker's
/metrics server, and the activity interceptor on Temporal's time-skipping server."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

from activities.metrics import WorkerMetrics
from gateway.fleetmetrics import FleetCollector, read_fleet_state
from shared.contracts.deploy import DeploymentRecord, LockState
from shared.stores.sql.deployments import DeploymentStore, StateChange
from shared.stores.sql.engine import Database
from shared.stores.sql.locks import RootLockStore
from tests.support import timeskip
from worker.telemetry import ActivityMetrics, serve_metrics, split_address

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def database(tmp_path: Path) -> Database:
    return Database(f"sqlite:///{tmp_path / 'db.sqlite'}")


def record(
    state: str, minutes: float, deployment_id: str = "d-1", **fields: str
) -> DeploymentRecord:
    values = {"repo": "acme/fleet", "root": "prod/eu", "revision": "a" * 40, "trigger": "merge"}
    values.update(fields)
    return DeploymentRecord(
        deployment_id=deployment_id,
        state=state,  # type: ignore[arg-type]
        at=T0 + timedelta(minutes=minutes),
        **values,  # type: ignore[arg-type]
    )


def test_a_state_change_is_reported_once_with_the_review_wait(database: Database) -> None:
    store = DeploymentStore(database)
    assert store.record(record("queued", 0)) == StateChange(None, "queued")
    assert store.record(record("queued", 0)) is None  # a retried activity: no change
    assert store.record(record("rendering", 1)) == StateChange("queued", "rendering")
    assert store.record(record("awaiting_review", 2)) == StateChange("rendering", "awaiting_review")
    assert store.record(record("awaiting_review", 2)) is None
    change = store.record(record("publishing", 92))
    assert change == StateChange("awaiting_review", "publishing", review_wait_seconds=5400.0)
    assert store.record(record("queued", 93)) is None  # a late queued moves nothing back
    database.close()


def sample(metrics: WorkerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_outcomes_phases_and_review_waits_are_counted() -> None:
    metrics = WorkerMetrics()
    for change in (
        StateChange(None, "queued"),
        StateChange("awaiting_review", "publishing", review_wait_seconds=120.0),
        StateChange("publishing", "published"),
        StateChange("awaiting_review", "rejected", review_wait_seconds=30.0),
        StateChange("rendering", "failed"),
    ):
        metrics.state_changed(change)
    assert sample(metrics, "rollwright_deployment_transitions_total", state="queued") == 1
    finished = "rollwright_deployments_finished_total"
    assert sample(metrics, finished, outcome="published", phase="publishing") == 1
    assert sample(metrics, finished, outcome="failed", phase="rendering") == 1
    assert sample(metrics, finished, outcome="rejected", phase="awaiting_review") == 1
    assert sample(metrics, finished, outcome="queued", phase="none") is None  # not an end
    wait = "rollwright_review_wait_seconds_sum"
    assert sample(metrics, wait, outcome="approved") == 120.0
    assert sample(metrics, wait, outcome="rejected") == 30.0


def test_the_github_quota_is_read_at_each_scrape() -> None:
    metrics = WorkerMetrics()
    quota = {7: (4990, 5000)}
    metrics.watch_github(lambda: dict(quota))
    name = "rollwright_github_rate_limit_remaining"
    assert sample(metrics, name, installation="7") == 4990
    quota[7] = (12, 5000)
    assert sample(metrics, name, installation="7") == 12
    assert sample(metrics, "rollwright_github_rate_limit", installation="7") == 5000


def test_root_locks_follow_latest_json_and_the_gateway_gauges_follow_sql(
    database: Database,
) -> None:
    locks = RootLockStore(database)
    since = T0 + timedelta(hours=1)
    held = LockState(locked=True, by_deployment="d-9", revision="b" * 40, since=since)
    locks.set("acme/fleet", "prod/eu", held, T0)
    locks.set("acme/fleet", "prod/eu", held, T0)  # retried: still one row
    store = DeploymentStore(database)
    store.record(record("queued", 0, "q-1", root="prod/us"))
    store.record(record("queued", 5, "q-2", root="prod/us"))
    store.record(record("awaiting_review", 7, "r-1", root="staging"))
    store.record(record("awaiting_review", 40, "r-1", root="staging"))  # a click, no decision

    collector = FleetCollector()
    collector.state = read_fleet_state(database)
    series = exposition(collector)
    assert series["rollwright_root_locked_since_timestamp_seconds"] == {
        ("acme/fleet", "prod/eu"): since.timestamp()
    }
    assert series["rollwright_root_queue_depth"] == {("acme/fleet", "prod/us"): 2.0}
    oldest = series["rollwright_root_queue_oldest_timestamp_seconds"]
    assert oldest == {("acme/fleet", "prod/us"): T0.timestamp()}
    assert series["rollwright_root_awaiting_review"] == {("acme/fleet", "staging"): 1.0}
    entered = (T0 + timedelta(minutes=7)).timestamp()  # not restarted by the second record
    assert series["rollwright_root_review_oldest_timestamp_seconds"] == {
        ("acme/fleet", "staging"): entered
    }

    # unlocked, dequeued, reviewed: the series go instead of keeping their last values
    locks.set("acme/fleet", "prod/eu", LockState(), T0)
    for deployment_id, root in (("q-1", "prod/us"), ("q-2", "prod/us"), ("r-1", "staging")):
        store.record(record("rendering", 10, deployment_id, root=root))
    collector.state = read_fleet_state(database)
    series = exposition(collector)
    assert series["rollwright_root_locked_since_timestamp_seconds"] == {}
    assert series["rollwright_root_queue_depth"] == {}
    assert series["rollwright_root_awaiting_review"] == {}
    assert 0 <= series["rollwright_gateway_fleet_state_age_seconds"][()] < 60
    database.close()


def exposition(collector: FleetCollector) -> dict[str, dict[tuple[str, ...], float]]:
    registry = CollectorRegistry()
    registry.register(collector)
    out: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        out.setdefault(family.name, {})  # a gauge with no series yet
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(s.labels.values())] = s.value
    return out


def test_the_worker_serves_its_metrics_with_the_token() -> None:
    metrics = WorkerMetrics()
    metrics.transitions.labels("queued").inc()
    url, stop = serve_metrics(metrics, "127.0.0.1:0", token="s3cret")
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 401
        with pytest.raises(urllib.error.HTTPError) as elsewhere:
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10)
        assert elsewhere.value.code == 404
        asked = urllib.request.Request(url, headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(asked, timeout=10) as answer:
            text = answer.read().decode()
    finally:
        stop()
    assert 'rollwright_deployment_transitions_total{state="queued"} 1.0' in text


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        (":9464", ("0.0.0.0", 9464)),
        ("[::1]:1", ("::1", 1)),
    ],
)
def test_metrics_addresses(address: str, expected: tuple[str, int]) -> None:
    assert split_address(address) == expected


def test_a_metrics_address_without_a_port_is_refused() -> None:
    with pytest.raises(ValueError, match="'localhost' is not host:port"):
        split_address("localhost")


ATTEMPTS: list[int] = []


@activity.defn(name="flaky")
async def flaky() -> str:
    ATTEMPTS.append(activity.info().attempt)
    if activity.info().attempt == 1:
        raise RuntimeError("first attempt fails")
    return "done"


@workflow.defn(name="CallsFlaky", sandboxed=False)
class CallsFlaky:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            flaky,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=10)),
        )


def test_the_interceptor_times_each_attempt_and_counts_retries() -> None:
    metrics = WorkerMetrics()

    async def scenario() -> str:
        async with timeskip.environment() as env:
            queue = f"metrics-{uuid.uuid4().hex[:8]}"
            async with Worker(
                env.client,
                task_queue=queue,
                workflows=[CallsFlaky],
                activities=[flaky],
                interceptors=[ActivityMetrics(metrics)],
            ):
                result: str = await env.client.execute_workflow(
                    CallsFlaky.run, id=f"flaky-{queue}", task_queue=queue
                )
                return result

    ATTEMPTS.clear()
    assert asyncio.run(scenario()) == "done" and ATTEMPTS == [1, 2]
    count = "rollwright_worker_activity_duration_seconds_count"
    assert sample(metrics, count, activity="flaky", outcome="failed") == 1
    assert sample(metrics, count, activity="flaky", outcome="completed") == 1
    assert sample(metrics, "rollwright_worker_activity_retries_total", activity="flaky") == 1
