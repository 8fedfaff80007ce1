"""What every request handler needs, kept on `app.state` and handed out as a dependency."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from gateway.dispatcher import Dispatcher
from gateway.intake import DeliveryIntake
from gateway.metrics import GatewayMetrics
from gateway.outbox import OutboxDrainer
from shared.settings import Settings
from shared.stores.blob import BlobStore
from shared.stores.blob_url import open_blob_store
from shared.stores.sql.audit import AuditStore
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from shared.stores.sql.notifications import NotificationStore


@dataclass
class Gateway:
    settings: Settings
    dispatcher: Dispatcher
    database: Database
    metrics: GatewayMetrics
    outbox: OutboxDrainer  # over the outbox store
    intake: DeliveryIntake  # over the delivery store
    # what the pages and the API read
    deployments: DeploymentStore = field(init=False)
    audit_trail: AuditStore = field(init=False)
    notifications: NotificationStore = field(init=False)
    _blobs: BlobStore | None = field(default=None, init=False, repr=False)
    _blobs_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.deployments = DeploymentStore(self.database)
        self.audit_trail = AuditStore(self.database)
        self.notifications = NotificationStore(self.database)

    @property
    def blobs(self) -> BlobStore:
        """The blob store the pages read (job logs, diffs, previews), opened on first use:
        a gateway that only takes webhooks never opens it."""
        with self._blobs_lock:
            if self._blobs is None:
                self._blobs = open_blob_store(self.settings.blobs, self.settings)
            return self._blobs


def get_gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


GatewayDep = Annotated[Gateway, Depends(get_gateway)]
