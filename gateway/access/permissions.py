"""Whether GitHub says a user can read a repository, asked through the App, cached briefly.

The App's installation asks the collaborator-permission API
(`GET /repos/{owner}/{repo}/collaborators/{user}/permission`): `read`, `write` or `admin` read;
`none` does not, and neither does a repository the App is not installed on (GitHub answers
404). Answers are kept for `ttl_seconds` (ROLLWRIGHT_PERMISSION_CACHE_SECONDS, a minute by
default), so revoking someone's access takes effect within a minute, and a page that polls
its log every second asks GitHub once a minute, not every second. When GitHub cannot be
asked, nothing is cached and the page says so.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from fastapi.concurrency import run_in_threadpool

from shared.github.app import GitHubApp, GitHubRequestError, GitHubRetryableError

log = logging.getLogger("rollwright.gateway.access")

TTL_SECONDS = 60.0
MAX_ENTRIES = 10_000
# GitHub calls at once: a page of many repositories, or many people at once, queue here
# rather than take every thread of the gateway (and the App's rate limit) with them.
CONCURRENT_ASKS = 8
READS = frozenset({"read", "write", "admin"})
# GitHub's owner and repository names (an owner has no dots; a repository is never . or ..)
# (no look-ahead: FastAPI's validator is Rust's regex).
REPO_PATTERN = (
    r"^[A-Za-z0-9-]{1,39}/(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}"
    r"|\.[A-Za-z0-9_-][A-Za-z0-9_.-]{0,98}|\.\.[A-Za-z0-9_.-]{1,98})$"
)
REPO = re.compile(REPO_PATTERN)
# The owner or name of a repository and a commit as path parameters of the pages
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
SHA_PATTERN = r"^[0-9a-f]{40}([0-9a-f]{24})?$"


class PermissionUnknown(Exception):
    """GitHub did not answer whether someone may read a repository (nothing is shown)."""


class ReadPermissions:
    def __init__(
        self,
        app: Callable[[], GitHubApp],
        *,
        ttl_seconds: float = TTL_SECONDS,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self._app = app
        self._ttl = ttl_seconds
        self._max = max_entries
        self._lock = threading.Lock()
        self._answers: OrderedDict[tuple[str, str], tuple[bool, float]] = OrderedDict()
        self._asking = asyncio.Semaphore(CONCURRENT_ASKS)
        self.asked = 0  # GitHub calls made: what the cache saves, for tests and metrics

    async def can_read(self, login: str, repo: str) -> bool:
        if not REPO.fullmatch(repo):
            return False  # no repository GitHub could have: nothing to ask
        key = (login.lower(), repo.lower())
        now = time.monotonic()
        with self._lock:
            cached = self._answers.get(key)
            if cached is not None and cached[1] > now:
                return cached[0]
        async with self._asking:
            allowed = await run_in_threadpool(self._ask, login, repo)
        with self._lock:
            self._answers[key] = (allowed, time.monotonic() + self._ttl)
            self._answers.move_to_end(key)
            while len(self._answers) > self._max:
                self._answers.popitem(last=False)
        return allowed

    def _ask(self, login: str, repo: str) -> bool:
        with self._lock:
            self.asked += 1
        try:
            return self._app().collaborator_permission(repo, login) in READS
        except GitHubRetryableError as err:
            raise PermissionUnknown(
                f"GitHub did not answer whether {login} may read {repo}: {err}"
            ) from err
        except GitHubRequestError as err:
            # 404: the App is not installed there, or no such user. Anything else (a 401 for
            # a wrong App key, a 403 for a missing permission) denies too, but is worth a look.
            if err.status != 404:
                log.warning(
                    "read permission refused",
                    extra={"login": login, "repo": repo, "error": str(err)},
                )
            return False
