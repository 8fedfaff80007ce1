"""The GitHub App that the settings describe, built the same way by the worker and the gateway."""

from __future__ import annotations

from urllib.parse import urlsplit

from shared.github.app import GitHubApp
from shared.settings import Settings

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class GitHubNotConfigured(Exception):
    """No App id or private key in the settings."""


def configured_app(settings: Settings) -> GitHubApp:
    """The App of ROLLWRIGHT_GITHUB_APP_ID and its private key, at ROLLWRIGHT_GITHUB_API_URL."""
    pem = settings.private_key_pem()
    if not settings.github_app_id or not pem:
        raise GitHubNotConfigured(
            "no GitHub App configured: set ROLLWRIGHT_GITHUB_APP_ID and "
            "ROLLWRIGHT_GITHUB_PRIVATE_KEY(_FILE) (docs/configuration.md)"
        )
    # PyGithub's throttles keep a busy installation under GitHub's secondary rate limits;
    # the local emulator has none, and waiting for it would only slow the tests and demo.
    local = urlsplit(settings.github_api_url).hostname in LOOPBACK
    return GitHubApp(
        settings.github_app_id,
        pem,
        settings.github_api_url,
        min_request_interval=0 if local else 0.25,
        min_write_interval=0 if local else 1.0,
    )
