"""The gateway's FastAPI app: webhooks, the manual-deploy API, the pages, health and metrics.

`create_app(settings)` builds everything from settings; tests and the embedded stack may pass
their own `dispatcher` and `database`, which the app then uses but does not close, and outbox
options (gateway/outbox.py). The lifespan runs the outbox drainer: it starts with the app (and
so drains rows left pending by an earlier run) and stops with it, giving its leases back.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager

from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse

from gateway import api, jobs_api, operations, pages, previews, signin, static, webhooks
from gateway.access.callers import Callers
from gateway.access.permissions import PermissionUnknown
from gateway.access.viewer import Access, SignInRequired
from gateway.context import Gateway
from gateway.dispatcher import Dispatcher, TemporalDispatcher
from gateway.headers import SecurityHeaders
from gateway.intake import DeliveryIntake
from gateway.metrics import GatewayMetrics
from gateway.outbox import OutboxDrainer, OutboxOptions
from shared.settings import Settings
from shared.stores.sql.deliveries import DeliveryStore
from shared.stores.sql.engine import Database
from shared.stores.sql.outbox import OutboxStore

log = logging.getLogger("rollwright.gateway")


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
    app = FastAPI(
        title="rollwright gateway",
        summary="GitHub webhooks in, Temporal workflows out.",
        lifespan=_lifespan(settings, access, metrics, dispatcher, database, outbox),
    )
    app.state.access = access
    app.state.callers = Callers(access)  # who calls POST /api/deploy (keeps GitHub's answers)
    app.add_exception_handler(SignInRequired, _sign_in_required)
    app.add_exception_handler(PermissionUnknown, _permission_unknown)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    docs = (app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url)
    app.add_middleware(
        SecurityHeaders, public_url=settings.public_url, docs_paths=[p for p in docs if p]
    )
    app.include_router(static.router)
    app.include_router(signin.router)
    app.include_router(webhooks.router)
    app.include_router(api.router)
    app.include_router(jobs_api.router)
    app.include_router(pages.router)
    app.include_router(previews.router)
    app.include_router(operations.router)
    return app


def _lifespan(
    settings: Settings,
    access: Access,
    metrics: GatewayMetrics,
    dispatcher: Dispatcher | None,
    database: Database | None,
    outbox: OutboxOptions | None,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: what was not given is opened (and closed) here, the `Gateway`
    the handlers take is put on `app.state`, and the outbox drainer runs."""

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

    return lifespan


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


async def _invalid_request(request: Request, exc: Exception) -> Response:
    """A request FastAPI could not validate.

    A path that names nothing that could exist (gateway/names.py) is not found, as a name that
    does not exist is: JSON 404 for the API, an HTML 404 page otherwise. A malformed query or
    body stays FastAPI's 422 for the JSON API, the webhooks and every non-GET; a page (GET)
    answers an HTML 400 naming the parameters it cannot take, never raw JSON."""
    assert isinstance(exc, RequestValidationError)
    path = request.url.path
    api = path.startswith("/api/")
    in_path = any(tuple(error.get("loc", ()))[:1] == ("path",) for error in exc.errors())
    if in_path and api:
        return JSONResponse({"detail": "Not Found"}, status_code=404)
    public = request.app.state.access.settings.public_url
    if in_path:
        return pages.error_page(404, "No such page", f"Rollwright has no page at {path}.", public)
    if api or path.startswith("/events") or request.method != "GET":
        return await request_validation_exception_handler(request, exc)
    fields = ", ".join(sorted({str(error["loc"][-1]) for error in exc.errors()}))
    return pages.error_page(400, "Bad request", f"This page cannot take: {fields}.", public)
