"""Issue comments in the GitHub emulator (on pull requests, the issues it knows): create, edit,
get and list them (paginated), each with every body it ever had."""

from __future__ import annotations

import copy
from typing import Any

from shared.devstack.emulator.model import (
    ApiError,
    App,
    CommentRecord,
    Page,
    Repo,
    Request,
    Route,
    int_param,
    make_route,
    repo_record,
    utc_now,
)
from shared.devstack.emulator.shapes import Shapes
from shared.devstack.emulator.state import Store


class IssueComments:
    """The issue comments API; its handlers run under the store's lock."""

    def __init__(self, app: App, store: Store, shapes: Shapes) -> None:
        self._app = app
        self._store = store
        self._shapes = shapes

    def routes(self) -> list[Route]:
        r = make_route
        on_issue = "/repos/{owner}/{repo}/issues/{issue_number}/comments"
        comment = "/repos/{owner}/{repo}/issues/comments/{comment_id}"
        return [
            r("POST", on_issue, self._post_comment, "token", True),
            r("GET", on_issue, self._list_comments, "token", False),
            r("PATCH", comment, self._edit_comment, "token", True),
            r("GET", comment, self._get_comment, "token", False),
        ]

    def comments(self, owner: str, repo: str, issue_number: int) -> list[CommentRecord]:
        with self._store.lock:
            key = f"{owner}/{repo}".lower()
            return [
                copy.deepcopy(c)
                for c in self._store.comments.values()
                if f"{c.owner}/{c.repo}".lower() == key and c.issue_number == issue_number
            ]

    def add_comment(
        self, owner: str, repo: str, issue_number: int, body: str, *, user_login: str
    ) -> int:
        """A comment written by someone else (a human), e.g. to test sticky-comment lookup."""
        with self._store.lock:
            return self._create_comment(
                self._store.repo(owner, repo), issue_number, body, user_login
            )

    def _post_comment(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        number = int_param(req.params["issue_number"])
        comment_id = self._create_comment(req.repo, number, req.body["body"], self._app.bot_login)
        return 201, self._shapes.comment(self._store.comments[comment_id], req.base)

    def _create_comment(self, repo: Repo, number: int, body: str, user_login: str) -> int:
        if number not in repo.pulls:
            raise ApiError(404, "Not Found")
        now = utc_now()
        comment_id = self._store.next_id("comment", start=900)
        self._store.comments[comment_id] = CommentRecord(
            comment_id, repo.owner, repo.name, number, body, user_login, now, now, [body]
        )
        return comment_id

    def _list_comments(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        number = int_param(req.params["issue_number"])
        if number not in req.repo.pulls:
            raise ApiError(404, "Not Found")
        items = [
            self._shapes.comment(c, req.base)
            for c in self._store.comments.values()
            if (c.owner, c.repo, c.issue_number) == (req.repo.owner, req.repo.name, number)
        ]
        return 200, Page(items, req)

    def _edit_comment(self, req: Request) -> tuple[int, Any]:
        comment = repo_record(self._store.comments, req, "comment_id")
        comment.body = req.body["body"]
        comment.bodies.append(comment.body)
        comment.updated_at = utc_now()
        return 200, self._shapes.comment(comment, req.base)

    def _get_comment(self, req: Request) -> tuple[int, Any]:
        comment = repo_record(self._store.comments, req, "comment_id")
        return 200, self._shapes.comment(comment, req.base)
