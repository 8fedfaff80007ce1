"""The GitHub emulator's git data API and pull request creation, on the seeded git repository.

What rollwright's promotions call (shared.github.gitdata): read a ref and a commit, create blobs,
trees and commits, move a ref (fast-forward only unless forced) or create one, list and open
pull requests. Objects are written into the repository the emulator was seeded with
(`git_dir`), so the worker's mirror fetches exactly what the API created. Like GitHub, moving
or creating a branch sends a `push` webhook (from a background thread, after the answer).

Request bodies are validated by the emulator against GitHub's schemas (endpoints added to
rest_schemas.json from @octokit/openapi); GitHub's own answers for refused updates are
kept: 422 "Update is not a fast forward", "Reference already exists", "Object does not exist".
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from shared.devstack.emulator.git import ZERO_SHA, git_output
from shared.devstack.emulator.model import (
    ApiError,
    App,
    Page,
    Repo,
    Request,
    Route,
    make_route,
    node_id,
)
from shared.devstack.emulator.pulls import Pulls
from shared.devstack.emulator.shapes import Shapes
from shared.devstack.emulator.webhooks import Webhooks

_SHA = re.compile(r"^[0-9a-f]{40}$")


class GitDataApi:
    """Handlers for the git data endpoints of one emulator (they run under its lock)."""

    def __init__(self, app: App, shapes: Shapes, pulls: Pulls, webhooks: Webhooks) -> None:
        self._app = app
        self._shapes = shapes
        self._pulls = pulls
        self._webhooks = webhooks

    def routes(self) -> list[Route]:
        r = make_route
        repo = "/repos/{owner}/{repo}"
        ref_tail = r"(?P<ref>.+)"
        return [
            r("GET", f"{repo}/git/commits/{{commit_sha}}", self._get_commit, "token", False),
            r("POST", f"{repo}/git/blobs", self._create_blob, "token", True),
            r("POST", f"{repo}/git/trees", self._create_tree, "token", True),
            r("POST", f"{repo}/git/commits", self._create_commit, "token", True),
            r("POST", f"{repo}/git/refs", self._create_ref, "token", True),
            _ref_route("GET", f"{repo}/git/ref/", ref_tail, self._get_ref, None),
            _ref_route(
                "PATCH",
                f"{repo}/git/refs/",
                ref_tail,
                self._update_ref,
                "PATCH /repos/{owner}/{repo}/git/refs/{ref}",
            ),
            r("GET", f"{repo}/pulls", self._list_pulls, "token", False),
            r("POST", f"{repo}/pulls", self._create_pull, "token", True),
        ]

    # --- objects

    def _git_dir(self, req: Request) -> Path:
        assert req.repo is not None
        if req.repo.git_dir is None:
            raise ApiError(409, "Git Repository is empty.")
        return req.repo.git_dir

    def _create_blob(self, req: Request) -> tuple[int, Any]:
        git_dir = self._git_dir(req)
        body = req.body
        encoding = body.get("encoding", "utf-8")
        if encoding not in ("utf-8", "utf8", "base64"):
            raise ApiError(422, f"encoding must be utf-8 or base64, not {encoding!r}")
        data = (
            base64.b64decode(body["content"])
            if encoding == "base64"
            else body["content"].encode("utf-8")
        )
        sha = _run(git_dir, "hash-object", "-w", "--stdin", data=data).strip()
        return 201, {"sha": sha, "url": f"{self._api(req)}/git/blobs/{sha}"}

    def _create_tree(self, req: Request) -> tuple[int, Any]:
        git_dir = self._git_dir(req)
        body = req.body
        base_tree = body.get("base_tree")
        with tempfile.TemporaryDirectory(prefix="emulator-tree-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if base_tree:
                self._require(git_dir, base_tree, "tree")
                _run(git_dir, "read-tree", base_tree, env=env)
            else:
                _run(git_dir, "read-tree", "--empty", env=env)
            records = []
            for entry in body["tree"]:
                path = entry["path"]
                if "sha" in entry and entry["sha"] is None:
                    records.append(f"0 {ZERO_SHA}\t{path}")  # mode 0: remove the path
                    continue
                if "content" in entry:
                    data = str(entry["content"]).encode("utf-8")
                    sha = _run(git_dir, "hash-object", "-w", "--stdin", data=data).strip()
                else:
                    sha = str(entry.get("sha") or "")
                    self._require(git_dir, sha, entry.get("type", "blob"))
                records.append(f"{entry.get('mode', '100644')} {sha}\t{path}")
            # --index-info works in bare repositories (GitHub's are), --force-remove does not
            stdin = "".join(f"{r}\0" for r in records).encode()
            _run(git_dir, "update-index", "-z", "--index-info", data=stdin, env=env)
            tree = _run(git_dir, "write-tree", env=env).strip()
        return 201, self._tree_json(req, git_dir, tree)

    def _tree_json(self, req: Request, git_dir: Path, tree: str) -> dict[str, Any]:
        api = self._api(req)
        entries = []
        for line in _run(git_dir, "ls-tree", tree).splitlines():
            meta, _, path = line.partition("\t")
            mode, kind, sha = meta.split()
            entries.append(
                {
                    "path": path,
                    "mode": mode,
                    "type": kind,
                    "sha": sha,
                    "url": f"{api}/git/{kind}s/{sha}",
                }
            )
        return {"sha": tree, "url": f"{api}/git/trees/{tree}", "tree": entries, "truncated": False}

    def _create_commit(self, req: Request) -> tuple[int, Any]:
        git_dir = self._git_dir(req)
        body = req.body
        self._require(git_dir, body["tree"], "tree")
        parents = list(body.get("parents") or [])
        for parent in parents:
            self._require(git_dir, parent, "commit")
        bot = self._app.bot_login
        email = f"{self._app.id}+{bot}@users.noreply.github.com"
        author = body.get("author") or {}
        committer = body.get("committer") or {}
        env = {
            "GIT_AUTHOR_NAME": author.get("name", bot),
            "GIT_AUTHOR_EMAIL": author.get("email", email),
            "GIT_COMMITTER_NAME": committer.get("name", "GitHub"),
            "GIT_COMMITTER_EMAIL": committer.get("email", "noreply@github.com"),
        }
        if author.get("date"):
            env["GIT_AUTHOR_DATE"] = author["date"]
        args = ["commit-tree", body["tree"]]
        for parent in parents:
            args += ["-p", parent]
        sha = _run(git_dir, *args, data=str(body["message"]).encode(), env=env).strip()
        return 201, self._git_commit_json(req, git_dir, sha)

    def _get_commit(self, req: Request) -> tuple[int, Any]:
        git_dir = self._git_dir(req)
        sha = req.params["commit_sha"]
        if not _is_object(git_dir, sha, "commit"):
            raise ApiError(404, "Not Found")
        return 200, self._git_commit_json(req, git_dir, _run(git_dir, "rev-parse", sha).strip())

    def _git_commit_json(self, req: Request, git_dir: Path, sha: str) -> dict[str, Any]:
        fmt = "%T%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%P%x00%B"
        tree, an, ae, ad, cn, ce, cd, parents, message = _run(
            git_dir, "show", "-s", f"--format={fmt}", sha
        ).split("\x00")[:9]
        api = self._api(req)
        web = f"{req.base}/{req.params['owner']}/{req.params['repo']}"
        return {
            "sha": sha,
            "node_id": node_id("Commit", int(sha[:7], 16)),
            "url": f"{api}/git/commits/{sha}",
            "html_url": f"{web}/commit/{sha}",
            "author": {"name": an, "email": ae, "date": ad},
            "committer": {"name": cn, "email": ce, "date": cd},
            "message": message.rstrip("\n"),
            "tree": {"sha": tree, "url": f"{api}/git/trees/{tree}"},
            "parents": [
                {"sha": p, "url": f"{api}/git/commits/{p}", "html_url": f"{web}/commit/{p}"}
                for p in parents.split()
            ],
            "verification": {
                "verified": False,
                "reason": "unsigned",
                "signature": None,
                "payload": None,
                "verified_at": None,
            },
        }

    # --- refs

    def _get_ref(self, req: Request) -> tuple[int, Any]:
        git_dir = self._git_dir(req)
        ref = "refs/" + req.params["ref"]
        sha = git_output(git_dir, "rev-parse", "--verify", "--quiet", ref)
        if sha is None:
            raise ApiError(404, "Not Found")
        return 200, self._ref_json(req, ref, sha)

    def _update_ref(self, req: Request) -> tuple[int, Any]:
        git_dir = self._git_dir(req)
        ref = "refs/" + req.params["ref"]
        new = req.body["sha"]
        old = git_output(git_dir, "rev-parse", "--verify", "--quiet", ref)
        if old is None:
            raise ApiError(422, "Reference does not exist")
        self._require(git_dir, new, "commit")
        forced = bool(req.body.get("force", False))
        if not forced and git_output(git_dir, "merge-base", "--is-ancestor", old, new) is None:
            raise ApiError(422, "Update is not a fast forward")
        # Compare-and-swap: a push that lands in between makes this fail like GitHub would.
        if git_output(git_dir, "update-ref", ref, new, old) is None:
            raise ApiError(422, "Update is not a fast forward")
        self._pushed(req.repo, ref, old, new, forced)
        return 200, self._ref_json(req, ref, new)

    def _create_ref(self, req: Request) -> tuple[int, Any]:
        git_dir = self._git_dir(req)
        ref, sha = req.body["ref"], req.body["sha"]
        if not ref.startswith("refs/") or ref.count("/") < 2:
            raise ApiError(422, "Reference name is invalid")
        self._require(git_dir, sha, "commit")
        if git_output(git_dir, "update-ref", ref, sha, ZERO_SHA) is None:
            raise ApiError(422, "Reference already exists")
        self._pushed(req.repo, ref, ZERO_SHA, sha, False)
        return 201, self._ref_json(req, ref, sha)

    def _ref_json(self, req: Request, ref: str, sha: str) -> dict[str, Any]:
        api = self._api(req)
        return {
            "ref": ref,
            "node_id": node_id("Ref", abs(hash(ref)) % 10**9),
            "url": f"{api}/git/{ref}",
            "object": {"type": "commit", "sha": sha, "url": f"{api}/git/commits/{sha}"},
        }

    def _pushed(self, repo: Repo | None, ref: str, before: str, after: str, forced: bool) -> None:
        """GitHub sends `push` for a ref the API moved; so does the emulator, once the answer
        is on its way (the receiver may call back into the emulator)."""
        if repo is None or not self._webhooks.url or not ref.startswith("refs/heads/"):
            return
        webhooks, owner, name = self._webhooks, repo.owner, repo.name
        pusher = self._app.bot_login

        def send() -> None:
            try:
                payload = webhooks.push_payload(
                    owner, name, before, after, ref=ref, pusher=pusher, forced=forced
                )
                webhooks.send_webhook("push", payload)
            except (ConnectionError, ValueError):
                pass  # recorded nowhere, as GitHub's failed deliveries are only in its log

        threading.Timer(0.05, send).start()

    # --- pulls

    def _list_pulls(self, req: Request) -> tuple[int, Any]:
        repo = req.repo
        assert repo is not None
        state = (req.query.get("state") or ["open"])[0]
        head = (req.query.get("head") or [""])[0]
        base = (req.query.get("base") or [""])[0]
        items = []
        for number in sorted(repo.pulls):
            pull = repo.pulls[number]
            if state != "all" and pull["state"] != state:
                continue
            if head and f"{repo.owner}:{pull['head_ref']}" != head and pull["head_ref"] != head:
                continue
            if base and pull["base_ref"] != base:
                continue
            items.append(self._shapes.pull(repo, pull, req.base))
        return 200, Page(items, req)

    def _create_pull(self, req: Request) -> tuple[int, Any]:
        git_dir = self._git_dir(req)
        repo = req.repo
        assert repo is not None
        body = req.body
        head = str(body["head"]).split(":", 1)[-1]
        base = str(body["base"])
        head_sha = git_output(git_dir, "rev-parse", "--verify", "--quiet", f"refs/heads/{head}")
        base_sha = git_output(git_dir, "rev-parse", "--verify", "--quiet", f"refs/heads/{base}")
        if head_sha is None or base_sha is None:
            invalid = [f for f, sha in (("head", head_sha), ("base", base_sha)) if sha is None]
            problems = [{"resource": "PullRequest", "field": f, "code": "invalid"} for f in invalid]
            raise ApiError(422, "Validation Failed", errors=problems)
        for pull in repo.pulls.values():
            if pull["state"] == "open" and (pull["head_ref"], pull["base_ref"]) == (head, base):
                raise ApiError(
                    422,
                    "Validation Failed",
                    errors=[
                        {
                            "resource": "PullRequest",
                            "code": "custom",
                            "message": f"A pull request already exists for {repo.owner}:{head}.",
                        }
                    ],
                )
        number = max(repo.pulls, default=0) + 1
        self._pulls.set_pull(
            repo.owner,
            repo.name,
            number,
            head_sha=head_sha,
            base_sha=base_sha,
            head_ref=head,
            base_ref=base,
            title=str(body.get("title") or head),
            draft=bool(body.get("draft", False)),
            user_login=self._app.bot_login,
        )
        repo.pulls[number]["body"] = body.get("body")
        return 201, self._shapes.pull(repo, repo.pulls[number], req.base)

    # --- helpers

    def _api(self, req: Request) -> str:
        return f"{req.base}/repos/{req.params['owner']}/{req.params['repo']}"

    def _require(self, git_dir: Path, sha: str, kind: str) -> None:
        if not _SHA.match(str(sha)) or not _is_object(git_dir, sha, kind):
            raise ApiError(422, f"Object does not exist: {kind} {sha}")


def _ref_route(method: str, prefix: str, tail: str, handler: Any, schema: str | None) -> Route:
    """A route whose last parameter may contain slashes (`heads/feature/x`)."""
    regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", prefix) + tail
    route = Route(method, re.compile(f"^{regex}$"), handler, "token", schema)
    return route


def _is_object(git_dir: Path, sha: str, kind: str) -> bool:
    found = git_output(git_dir, "cat-file", "-t", sha)
    return found == kind


def _run(
    git_dir: Path, *args: str, data: bytes | None = None, env: dict[str, str] | None = None
) -> str:
    proc = subprocess.run(
        ["git", "-C", str(git_dir), *args],
        input=data,
        capture_output=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip()
        raise ApiError(500, f"git {' '.join(args[:2])} failed: {message}")
    return proc.stdout.decode("utf-8", "replace")
