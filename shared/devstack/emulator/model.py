"""The GitHub emulator's records and request plumbing: the App it plays (`App`), what it
keeps (check runs, comments, requests, webhook deliveries, repositories, injected faults, OAuth
codes) and how a handler sees a request (`Request`, `Route`, `ApiError`, `int_param`,
`repo_record`) and
answers (`Page`, `Html`, `Redirect`, `FormEncoded`). Shared by all of its API families."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

DOCS = "https://docs.github.com/rest"


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, number: int) -> str:
    """GitHub's legacy global ids: base64 of `<len>:<Type><id>`."""
    raw = f"{len(kind):02d}:{kind}{number}"
    return base64.b64encode(raw.encode()).decode()


@dataclass(frozen=True)
class App:
    """The GitHub App the emulator plays."""

    id: int
    slug: str
    client_id: str  # of its OAuth web flow

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]"


@dataclass(frozen=True)
class CheckRunUpdate:
    """One accepted create (POST) or update (PATCH), and the check run right after it."""

    method: str
    request: dict[str, Any]
    state: dict[str, Any]
    at: str


@dataclass
class CheckRunRecord:
    id: int
    owner: str
    repo: str
    state: dict[str, Any]
    history: list[CheckRunUpdate] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.state["name"])

    @property
    def status(self) -> str:
        return str(self.state["status"])

    @property
    def conclusion(self) -> str | None:
        value = self.state.get("conclusion")
        return None if value is None else str(value)

    @property
    def output(self) -> dict[str, Any]:
        return dict(self.state["output"])

    @property
    def actions(self) -> list[dict[str, str]]:
        return list(self.state["actions"])


@dataclass
class CommentRecord:
    id: int
    owner: str
    repo: str
    issue_number: int
    body: str
    user_login: str
    created_at: str
    updated_at: str
    bodies: list[str] = field(default_factory=list)  # every body it ever had, oldest first


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    status: int


@dataclass(frozen=True)
class WebhookDelivery:
    event: str
    delivery_id: str
    url: str
    body: bytes
    headers: dict[str, str]
    status: int
    response: str


@dataclass
class Repo:
    owner: str
    name: str
    id: int
    installation_id: int
    default_branch: str
    owner_type: str
    owner_id: int
    git_dir: Path | None
    created_at: str
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class OAuthCode:
    """A one-time code of the OAuth web flow, bound to what the authorization was for."""

    client_id: str
    redirect_uri: str
    login: str
    expires: float  # time.time() after which it is refused


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    body: dict[str, Any]
    headers: dict[str, str]
    times: int


@dataclass
class Hook:
    method: str
    path: re.Pattern[str]
    action: Callable[[], None]
    times: int


class ApiError(Exception):
    """Answer the current request with `status` and a GitHub-shaped error body."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body: dict[str, Any] = {
            "message": message,
            **extra,
            "documentation_url": extra.get("documentation_url", DOCS),
            "status": str(status),
        }


def int_param(value: str) -> int:
    """A numeric path parameter; GitHub answers 404 for one that is not a number."""
    try:
        return int(value)
    except ValueError as err:
        raise ApiError(404, "Not Found") from err


class _OfRepository(Protocol):
    owner: str
    repo: str


_Owned = TypeVar("_Owned", bound=_OfRepository)


def repo_record(records: dict[int, _Owned], req: Request, param: str) -> _Owned:
    """The record whose id is the path parameter `param`, if it is of the request's repository:
    GitHub answers 404 alike for a missing record and for another repository's."""
    assert req.repo is not None
    record = records.get(int_param(req.params[param]))
    if record is None or (record.owner, record.repo) != (req.repo.owner, req.repo.name):
        raise ApiError(404, "Not Found")
    return record


Handler = Callable[["Request"], tuple[int, Any]]


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, list[str]]
    body: Any
    raw: bytes
    content_type: str
    base: str  # scheme://host:port the client used, for URLs in responses
    repo: Repo | None = None
    user: str | None = None  # the login a user access token (route auth "user-token") is for
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler
    # "jwt", "token" (a repository's installation), "org-token" (an org's), "user-token" (a
    # user access token of the OAuth web flow) or "none"
    auth: str
    schema: str | None


def make_route(method: str, template: str, handler: Handler, auth: str, schema: bool) -> Route:
    regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template)
    key = f"{method} {template}" if schema else None
    return Route(method, re.compile(f"^{regex}$"), handler, auth, key)


@dataclass(frozen=True)
class Page:
    """A paginated list: the handler slices it with `page`/`per_page` and adds a Link header."""

    items: list[dict[str, Any]]
    request: Request


@dataclass(frozen=True)
class Html:
    text: str


@dataclass(frozen=True)
class Redirect:
    location: str


@dataclass(frozen=True)
class FormEncoded:
    """An `application/x-www-form-urlencoded` body (GitHub's default answer of
    `POST /login/oauth/access_token`)."""

    fields: dict[str, str]
