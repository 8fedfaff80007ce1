"""What the GitHub emulator keeps that more than one of its API families reads: the seeded
repositories, check runs, issue comments and webhook deliveries, the ids it hands out, and the
one lock all of its state is read and changed under."""

from __future__ import annotations

import threading

from shared.devstack.emulator.model import CheckRunRecord, CommentRecord, Repo, WebhookDelivery


class Store:
    def __init__(self) -> None:
        # re-entrant: an operation taking the lock may call another that takes it too
        self.lock = threading.RLock()
        self.repos: dict[str, Repo] = {}  # lower-case full name → repository
        self.check_runs: dict[int, CheckRunRecord] = {}
        self.comments: dict[int, CommentRecord] = {}
        self.deliveries: list[WebhookDelivery] = []
        self._ids: dict[str, int] = {}

    def next_id(self, kind: str, start: int = 1) -> int:
        with self.lock:
            value = self._ids.get(kind, start - 1) + 1
            self._ids[kind] = value
            return value

    def find_repo(self, owner: str, repo: str) -> Repo | None:
        return self.repos.get(f"{owner}/{repo}".lower())

    def repo(self, owner: str, repo: str) -> Repo:
        record = self.find_repo(owner, repo)
        if record is None:
            raise KeyError(f"repository {owner}/{repo} is not seeded in the GitHub emulator")
        return record
