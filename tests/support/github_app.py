"""The settings of a worker or gateway whose GitHub App the emulator serves."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from shared.devstack.emulator.server import GitHubEmulator
from shared.settings import Settings


def app_settings(data_dir: Path, emulator: GitHubEmulator, app_id: int, app_key: str) -> Settings:
    """Settings that reach `emulator` as the App `app_id` with its private key `app_key`."""
    return Settings(
        data_dir=data_dir,
        github_api_url=emulator.url,
        github_app_id=str(app_id),
        github_private_key=SecretStr(app_key),
    )
