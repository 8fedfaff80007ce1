"""Service settings, from environment variables prefixed `ROLLWRIGHT_` (docs/configuration.md).

With no configuration at all everything points at the embedded stack under `.rollwright/`:
a local Temporal dev server, SQLite, a filesystem blob store and — when no GitHub App is
configured — the local GitHub emulator.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
from functools import cached_property
from pathlib import Path
from urllib.parse import quote, urlencode

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ROLLWRIGHT_", extra="ignore", frozen=True)

    data_dir: Path = Field(default=Path(".rollwright"), description="Local state directory.")
    temporal_address: str = Field(default="localhost:7233")
    temporal_namespace: str = Field(default="default")
    task_queue: str = Field(default="rollwright", description="The shared task queue.")
    worker_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        description="Names this worker's own task queue (`<task_queue>/<worker_id>`).",
    )
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default sqlite:///<data_dir>/rollwright.db"
    )
    blob_url: str | None = Field(
        default=None, description="file:///path or s3://bucket/prefix; default <data_dir>/blobs"
    )
    s3_endpoint_url: str | None = Field(
        default=None,
        description="S3-compatible endpoint for s3:// blob URLs; unset: AWS (AWS_ENDPOINT_URL_S3).",
    )
    s3_region: str = Field(default="us-east-1", description="Region S3 requests are signed for.")
    s3_access_key_id: str | None = Field(
        default=None, description="S3 access key; unset: boto3's chain (AWS_ACCESS_KEY_ID, …)."
    )
    s3_secret_access_key: SecretStr | None = Field(
        default=None, description="S3 secret key; unset: boto3's chain (AWS_SECRET_ACCESS_KEY)."
    )
    git_cache_dir: Path | None = Field(
        default=None, description="Bare mirrors and checkouts; default <data_dir>/git"
    )
    github_api_url: str = Field(default="https://api.github.com")
    github_app_id: str | None = None
    github_private_key: SecretStr | None = None
    github_private_key_file: Path | None = None
    webhook_secret: SecretStr | None = None
    api_token: SecretStr | None = Field(
        default=None, description="Bearer token for POST /api/deploy (manual deploys)."
    )
    public_url: str = Field(default="http://localhost:8000", description="Gateway base URL.")
    github_oauth_client_id: str | None = Field(
        default=None,
        description="The GitHub App's client id: people sign in to the pages with GitHub "
        "(docs/governance.md). Unset: only the bearer token reads them.",
    )
    github_oauth_client_secret: SecretStr | None = Field(
        default=None, description="The GitHub App's client secret (with the client id)."
    )
    session_secret: SecretStr | None = Field(
        default=None,
        description="Key that signs the pages' session cookies; every gateway behind one "
        "address needs the same. Default: derived from the OAuth client secret.",
    )
    session_hours: float = Field(
        default=8.0, gt=0, le=24 * 14, description="How long a page sign-in lasts."
    )
    permission_cache_seconds: float = Field(
        default=60.0,
        ge=0,
        description="How long the gateway trusts GitHub's answer to whether someone may read a "
        "repository (a revoked reader keeps reading for at most this long).",
    )
    open_pages: bool = Field(
        default=False,
        description="Serve the pages and their JSON to anyone who can reach the gateway, "
        "without signing in: only behind a network where everyone may read every fleet.",
    )
    metrics_token: SecretStr | None = Field(
        default=None, description="Bearer token /metrics asks for; unset: /metrics is open."
    )
    worker_metrics_address: str | None = Field(
        default=None,
        description="host:port where a worker serves its Prometheus metrics (`/metrics`, "
        "with ROLLWRIGHT_METRICS_TOKEN when set); unset: not served.",
    )
    temporal_metrics_address: str | None = Field(
        default=None,
        description="host:port where a worker's Temporal SDK serves its own Prometheus "
        "metrics (task slots, schedule-to-start latency, workflow task failures, and the "
        "workflows' `rollwright_*` counters); unset: not served.",
    )
    deploy_admin_team: str | None = Field(
        default=None,
        description="`org/team` whose members may deploy several roots at once through "
        "POST /api/deploy and `rollwright deploy` (unset: nobody may).",
    )
    notify_slack_url: SecretStr | None = Field(
        default=None,
        description="A Slack-compatible incoming webhook: one message per deployment event and "
        "reminder (docs/notifications.md).",
    )
    notify_webhook_url: str | None = Field(
        default=None,
        description="A generic HTTP endpoint: each event as JSON, signed with "
        "ROLLWRIGHT_NOTIFY_WEBHOOK_SECRET (`X-Rollwright-Signature-256`).",
    )
    notify_webhook_secret: SecretStr | None = Field(
        default=None, description="HMAC key of the generic webhook's signature."
    )
    remind_review_after: str | None = Field(
        default="4h",
        description="Remind (again each such span) while a deployment waits for review this "
        "long; empty: never.",
    )
    remind_lock_after: str | None = Field(
        default="24h",
        description="Remind (again each such span) while a root's queue stays locked this long; "
        "empty: never.",
    )
    remind_hours: str | None = Field(
        default=None,
        description="When reminders may be sent: a cron expression or RRULE opening a window "
        "(`0 9 * * 1-5`: weekdays from 09:00) of ROLLWRIGHT_REMIND_HOURS_DURATION, read in "
        "ROLLWRIGHT_REMIND_TIMEZONE; unset: at any hour.",
    )
    remind_hours_duration: str = Field(default="8h")
    remind_timezone: str = Field(default="UTC")
    read_token: SecretStr | None = Field(
        default=None,
        description="Bearer token that reads the pages and their JSON, and nothing else "
        "(dashboards, scripts); ROLLWRIGHT_API_TOKEN reads them too.",
    )
    temporal_ui_url: str = Field(default="http://localhost:8233")
    dev_mode: bool = Field(
        default=False,
        description="Job pages offer Approve / Reject / Unlock through the GitHub emulator "
        "(set by the embedded stack; never in production).",
    )
    log_level: str = Field(default="info")
    redaction_key: SecretStr | None = Field(
        default=None,
        description="Key of the secret markers (`REDACTED:hmac:…`) in check runs, comments and "
        "pages; each repository gets its own key derived from it. Default: derived from the "
        "GitHub App's private key. Changing it rotates every marker (docs/secrets.md).",
    )
    webhook_max_bytes: int = Field(
        default=25 * 1024 * 1024,
        gt=0,
        description="Largest webhook body the gateway reads (GitHub caps payloads at 25 MB); "
        "a longer one is refused with 413 before it is read whole.",
    )

    @field_validator(
        "webhook_secret",
        "api_token",
        "read_token",
        "metrics_token",
        "notify_slack_url",
        "notify_webhook_secret",
        "session_secret",
        "github_oauth_client_secret",
        "github_private_key",
        "redaction_key",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """`ROLLWRIGHT_API_TOKEN=` (an empty line in an env file) is no secret at all, never
        the empty string a request without credentials would match."""
        if (
            isinstance(value, str | SecretStr)
            and not str(value.get_secret_value() if isinstance(value, SecretStr) else value).strip()
        ):
            return None
        return value

    @cached_property
    def database(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'rollwright.db').resolve()}"

    @cached_property
    def blobs(self) -> str:
        return self.blob_url or f"file://{(self.data_dir / 'blobs').resolve()}"

    @cached_property
    def git_dir(self) -> Path:
        return self.git_cache_dir or self.data_dir / "git"

    @property
    def worker_task_queue(self) -> str:
        return f"{self.task_queue}/{self.worker_id}"

    def private_key_pem(self) -> str | None:
        if self.github_private_key is not None:
            return self.github_private_key.get_secret_value()
        if self.github_private_key_file is not None:
            return self.github_private_key_file.read_text()
        return None

    def marker_key(self, repo: str) -> bytes | None:
        """The secret-marker key of one repository (`owner/name`): HMAC of its name with the
        service's key, so markers of two fleets never match. None when the service has no
        key at all (no redaction key and no App key: markers are then unkeyed)."""
        base = (
            self.redaction_key.get_secret_value()
            if self.redaction_key is not None
            else self.private_key_pem()
        )
        if not base:
            return None
        root = hashlib.sha256(b"rollwright redaction key\0" + base.encode()).digest()
        return hmac.new(root, repo.encode(), hashlib.sha256).digest()

    @property
    def github_configured(self) -> bool:
        return bool(self.github_app_id) and (
            self.github_private_key is not None or self.github_private_key_file is not None
        )

    @property
    def signin_configured(self) -> bool:
        secret = self.github_oauth_client_secret
        return bool(self.github_oauth_client_id) and bool(secret and secret.get_secret_value())

    def session_key(self) -> bytes | None:
        """The key of the session cookies: ROLLWRIGHT_SESSION_SECRET, or one derived from the
        OAuth client secret (so rotating that secret signs everyone out); an empty value
        counts as unset, never as a key."""
        for base in (self.session_secret, self.github_oauth_client_secret):
            if base is not None and base.get_secret_value():
                secret = base.get_secret_value().encode()
                return hashlib.sha256(b"rollwright session key\0" + secret).digest()
        return None

    def root_url(self, repo: str, root: str) -> str:
        return f"{self.public_url.rstrip('/')}/roots/{quote(root)}?{urlencode({'repo': repo})}"

    def job_url(self, deployment_id: str) -> str:
        return f"{self.public_url.rstrip('/')}/jobs/{deployment_id}"

    def revision_url(self, repo: str, revision: str) -> str:
        """A merged revision's page: its roots' deployments (the `rollwright` check run)."""
        return f"{self.public_url.rstrip('/')}/revisions/{repo}/{revision}"

    def rollout_url(self, repo: str, patch_id: str) -> str:
        """A patch's rollout page (the rollout check run's Details link)."""
        return f"{self.public_url.rstrip('/')}/rollouts/{repo}/{quote(patch_id, safe='')}"

    def preview_url(self, repo: str, pr: int, head: str) -> str:
        """One pull request head's preview report."""
        return f"{self.public_url.rstrip('/')}/previews/{repo}/{pr}/{head}"
