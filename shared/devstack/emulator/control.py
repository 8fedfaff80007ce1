"""The emulator's control endpoints under `/_emulator/…`, for other processes (`rollwright dev`,
the demo): read the state back, seed repositories, pull requests, collaborators and team
members, send pushes and webhooks, click check-run buttons and get OAuth codes. No
authentication: the emulator binds to loopback.

They run outside the store's lock: they may deliver webhooks, and the receiver may call back
into the emulator, so the operations they call take the lock themselves, never across a
delivery."""

from __future__ import annotations

import copy
import dataclasses
import urllib.parse
from pathlib import Path
from typing import Any

from shared.devstack.emulator.access import Access
from shared.devstack.emulator.apps import Installations
from shared.devstack.emulator.model import (
    ApiError,
    Redirect,
    Request,
    Route,
    WebhookDelivery,
    int_param,
    make_route,
)
from shared.devstack.emulator.oauth import OAuthFlow
from shared.devstack.emulator.pulls import Pulls
from shared.devstack.emulator.state import Store
from shared.devstack.emulator.webhooks import Webhooks


class Control:
    def __init__(
        self,
        store: Store,
        *,
        installations: Installations,
        pulls: Pulls,
        access: Access,
        webhooks: Webhooks,
        oauth: OAuthFlow,
    ) -> None:
        self._store = store
        self._installations = installations
        self._pulls = pulls
        self._access = access
        self._webhooks = webhooks
        self._oauth = oauth

    def routes(self) -> list[Route]:
        r = make_route
        repo = "/_emulator/repos/{owner}/{repo}"
        membership = "/_emulator/orgs/{org}/teams/{team_slug}/memberships/{username}"
        return [
            r("GET", "/_emulator/state", self._ctl_state, "none", False),
            r("POST", "/_emulator/repos", self._ctl_seed, "none", False),
            r("PUT", f"{repo}/pulls/{{number}}", self._ctl_pull, "none", False),
            r("POST", f"{repo}/push", self._ctl_push, "none", False),
            r("PUT", f"{repo}/collaborators/{{username}}", self._ctl_permission, "none", False),
            r("PUT", membership, self._ctl_membership, "none", False),
            r("POST", "/_emulator/check-runs/{check_run_id}/click", self._ctl_click, "none", False),
            r("POST", "/_emulator/webhooks", self._ctl_webhook, "none", False),
            r("POST", "/_emulator/oauth/codes", self._ctl_oauth_code, "none", False),
        ]

    def _ctl_state(self, req: Request) -> tuple[int, Any]:
        with self._store.lock:
            return 200, copy.deepcopy(self._state_json(req.base))

    def _state_json(self, base: str) -> dict[str, Any]:
        return {
            "repositories": sorted(r.full_name for r in self._store.repos.values()),
            "check_runs": [
                {
                    "id": run.id,
                    "repository": f"{run.owner}/{run.repo}",
                    "html_url": f"{base}/{run.owner}/{run.repo}/runs/{run.id}",
                    "state": run.state,
                    "history": [dataclasses.asdict(u) for u in run.history],
                }
                for run in self._store.check_runs.values()
            ],
            "comments": [dataclasses.asdict(c) for c in self._store.comments.values()],
            "deliveries": [
                {"event": d.event, "delivery_id": d.delivery_id, "status": d.status}
                for d in self._store.deliveries
            ],
        }

    def _ctl_seed(self, req: Request) -> tuple[int, Any]:
        body = _object(req.body)
        git_dir = body.get("git_dir")
        return 201, self._installations.seed_repository(
            str(body["owner"]),
            str(body["repo"]),
            int(body["installation_id"]),
            str(body.get("default_branch", "main")),
            git_dir=Path(git_dir) if git_dir else None,
            owner_type=str(body.get("owner_type", "Organization")),
        )

    def _ctl_pull(self, req: Request) -> tuple[int, Any]:
        body = _object(req.body)
        return 200, self._pulls.set_pull(
            req.params["owner"], req.params["repo"], int_param(req.params["number"]), **body
        )

    def _ctl_permission(self, req: Request) -> tuple[int, Any]:
        """`{"permission": "read"}`: what the permission API answers for that user."""
        permission = str(_object(req.body)["permission"])
        self._access.set_permission(
            req.params["owner"], req.params["repo"], req.params["username"], permission
        )
        return 200, {"permission": permission}

    def _ctl_membership(self, req: Request) -> tuple[int, Any]:
        """`{"state": "active"}` (default) or `"pending"`: the user's team membership."""
        state = str(_object(req.body or {}).get("state", "active"))
        self._access.add_team_member(
            req.params["org"], req.params["team_slug"], req.params["username"], state
        )
        return 200, {"state": state}

    def _ctl_push(self, req: Request) -> tuple[int, Any]:
        body = _object(req.body)
        delivery = self._webhooks.send_push(
            req.params["owner"],
            req.params["repo"],
            str(body["before"]),
            str(body["after"]),
            ref=body.get("ref"),
        )
        return 200, _delivery_json(delivery)

    def _ctl_click(self, req: Request) -> tuple[int, Any]:
        if "json" in req.content_type:
            fields = {k: str(v) for k, v in _object(req.body).items()}
        else:
            form = urllib.parse.parse_qs(req.raw.decode())
            fields = {k: v[0] for k, v in form.items()}
        run_id = int_param(req.params["check_run_id"])
        try:
            delivery = self._webhooks.click_action(
                run_id, fields["identifier"], fields.get("sender", "octocat")
            )
        except (KeyError, ValueError) as err:
            raise ApiError(422, str(err)) from err
        if "json" in req.content_type:
            return 200, _delivery_json(delivery)
        run = self._store.check_runs[run_id]
        return 303, Redirect(f"{req.base}/{run.owner}/{run.repo}/runs/{run_id}")

    def _ctl_webhook(self, req: Request) -> tuple[int, Any]:
        body = _object(req.body)
        delivery = self._webhooks.send_webhook(str(body["event"]), body["payload"])
        return 200, _delivery_json(delivery)

    def _ctl_oauth_code(self, req: Request) -> tuple[int, Any]:
        """`{"login": "octocat", "redirect_uri": "http://…/callback"}` → `{"code": …}`."""
        body = _object(req.body)
        return 201, {
            "code": self._oauth.issue_oauth_code(str(body["login"]), str(body["redirect_uri"]))
        }


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "expected a JSON object")
    return body


def _delivery_json(delivery: WebhookDelivery) -> dict[str, Any]:
    return {
        "event": delivery.event,
        "delivery_id": delivery.delivery_id,
        "status": delivery.status,
        "response": delivery.response,
    }
