"""The gateway's FastAPI app: webhooks, the manual-deploy API, health and metrics.

`create_app(settings)` builds everything from settings; tests and the embedded stack may pass
their own `dispatcher` and `store`, which the app then uses but does not close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Literal

from fastapi import FastAPI, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text

from gateway import api, webhooks
from gateway.context import Gateway, GatewayDep
from gateway.dispatcher import Dispatcher, DispatchError, TemporalDispatcher
from gateway.metrics import GatewayMetrics
from shared.settings import Settings
from shared.sqlstore import SqlStore

log = logging.getLogger("rollwright.gateway")

HEALTH_TIMEOUT_SECONDS = 3.0


class Check(BaseModel):
    ok: bool
    detail: str = ""


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    checks: dict[str, Check]


def create_app(
    settings: Settings,
    *,
    dispatcher: Dispatcher | None = None,
    store: SqlStore | None = None,
) -> FastAPI:
    metrics = GatewayMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as owned:
            the_store = store
            if the_store is None:
                if settings.database_url is None:
                    settings.data_dir.mkdir(parents=True, exist_ok=True)
                the_store = await run_in_threadpool(SqlStore, settings.database)
                owned.callback(the_store.close)
            the_dispatcher = dispatcher or await TemporalDispatcher.connect(settings)
            if settings.webhook_secret is None:
                log.warning("ROLLWRIGHT_WEBHOOK_SECRET is not set: every webhook gets 401")
            app.state.gateway = Gateway(settings, the_dispatcher, the_store, metrics)
            yield

    app = FastAPI(
        title="rollwright gateway",
        summary="GitHub webhooks in, Temporal workflows out.",
        lifespan=lifespan,
    )
    app.include_router(webhooks.router)
    app.include_router(api.router)

    @app.get(
        "/healthz",
        response_model=Health,
        responses={503: {"model": Health, "description": "The database or Temporal is down."}},
        tags=["operations"],
    )
    async def healthz(gw: GatewayDep) -> JSONResponse:
        """Whether the database answers and Temporal is reachable."""
        database, temporal = await asyncio.gather(_check_database(gw), _check_temporal(gw))
        health = Health(
            status="ok" if database.ok and temporal.ok else "unavailable",
            checks={"database": database, "temporal": temporal},
        )
        return JSONResponse(health.model_dump(), status_code=200 if health.status == "ok" else 503)

    @app.get("/metrics", tags=["operations"], response_class=Response)
    async def prometheus_metrics() -> Response:
        """Prometheus exposition of the gateway's metrics."""
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    return app


async def _check_database(gw: Gateway) -> Check:
    def probe() -> None:
        with gw.store.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    try:
        await asyncio.wait_for(run_in_threadpool(probe), HEALTH_TIMEOUT_SECONDS)
    except Exception as err:
        return Check(ok=False, detail=f"database: {type(err).__name__}: {err}"[:500])
    return Check(ok=True)


async def _check_temporal(gw: Gateway) -> Check:
    try:
        await asyncio.wait_for(gw.dispatcher.check_health(), HEALTH_TIMEOUT_SECONDS)
    except DispatchError as err:
        return Check(ok=False, detail=str(err)[:500])
    except TimeoutError:
        return Check(ok=False, detail="Temporal health check timed out")
    return Check(ok=True)
