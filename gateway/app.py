"""The gateway's FastAPI app: webhooks, the manual-deploy API, health and metrics.

`create_app(settings)` builds everything from settings; tests and the embedded stack may pass
their own `dispatcher` and `database`, which the app then uses but does not close, and outbox
options (gateway/outbox.py). The lifespan runs the outbox drainer: it starts with the app (and
so drains rows left pending by an earlier run) and stops with it, giving its leases back.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Literal

from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import BaseModel

from gateway import api, jobs_api, pages, previews, signin, webhooks
from gateway.access.permissions import PermissionUnknown
from gateway.access.viewer import Access, SignInRequired
from gateway.context import Gateway, GatewayDep
from gateway.dispatcher import Dispatcher, DispatchError, TemporalDispatcher
from gateway.intake import DeliveryIntake
from gateway.metrics import GatewayMetrics
from gateway.outbox import OutboxDrainer, OutboxOptions
from shared.settings import Settings
from shared.stores.sql.deliveries import DeliveryStore
from shared.stores.sql.engine import Database
from shared.stores.sql.outbox import OutboxStats, OutboxStore

log = logging.getLogger("rollwright.gateway")

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


def create_app(
    settings: Settings,
    *,
    dispatcher: Dispatcher | None = None,
    database: Database | None = None,
    outbox: OutboxOptions | None = None,
) -> FastAPI:
    metrics = GatewayMetrics()
    access = Access(settings)
    if not settings.signin_configured and not settings.open_pages:
        log.warning(
            "no github sign-in configured: the pages answer only the bearer token",
            extra={"see": "docs/governance.md"},
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as owned:
            the_database = database
            if the_database is None:
                if settings.database_url is None:
                    settings.data_dir.mkdir(parents=True, exist_ok=True)
                the_database = await run_in_threadpool(Database, settings.database)
                owned.callback(the_database.close)
            the_dispatcher = dispatcher or await TemporalDispatcher.connect(settings)
            if settings.webhook_secret is None:
                log.warning("ROLLWRIGHT_WEBHOOK_SECRET is not set: every webhook gets 401")
            drainer = OutboxDrainer(OutboxStore(the_database), the_dispatcher, metrics, outbox)
            intake = DeliveryIntake(DeliveryStore(the_database))
            app.state.gateway = Gateway(
                settings, the_dispatcher, the_database, metrics, drainer, intake
            )
            owned.callback(access.close)
            drainer.start()
            owned.push_async_callback(drainer.stop)
            yield

    app = FastAPI(
        title="rollwright gateway",
        summary="GitHub webhooks in, Temporal workflows out.",
        lifespan=lifespan,
    )
    app.state.access = access
    app.add_exception_handler(SignInRequired, _sign_in_required)
    app.add_exception_handler(PermissionUnknown, _permission_unknown)
    app.include_router(signin.router)
    app.include_router(webhooks.router)
    app.include_router(api.router)
    app.include_router(jobs_api.router)
    app.include_router(pages.router)
    app.include_router(previews.router)

    @app.get(
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

    @app.get("/metrics", tags=["operations"], response_class=Response)
    async def prometheus_metrics(gw: GatewayDep, request: Request) -> Response:
        """Prometheus exposition of the gateway's metrics (with ROLLWRIGHT_METRICS_TOKEN set,
        only for `Authorization: Bearer <that token>`)."""
        if settings.metrics_token is not None:  # never empty: settings read "" as unset
            given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            wanted = settings.metrics_token.get_secret_value()
            if not hmac.compare_digest(given.encode(), wanted.encode()):
                return Response(
                    "a valid bearer token is required\n",
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
        _, stats = await _check_database(gw)
        if stats is not None:  # else the gauges keep their last values
            metrics.outbox_depth.set(stats.depth)
            metrics.outbox_oldest.set(stats.oldest_pending_seconds() or 0.0)
            metrics.outbox_failed.set(stats.failed)
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    return app


async def _sign_in_required(request: Request, exc: Exception) -> Response:
    """Nobody signed in: the JSON API answers 401, a page sends the browser to sign in."""
    assert isinstance(exc, SignInRequired)
    settings: Settings = request.app.state.access.settings
    if request.url.path.startswith("/api/") or exc.bad_token:
        detail = (
            "the bearer token is not valid"
            if exc.bad_token
            else "sign in with GitHub at /auth/signin, or send the bearer token"
        )
        return JSONResponse(
            {"detail": detail}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
        )
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(signin.signin_location(settings.public_url, path), status_code=303)


async def _permission_unknown(request: Request, exc: Exception) -> Response:
    """GitHub did not answer whether the viewer may read the repository: nothing is shown,
    and the answer names nothing (the log has the login and the repository)."""
    log.warning("read permission unknown", extra={"error": str(exc)})
    detail = "GitHub did not answer whether you may read this page; try again shortly"
    if request.url.path.startswith("/api/"):
        return JSONResponse({"detail": detail}, status_code=503)
    public = request.app.state.access.settings.public_url
    return pages.error_page(503, "GitHub did not answer", f"{detail}.", public)


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
