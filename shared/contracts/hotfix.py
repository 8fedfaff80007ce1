"""Contracts of hotfixes: deploying an unmerged pull request's head to chosen roots
(`/rollwright hotfix <root>…` commented on the pull request; docs/governance.md, "Hotfixes").

Same rules as shared/contracts/deploy.py: these are persisted in Temporal histories and the
gateway's outbox; add optional fields with defaults, never rename or retype one.

One HotfixWorkflow per pull request, id `hotfix:<owner>/<repo>:<pr>`. The gateway
signal-with-starts it with `hotfix` for each command and signals `pr_closed` (never starting
it) when the pull request closes: on a merge, every root it hotfixed is told (`hotfix_merged`)
and its lock opens.
"""

from __future__ import annotations

from pydantic import Field

from shared.contracts.deploy import HotfixMerged, Payload, RepoRef
from shared.contracts.preview import PullRequestClosed

HOTFIX_WORKFLOW = "HotfixWorkflow"
SIGNAL_HOTFIX = "hotfix"
SIGNAL_HOTFIX_CLOSED = "pr_closed"  # the same payload as the preview's (PullRequestClosed)
# The sticky comment carries `<!-- rollwright:hotfix -->`.
HOTFIX_COMMENT_MARKER = "rollwright:hotfix"
# The command, at the start of a comment's first line.
HOTFIX_COMMAND = "/rollwright hotfix"
MAX_HOTFIX_ROOTS = 20


def hotfix_workflow_id(repo: str, pr: int) -> str:
    return f"hotfix:{repo}:{pr}"


class HotfixCommand(Payload):
    """Signal `hotfix`: someone commented `/rollwright hotfix <root>…` on the pull request."""

    by: str
    roots: list[str]
    problem: str = ""  # a malformed command: why (refused with it)
    comment_id: int | None = None
    delivery_id: str | None = None


class HotfixInput(Payload):
    repo: RepoRef
    pr: int
    # Carried across continue-as-new: commands not handled yet, and the roots hotfixed so far
    # (each told when the pull request is merged).
    pending: list[HotfixCommand] = Field(default_factory=list)
    hotfixed: list[str] = Field(default_factory=list)
    closed: PullRequestClosed | None = None


class HotfixJudgeRequest(Payload):
    repo: RepoRef
    pr: int
    command: HotfixCommand


class HotfixVerdict(Payload):
    """Whether the command may deploy, and what was checked (the comment lists both)."""

    allowed: bool
    reasons: list[str] = Field(default_factory=list)  # why not, each a sentence
    met: list[str] = Field(default_factory=list)  # the requirements that held
    head_sha: str = ""
    url: str = ""  # the pull request's page


class HotfixCommentRequest(Payload):
    repo: RepoRef
    pr: int
    body: str  # rollwright's own words: roots, logins, requirements; never render output


class HotfixMergedRequest(Payload):
    repo: RepoRef
    roots: list[str]
    merged: HotfixMerged
