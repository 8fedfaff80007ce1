"""What a worker tells Prometheus: its own metrics (activities/metrics.py) over HTTP, each
activity's duration and retries measured by an interceptor, and the Temporal SDK's metrics on
an address of their own.

The SDK serves its metrics itself (`PrometheusConfig`) from the Runtime the client is built
with; the workflows' counters (`workflow.metric_meter()`: emitted once, never on replay) go
there too. rollwright's own registry is served by a small WSGI server on a thread, which asks
for the metrics token when one is set (as the gateway's /metrics does).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from temporalio import activity
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from activities.metrics import WorkerMetrics
from shared import bearer


class ActivityMetrics(Interceptor):
    """Times every activity this worker runs and counts its retried attempts."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self.metrics = metrics

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Timed(next, self.metrics)


class _Timed(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, metrics: WorkerMetrics) -> None:
        super().__init__(next)
        self.metrics = metrics

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        name = info.activity_type
        if info.attempt > 1:
            self.metrics.activity_retries.labels(name).inc()
        outcome = "failed"
        started = time.monotonic()
        try:
            result = await super().execute_activity(input)
            outcome = "completed"
            return result
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            elapsed = time.monotonic() - started
            self.metrics.activity_seconds.labels(name, outcome).observe(elapsed)


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (`[v6]:port` too) → (host, port); a bad one says which setting."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"metrics address {address!r} is not host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # scrapes are not news
        pass


def serve_metrics(
    metrics: WorkerMetrics, address: str, token: str | None = None
) -> tuple[str, Callable[[], None]]:
    """Serve `/metrics` on `address` from a daemon thread; the URL and how to stop it."""
    exposition = make_wsgi_app(metrics.registry)

    def app(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/metrics":
            start("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: the worker serves /metrics only\n"]
        if token is not None and not bearer.accepts(environ.get("HTTP_AUTHORIZATION"), token):
            start("401 Unauthorized", [bearer.CHALLENGE])
            return [bearer.REFUSAL.encode()]
        return exposition(environ, start)  # type: ignore[no-any-return]

    host, port = split_address(address)
    server: WSGIServer = make_server(host, port, app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="rollwright-metrics", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{server.server_port}/metrics", stop


def temporal_runtime(address: str) -> Runtime:
    """A Runtime whose SDK metrics are served in Prometheus form on `address`."""
    host, port = split_address(address)
    return Runtime(
        telemetry=TelemetryConfig(
            metrics=PrometheusConfig(bind_address=f"{host}:{port}", durations_as_seconds=True)
        )
    )
