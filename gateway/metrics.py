"""Prometheus metrics of the gateway: webhooks by event and outcome, and how fast we answer.

Each app gets its own registry so several apps can live in one process (tests, the embedded
stack). Label values are bounded: an event name we do not know is counted as `other`, because
the header is attacker-controlled until the signature is checked.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from gateway.fleetmetrics import FleetCollector

KNOWN_EVENTS = frozenset(
    {
        "push",
        "check_run",
        "check_suite",
        "ping",
        "installation",
        "installation_repositories",
        "installation_target",
        "pull_request",
        "github_app_authorization",
    }
)

# Acknowledgement latency is the figure we promise (p99 ≤ 50 ms), so buckets are fine-grained
# below 100 ms.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# Accepted → performed: milliseconds normally, up to an outage's length when Temporal is away.
OUTBOX_DELAY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)


def event_label(event: str | None) -> str:
    return event if event in KNOWN_EVENTS else "other"


class GatewayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        if registry is None:
            # Process, platform and GC figures on the private registry too.
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                self.registry.register(collector)
        self.webhooks = Counter(
            "rollwright_gateway_webhooks",
            "Webhook deliveries by event and outcome "
            "(accepted, acknowledged, ignored, duplicate, bad_signature, bad_request, too_large, "
            "unavailable).",
            ["event", "outcome"],
            registry=self.registry,
        )
        self.webhook_seconds = Histogram(
            "rollwright_gateway_webhook_duration_seconds",
            "Time from receiving a webhook to answering it.",
            ["event"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.api_deploys = Counter(
            "rollwright_gateway_api_deploys",
            "POST /api/deploy requests by outcome (queued, unauthorized, refused, unavailable).",
            ["outcome"],
            registry=self.registry,
        )

        self.outbox_performed = Counter(
            "rollwright_gateway_outbox_performed",
            "Outbox rows performed by outcome (started, already_started, signaled, queued, "
            "not_running, failed).",
            ["outcome"],
            registry=self.registry,
        )
        self.outbox_retries = Counter(
            "rollwright_gateway_outbox_retries",
            "Attempts to perform an outbox row that failed on an infrastructure error "
            "(Temporal unreachable); the row is retried with backoff.",
            registry=self.registry,
        )
        self.outbox_delay = Histogram(
            "rollwright_gateway_outbox_delay_seconds",
            "Time from accepting a webhook (202) to performing its start or signal.",
            buckets=OUTBOX_DELAY_BUCKETS,
            registry=self.registry,
        )
        self.outbox_depth = Gauge(
            "rollwright_gateway_outbox_depth",
            "Pending outbox rows in the database (all gateways), as of the last scrape.",
            registry=self.registry,
        )
        self.outbox_oldest = Gauge(
            "rollwright_gateway_outbox_oldest_pending_seconds",
            "Age of the oldest pending outbox row (0 when there is none).",
            registry=self.registry,
        )
        self.outbox_failed = Gauge(
            "rollwright_gateway_outbox_failed",
            "Outbox rows that can never be performed (kept until pruned).",
            registry=self.registry,
        )

        self.fleet = FleetCollector()
        self.registry.register(self.fleet)

    def webhook(self, event: str | None, outcome: str, seconds: float) -> None:
        label = event_label(event)
        self.webhooks.labels(event=label, outcome=outcome).inc()
        self.webhook_seconds.labels(event=label).observe(seconds)

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
