"""`GET /healthz` and `GET /metrics`: what load balancers and Prometheus ask the gateway."""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from gateway.context import Gateway, GatewayDep
from gateway.dispatcher import DispatchError
from gateway.fleetmetrics import read_fleet_state
from shared import bearer
from shared.stores.sql.outbox import OutboxStats

HEALTH_TIMEOUT_SECONDS = 3.0


class Check(BaseModel):
    ok: bool
    detail: str = ""


class OutboxHealth(BaseModel):
    """The outbox across all gateways sharing the database; null when it did not answer."""

    depth: int | None = None
    oldest_pending_seconds: float | None = None
    failed: int | None = None


class Health(BaseModel):
    status: Literal["ok", "degraded", "unavailable"]
    checks: dict[str, Check]
    outbox: OutboxHealth


log = logging.getLogger("rollwright.gateway")
router = APIRouter()


@router.get(
    "/healthz",
    response_model=Health,
    responses={503: {"model": Health, "description": "The database is down."}},
    tags=["operations"],
)
async def healthz(gw: GatewayDep) -> JSONResponse:
    """Whether the database answers (else 503: webhooks cannot be accepted) and Temporal
    is reachable (else `degraded`, still 200: webhooks are accepted and kept in the
    outbox until it is back), with the outbox's depth and oldest pending row."""
    (database, stats), temporal = await asyncio.gather(_check_database(gw), _check_temporal(gw))
    health = Health(
        status="unavailable" if not database.ok else "ok" if temporal.ok else "degraded",
        checks={"database": database, "temporal": temporal},
        outbox=_outbox_health(stats),
    )
    code = 503 if health.status == "unavailable" else 200
    return JSONResponse(health.model_dump(), status_code=code)


@router.get("/metrics", tags=["operations"], response_class=Response)
async def prometheus_metrics(gw: GatewayDep, request: Request) -> Response:
    """Prometheus exposition of the gateway's metrics (with ROLLWRIGHT_METRICS_TOKEN set,
    only for `Authorization: Bearer <that token>`)."""
    token = gw.settings.metrics_token  # never empty: settings read "" as unset
    given = request.headers.get("authorization")
    if token is not None and not bearer.accepts(given, token.get_secret_value()):
        return Response(bearer.REFUSAL, status_code=401, headers=dict([bearer.CHALLENGE]))
    metrics = gw.metrics
    _, stats = await _check_database(gw)
    if stats is not None:  # else the gauges keep their last values
        metrics.outbox_depth.set(stats.depth)
        metrics.outbox_oldest.set(stats.oldest_pending_seconds() or 0.0)
        metrics.outbox_failed.set(stats.failed)
        try:
            metrics.fleet.state = await asyncio.wait_for(
                run_in_threadpool(read_fleet_state, gw.database), HEALTH_TIMEOUT_SECONDS
            )
        except Exception as err:  # the last snapshot stays; its age says how old
            log.warning("fleet state unread", extra={"error": f"{type(err).__name__}: {err}"})
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)


async def _check_database(gw: Gateway) -> tuple[Check, OutboxStats | None]:
    """The outbox figures double as the database probe."""
    try:
        stats = await asyncio.wait_for(
            run_in_threadpool(gw.outbox.store.stats), HEALTH_TIMEOUT_SECONDS
        )
    except Exception as err:
        return Check(ok=False, detail=f"database: {type(err).__name__}: {err}"[:500]), None
    return Check(ok=True), stats


def _outbox_health(stats: OutboxStats | None) -> OutboxHealth:
    if stats is None:
        return OutboxHealth()
    oldest = stats.oldest_pending_seconds()
    return OutboxHealth(
        depth=stats.depth,
        oldest_pending_seconds=round(oldest, 3) if oldest is not None else None,
        failed=stats.failed,
    )


async def _check_temporal(gw: Gateway) -> Check:
    try:
        await asyncio.wait_for(gw.dispatcher.check_health(), HEALTH_TIMEOUT_SECONDS)
    except DispatchError as err:
        return Check(ok=False, detail=str(err)[:500])
    except TimeoutError:
        return Check(ok=False, detail="Temporal health check timed out")
    return Check(ok=True)
