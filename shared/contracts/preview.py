"""Contracts of pull request previews: PreviewWorkflow's input, signals, query and activities.

Same rules as shared/contracts/deploy.py (they are persisted in Temporal histories and in the
gateway's outbox): add optional fields with defaults, never rename or retype one; unknown fields are
ignored so an older worker still decodes a newer payload.

One PreviewWorkflow per pull request, id `preview:<owner>/<repo>:<pr>`. The gateway
signal-with-starts it with `pr_head` for opened / synchronize / reopened / ready_for_review and
signals `pr_closed` (never starting it) when the pull request closes. The check run
`rollwright/preview` (external_id `preview:<pr>:<head>`) goes through the deploy flow's
`check_run` activity; the sticky comment and the report through the activities named here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from shared.contracts.deploy import Payload, RepoRef

PREVIEW_WORKFLOW = "PreviewWorkflow"

SIGNAL_PR_HEAD = "pr_head"
SIGNAL_PR_CLOSED = "pr_closed"
# The query is named `state`, like DeployWorkflow's (shared.contracts.deploy.QUERY_STATE).

PREVIEW_CHECK_NAME = "rollwright/preview"
# The sticky comment carries `<!-- rollwright:preview -->`
# (shared.github.app.upsert_sticky_comment).
PREVIEW_COMMENT_MARKER = "rollwright:preview"


# ApplicationError type of a PR head (or base branch) the repository does not have.
ERR_PREVIEW_REVISION = "PreviewRevisionMissing"

PullRequestAction = Literal[
    "opened", "synchronize", "reopened", "ready_for_review", "edited", "rerequested", "api"
]
# Actions that preview the head again even when that head was already previewed: the base
# may have moved meanwhile (reopened), or someone asked for it (Re-run on the check run).
FORCING_ACTIONS: frozenset[str] = frozenset({"reopened", "rerequested", "api"})

PreviewRunState = Literal["rendering", "reporting", "done", "failed", "superseded", "cancelled"]
PreviewConclusion = Literal["success", "failure"]


def preview_workflow_id(repo: str, pr: int) -> str:
    return f"preview:{repo}:{pr}"


def preview_external_id(pr: int, head_sha: str) -> str:
    """The check run's external_id: which pull request and head it previews."""
    return f"preview:{pr}:{head_sha}"


def parse_preview_external_id(external_id: str | None) -> tuple[int, str] | None:
    """`preview:<pr>:<head>` → (pr, head); anything else → None."""
    if not external_id:
        return None
    kind, _, rest = external_id.partition(":")
    number, _, head = rest.partition(":")
    if kind != "preview" or not number.isdigit() or not head:
        return None
    return int(number), head


def preview_fingerprints_key(repo: str, pr: int, head_sha: str) -> str:
    """`{root: {path: [old digest, new digest]}}` of a preview: every changed file per root."""
    return preview_prefix(repo, pr, head_sha) + "fingerprints.json"


def preview_prefix(repo: str, pr: int, head_sha: str) -> str:
    """Blob prefix of one head's report: report.md, report.json, comment.md, check.md."""
    return f"previews/{repo}/{pr}/{head_sha}/"


def preview_latest_key(repo: str, pr: int) -> str:
    """Blob key naming the newest reported head of a pull request (PreviewPointer JSON)."""
    return f"previews/{repo}/{pr}/latest.json"


# --- signals -----------------------------------------------------------------------------------


class PullRequestHead(Payload):
    """Signal `pr_head`: preview this head of the pull request (newer heads win)."""

    head_sha: str
    base_ref: str
    head_ref: str = ""
    base_sha: str = ""  # GitHub's base tip when the event was sent (a hint; the mirror decides)
    action: PullRequestAction = "synchronize"
    draft: bool = False
    title: str = ""
    sender: str | None = None
    delivery_id: str | None = None


class PullRequestClosed(Payload):
    """Signal `pr_closed`: the pull request was closed (merged or not); the preview ends."""

    merged: bool = False
    sender: str | None = None
    delivery_id: str | None = None
    merge_commit_sha: str | None = None


# --- workflow input, state, result ---------------------------------------------------------------


class PreviewCounts(Payload):
    """What a report found: roots rendered and how they changed, and resources."""

    roots: int = 0  # affected roots rendered
    roots_changed: int = 0
    roots_added: int = 0
    roots_removed: int = 0
    roots_failed: int = 0
    added: int = 0  # resources
    removed: int = 0
    changed: int = 0
    hidden: int = 0  # changed resources hidden as noise


class PreviewRun(Payload):
    """One head's preview, as the query and the Temporal UI show it."""

    head_sha: str
    base_ref: str
    action: str = ""
    state: PreviewRunState = "rendering"
    started_at: datetime | None = None
    finished_at: datetime | None = None
    check_run_id: int | None = None
    conclusion: str | None = None
    base_sha: str | None = None  # the revision rendered on the base side
    rendered_sha: str | None = None  # the revision rendered on the PR side (merge or head)
    merge_sha: str | None = None
    counts: PreviewCounts | None = None
    warnings: list[str] = Field(default_factory=list)
    message: str = ""
    superseded_by: str | None = None


class PreviewInput(Payload):
    repo: RepoRef
    pr: int
    # Carried across continue-as-new; empty on a fresh start.
    pending: PullRequestHead | None = None
    last: PreviewRun | None = None
    comment_id: int | None = None
    previews: int = 0  # heads previewed by this workflow id, over all its runs
    # Continue-as-new after this many history events or previews in one run (None: defaults).
    max_history_events: int | None = None
    max_previews_per_run: int | None = None


class PreviewState(Payload):
    """Query `state`."""

    repo: str
    pr: int
    closed: bool = False
    current: PreviewRun | None = None
    last: PreviewRun | None = None
    pending_head: str | None = None
    comment_id: int | None = None
    previews: int = 0


class PreviewResult(Payload):
    reason: Literal["closed", "idle"]
    last: PreviewRun | None = None


# --- activities -----------------------------------------------------------------------------------


class PreviewRevisionsRequest(Payload):
    repo: RepoRef
    pr: int
    head_sha: str
    base_ref: str


class PreviewRevisions(Payload):
    """What to render on each side, fetched into the worker's mirror."""

    base_sha: str  # base side
    head_sha: str  # PR side: the merge result, or the PR head when there is none
    pr_head_sha: str
    base_tip_sha: str  # the base branch tip in the mirror
    merge_sha: str | None = None
    warnings: list[str] = Field(default_factory=list)


class PreviewBuildRequest(Payload):
    repo: RepoRef
    pr: int
    revisions: PreviewRevisions
    base_ref: str = ""
    title: str = ""


class PreviewOutcome(Payload):
    """A built report: counts and the texts to show, already cut to GitHub's limits.

    The comment body stays in the blob store (`comment_key`): the workflow history only carries
    the check run's text, once.
    """

    conclusion: PreviewConclusion
    title: str
    summary: str
    text: str
    counts: PreviewCounts
    warnings: list[str] = Field(default_factory=list)
    error: str = ""
    roots: list[str] = Field(default_factory=list)  # rendered roots (the first 200)
    prefix: str  # blob prefix of report.md / report.json / comment.md
    comment_key: str
    full_url: str = ""
    repro: str = ""


class PreviewCommentRequest(Payload):
    repo: RepoRef
    pr: int
    body_key: str  # blob key of the comment body (Markdown, within GitHub's limit)
    # Once the comment is written, latest.json points the preview page at this head.
    head_sha: str = ""
    prefix: str = ""
    conclusion: PreviewConclusion | None = None


class PreviewCommentRef(Payload):
    comment_id: int


class PreviewPointer(Payload):
    """previews/<owner>/<repo>/<pr>/latest.json: the newest reported head (the gateway page)."""

    pr: int
    head_sha: str
    prefix: str
    conclusion: PreviewConclusion
    at: datetime
