"""Where GitHub's web pages are, given where its REST API is."""

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
