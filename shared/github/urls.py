"""Where GitHub's web pages and repositories are, given where its REST API is."""

from __future__ import annotations


def web_base(api_url: str) -> str:
    """github.com for api.github.com, `https://HOST` for GHES (`https://HOST/api/v3`), and the
    emulator's own URL (it serves the API at its root)."""
    base = api_url.rstrip("/")
    if base == "https://api.github.com":
        return "https://github.com"
    if base.endswith("/api/v3"):
        return base[: -len("/api/v3")]
    return base


def clone_url(api_url: str, owner: str, name: str) -> str:
    """The one URL rollwright clones `owner/name` from: the repository on the configured GitHub.

    Never a URL a request or a payload carries: a caller who could choose it could make the
    worker render, and publish, another repository's content, or send the installation token
    to another host."""
    return f"{web_base(api_url)}/{owner}/{name}.git"
