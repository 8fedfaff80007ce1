"""Check runs in the GitHub emulator: create, update and get them, each with the full history
of its creates and updates, and the check suite of their head commit; list a commit's (with
other apps' runs, which tests add as a CI would); and commit statuses with their combined
state.

GitHub behaviour modelled on purpose (and relied on by the worker's check-run cache):
- a completed check run stays completed: a later update keeps its id, may change its
  conclusion, output and actions, but a `status` of queued/in_progress is ignored (GitHub does
  not reopen completed runs);
- giving a `conclusion` completes the run; `completed` without a conclusion is a 422;
- `output` and `actions`, when sent, replace the previous ones; when left out they stay.
- output `summary`/`text` are limited to 65,535 characters by GitHub; the emulator enforces
  65,535 UTF-8 *bytes*, the stricter reading, so anything it accepts GitHub accepts too
  (`schemas`).
"""

from __future__ import annotations

import copy
from typing import Any

from shared.devstack.emulator.model import (
    ApiError,
    CheckRunRecord,
    CheckRunUpdate,
    Repo,
    Request,
    Route,
    make_route,
    repo_record,
    utc_now,
)
from shared.devstack.emulator.shapes import Shapes
from shared.devstack.emulator.state import Store


class CheckRuns:
    """The check runs API; its handlers run under the store's lock."""

    def __init__(self, store: Store, shapes: Shapes) -> None:
        self._store = store
        self._shapes = shapes
        self._suites: dict[tuple[str, str], int] = {}  # (repo, head sha) → check suite id
        # (repo, sha) → context → (state, updated at): the newest status of each context
        self._statuses: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}

    def routes(self) -> list[Route]:
        r = make_route
        runs = "/repos/{owner}/{repo}/check-runs"
        run = f"{runs}/{{check_run_id}}"
        return [
            r("POST", runs, self._create_check_run, "token", True),
            r("PATCH", run, self._update_check_run, "token", True),
            r("GET", run, self._get_check_run, "token", False),
            r(
                "GET",
                "/repos/{owner}/{repo}/commits/{ref}/check-runs",
                self._of_commit,
                "token",
                False,
            ),
            r("GET", "/repos/{owner}/{repo}/commits/{ref}/status", self._combined, "token", False),
        ]

    def add_foreign_check_run(
        self,
        owner: str,
        repo: str,
        head_sha: str,
        name: str,
        *,
        conclusion: str | None,
        status: str = "queued",
        app_id: int = 15368,
        app_slug: str = "github-actions",
    ) -> int:
        """Another app's check run on `head_sha` (a CI's): listed with the App's own."""
        with self._store.lock:
            record = self._store.repo(owner, repo)
            run_id = self._store.next_id("check_run")
            now = utc_now()
            state: dict[str, Any] = {
                "name": name,
                "head_sha": head_sha,
                "external_id": "",
                "details_url": None,
                "status": "completed" if conclusion else status,
                "conclusion": conclusion,
                "started_at": now,
                "completed_at": now if conclusion else None,
                "output": {"title": None, "summary": None, "text": None, "annotations_count": 0},
                "actions": [],
                "check_suite_id": self._suite_for(record, head_sha),
                "app": {"id": app_id, "slug": app_slug},
            }
            run = CheckRunRecord(run_id, record.owner, record.name, state)
            run.history.append(CheckRunUpdate("POST", {}, copy.deepcopy(state), now))
            self._store.check_runs[run_id] = run
            return run_id

    def set_status(self, owner: str, repo: str, sha: str, context: str, state: str) -> None:
        """A commit status (`error`, `failure`, `pending` or `success`) of `context` on `sha`."""
        if state not in ("error", "failure", "pending", "success"):
            raise ValueError(f"unknown status state {state!r}")
        with self._store.lock:
            key = (self._store.repo(owner, repo).full_name.lower(), sha)
            self._statuses.setdefault(key, {})[context] = (state, utc_now())

    def check_runs(self, owner: str, repo: str) -> list[CheckRunRecord]:
        """Every check run of the repository, oldest first, each with its full history."""
        with self._store.lock:
            key = f"{owner}/{repo}".lower()
            return [
                copy.deepcopy(run)
                for run in self._store.check_runs.values()
                if f"{run.owner}/{run.repo}".lower() == key
            ]

    def check_run(self, check_run_id: int) -> CheckRunRecord:
        with self._store.lock:
            if check_run_id not in self._store.check_runs:
                raise KeyError(f"no check run {check_run_id}")
            return copy.deepcopy(self._store.check_runs[check_run_id])

    def _create_check_run(self, req: Request) -> tuple[int, Any]:
        assert req.repo is not None
        body: dict[str, Any] = req.body
        now = utc_now()
        conclusion = body.get("conclusion")
        status = "completed" if conclusion else body.get("status", "queued")
        _require_conclusion(status, conclusion, body)
        run_id = self._store.next_id("check_run")
        suite = self._suite_for(req.repo, body["head_sha"])
        output = body.get("output") or {}
        state: dict[str, Any] = {
            "name": body["name"],
            "head_sha": body["head_sha"],
            "external_id": body.get("external_id", ""),
            "details_url": body.get("details_url"),
            "status": status,
            "conclusion": conclusion,
            "started_at": body.get("started_at") or now,
            "completed_at": (body.get("completed_at") or now) if status == "completed" else None,
            "output": {
                "title": output.get("title"),
                "summary": output.get("summary"),
                "text": output.get("text"),
                "annotations_count": len(output.get("annotations", [])),
            },
            "actions": list(body.get("actions", [])),
            "check_suite_id": suite,
        }
        run = CheckRunRecord(run_id, req.repo.owner, req.repo.name, state)
        run.history.append(CheckRunUpdate("POST", copy.deepcopy(body), copy.deepcopy(state), now))
        self._store.check_runs[run_id] = run
        return 201, self._shapes.check_run(run, req.base)

    def _update_check_run(self, req: Request) -> tuple[int, Any]:
        run = repo_record(self._store.check_runs, req, "check_run_id")
        body: dict[str, Any] = req.body
        now = utc_now()
        state = run.state
        for key in ("name", "details_url", "external_id", "started_at"):
            if key in body:
                state[key] = body[key]
        conclusion = body.get("conclusion")
        status = body.get("status")
        _require_conclusion(status, conclusion, body)
        if conclusion:
            # completes the run, or changes the conclusion of an already completed one
            state["conclusion"] = conclusion
            state["status"] = "completed"
            state["completed_at"] = body.get("completed_at") or now
        elif status is not None and state["status"] != "completed":
            state["status"] = status
        # a completed run never goes back to queued/in_progress (the request still succeeds)
        if "output" in body:
            output = body["output"]
            state["output"] = {
                "title": output.get("title", state["output"].get("title")),
                "summary": output["summary"],
                "text": output.get("text"),
                "annotations_count": state["output"]["annotations_count"]
                + len(output.get("annotations", [])),
            }
        if "actions" in body:
            state["actions"] = list(body["actions"])
        run.history.append(CheckRunUpdate("PATCH", copy.deepcopy(body), copy.deepcopy(state), now))
        return 200, self._shapes.check_run(run, req.base)

    def _get_check_run(self, req: Request) -> tuple[int, Any]:
        run = repo_record(self._store.check_runs, req, "check_run_id")
        return 200, self._shapes.check_run(run, req.base)

    def _of_commit(self, req: Request) -> tuple[int, Any]:
        """`GET …/commits/{ref}/check-runs`: the newest run of each name and app on the
        commit (GitHub's `filter=latest`, its default), paginated in the body's list."""
        assert req.repo is not None
        sha = req.params["ref"]
        newest: dict[tuple[str, int], CheckRunRecord] = {}
        for run in self._store.check_runs.values():
            if (run.owner, run.repo) != (req.repo.owner, req.repo.name):
                continue
            if run.state["head_sha"] != sha:
                continue
            app = run.state.get("app") or {"id": -1}
            newest[(run.name, int(app["id"]))] = run  # ids grow: the last is the newest
        runs = [self._shapes.check_run(r, req.base) for r in newest.values()]
        page = max(1, int(req.query.get("page", ["1"])[0]))
        per_page = min(100, max(1, int(req.query.get("per_page", ["30"])[0])))
        chunk = runs[(page - 1) * per_page : page * per_page]
        return 200, {"total_count": len(runs), "check_runs": chunk}

    def _combined(self, req: Request) -> tuple[int, Any]:
        """`GET …/commits/{ref}/status`: the combined state and the newest status of each
        context (`pending` with none, as GitHub says)."""
        assert req.repo is not None
        sha = req.params["ref"]
        found = self._statuses.get((req.repo.full_name.lower(), sha), {})
        states = [state for state, _ in found.values()]
        if any(s in ("error", "failure") for s in states):
            combined = "failure"
        elif states and all(s == "success" for s in states):
            combined = "success"
        else:
            combined = "pending"
        statuses = [
            {"context": context, "state": state, "updated_at": at, "created_at": at}
            for context, (state, at) in sorted(found.items())
        ]
        return 200, {
            "state": combined,
            "sha": sha,
            "total_count": len(statuses),
            "statuses": statuses,
        }

    def _suite_for(self, repo: Repo, head_sha: str) -> int:
        key = (repo.full_name.lower(), head_sha)
        if key not in self._suites:
            self._suites[key] = self._store.next_id("check_suite", start=7000)
        return self._suites[key]


def _require_conclusion(status: str | None, conclusion: str | None, body: dict[str, Any]) -> None:
    if conclusion:
        return
    if status == "completed" or "completed_at" in body:
        raise ApiError(
            422,
            "Invalid request.",
            errors=[
                {
                    "resource": "CheckRun",
                    "field": "conclusion",
                    "code": "missing_field",
                    "message": "conclusion is required when status is completed",
                }
            ],
        )
