"""`POST /events`: GitHub webhooks in, Temporal starts and signals out. Nothing is cloned here.

1. The signature (`X-Hub-Signature-256`, HMAC-SHA256 of the raw body) is checked in constant
   time before anything else; a bad or missing one gets an empty 401.
2. The payload is parsed and turned into a `Route` by `route_event` (pure: no I/O).
3. In one SQL transaction `X-GitHub-Delivery` is claimed and, for a route that starts or
   signals a workflow, the `Action` is stored in the outbox. A delivery seen before answers
   `duplicate` and does nothing else, so GitHub's redelivery has no second effect. When the
   database is down the answer is 503 and nothing is stored.
4. The answer is 202 right away; the outbox drainer (gateway/outbox.py) performs the action
   through the Dispatcher shortly after, retrying while Temporal is unreachable.

Which events do what (anything else is answered 200 `ignored`):
- `push` to the default branch (not tags, other branches or deletions) → start DispatchWorkflow
  `dispatch:<repo>:<after>`.
- `check_run.requested_action` on a check run named `rollwright/<root>` of this App:
  `approve` / `reject` → `review` signal to the DeploymentWorkflow named by the `external_id`;
  `unlock` → signal-with-start `deploy:<repo>:<root>` with `unlock` (the queue judges it).
- `check_run.requested_action` on `rollwright/promote: <patch-id>` (a rollout's check run):
  `promote` / `halt` / `resume` / `rollback` → that signal to `promote:<repo>:<patch-id>`,
  with the clicked run's `head_sha` (the workflow tells a stale Promote, Resume or Roll back
  apart, and judges the click).
- `check_run.rerequested` (same check runs, default branch) → signal-with-start
  `deploy:<repo>:<root>` with a manual `rerequested` revision of the check run's head sha.
- `check_suite.rerequested` (this App's suite, default branch) → start a manual
  DispatchWorkflow for the suite's `before..head_sha` (the gateway cannot list roots itself),
  id `dispatch:<repo>:<head_sha>:rerequested:<delivery>`.
- `pull_request` opened / synchronize / reopened / ready_for_review (drafts included), and
  edited when the base branch changed → signal-with-start `preview:<repo>:<pr>` with
  `pr_head`; `closed` → `pr_closed` to it and to `hotfix:<repo>:<pr>` (never starting
  either). Pull requests from forks are ignored (docs/previews.md). `check_run.rerequested` on
  `rollwright/preview` previews that head again.
- `issue_comment.created` on a pull request whose first line is `/rollwright hotfix <root>…`
  (not by a bot) → signal-with-start `hotfix:<repo>:<pr>` with `hotfix`; the workflow judges
  it (docs/governance.md, "Hotfixes"). Any other comment is ignored.
- `ping`, `installation*` → 200 `acknowledged`.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs

from fastapi import APIRouter, Header, Request, Response, status
from pydantic import BaseModel, ConfigDict, ValidationError

from gateway.actions import (
    Action,
    HotfixRequested,
    PreviewClosed,
    PreviewHead,
    PromotionClick,
    QueueRevision,
    Review,
    StartDispatch,
    Unlock,
)
from gateway.context import Gateway, GatewayDep
from gateway.names import check_root
from shared.contracts.checkrun import REVISION_CHECK_NAME, root_from_check_run_name
from shared.contracts.deploy import (
    DispatchInput,
    NewRevision,
    RepoRef,
    ReviewSignal,
    UnlockSignal,
    dispatch_workflow_id,
)
from shared.contracts.governance import APPROVE_ALL_ID, revision_review_workflow_id
from shared.contracts.hotfix import HOTFIX_COMMAND, MAX_HOTFIX_ROOTS, HotfixCommand
from shared.contracts.preview import (
    PREVIEW_CHECK_NAME,
    PullRequestClosed,
    PullRequestHead,
    parse_preview_external_id,
)
from shared.contracts.promotion import patch_from_check_run_name
from shared.github.app import verify_webhook_signature
from shared.settings import Settings
from shared.stores.sql.deliveries import DeliveryClaim
from shared.stores.sql.outbox import OutboxEntry

log = logging.getLogger("rollwright.gateway")

ZERO_SHA = "0" * 40
MAX_DELIVERY_ID = 64  # the webhook_deliveries key column
# GitHub sends JSON, or the JSON in a `payload` form field (the hook's content type).
CONTENT_TYPES = frozenset({"application/json", "application/x-www-form-urlencoded"})


class BodyTooLarge(Exception):
    pass


ACKNOWLEDGED_EVENTS = frozenset({"ping", "installation_repositories", "installation_target"})

# --------------------------------------------------------------------------- GitHub payloads
# Only the fields we read; GitHub adds fields freely, so everything else is ignored.


class _GitHubModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Account(_GitHubModel):
    login: str


class Installation(_GitHubModel):
    id: int


class Repository(_GitHubModel):
    full_name: str
    clone_url: str = ""
    default_branch: str = "main"
    html_url: str = ""

    def ref(self, installation: Installation | None) -> RepoRef:
        owner, _, name = self.full_name.partition("/")
        return RepoRef(
            owner=owner,
            name=name,
            installation_id=installation.id if installation else None,
            clone_url=self.clone_url,
            default_branch=self.default_branch,
            html_url=self.html_url,
        )


class Pusher(_GitHubModel):
    name: str | None = None


class PushEvent(_GitHubModel):
    ref: str
    before: str
    after: str
    deleted: bool = False
    forced: bool = False
    repository: Repository
    pusher: Pusher | None = None
    sender: Account | None = None
    installation: Installation | None = None


class App(_GitHubModel):
    id: int


class SuiteRef(_GitHubModel):
    head_branch: str | None = None


class PullRef(_GitHubModel):
    ref: str
    sha: str


class PullSide(PullRef):
    repo: Repository | None = None  # null when a fork was deleted


class CheckRunPull(_GitHubModel):
    number: int
    base: PullRef | None = None  # its `repo` has no full_name here


class CheckRun(_GitHubModel):
    id: int
    name: str
    head_sha: str
    external_id: str | None = None
    app: App | None = None
    check_suite: SuiteRef | None = None
    pull_requests: list[CheckRunPull] = []


class PullRequest(_GitHubModel):
    number: int
    head: PullSide
    base: PullSide
    state: str = "open"
    draft: bool = False
    merged: bool | None = None
    title: str = ""
    merge_commit_sha: str | None = None


class BaseChange(_GitHubModel):
    ref: dict[str, Any] | None = None


class PullRequestChanges(_GitHubModel):
    base: BaseChange | None = None


class PullRequestEvent(_GitHubModel):
    action: str
    number: int
    pull_request: PullRequest
    repository: Repository
    changes: PullRequestChanges | None = None
    sender: Account | None = None
    installation: Installation | None = None


class CommentUser(_GitHubModel):
    login: str
    type: str = "User"


class IssueComment(_GitHubModel):
    id: int
    body: str = ""
    user: CommentUser


class Issue(_GitHubModel):
    number: int
    # present (an object of links) when the issue is a pull request
    pull_request: dict[str, Any] | None = None


class IssueCommentEvent(_GitHubModel):
    action: str
    issue: Issue
    comment: IssueComment
    repository: Repository
    sender: Account | None = None
    installation: Installation | None = None


class RequestedAction(_GitHubModel):
    identifier: str


class CheckRunEvent(_GitHubModel):
    action: str
    check_run: CheckRun
    requested_action: RequestedAction | None = None
    repository: Repository
    sender: Account | None = None
    installation: Installation | None = None


class CheckSuite(_GitHubModel):
    id: int
    head_branch: str | None = None
    head_sha: str
    before: str | None = None
    after: str | None = None
    app: App | None = None


class CheckSuiteEvent(_GitHubModel):
    action: str
    check_suite: CheckSuite
    repository: Repository
    sender: Account | None = None
    installation: Installation | None = None


# --------------------------------------------------------------------------- routes


@dataclass(frozen=True)
class Ignore:
    reason: str


@dataclass(frozen=True)
class Acknowledge:
    reason: str


Route = Ignore | Acknowledge | Action


def route_event(
    event: str, payload: dict[str, Any], *, app_id: str | None, delivery_id: str
) -> Route:
    """What a verified webhook should do. Raises pydantic ValidationError on a payload that
    lacks what its event needs."""
    if event == "push":
        return _push(PushEvent.model_validate(payload), delivery_id)
    if event == "check_run":
        return _check_run(CheckRunEvent.model_validate(payload), app_id)
    if event == "check_suite":
        return _check_suite(CheckSuiteEvent.model_validate(payload), app_id, delivery_id)
    if event == "pull_request":
        return _pull_request(PullRequestEvent.model_validate(payload), delivery_id)
    if event == "issue_comment":
        return _issue_comment(IssueCommentEvent.model_validate(payload), delivery_id)
    if event == "installation" or event in ACKNOWLEDGED_EVENTS:
        return Acknowledge(f"{event} acknowledged")
    return Ignore(f"event {event!r} is not handled")


def _push(push: PushEvent, delivery_id: str) -> Route:
    default_ref = f"refs/heads/{push.repository.default_branch}"
    if push.ref.startswith("refs/tags/"):
        return Ignore(f"tag push {push.ref}")
    if push.ref != default_ref:
        return Ignore(f"push to {push.ref}, not the default branch {default_ref}")
    if push.deleted or push.after == ZERO_SHA:
        return Ignore(f"{push.ref} was deleted")
    repo = push.repository.ref(push.installation)
    pusher = push.sender.login if push.sender else (push.pusher.name if push.pusher else None)
    return StartDispatch(
        workflow_id=dispatch_workflow_id(repo.full_name, push.after),
        inp=DispatchInput(
            repo=repo,
            before=push.before,
            after=push.after,
            forced=push.forced,
            pusher=pusher,
            delivery_id=delivery_id,
            reason="push",
        ),
    )


def _ours(app: App | None, app_id: str | None) -> bool:
    # Without a configured App id (a bare local setup) every app's runs are candidates; the
    # `rollwright/` name still has to match.
    return app_id is None or (app is not None and str(app.id) == str(app_id))


def _check_run(ev: CheckRunEvent, app_id: str | None) -> Route:
    run = ev.check_run
    if run.name == PREVIEW_CHECK_NAME:
        return _preview_check_run(ev, app_id)
    patch_id = patch_from_check_run_name(run.name)
    if patch_id is not None:
        return _promotion_check_run(ev, patch_id, app_id)
    if run.name == REVISION_CHECK_NAME:
        return _revision_check_run(ev, app_id)
    root = root_from_check_run_name(run.name)
    if root is None:
        return Ignore(f"check run {run.name!r} is not a rollwright check run")
    if not _ours(run.app, app_id):
        return Ignore(f"check run {run.name!r} belongs to another app")
    sender = ev.sender.login if ev.sender else None
    repo = ev.repository.ref(ev.installation)
    if ev.action == "requested_action":
        identifier = ev.requested_action.identifier if ev.requested_action else ""
        if identifier in ("approve", "reject"):
            if not run.external_id:
                return Ignore(f"check run {run.id} has no external_id (deployment id)")
            return Review(
                repo=repo.full_name,
                deployment_id=run.external_id,
                signal=ReviewSignal(
                    decision="approve" if identifier == "approve" else "reject",
                    by=sender,
                    # The deployment checks these against its own check run.
                    repo=repo.full_name,
                    check_run_name=run.name,
                    head_sha=run.head_sha,
                ),
            )
        if identifier == "unlock":
            return Unlock(
                repo=repo.full_name,
                root=root,
                signal=UnlockSignal(by=sender, check_run_id=run.id),
                repo_ref=repo,
            )
        return Ignore(f"requested action {identifier!r} is not handled")
    if ev.action == "rerequested":
        branch = run.check_suite.head_branch if run.check_suite else None
        if branch != repo.default_branch:
            return Ignore(f"re-run requested on {branch!r}, not {repo.default_branch!r}")
        return QueueRevision(
            repo_ref=repo,
            root=root,
            revision=NewRevision(
                revision=run.head_sha,
                trigger="manual",
                reason="rerequested",
                requested_by=sender,
            ),
        )
    return Ignore(f"check_run.{ev.action} is not handled")


PREVIEWED_ACTIONS = frozenset({"opened", "synchronize", "reopened", "ready_for_review"})


def _pull_request(ev: PullRequestEvent, delivery_id: str) -> Route:
    pull = ev.pull_request
    repo = ev.repository.ref(ev.installation)
    sender = ev.sender.login if ev.sender else None
    if ev.action == "closed":
        return PreviewClosed(
            repo=repo.full_name,
            pr=ev.number,
            signal=PullRequestClosed(
                merged=bool(pull.merged),
                sender=sender,
                delivery_id=delivery_id,
                merge_commit_sha=pull.merge_commit_sha if pull.merged else None,
            ),
        )
    retargeted = ev.action == "edited" and ev.changes is not None and ev.changes.base is not None
    if ev.action not in PREVIEWED_ACTIONS and not retargeted:
        return Ignore(f"pull_request.{ev.action} is not handled")
    head_repo = pull.head.repo.full_name if pull.head.repo else None
    if head_repo is None or head_repo.lower() != repo.full_name.lower():
        # A fork's templates would be rendered with this repository's SOPS keys.
        return Ignore(f"pull request #{ev.number} comes from a fork ({head_repo}): not previewed")
    return PreviewHead(
        repo_ref=repo,
        pr=ev.number,
        signal=PullRequestHead.model_validate(
            {
                "head_sha": pull.head.sha,
                "head_ref": pull.head.ref,
                "base_ref": pull.base.ref,
                "base_sha": pull.base.sha,
                "action": "edited" if retargeted else ev.action,
                "draft": pull.draft,
                "title": pull.title,
                "sender": sender,
                "delivery_id": delivery_id,
            }
        ),
    )


def _issue_comment(ev: IssueCommentEvent, delivery_id: str) -> Route:
    """`/rollwright hotfix <root>…` on a pull request. Whether it may deploy is the
    HotfixWorkflow's to judge (it asks GitHub and reads the default branch): here only the
    command's shape is checked."""
    if ev.action != "created":
        return Ignore(f"issue_comment.{ev.action} is not handled")
    if ev.issue.pull_request is None:
        return Ignore(f"#{ev.issue.number} is an issue, not a pull request")
    if ev.comment.user.type == "Bot":
        return Ignore("comments by bots are not commands")
    parsed = hotfix_command(ev.comment.body)
    if parsed is None:
        return Ignore("not a rollwright command")
    roots, problem = parsed
    # A malformed command is answered too: the workflow refuses it with a comment saying why.
    return HotfixRequested(
        repo_ref=ev.repository.ref(ev.installation),
        pr=ev.issue.number,
        command=HotfixCommand(
            by=ev.comment.user.login,
            roots=roots,
            problem=problem,
            comment_id=ev.comment.id,
            delivery_id=delivery_id,
        ),
    )


def hotfix_command(body: str) -> tuple[list[str], str] | None:
    """The roots of a `/rollwright hotfix <root>…` comment (its first line; roots separated by
    spaces or commas) and what is wrong with it (empty: nothing), or None when it is no such
    command."""
    first = body.strip().splitlines()[0].strip() if body.strip() else ""
    if first != HOTFIX_COMMAND and not first.startswith(HOTFIX_COMMAND + " "):
        return None
    roots = list(dict.fromkeys(first[len(HOTFIX_COMMAND) :].replace(",", " ").split()))
    if len(roots) > MAX_HOTFIX_ROOTS:
        return [], f"a hotfix names at most {MAX_HOTFIX_ROOTS} roots; this one names {len(roots)}"
    for root in roots:
        try:
            check_root(root)
        except ValueError:
            return [], f"`{root[:100]}` is not a root id"
    return roots, ""


def _preview_check_run(ev: CheckRunEvent, app_id: str | None) -> Route:
    """Re-run on `rollwright/preview`: preview that head again. It has no buttons."""
    run = ev.check_run
    if not _ours(run.app, app_id):
        return Ignore(f"check run {run.name!r} belongs to another app")
    if ev.action != "rerequested":
        return Ignore(f"check_run.{ev.action} on {run.name!r} is not handled")
    parsed = parse_preview_external_id(run.external_id)
    if parsed is None:
        return Ignore(f"check run {run.id} has no preview external_id")
    pr, head = parsed
    repo = ev.repository.ref(ev.installation)
    base = next((p.base for p in run.pull_requests if p.number == pr and p.base), None)
    return PreviewHead(
        repo_ref=repo,
        pr=pr,
        signal=PullRequestHead(
            head_sha=head,
            base_ref=base.ref if base else repo.default_branch,
            base_sha=base.sha if base else "",
            action="rerequested",
            sender=ev.sender.login if ev.sender else None,
        ),
    )


def _revision_check_run(ev: CheckRunEvent, app_id: str | None) -> Route:
    """Approve all on a revision's summary check run (`rollwright`) → its
    RevisionReviewWorkflow, as a review click made on that check run: the workflow passes it
    on to each deployment of the revision, and each judges it by its own policy."""
    run = ev.check_run
    if not _ours(run.app, app_id):
        return Ignore(f"check run {run.name!r} belongs to another app")
    if ev.action != "requested_action":
        return Ignore(f"check_run.{ev.action} on {run.name!r} is not handled")
    identifier = ev.requested_action.identifier if ev.requested_action else ""
    if identifier != APPROVE_ALL_ID:
        return Ignore(f"requested action {identifier!r} is not handled")
    repo = ev.repository.full_name
    return Review(
        repo=repo,
        # The stored format names the signalled workflow `deployment_id`.
        deployment_id=revision_review_workflow_id(repo, run.head_sha),
        signal=ReviewSignal(
            decision="approve",
            by=ev.sender.login if ev.sender else None,
            repo=repo,
            check_run_name=run.name,
            head_sha=run.head_sha,
        ),
    )


def _promotion_check_run(ev: CheckRunEvent, patch_id: str, app_id: str | None) -> Route:
    """Promote / Halt / Resume / Roll back on a rollout's check run → its PromotionWorkflow."""
    run = ev.check_run
    if not _ours(run.app, app_id):
        return Ignore(f"check run {run.name!r} belongs to another app")
    if ev.action != "requested_action":
        return Ignore(f"check_run.{ev.action} on {run.name!r} is not handled")
    identifier = ev.requested_action.identifier if ev.requested_action else ""
    if identifier not in ("promote", "halt", "resume", "rollback"):
        return Ignore(f"requested action {identifier!r} is not handled")
    return PromotionClick.model_validate(
        {
            "repo": ev.repository.full_name,
            "patch_id": patch_id,
            "action": identifier,
            "by": ev.sender.login if ev.sender else None,
            "head_sha": run.head_sha,
        }
    )


def _check_suite(ev: CheckSuiteEvent, app_id: str | None, delivery_id: str) -> Route:
    suite = ev.check_suite
    if ev.action != "rerequested":
        return Ignore(f"check_suite.{ev.action} is not handled")
    if not _ours(suite.app, app_id):
        return Ignore("check suite belongs to another app")
    repo = ev.repository.ref(ev.installation)
    if suite.head_branch != repo.default_branch:
        return Ignore(f"re-run requested on {suite.head_branch!r}, not {repo.default_branch!r}")
    # The gateway does not clone, so it cannot list the suite's roots; the DispatchWorkflow
    # recomputes them from the push that created the suite (before..head), as a manual re-run.
    # The id carries the delivery so a re-run never collides with the push's own dispatch.
    workflow_id = (
        f"{dispatch_workflow_id(repo.full_name, suite.head_sha)}:rerequested:{delivery_id}"
    )
    return StartDispatch(
        workflow_id=workflow_id,
        inp=DispatchInput(
            repo=repo,
            before=suite.before or ZERO_SHA,
            after=suite.head_sha,
            trigger="manual",
            reason="rerequested",
            pusher=ev.sender.login if ev.sender else None,
            delivery_id=delivery_id,
        ),
    )


# --------------------------------------------------------------------------- HTTP


class WebhookAnswer(BaseModel):
    status: Literal["accepted", "acknowledged", "ignored", "duplicate", "unavailable"]
    event: str
    delivery: str
    detail: str = ""
    workflow_id: str | None = None


router = APIRouter(tags=["webhooks"])


def media_type(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


def parse_body(body: bytes, content_type: str) -> dict[str, Any]:
    """JSON, or the `payload` field of a form-encoded delivery (both are GitHub options).
    Anything unreadable, including JSON nested too deep for the parser, is a ValueError."""
    try:
        if media_type(content_type) == "application/x-www-form-urlencoded":
            fields = parse_qs(body.decode("utf-8"), strict_parsing=False)
            body = fields.get("payload", [""])[0].encode()
        data = json.loads(body)
    except RecursionError:
        raise ValueError("payload nests too deep") from None
    if not isinstance(data, dict):
        raise ValueError("payload is not a JSON object")
    return data


async def read_capped(request: Request, limit: int) -> bytes:
    """The request body, or BodyTooLarge as soon as it is longer than `limit` bytes: a
    declared Content-Length is refused before anything is read, a chunked body as soon as it
    outgrows the limit (nothing longer is ever held in memory)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


@router.post(
    "/events",
    response_model=WebhookAnswer,
    responses={
        202: {
            "model": WebhookAnswer,
            "description": "A workflow start or signal was stored in the outbox; the gateway "
            "performs it shortly (`workflow_id` names the target).",
        },
        400: {"description": "Signed, but not a GitHub webhook we can read."},
        401: {"description": "Bad or missing X-Hub-Signature-256 (empty body)."},
        413: {"description": "Longer than `ROLLWRIGHT_WEBHOOK_MAX_BYTES`; not read whole."},
        415: {"description": "Neither JSON nor form-encoded (GitHub sends one of the two)."},
        503: {"model": WebhookAnswer, "description": "The database is down: nothing stored."},
    },
)
async def receive_event(
    request: Request,
    response: Response,
    gw: GatewayDep,
    x_github_event: Annotated[str | None, Header()] = None,
    x_github_delivery: Annotated[str | None, Header()] = None,
    x_hub_signature_256: Annotated[str | None, Header()] = None,
) -> WebhookAnswer | Response:
    with gw.outbox.giving_way():
        started = time.perf_counter()
        outcome = await _receive(
            request, gw, x_github_event, x_github_delivery, x_hub_signature_256
        )
        # Every answer, refusals included, is counted here and nowhere else.
        gw.metrics.webhook(x_github_event, outcome.label, time.perf_counter() - started)
    if isinstance(outcome.answer, WebhookAnswer):
        response.status_code = outcome.code
    return outcome.answer


@dataclass(frozen=True)
class _Outcome:
    """How a delivery was answered: its label in the metrics, and the answer; `code` is the
    status of a `WebhookAnswer` (a plain `Response` carries its own)."""

    label: str
    answer: WebhookAnswer | Response
    code: int = 200


def _answer(
    status_: Literal["accepted", "acknowledged", "ignored", "duplicate", "unavailable"],
    code: int,
    event: str,
    delivery: str,
    detail: str = "",
    workflow_id: str | None = None,
) -> _Outcome:
    """A JSON answer, counted in the metrics under its status."""
    answer = WebhookAnswer(
        status=status_, event=event, delivery=delivery, detail=detail, workflow_id=workflow_id
    )
    return _Outcome(status_, answer, code)


async def _receive(
    request: Request,
    gw: Gateway,
    event_header: str | None,
    delivery_header: str | None,
    signature: str | None,
) -> _Outcome:
    """The guards in order, each answering the delivery or passing on what it established;
    then the claim."""
    content_type = request.headers.get("content-type", "application/json")
    if (refused := _unreadable_type(content_type)) is not None:
        return refused
    body = await _body(request, gw.settings.webhook_max_bytes)
    if isinstance(body, _Outcome):
        return body
    if (refused := _unsigned(gw.settings, body, signature)) is not None:
        return refused
    named = _named(event_header, delivery_header)
    if isinstance(named, _Outcome):
        return named
    event, delivery = named
    routed = _routed(body, content_type, event, delivery, gw.settings.github_app_id)
    if isinstance(routed, _Outcome):
        return routed
    payload, route = routed
    return await _claim(gw, event, delivery, payload, route)


def _unreadable_type(content_type: str) -> _Outcome | None:
    if media_type(content_type) not in CONTENT_TYPES:
        return _Outcome("bad_request", Response("webhooks are JSON or form-encoded\n", 415))
    return None


async def _body(request: Request, limit: int) -> bytes | _Outcome:
    try:
        return await read_capped(request, limit)
    except BodyTooLarge:
        # Connection: close, so the client stops sending the rest of the body.
        return _Outcome(
            "too_large", Response("payload too large\n", 413, headers={"connection": "close"})
        )


def _unsigned(settings: Settings, body: bytes, signature: str | None) -> _Outcome | None:
    """Refused unless GitHub signed the body with our secret (none set: every webhook)."""
    secret = settings.webhook_secret
    if secret is None or not verify_webhook_signature(secret.get_secret_value(), body, signature):
        return _Outcome("bad_signature", Response(status_code=status.HTTP_401_UNAUTHORIZED))
    return None


def _named(event: str | None, delivery: str | None) -> tuple[str, str] | _Outcome:
    """The event and the delivery id the headers name."""
    if not event or not delivery:
        return _Outcome(
            "bad_request", Response("missing X-GitHub-Event or X-GitHub-Delivery\n", 400)
        )
    if len(delivery) > MAX_DELIVERY_ID:  # GitHub sends a 36-character GUID
        return _Outcome("bad_request", Response("X-GitHub-Delivery is too long\n", 400))
    return event, delivery


def _routed(
    body: bytes, content_type: str, event: str, delivery: str, app_id: str | None
) -> tuple[dict[str, Any], Route] | _Outcome:
    """The payload and what it should do."""
    try:
        payload = parse_body(body, content_type)
        route = route_event(event, payload, app_id=app_id, delivery_id=delivery)
    except (ValueError, ValidationError, RecursionError) as err:
        # ValidationError is a ValueError; json errors too. Signed by GitHub but unreadable:
        # a redelivery would not help, so this is the sender's problem (400), not ours.
        log.warning("webhook %s %s: unreadable payload: %s", event, delivery, err)
        return _Outcome("bad_request", Response(f"unreadable {event} payload\n", 400))
    return payload, route


async def _claim(
    gw: Gateway, event: str, delivery: str, payload: dict[str, Any], route: Route
) -> _Outcome:
    """Record the delivery, with the route's action in the outbox; answer what became of it."""
    action = payload.get("action") if isinstance(payload.get("action"), str) else None
    repo = payload.get("repository")
    repo_name = repo.get("full_name") if isinstance(repo, dict) else None
    if isinstance(route, Ignore | Acknowledge):
        kind = "ignored" if isinstance(route, Ignore) else "acknowledged"
        outcome, enqueue, audit = f"{kind}: {route.reason}", None, None
    else:
        # The action goes into the outbox in the same transaction as the delivery record:
        # once we answer 202 it will be performed, even if Temporal is down right now.
        outcome = "pending"
        enqueue = OutboxEntry(
            repo=route.repo,
            kind=route.kind,
            target=route.target,
            payload=route.model_dump_json(),
        )
        audit = route.audit(datetime.now(UTC))
    try:
        claimed = await gw.intake.claim(
            DeliveryClaim(delivery, event, action, repo_name, outcome, enqueue, audit)
        )
    except Exception as err:  # the database is down: let GitHub's redelivery try again
        log.error("webhook %s %s: recording the delivery failed: %s", event, delivery, err)
        return _answer("unavailable", 503, event, delivery, "database unavailable")
    if not claimed:
        return _answer("duplicate", 200, event, delivery, "delivery already processed")
    if isinstance(route, Ignore):
        return _answer("ignored", 200, event, delivery, route.reason)
    if isinstance(route, Acknowledge):
        return _answer("acknowledged", 200, event, delivery, route.reason)
    gw.outbox.wake()
    log.debug(
        "webhook %s.%s %s → outbox: %s %s",
        event,
        action or "",
        delivery,
        route.describe(),
        route.target,
    )
    return _answer("accepted", 202, event, delivery, route.describe(), route.target)
