"""The emulator's web pages, its stand-in for github.com: a check run with its output (rendered
as Markdown), history and working buttons (`/{owner}/{repo}/runs/{id}`), and a commit from the
seeded repository (`/{owner}/{repo}/commit/{sha}`)."""

from __future__ import annotations

import html
import re
from typing import Any

from shared.devstack.emulator.git import git, git_output
from shared.devstack.emulator.model import (
    ApiError,
    CheckRunRecord,
    Html,
    Request,
    Route,
    int_param,
    make_route,
)
from shared.devstack.emulator.state import Store
from shared.review.markdown_html import render_markdown


class Pages:
    def __init__(self, store: Store) -> None:
        self._store = store

    def routes(self) -> list[Route]:
        r = make_route
        return [
            r("GET", "/{owner}/{repo}/runs/{check_run_id}", self._html_check_run, "none", False),
            r("GET", "/{owner}/{repo}/commit/{sha}", self._html_commit, "none", False),
        ]

    def _html_commit(self, req: Request) -> tuple[int, Any]:
        """A commit's page (what `html_url`s and the job page's revision link open): message,
        author and the patch, from the seeded repository."""
        with self._store.lock:
            repo = self._store.find_repo(req.params["owner"], req.params["repo"])
        sha = req.params["sha"]
        if repo is None or repo.git_dir is None or not re.fullmatch(r"[0-9a-fA-F]{4,40}", sha):
            raise ApiError(404, "Not Found")
        full = git_output(repo.git_dir, "rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}")
        if not full:
            raise ApiError(404, "Not Found")
        shown = git(repo.git_dir, "show", "--format=%H%n%an <%ae>%n%cI%n%B%x00", "--patch", full)
        header, _, patch = shown.partition("\0")
        commit, author, date, *message = header.split("\n")
        return 200, Html(_render_commit_page(repo.full_name, commit, author, date, message, patch))

    def _html_check_run(self, req: Request) -> tuple[int, Any]:
        with self._store.lock:
            run = self._store.check_runs.get(int_param(req.params["check_run_id"]))
            if run is None or (run.owner, run.repo) != (req.params["owner"], req.params["repo"]):
                raise ApiError(404, "Not Found")
            return 200, Html(_render_check_run_page(run))


# render_markdown marks aligned table columns with classes (shared/review/markdown_html.py)
ALIGNED_COLUMNS = ".align-center{text-align:center}.align-right{text-align:right}"


def _render_check_run_page(run: CheckRunRecord) -> str:
    state = run.state
    output = state["output"]
    buttons = "".join(
        f'<button name="identifier" value="{html.escape(a["identifier"])}"'
        f' title="{html.escape(a["description"])}">{html.escape(a["label"])}</button> '
        for a in state["actions"]
    )
    if buttons:
        buttons = (
            f'<form method="post" action="/_emulator/check-runs/{run.id}/click">'
            f'clicked by <input name="sender" value="octocat" size="12"> {buttons}</form>'
        )
    history = "".join(
        f"<li>{html.escape(u.at)} {u.method} → {html.escape(str(u.state['status']))}"
        f" {html.escape(str(u.state['conclusion'] or ''))}</li>"
        for u in run.history
    )
    title = html.escape(f"{run.owner}/{run.repo} · {state['name']}")
    details = state.get("details_url") or ""
    # GitHub shows a "Details" link to details_url beside the check run; so does this page.
    details_link = (
        f" · <a id='details' href='{html.escape(details)}'>Details</a>"
        if details.startswith(("http://", "https://"))
        else ""
    )
    commit = f"/{run.owner}/{run.repo}/commit/{state['head_sha']}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{ALIGNED_COLUMNS}</style></head>"
        f"<body style='font-family:sans-serif;max-width:70em;margin:2em auto'>"
        f"<h1>{title}</h1>"
        f"<p>check run {run.id} · <b>{html.escape(state['status'])}</b>"
        f" {html.escape(state['conclusion'] or '')} · head "
        f"<a href='{html.escape(commit)}'>{html.escape(state['head_sha'][:12])}</a>"
        f" · external id {html.escape(state['external_id'] or '')}{details_link}</p>"
        f"<p>{buttons}</p>"
        f"<h2>{html.escape(output.get('title') or '')}</h2>"
        # GitHub renders the summary and text as Markdown: rollwright writes them for that.
        f"<div id='summary'>{render_markdown(output.get('summary') or '')}</div>"
        f"<div id='text'>{render_markdown(output.get('text') or '')}</div>"
        f"<h3>History</h3><ol>{history}</ol></body></html>"
    )


def _render_commit_page(
    full_name: str, commit: str, author: str, date: str, message: list[str], patch: str
) -> str:
    subject = message[0] if message else ""
    body = "\n".join(message[1:]).strip()
    title = html.escape(f"{full_name} · {subject}")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body style='font-family:sans-serif;max-width:70em;margin:2em auto'>"
        f"<h1 id='subject'>{html.escape(subject)}</h1>"
        f"<p>{html.escape(full_name)} · commit <code id='sha'>{html.escape(commit)}</code>"
        f" · {html.escape(author)} · {html.escape(date)}</p>"
        f"<pre style='white-space:pre-wrap'>{html.escape(body)}</pre>"
        f"<pre id='patch'>{html.escape(patch.strip())}</pre></body></html>"
    )
