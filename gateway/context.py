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
from shared.stores.sql import SqlStore


@dataclass
class Gateway:
    settings: Settings
    dispatcher: Dispatcher
    store: SqlStore
    metrics: GatewayMetrics
    outbox: OutboxDrainer
    intake: DeliveryIntake
    _blobs: BlobStore | None = field(default=None, init=False, repr=False)
    _blobs_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

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
