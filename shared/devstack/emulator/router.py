"""How the GitHub emulator answers a request: faults and hooks a test injected come first, then
the route (404 without one), its authentication, the body's schema, and the route's handler
(under the store's lock, but for the control routes). Every request is recorded."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

from shared.devstack.emulator.auth import Credentials
from shared.devstack.emulator.model import (
    DOCS,
    ApiError,
    Fault,
    Hook,
    Request,
    RequestRecord,
    Route,
)
from shared.devstack.emulator.schemas import RequestSchemas
from shared.devstack.emulator.state import Store


class Router:
    def __init__(
        self, store: Store, credentials: Credentials, schemas: RequestSchemas, routes: list[Route]
    ) -> None:
        self._store = store
        self._credentials = credentials
        self._schemas = schemas
        self._routes = routes
        self._requests: list[RequestRecord] = []
        self._faults: list[Fault] = []
        self._hooks: list[Hook] = []

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        *,
        message: str = "Server Error",
        headers: dict[str, str] | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` matching requests with an error (5xx, rate limits…)."""
        with self._store.lock:
            self._faults.append(
                Fault(
                    method.upper(),
                    re.compile(path_regex),
                    status,
                    {"message": message, "documentation_url": DOCS},
                    dict(headers or {}),
                    times,
                )
            )

    def before_next(
        self, method: str, path_regex: str, action: Callable[[], None], *, times: int = 1
    ) -> None:
        """Run `action` just before answering the next `times` matching requests, outside
        the emulator's lock: a race made to happen (say, a push landing between a client
        reading a branch and updating it)."""
        with self._store.lock:
            self._hooks.append(Hook(method.upper(), re.compile(path_regex), action, times))

    def requests(self) -> list[RequestRecord]:
        with self._store.lock:
            return list(self._requests)

    def dispatch(
        self, method: str, target: str, headers: dict[str, str], raw: bytes, base: str
    ) -> tuple[int, Any, dict[str, str]]:
        parsed = urllib.parse.urlsplit(target)
        path = parsed.path.rstrip("/") or "/"
        try:
            status, body, extra = self._answer(method, path, parsed.query, headers, raw, base)
        except Exception as err:  # answer like GitHub's 500 rather than drop the connection
            status, body, extra = 500, ApiError(500, f"emulator error: {err!r}").body, {}
        with self._store.lock:
            self._requests.append(RequestRecord(method, path, status))
        # like GitHub, every answer to an installation token says what quota is left
        quota = self._credentials.quota_headers(headers.get("authorization", ""))
        return status, body, {**quota, **extra}

    def _answer(
        self,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        raw: bytes,
        base: str,
    ) -> tuple[int, Any, dict[str, str]]:
        hook = self._take_hook(method, path)
        if hook is not None:
            hook.action()
        fault = self._take_fault(method, path)
        if fault is not None:
            return fault.status, fault.body, fault.headers
        route, params = self._match(method, path)
        if route is None:
            return 404, ApiError(404, "Not Found").body, {}
        content_type = headers.get("content-type", "")
        request = Request(
            method,
            path,
            params,
            urllib.parse.parse_qs(query),
            None,
            raw,
            content_type,
            base,
            headers=headers,
        )
        try:
            self._credentials.authenticate(route, request, headers.get("authorization", ""))
            if route.schema is not None or (raw and "json" in content_type):
                request.body = _parse_json(raw)
            if route.schema is not None:
                self._schemas.validate(route.schema, request.body)
            if route.auth == "none":
                # control routes may deliver webhooks, and the receiver may call back into
                # this emulator: they take the lock themselves, never across a delivery
                status, body = route.handler(request)
            else:
                with self._store.lock:
                    status, body = route.handler(request)
        except ApiError as err:
            return err.status, err.body, {}
        except (KeyError, TypeError, ValueError) as err:
            if route.auth != "none":
                raise
            # a malformed control request (missing or unknown field)
            return 400, ApiError(400, f"bad emulator request: {err!r}").body, {}
        return status, body, {}

    def _take_hook(self, method: str, path: str) -> Hook | None:
        with self._store.lock:
            return _take(self._hooks, method, path)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._store.lock:
            return _take(self._faults, method, path)

    def _match(self, method: str, path: str) -> tuple[Route | None, dict[str, str]]:
        for route in self._routes:
            found = route.pattern.match(path) if route.method == method else None
            if found is not None:
                return route, {k: urllib.parse.unquote(v) for k, v in found.groupdict().items()}
        return None, {}


def _parse_json(raw: bytes) -> Any:
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise ApiError(400, "Problems parsing JSON") from err


_Injected = TypeVar("_Injected", Fault, Hook)


def _take(injected: list[_Injected], method: str, path: str) -> _Injected | None:
    """The first of `injected` for this request, used once more (and dropped when used up)."""
    for entry in injected:
        if entry.method == method and entry.path.search(path):
            entry.times -= 1
            if entry.times <= 0:
                injected.remove(entry)
            return entry
    return None
