"""The GitHub App and its installations in the emulator: installing the App on a repository
(seeding it), `GET /app`, installation tokens for an App JWT, a repository's installation and
the repository itself."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.devstack.emulator.auth import Credentials
from shared.devstack.emulator.model import (
    ApiError,
    App,
    Repo,
    Request,
    Route,
    int_param,
    make_route,
    utc_now,
)
from shared.devstack.emulator.shapes import APP_EVENTS, APP_PERMISSIONS, Shapes
from shared.devstack.emulator.state import Store


class Installations:
    """The App's endpoints; the handlers run under the store's lock."""

    def __init__(
        self,
        app: App,
        store: Store,
        shapes: Shapes,
        credentials: Credentials,
        base_url: Callable[[], str],
    ) -> None:
        self._app = app
        self._store = store
        self._shapes = shapes
        self._credentials = credentials
        self._base_url = base_url  # the emulator's URL, for answers given outside a request

    def routes(self) -> list[Route]:
        r = make_route
        tokens = "/app/installations/{installation_id}/access_tokens"
        return [
            r("GET", "/app", self._get_app, "jwt", False),
            r("POST", tokens, self._create_token, "jwt", True),
            r("GET", "/repos/{owner}/{repo}/installation", self._get_installation, "jwt", False),
            r("GET", "/repos/{owner}/{repo}", self._get_repository, "repo-reader", False),
        ]

    def seed_repository(
        self,
        owner: str,
        repo: str,
        installation_id: int,
        default_branch: str = "main",
        *,
        git_dir: Path | None = None,
        owner_type: str = "Organization",
    ) -> dict[str, Any]:
        """Install the App on `owner/repo`. `git_dir` backs compare and push webhooks."""
        with self._store.lock:
            record = Repo(
                owner=owner,
                name=repo,
                id=self._store.next_id("repo", start=100),
                installation_id=installation_id,
                default_branch=default_branch,
                owner_type=owner_type,
                owner_id=self._store.next_id("account", start=1000),
                git_dir=git_dir,
                created_at=utc_now(),
            )
            self._store.repos[record.full_name.lower()] = record
            return self._shapes.repository(record, self._base_url())

    def _get_app(self, req: Request) -> tuple[int, Any]:
        return 200, self._shapes.app(req.base)

    def _create_token(self, req: Request) -> tuple[int, Any]:
        installation_id = int_param(req.params["installation_id"])
        repos = [r for r in self._store.repos.values() if r.installation_id == installation_id]
        if not repos:
            raise ApiError(404, "Not Found")
        token = self._credentials.issue_token(installation_id)
        expires = datetime.fromtimestamp(self._credentials.expiry(token), UTC)
        return 201, {
            "token": token,
            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "permissions": dict(APP_PERMISSIONS),
            "repository_selection": "selected",
            "repositories": [self._shapes.repository(r, req.base) for r in repos],
        }

    def _get_installation(self, req: Request) -> tuple[int, Any]:
        record = self._store.find_repo(req.params["owner"], req.params["repo"])
        if record is None:
            raise ApiError(404, "Not Found")
        base = req.base
        iid = record.installation_id
        return 200, {
            "id": iid,
            "account": self._shapes.owner(record, base),
            "repository_selection": "selected",
            "access_tokens_url": f"{base}/app/installations/{iid}/access_tokens",
            "repositories_url": f"{base}/installation/repositories",
            "html_url": f"{base}/organizations/{record.owner}/settings/installations/{iid}",
            "app_id": self._app.id,
            "app_slug": self._app.slug,
            "target_id": record.owner_id,
            "target_type": record.owner_type,
            "permissions": dict(APP_PERMISSIONS),
            "events": list(APP_EVENTS),
            "created_at": record.created_at,
            "updated_at": record.created_at,
            "single_file_name": None,
            "has_multiple_single_files": False,
            "single_file_paths": [],
            "suspended_at": None,
            "suspended_by": None,
        }

    def _get_repository(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        return 200, self._shapes.repository(req.repo, req.base)
