"""What every request handler needs, kept on `app.state` and handed out as a dependency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from gateway.dispatcher import Dispatcher
from gateway.intake import DeliveryIntake
from gateway.metrics import GatewayMetrics
from gateway.outbox import OutboxDrainer
from shared.settings import Settings
from shared.sqlstore import SqlStore


@dataclass
class Gateway:
    settings: Settings
    dispatcher: Dispatcher
    store: SqlStore
    metrics: GatewayMetrics
    outbox: OutboxDrainer
    intake: DeliveryIntake


def get_gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


GatewayDep = Annotated[Gateway, Depends(get_gateway)]
