"""Who may do what in the GitHub emulator: collaborators' permissions on a repository and team
memberships in an organization, as GitHub's permission and membership APIs answer them."""

from __future__ import annotations

from typing import Any

from shared.devstack.emulator.model import ApiError, Repo, Request, Route, make_route
from shared.devstack.emulator.shapes import stable_id, user_json
from shared.devstack.emulator.state import Store

# Collaborator role → the `permission` GitHub's permission API answers with.
_ROLE_PERMISSION = {
    "admin": "admin",
    "maintain": "write",
    "write": "write",
    "triage": "read",
    "read": "read",
    "none": "none",
}


class Access:
    """Collaborator permissions and team memberships; the handlers run under the store's lock."""

    def __init__(self, store: Store, default_permission: str) -> None:
        # What the permission API says of anyone not made a collaborator: GitHub's `none`
        # for a private repository; the dev stack says `write`, so whoever one clicks as in
        # the emulator's pages counts unless told otherwise (docs/governance.md).
        if default_permission not in _ROLE_PERMISSION:
            raise ValueError(f"unknown collaborator permission {default_permission!r}")
        self._store = store
        self._default_permission = default_permission
        # (repo, login) → collaborator permission (admin, maintain, write, triage, read)
        self._permissions: dict[tuple[str, str], str] = {}
        # (org, team slug) → login → membership state (active, pending)
        self._teams: dict[tuple[str, str], dict[str, str]] = {}

    def routes(self) -> list[Route]:
        r = make_route
        permission = "/repos/{owner}/{repo}/collaborators/{username}/permission"
        membership = "/orgs/{org}/teams/{team_slug}/memberships/{username}"
        return [
            r("GET", permission, self._get_permission, "token", False),
            r("GET", membership, self._get_membership, "org-token", False),
        ]

    def set_permission(self, owner: str, repo: str, login: str, permission: str) -> None:
        """Make `login` a collaborator of `owner/repo` with `permission` (admin, maintain,
        write, triage or read); anyone else has none (a private repository)."""
        if permission not in _ROLE_PERMISSION:
            raise ValueError(f"unknown collaborator permission {permission!r}")
        with self._store.lock:
            record = self._store.repo(owner, repo)
            self._permissions[(record.full_name.lower(), login.lower())] = permission

    def add_team_member(self, org: str, team_slug: str, login: str, state: str = "active") -> None:
        """Put `login` in the team `org/team_slug` (state `pending`: invited, not yet in)."""
        with self._store.lock:
            self._teams.setdefault((org.lower(), team_slug.lower()), {})[login.lower()] = state

    def reads(self, repo: Repo, login: str) -> bool:
        """Whether `login` may read `repo` (any permission but none)."""
        with self._store.lock:
            role = self._permissions.get(
                (repo.full_name.lower(), login.lower()), self._default_permission
            )
        return _ROLE_PERMISSION[role] != "none"

    def _get_permission(self, req: Request) -> tuple[int, Any]:
        """GitHub's answer for a collaborator (or anyone: a private repository's outsiders
        have `none`); `permission` folds maintain into write and triage into read."""
        assert req.repo is not None
        login = req.params["username"]
        key = (req.repo.full_name.lower(), login.lower())
        role = self._permissions.get(key, self._default_permission)
        user = user_json(login, stable_id(login), "User", req.base)
        return 200, {"permission": _ROLE_PERMISSION[role], "role_name": role, "user": user}

    def _get_membership(self, req: Request) -> tuple[int, Any]:
        org, slug, login = (req.params[k] for k in ("org", "team_slug", "username"))
        state = self._teams.get((org.lower(), slug.lower()), {}).get(login.lower())
        if state is None:
            raise ApiError(404, "Not Found")
        url = f"{req.base}/organizations/{stable_id(org)}/team/{stable_id(slug)}"
        return 200, {"url": f"{url}/memberships/{login}", "role": "member", "state": state}
