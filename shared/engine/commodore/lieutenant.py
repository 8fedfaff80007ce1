"""The Lieutenant API as Commodore reads it: `GET /clusters/<id>`, `GET /tenants/<id>` and the
tenant's cluster list (`GET /clusters?tenant=<id>`), with `Authorization: Bearer <token>`, and
the compile metadata reported after a catalog is published (`POST /clusters/<id>/compileMeta`).

    api = Lieutenant.from_settings(settings.lieutenant)
    api.cluster("c-demo")   # {"id": ..., "tenant": ..., "facts": {...}, "gitRepo": {...}}

The URL is the operator's `$COMMODORE_API_URL`, the token `$COMMODORE_API_TOKEN`, as with
Commodore. rollwright.yaml (which any branch changes) never chooses where the token goes: its
`commodore.lieutenant.url` must equal `$COMMODORE_API_URL` when that is set, and without it is
asked without a token. An API that cannot be reached, or answers 5xx, is
not the fleet's fault: the error is retryable, and nothing renders from a partial answer. The
token never appears in a message."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from shared.engine.commodore.repos import shown
from shared.engine.config.commodore import Lieutenant as LieutenantSettings
from shared.engine.config.fleet import CONFIG_FILE
from shared.engine.errors import FleetError

URL_ENV = "COMMODORE_API_URL"
TOKEN_ENV = "COMMODORE_API_TOKEN"
TIMEOUT_SECONDS = 30.0
REDIRECTS = 5


class LieutenantUnreachable(FleetError):
    retryable = True


class Lieutenant:
    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self._token = token

    def __repr__(self) -> str:  # the token never shows in logs or tracebacks
        return f"Lieutenant(url={shown(self.url)!r})"

    @classmethod
    def from_settings(cls, settings: LieutenantSettings, line: int | None = None) -> Lieutenant:
        """The API at the operator's `$COMMODORE_API_URL` with `$COMMODORE_API_TOKEN`. A URL in
        rollwright.yaml (at `line`) must be that URL: a branch must not send the token to a
        server of its choosing. Without `$COMMODORE_API_URL` it is asked without a token."""
        operator = os.environ.get(URL_ENV, "")
        if operator and settings.url and _normal(settings.url) != _normal(operator):
            raise FleetError(
                f"commodore.lieutenant.url {shown(settings.url)!r} is not the operator's {URL_ENV} "
                "(the Lieutenant token is sent only there): remove it or set it to that URL",
                path=CONFIG_FILE,
                line=line,
            )
        if operator:
            token = os.environ.get(TOKEN_ENV, "")
            if not token:
                raise FleetError(
                    f"commodore.lieutenant: {TOKEN_ENV} is not set (the Lieutenant API's token)",
                    path=CONFIG_FILE,
                )
            return cls(operator, token)
        if not settings.url:
            raise FleetError(
                f"commodore.lieutenant: no url, and {URL_ENV} is not set", path=CONFIG_FILE
            )
        return cls(settings.url, None)

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        where = f"Lieutenant {shown(self.url)}/{path}"
        try:
            answer = httpx.get(
                f"{self.url}/{path}",
                params=params,
                headers={"Authorization": f"Bearer {self._token}"} if self._token else {},
                timeout=TIMEOUT_SECONDS,
                follow_redirects=True,
            )
        except httpx.HTTPError as err:
            raise LieutenantUnreachable(f"{where}: unreachable ({type(err).__name__})") from None
        if answer.status_code >= 500:
            raise LieutenantUnreachable(f"{where}: answered {answer.status_code}")
        try:
            body = answer.json() if answer.content else {}
        except ValueError:
            raise LieutenantUnreachable(f"{where}: the answer is not JSON") from None
        if answer.status_code >= 400:
            reason = body.get("reason") if isinstance(body, dict) else None
            raise FleetError(f"{where}: answered {answer.status_code}: {reason or 'no reason'}")
        return body

    def cluster(self, cluster_id: str) -> dict[str, Any]:
        body = self._get(f"clusters/{cluster_id}")
        if not isinstance(body, dict) or "tenant" not in body:
            raise FleetError(f"Lieutenant: cluster {cluster_id!r} has no tenant reference")
        return body

    def tenant(self, tenant_id: str) -> dict[str, Any]:
        body = self._get(f"tenants/{tenant_id}")
        if not isinstance(body, dict):
            raise FleetError(f"Lieutenant: tenant {tenant_id!r}: not an object")
        return body

    def clusters(self, tenant_id: str) -> list[dict[str, Any]]:
        body = self._get("clusters", {"tenant": tenant_id})
        if not isinstance(body, list):
            raise FleetError(f"Lieutenant: the clusters of tenant {tenant_id!r}: not a list")
        return [c for c in body if isinstance(c, dict)]

    def post_compile_meta(self, cluster_id: str, body: dict[str, Any]) -> None:
        """`POST /clusters/<id>/compileMeta`. As Commodore, a redirect is POSTed again to its
        location (httpx would turn a 301 or 302 into a GET); any 2xx is success."""
        url = f"{self.url}/clusters/{cluster_id}/compileMeta"
        where = f"Lieutenant {url}"
        if not self._token:  # Lieutenant takes no report from nobody
            raise FleetError(f"{where}: reporting the compile needs COMMODORE_API_TOKEN")
        for _ in range(REDIRECTS + 1):
            try:
                answer = httpx.post(
                    url,
                    json=body,
                    headers={"Authorization": f"Bearer {self._token}"},
                    timeout=TIMEOUT_SECONDS,
                    follow_redirects=False,
                )
            except httpx.HTTPError as err:
                raise LieutenantUnreachable(
                    f"{where}: unreachable ({type(err).__name__})"
                ) from None
            if answer.status_code in (301, 302, 307, 308) and "location" in answer.headers:
                moved = answer.url.join(answer.headers["location"])
                if moved.host != answer.url.host:  # the token goes to Lieutenant's host only
                    raise FleetError(f"{where}: redirected to another host ({moved.host})")
                url = str(moved)
                continue
            if answer.status_code >= 500:
                raise LieutenantUnreachable(f"{where}: answered {answer.status_code}")
            if answer.status_code >= 300:
                try:
                    reason = answer.json().get("reason") if answer.content else None
                except (ValueError, AttributeError):
                    reason = None
                raise FleetError(f"{where}: answered {answer.status_code}: {reason or 'no reason'}")
            return
        raise LieutenantUnreachable(f"{where}: more than {REDIRECTS} redirects")


def _normal(url: str) -> str:
    """`url` compared as a place: scheme and host in lower case, no trailing slash."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))
