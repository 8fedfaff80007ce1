"""How the worker reaches chart repositories: mirrors and credentials, from its environment.

Nothing here comes from the fleet repository (a fleet names repositories by their public
URLs; where they are mirrored and which credentials open them is the installation's business):

    ROLLWRIGHT_CHART_MIRRORS      JSON object, repository URL prefix → mirror URL prefix:
                                  {"https://argoproj.github.io/argo-helm":
                                   "https://nexus.internal/repository/argo",
                                   "oci://ghcr.io/acme": "oci://registry.internal/acme"}
    ROLLWRIGHT_CHART_CREDENTIALS  JSON object, URL prefix (after mirroring) → credentials:
                                  {"https://nexus.internal": {"username": "ci",
                                   "password": "..."}}

The longest matching prefix wins; a prefix matches whole path segments only. Proxies
(`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`) and a custom CA bundle (`SSL_CERT_FILE`,
`SSL_CERT_DIR`) are honoured by Helm's Go HTTP client as they are by every Go program. Charts
are cached under the canonical URL, so switching mirrors keeps the cache.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

MIRRORS_ENV = "ROLLWRIGHT_CHART_MIRRORS"
CREDENTIALS_ENV = "ROLLWRIGHT_CHART_CREDENTIALS"


class AccessSettingsError(RuntimeError):
    """The worker's chart settings are malformed: an installation problem, not the fleet's."""


@dataclass(frozen=True)
class Route:
    """Where a repository URL is fetched from, and with which credentials."""

    url: str
    username: str | None = None
    password: str | None = None

    def __repr__(self) -> str:  # the password never shows in logs or tracebacks
        return f"Route(url={self.url!r}, username={self.username!r})"


def route(url: str) -> Route:
    """The mirror and credentials for a repository URL (`https://…` or `oci://…`)."""
    mirrors = _mapping(MIRRORS_ENV)
    target = url
    prefix = _longest_prefix(url, mirrors)
    if prefix is not None:
        mirror = mirrors[prefix]
        if not isinstance(mirror, str):
            raise AccessSettingsError(f"{MIRRORS_ENV}: the mirror of {prefix!r} must be a URL")
        target = mirror.rstrip("/") + url[len(prefix.rstrip("/")) :]
    credentials = _mapping(CREDENTIALS_ENV)
    found = _longest_prefix(target, credentials)
    if found is None:
        return Route(target)
    entry = credentials[found]
    if not isinstance(entry, dict) or not {"username", "password"} <= set(entry):
        raise AccessSettingsError(
            f"{CREDENTIALS_ENV}: the entry for {found!r} needs username and password"
        )
    return Route(target, str(entry["username"]), str(entry["password"]))


def _mapping(name: str) -> dict[str, Any]:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        raise AccessSettingsError(f"{name} is not valid JSON") from None
    if not isinstance(data, dict):
        raise AccessSettingsError(f"{name} must be a JSON object (URL prefix → value)")
    return data


def _longest_prefix(url: str, table: dict[str, Any]) -> str | None:
    best: str | None = None
    for prefix in table:
        bare = prefix.rstrip("/")
        if (url == bare or url.startswith(bare + "/")) and (best is None or len(bare) > len(best)):
            best = prefix
    return best
