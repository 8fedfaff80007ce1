"""Fuzzing the gateway's routes with schemathesis: no request, well-formed or not, gets a 5xx
while the database and Temporal are healthy.

The gateway is served by uvicorn on loopback over real SQLite and a real file blob store with
a deployment, its log and diff, and a pull request's preview in them (tests/support/pages.py);
its dispatcher answers like a healthy Temporal with nothing running. Requests are generated
from the app's own OpenAPI description, widened to the routes it hides from it (the pages,
sign-in, static files), both valid (positive) and invalid (negative) ones, read as the
machine (the bearer token: it reaches every store). Sign-in is configured (its routes
answer 503 otherwise, by design), but GitHub is never reached: no forged state passes.
A fixed number of examples per operation keeps the run under a minute."""

from __future__ import annotations

import copy
import importlib
import json
import pkgutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from pydantic import SecretStr
from schemathesis import GenerationMode

import gateway
from shared.contracts.preview import preview_prefix
from shared.devstack.credentials import new_app_key
from shared.devstack.ports import free_port
from tests.support.machine import MACHINE_HEADERS
from tests.support.pages import T0, QueueRecorder, World
from tests.support.serving import serving

EXAMPLES = 40  # per operation and mode: 22 operations in about 15 s on 2 cores
BUDGET_SECONDS = 60.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


class HealthyTemporal(QueueRecorder):
    """Temporal up, no rollout running: the rollout pages' query finds nothing."""

    async def rollout(self, repo: str, patch_id: str) -> None:
        return None


def described(app: FastAPI) -> dict[str, Any]:
    """An OpenAPI description of every route of the gateway's routers (each module's
    `router`), also of those the app hides from its own (pages, sign-in, static files):
    copies of them, the app's own routes left as they are."""
    routes = []
    for module in pkgutil.iter_modules(gateway.__path__):
        router = getattr(importlib.import_module(f"gateway.{module.name}"), "router", None)
        if isinstance(router, APIRouter):
            for route in router.routes:
                if isinstance(route, APIRoute):
                    shown = copy.copy(route)
                    shown.include_in_schema = True
                    routes.append(shown)
    return get_openapi(title=app.title, version=app.version, routes=routes)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FastAPI, str]]:
    port = free_port("127.0.0.1")
    world = World(
        tmp_path,
        HealthyTemporal(),
        public_url=f"http://127.0.0.1:{port}",
        webhook_secret=SecretStr("fuzz-hook-secret"),
        github_api_url="http://127.0.0.1:9",  # never asked: the machine reads everything
        github_app_id="61",
        github_private_key=SecretStr(new_app_key()),
        github_oauth_client_id="Iv1.fuzz",
        github_oauth_client_secret=SecretStr("fuzz-oauth-secret"),
    )
    app = world.client.app
    world.record("rendering", T0)
    world.record("published", T0)
    world.store_diff()
    prefix = preview_prefix("acme/fleet", 9, "c" * 40)
    world.blobs.put(f"{prefix}report.md", b"### rollwright preview\n")
    world.blobs.put(f"{prefix}report.json", json.dumps({"base": "b" * 40}).encode())
    try:
        with serving(app, port) as url:
            yield app, url
    finally:
        world.close()


def test_no_route_answers_a_server_error(served: tuple[FastAPI, str]) -> None:
    app, url = served
    schema = schemathesis.openapi.from_dict(described(app))
    started = time.monotonic()
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    public = {(path, method) for path, item in app.openapi()["paths"].items() for method in item}
    fuzzed = {(o.path, o.method.lower()) for o in operations}
    assert public < fuzzed and ("/roots/{root}", "get") in fuzzed  # the hidden routes too
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def probe(case: Any) -> None:
                answer = case.call(base_url=url, headers=MACHINE_HEADERS, timeout=10)
                if answer.status_code >= 500:
                    failures.append(f"{answer.status_code} {case.method} {answer.request.url}")

            try:
                probe()
            except Unsatisfiable:  # nothing to make invalid (no parameters, no body)
                assert mode is GenerationMode.NEGATIVE, operation.label
    elapsed = time.monotonic() - started
    assert failures == [], failures[:20]
    assert elapsed < BUDGET_SECONDS, f"the fuzz took {elapsed:.0f} s"
