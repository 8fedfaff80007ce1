"""How the GitHub emulator's answers go on the wire: JSON, HTML pages, redirects and forms,
with GitHub's request id header, and lists paginated (`page`, `per_page`) with a `Link` header."""

from __future__ import annotations

import json
import urllib.parse
import uuid
from typing import Any, Protocol

from shared.devstack.background import FakeRequestHandler
from shared.devstack.emulator.model import FormEncoded, Html, Page, Redirect


class Dispatcher(Protocol):
    """What the handler needs of the emulator serving it."""

    @property
    def url(self) -> str: ...

    def dispatch(
        self, method: str, target: str, headers: dict[str, str], raw: bytes, base: str
    ) -> tuple[int, Any, dict[str, str]]: ...


class GitHubHandler(FakeRequestHandler):
    """Serves an emulator's answers over HTTP the way GitHub does."""

    owner: Dispatcher
    server_version = "GitHub.com"

    def _serve(self) -> None:
        headers, raw = self.read_request()
        base = f"http://{headers.get('host') or self.owner.url.split('://', 1)[1]}"
        status, body, extra = self.owner.dispatch(self.command, self.path, headers, raw, base)
        out_headers = {"X-GitHub-Request-Id": uuid.uuid4().hex[:16].upper(), **extra}
        if isinstance(body, Page):
            body, link = _paginate(body, base, self.path)
            if link:
                out_headers["Link"] = link
        if isinstance(body, Html):
            data, content_type = body.text.encode(), "text/html; charset=utf-8"
        elif isinstance(body, Redirect):
            data, content_type = b"", "text/plain"
            out_headers["Location"] = body.location
        elif isinstance(body, FormEncoded):
            data = urllib.parse.urlencode(body.fields).encode()
            content_type = "application/x-www-form-urlencoded; charset=utf-8"
        else:
            data, content_type = json.dumps(body).encode(), "application/json; charset=utf-8"
        self.write_answer(status, content_type, data, out_headers)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve


def _paginate(page: Page, base: str, target: str) -> tuple[list[dict[str, Any]], str]:
    query = page.request.query
    per_page = max(1, min(100, int(query.get("per_page", ["30"])[0])))
    number = max(1, int(query.get("page", ["1"])[0]))
    last = max(1, -(-len(page.items) // per_page))
    chunk = page.items[(number - 1) * per_page : number * per_page]
    path = urllib.parse.urlsplit(target).path

    def link(n: int, rel: str) -> str:
        return f'<{base}{path}?per_page={per_page}&page={n}>; rel="{rel}"'

    links = []
    if number < last:
        links += [link(number + 1, "next"), link(last, "last")]
    if number > 1:
        links += [link(1, "first"), link(number - 1, "prev")]
    return chunk, ", ".join(links)
