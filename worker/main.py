"""The worker process: `python -m worker` (configuration: ROLLWRIGHT_* variables).

Temporal workers share one process and one client (pydantic data converter):

- the shared task queue (`settings.task_queue`): every workflow and every activity;
- this worker's own queue (`settings.worker_task_queue`, `<task_queue>/<worker_id>`): the
  activities a deployment pins to the worker holding its checkout (checkout, render, diff,
  publish, cleanup). A DeploymentWorkflow learns the name from `worker_task_queue`, which runs
  on the admission queue and is answered by a worker once it has room for the deployment
  (activities.admission);
- the waits queue (activities that only wait on another workflow) and the admission queue.

A worker that dies takes its queue with it: the pinned activities' schedule-to-start timeout
then fails the deployment visibly instead of waiting forever.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Interceptor, Worker

from activities import Activities, build_activities
from activities.admission import Admission
from shared.contracts.deploy import (
    REVIEW_TIMEOUT_SECONDS,
    admission_task_queue,
    waits_task_queue,
)
from shared.notify.notifier import Notifier
from shared.notify.sinks import configured_sinks
from shared.settings import Settings
from worker.admission import AdmissionRelease
from worker.bytecode import precompile
from worker.logs import configure_logging
from worker.telemetry import ActivityMetrics, serve_metrics, temporal_runtime
from workflows.registry import WORKFLOWS

# A checkout lives while its deployment waits for review (up to 7 days); older ones were left
# by a worker that died and are removed at start.
STALE_CHECKOUT_SECONDS = REVIEW_TIMEOUT_SECONDS + 24 * 3600
GRACEFUL_SHUTDOWN = timedelta(seconds=30)
HEARTBEAT_THROTTLE = timedelta(seconds=5)
# Activities are async and run blocking work (git, Helm, stores) in the loop's default thread
# pool. Python's default pool has cpu+4 threads: a few long renders would make a check-run
# update wait behind them. A wide pool for waiting; the pinned worker's concurrency limit
# keeps the CPU-heavy work (checkout, render, diff, publish) near the number of cores.
THREADS = 64
# Activities that only wait on another workflow (a dispatch waiting for the previous one; a
# long poll each, no thread): a burst of pushes queues hundreds at once.
WAIT_SLOTS = 2000
# Deployments this worker takes off the admission queue to wait for its room: a few, so that
# the others wait in Temporal's queue for whichever worker has room first.
ADMISSION_SLOTS = 2


def pinned_concurrency() -> int:
    return max(4, 2 * (os.cpu_count() or 1))


def admitted_deployments() -> int:
    """Deployments holding this worker at once (activities.admission): twice its pinned slots,
    so that a slot freed between one deployment's steps finds the next one's task queued."""
    return 2 * pinned_concurrency()


log = logging.getLogger("rollwright.worker")


async def connect(settings: Settings) -> Client:
    runtime = None
    if settings.temporal_metrics_address:
        runtime = temporal_runtime(settings.temporal_metrics_address)
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
        runtime=runtime,
    )


def build_workers(client: Client, settings: Settings, activities: Activities) -> list[Worker]:
    """The shared-queue worker (workflows + all activities), the pinned-queue worker, the
    waits-queue worker and the admission-queue worker."""
    interceptors: list[Interceptor] = [ActivityMetrics(activities.metrics)]
    releasing = [AdmissionRelease(activities.admission)] if activities.admission else []
    shared = Worker(
        client,
        task_queue=settings.task_queue,
        workflows=WORKFLOWS,
        activities=activities.all,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=interceptors,
    )
    own = Worker(
        client,
        task_queue=settings.worker_task_queue,
        activities=activities.pinned,
        max_concurrent_activities=pinned_concurrency(),
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=[*interceptors, *releasing],
        # A cancellation reaches an activity in a heartbeat's answer; the SDK sends them at
        # most this often. A superseded PR preview stops rendering within seconds.
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
    )
    waits = Worker(
        client,
        task_queue=waits_task_queue(settings.task_queue),
        activities=activities.waits,
        max_concurrent_activities=WAIT_SLOTS,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=interceptors,
    )
    admitting = Worker(
        client,
        task_queue=admission_task_queue(settings.task_queue),
        activities=activities.admitting,
        max_concurrent_activities=ADMISSION_SLOTS,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=interceptors,
    )
    return [shared, own, waits, admitting]


async def run_worker(
    settings: Settings, stop: asyncio.Event, *, client: Client | None = None
) -> None:
    """Poll both task queues until `stop` is set, then shut down gracefully."""
    precompile()  # before the first workflow instance imports them
    client = client or await connect(settings)
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="rollwright-activity")
    )
    activities = build_activities(settings, client, admission=Admission(admitted_deployments()))
    stop_metrics: Callable[[], None] | None = None
    try:
        if settings.worker_metrics_address:
            token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
            url, stop_metrics = serve_metrics(
                activities.metrics, settings.worker_metrics_address, token
            )
            log.info("worker metrics served", extra={"url": url})
        removed = await asyncio.to_thread(activities.mirror.prune_checkouts, STALE_CHECKOUT_SECONDS)
        if removed:
            log.info("stale checkouts removed", extra={"count": len(removed)})
        async with contextlib.AsyncExitStack() as stack:
            for worker in build_workers(client, settings, activities):
                await stack.enter_async_context(worker)
            log.info(
                "worker started",
                extra={
                    "temporal": settings.temporal_address,
                    "namespace": settings.temporal_namespace,
                    "task_queue": settings.task_queue,
                    "worker_task_queue": settings.worker_task_queue,
                },
            )
            notifier = None
            if configured_sinks(settings):  # deliver events and send reminders from here
                notifier = Notifier(activities.database, settings)
                stack.callback(notifier.close)
                delivering = asyncio.create_task(notifier.run(stop))
            await stop.wait()
            log.info("worker stopping")
            if notifier is not None:
                await delivering
    finally:
        if stop_metrics is not None:
            stop_metrics()
        activities.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m worker",
        description="Run the rollwright worker. Configured by ROLLWRIGHT_* environment "
        "variables (docs/configuration.md).",
    )
    parser.parse_args(argv)
    settings = Settings()
    configure_logging(settings.log_level)
    # Activity and workflow details go into the `temporal_*` fields, not into the message.
    activity.logger.activity_info_on_message = False
    workflow.logger.workflow_info_on_message = False

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_worker(settings, stop)

    try:
        asyncio.run(run())
    except (OSError, RuntimeError) as err:
        # e.g. Temporal unreachable: one line saying so beats a traceback.
        log.error("worker failed", extra={"error": str(err)})
        return 1
    return 0
