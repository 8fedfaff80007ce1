"""The gateway's settings for tests that sign people in with GitHub: the emulator's OAuth
client and the App (its key `pem`) that asks the emulator who may read what."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr

from shared.devstack.emulator.server import GitHubEmulator
from shared.settings import Settings

PUBLIC = "http://testserver"  # what a TestClient sends: the pages' links stay on it


def signin_settings(tmp: Path, emulator: GitHubEmulator, pem: str, **extra: Any) -> Settings:
    """Settings with sign-in through `emulator`, data under `tmp/state` (made here) and the
    public URL of a TestClient; `extra` adds or overrides settings."""
    values: dict[str, Any] = {
        "data_dir": tmp / "state",
        "public_url": PUBLIC,
        "github_api_url": emulator.url,
        "github_app_id": str(emulator.app_id),
        "github_private_key": SecretStr(pem),
        "github_oauth_client_id": emulator.oauth_client_id,
        "github_oauth_client_secret": SecretStr(emulator.oauth_client_secret),
        **extra,
    }
    settings = Settings(**values)
    settings.data_dir.mkdir(parents=True)
    return settings
