"""Pull request previews: fetch the PR refs, build the report, write the sticky comment.

- `preview_revisions`: fetch the mirror (GitHub's `refs/pull/N/head` and `refs/pull/N/merge`
  come with it) and pick what each side renders. The merge ref is GitHub's merge of the PR
  into its base: the PR side renders it and the base side its first parent (the base tip it
  was made from, so the diff shows exactly what the PR changes). Without one (conflicts, or
  GitHub still computing it) the PR head is rendered against its merge base with the base
  branch, and the report says so in a warning.
- `preview_build`: `shared.review.preview.build_preview` on the mirror (bare, read in place; only
  affected roots; redacted), heartbeating while it renders. A cancellation (a newer head,
  the PR closed) stops the rendering thread at its next root. Everything is stored under
  `previews/<owner>/<repo>/<pr>/<head>/` (report.md uncut, report.json, report.diff,
  comment.md); the answer carries the check run's texts, cut to GitHub's limit.
- `preview_comment`: the one sticky comment of the App on the PR (found by its marker, edited
  in place; listing before creating makes a retry after a lost answer harmless), then
  `latest.json` pointing the gateway's preview page at this head.

Both sides are rendered from the redacted renders; texts here are built from the report, so
nothing in a comment, check run, blob or log carries a plaintext secret. An unexpected
exception (not a fleet error, whose messages `shared.engine.fleet` redacts) may quote anything, and
neither Temporal's history nor the worker log redacts: the activity logs its type and
traceback without the message and fails with its type and a generic sentence
(`activities.errors.withhold_unexpected`).
"""

from __future__ import annotations

import asyncio
import html
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import (
    ERR_REVISION_NOT_FOUND,
    github_errors,
    withhold_unexpected,
)
from activities.github import GitHubAccess
from activities.governance import owners_report
from activities.heartbeat import beat, blocking
from shared.contracts.activityrefs import (
    ACT_PREVIEW_BUILD,
    ACT_PREVIEW_COMMENT,
    ACT_PREVIEW_REVISIONS,
)
from shared.contracts.governance import OwnersRequirement
from shared.contracts.preview import (
    ERR_PREVIEW_REVISION,
    PREVIEW_COMMENT_MARKER,
    PreviewBuildRequest,
    PreviewCommentRef,
    PreviewCommentRequest,
    PreviewCounts,
    PreviewOutcome,
    PreviewPointer,
    PreviewRevisions,
    PreviewRevisionsRequest,
    preview_latest_key,
    preview_prefix,
)
from shared.engine.secrets.redact import keyed_markers
from shared.github.limits import COMMENT_LIMIT, OUTPUT_LIMIT, fit_text, size
from shared.review.markdown import report_markdown
from shared.review.preview import build_preview
from shared.review.report import PreviewReport, report_json, report_unified, repro_command
from shared.settings import Settings
from shared.stores.blob import BlobStore
from shared.stores.gitmirror import GitMirror, RevisionNotFound

T = TypeVar("T")

MERGE_MISSING = (
    "merge ref missing (conflicts?): the PR head `{head}` is rendered against its merge base "
    "`{base}` with `{branch}`, not the merge result"
)
MERGE_STALE = (
    "merge ref out of date (GitHub is still computing it?): the PR head `{head}` is rendered "
    "against its merge base `{base}` with `{branch}`, not the merge result"
)
COMMENT_TAG = f"<!-- {PREVIEW_COMMENT_MARKER} -->"
MAX_LISTED = 50  # roots named in a summary list
MAX_ERROR_BYTES = 4000  # of one error in the summary (the text and the full report have all)
MAX_LINE_BYTES = 300  # of one warning line in the summary
# Room the workflow may add to the summary (a note that the comment could not be written).
SUMMARY_RESERVE = 4_500
# The OWNERS table after the summary: skipped when less than this is left of GitHub's limit.
OWNERS_MIN_BYTES = 500
OWNERS_CUT = "\n_{omitted} more OWNERS files are not listed here._\n"
SUMMARY_CUT = "\n\n_The summary is cut here to stay within GitHub's limit; see the full diff._\n"


class PreviewCancelled(Exception):
    """Raised inside the rendering thread once the activity has been cancelled."""


class PreviewActivities:
    def __init__(
        self,
        settings: Settings,
        mirror: GitMirror,
        blobs: BlobStore,
        github: GitHubAccess,
        *,
        jobs: int = 1,
        merge_attempts: int = 5,
        merge_wait: float = 2.0,
    ) -> None:
        self.settings = settings
        self.mirror = mirror
        self.blobs = blobs
        self.github = github
        self.jobs = jobs
        self.merge_attempts = merge_attempts
        self.merge_wait = merge_wait

    # --- revisions ---------------------------------------------------------------------------

    @activity.defn(name=ACT_PREVIEW_REVISIONS.name)
    async def preview_revisions(self, request: PreviewRevisionsRequest) -> PreviewRevisions:
        repo, head = request.repo, request.head_sha
        base_tip, merge = "", None
        for attempt in range(1, self.merge_attempts + 1):
            refs = await blocking(self.mirror.pull_refs, repo, request.pr, request.base_ref)
            if refs.base is None:
                raise ApplicationError(
                    f"previewing {repo.full_name}#{request.pr}: the base branch "
                    f"{request.base_ref!r} is not in the repository",
                    type=ERR_PREVIEW_REVISION,
                    non_retryable=True,
                )
            base_tip, merge = refs.base, refs.merge
            try:
                await blocking(self.mirror.ensure, repo, head)
            except RevisionNotFound as err:
                # Force-pushed away already; the newer head has its own event.
                raise ApplicationError(
                    f"previewing {repo.full_name}#{request.pr}: {err}",
                    type=ERR_REVISION_NOT_FOUND,
                    non_retryable=True,
                ) from None
            if merge is not None:
                parents = await blocking(self.mirror.parents, repo, merge)
                if len(parents) == 2 and parents[1] == head:
                    return PreviewRevisions(
                        base_sha=parents[0],
                        head_sha=merge,
                        pr_head_sha=head,
                        base_tip_sha=base_tip,
                        merge_sha=merge,
                    )
            if merge is None or attempt == self.merge_attempts:
                break
            # GitHub computes merge refs after the push event: give it a moment.
            activity.logger.info(
                "merge ref not yet updated",
                extra={"repo": repo.full_name, "pr": request.pr, "attempt": attempt},
            )
            await asyncio.sleep(self.merge_wait)
            beat()
        base = await blocking(self.mirror.merge_base, repo, base_tip, head) or base_tip
        template = MERGE_MISSING if merge is None else MERGE_STALE
        warning = template.format(head=head[:12], base=base[:12], branch=request.base_ref)
        return PreviewRevisions(
            base_sha=base,
            head_sha=head,
            pr_head_sha=head,
            base_tip_sha=base_tip,
            merge_sha=None,
            warnings=[warning],
        )

    # --- build -------------------------------------------------------------------------------

    @activity.defn(name=ACT_PREVIEW_BUILD.name)
    async def preview_build(self, request: PreviewBuildRequest) -> PreviewOutcome:
        with withhold_unexpected(f"previewing {request.repo.full_name}#{request.pr}"):
            return await self._build(request)

    async def _build(self, request: PreviewBuildRequest) -> PreviewOutcome:
        repo, rev = request.repo, request.revisions
        mirror = await blocking(self.mirror.ensure, repo, rev.base_sha, rev.head_sha)
        rendered = [0]

        def build(progress: Callable[[str], None]) -> PreviewReport:
            with keyed_markers(self.settings.marker_key(repo.full_name)):
                return build_preview(
                    mirror,
                    rev.base_sha,
                    rev.head_sha,
                    warnings=rev.warnings,
                    jobs=self.jobs,
                    progress=progress,
                )

        def count(_label: str) -> None:
            rendered[0] += 1

        report = await _cancellable(build, count)
        prefix = preview_prefix(repo.full_name, request.pr, rev.pr_head_sha)
        full_url = self.settings.preview_url(repo.full_name, request.pr, rev.pr_head_sha)
        outcome = outcome_of(report, request, prefix=prefix, full_url=full_url)
        owners = await blocking(self._owners, request, report, size(outcome.summary))
        if owners:
            outcome = outcome.model_copy(update={"summary": f"{outcome.summary}\n\n{owners}"})
        await blocking(self._store, report, prefix, request, outcome)
        activity.logger.info(
            "preview built",
            extra={
                "repo": repo.full_name,
                "pr": request.pr,
                "head": rev.pr_head_sha,
                "roots": outcome.counts.roots,
                "renders": rendered[0],
                "conclusion": outcome.conclusion,
            },
        )
        return outcome

    def _owners(self, request: PreviewBuildRequest, report: PreviewReport, used: int) -> str:
        """The OWNERS section of the check run summary (empty: no OWNERS file touched), within
        what the summary (`used` bytes so far) leaves of GitHub's limit."""
        found: dict[str, OwnersRequirement] = {}
        for root in report.roots:
            for req in root.owners:
                found.setdefault(req.path, req)
        if not found:
            return ""
        repo = request.repo
        owners = [found[p] for p in sorted(found)]
        with github_errors():
            lines = owners_report(
                self.github.app_for(repo),
                repo.full_name,
                request.pr,
                request.revisions.pr_head_sha,
                owners,
            )
        budget = OUTPUT_LIMIT - used - 2  # the blank line between
        if budget < OWNERS_MIN_BYTES:
            return ""  # the full report page still lists the owners' files per root
        return fit_text([line + "\n" for line in lines], budget, OWNERS_CUT)

    def _store(
        self,
        report: PreviewReport,
        prefix: str,
        request: PreviewBuildRequest,
        outcome: PreviewOutcome,
    ) -> None:
        rev = request.revisions
        self.blobs.put(f"{prefix}report.md", report_markdown(report, limit=None).encode())
        self.blobs.put(f"{prefix}report.diff", report_unified(report).encode())
        document = report_json(report) | {
            "pull_request": request.pr,
            "pr_head": rev.pr_head_sha,
            "merge": rev.merge_sha,
            "base_ref": request.base_ref,
        }
        self.blobs.put(f"{prefix}report.json", json.dumps(document, indent=1).encode())
        prints = {r.root: r.fingerprint for r in report.roots if r.head_error is None}
        self.blobs.put(f"{prefix}fingerprints.json", json.dumps(prints, indent=1).encode())
        comment = comment_body(report, request, full_url=outcome.full_url)
        self.blobs.put(outcome.comment_key, comment.encode())

    # --- comment -----------------------------------------------------------------------------

    @activity.defn(name=ACT_PREVIEW_COMMENT.name)
    async def preview_comment(self, request: PreviewCommentRequest) -> PreviewCommentRef:
        body = await blocking(self.blobs.get, request.body_key)
        if body is None:
            raise ApplicationError(
                f"the preview comment {request.body_key} is not in the blob store",
                type=ERR_PREVIEW_REVISION,
                non_retryable=True,
            )
        repo = request.repo.full_name
        with github_errors():
            comment_id = await blocking(self._upsert, request, body.decode("utf-8"), interval=None)
        if request.head_sha and request.prefix and request.conclusion:
            pointer = PreviewPointer(
                pr=request.pr,
                head_sha=request.head_sha,
                prefix=request.prefix,
                conclusion=request.conclusion,
                at=datetime.now(UTC),
            )
            await blocking(
                self.blobs.put,
                preview_latest_key(repo, request.pr),
                pointer.model_dump_json().encode(),
            )
        activity.logger.info(
            "preview comment written",
            extra={"repo": repo, "pr": request.pr, "comment": comment_id},
        )
        return PreviewCommentRef(comment_id=comment_id)

    def _upsert(self, request: PreviewCommentRequest, body: str) -> int:
        app = self.github.app_for(request.repo)
        return app.upsert_sticky_comment(
            request.repo.full_name, request.pr, PREVIEW_COMMENT_MARKER, body
        )


async def _cancellable(
    work: Callable[[Callable[[str], None]], T], progress: Callable[[str], None]
) -> T:
    """`work(progress)` in a thread with heartbeats; once the activity is cancelled the next
    `progress` call raises PreviewCancelled, so the thread stops rendering at the next root
    instead of finishing a report nobody will read."""
    stop = threading.Event()

    def checked(label: str) -> None:
        if stop.is_set():
            raise PreviewCancelled(label)
        progress(label)

    try:
        return await blocking(work, checked)
    except asyncio.CancelledError:
        stop.set()
        activity.logger.info("preview cancelled", extra={"activity": ACT_PREVIEW_BUILD.name})
        raise


# --- texts ---------------------------------------------------------------------------------------


def outcome_of(
    report: PreviewReport, request: PreviewBuildRequest, *, prefix: str, full_url: str
) -> PreviewOutcome:
    rev = request.revisions
    c = report.counts
    counts = PreviewCounts(
        roots=c.roots,
        roots_changed=c.roots_changed,
        roots_added=c.roots_added,
        roots_removed=c.roots_removed,
        roots_failed=c.roots_failed,
        added=c.added,
        removed=c.removed,
        changed=c.changed,
        hidden=c.hidden,
    )
    failed_roots = [r.root for r in report.head_errors]
    repro = repro_command(rev.base_sha, rev.head_sha, failed_roots[0] if failed_roots else None)
    conclusion = "failure" if report.failed else "success"
    warnings = list(report.warnings) + [
        f"`{r.root}`: the base side failed to render (shown as all added): {r.base_error}"
        for r in report.base_errors
    ]
    return PreviewOutcome.model_validate(
        {
            "conclusion": conclusion,
            "title": _title(report),
            "summary": _summary(report, request, full_url=full_url, repro=repro),
            "text": report_markdown(report, limit=OUTPUT_LIMIT, full_url=full_url, title=""),
            "counts": counts,
            "warnings": warnings,
            "error": report.error
            or (report.head_errors[0].head_error or "" if failed_roots else ""),
            "roots": [r.root for r in report.roots[:200]],
            "prefix": prefix,
            "comment_key": f"{prefix}comment.md",
            "full_url": full_url,
            "repro": repro,
        }
    )


def _title(report: PreviewReport) -> str:
    c = report.counts
    if report.error is not None:
        return "The PR side cannot be read"
    if c.roots_failed:
        return f"{c.roots_failed} of {c.roots} root(s) fail to render on the PR side"
    if not report.roots:
        return "No root affected"
    if not report.changed:
        return f"{c.roots} root(s) rendered: no changes"
    return (
        f"{c.roots_changed} of {c.roots} root(s) change: "
        f"{c.added} added, {c.removed} removed, {c.changed} changed"
    )


def _summary(
    report: PreviewReport, request: PreviewBuildRequest, *, full_url: str, repro: str
) -> str:
    rev = request.revisions
    c = report.counts
    branch = request.base_ref or "base"
    pr_side = (
        f"merge result `{rev.merge_sha[:12]}`"
        if rev.merge_sha
        else f"PR head `{rev.pr_head_sha[:12]}`"
    )
    lines = [
        f"Base `{rev.base_sha[:12]}` ({branch}) → {pr_side}.",
        "",
        f"- Roots rendered: {c.roots}"
        + (" (a global input changed: every root)" if report.all_roots else " (affected only)"),
        f"- Roots changed: {c.roots_changed}; failed on the PR side: {c.roots_failed}",
        f"- Resources: {c.added} added, {c.removed} removed, {c.changed} changed"
        + (f"; {c.hidden} hidden as noise" if c.hidden else ""),
    ]
    findings = [f for r in report.roots for f in r.policies]
    if findings:
        denies = sum(1 for f in findings if f.level == "deny")
        lines.append(
            f"- Policy checks: {denies} denied, {len(findings) - denies} warning(s)"
            + (" (deployments wait for an owner of each set)" if denies else "")
        )
    for status, label in (("added", "Roots added"), ("removed", "Roots removed")):
        names = [r.root for r in report.roots if r.status == status]
        if names:
            shown = ", ".join(f"`{n}`" for n in names[:MAX_LISTED])
            more = f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""
            lines.append(f"- {label}: {shown}{more}")
    warnings = list(report.warnings) + [
        f"`{r.root}`: the base side failed to render, so the diff shows the PR side as added"
        for r in report.base_errors
    ]
    if warnings:
        lines += ["", "**Warnings**", ""]
        lines += [f"- ⚠️ {_one_line(w)}" for w in warnings[:MAX_LISTED]]
    errors = ([("the PR side", report.error)] if report.error else []) + [
        (f"`{r.root}`", r.head_error or "") for r in report.head_errors[:5]
    ]
    errors += [
        (f"`{r.root}` (policy sets)", r.policy_error)
        for r in report.roots
        if r.policy_error is not None
    ][:5]
    if errors:
        lines += ["", "**The PR side fails to render**", ""]
        for where, message in errors:
            lines += [f"{where}:", "", _fenced(_cut(message, MAX_ERROR_BYTES)), ""]
        lines += [
            "Reproduce locally:",
            "",
            _fenced(
                f"git fetch origin {branch} pull/{request.pr}/head"
                + (f" pull/{request.pr}/merge" if rev.merge_sha else "")
                + f"\n{repro}"
            ),
        ]
    link = f"\n\nFull diff: {full_url}"
    # The lines are bounded one by one; this only guards the sum (a summary GitHub refuses
    # would leave the check run in progress for good).
    body = fit_text(
        [line + "\n" for line in lines], OUTPUT_LIMIT - SUMMARY_RESERVE - len(link), SUMMARY_CUT
    )
    return body.rstrip("\n") + link


def comment_body(report: PreviewReport, request: PreviewBuildRequest, *, full_url: str) -> str:
    """The sticky comment: marker, the report within GitHub's limit, and which head it shows.
    Each failed root gets its own `rollwright diff` command (the report's default)."""
    rev = request.revisions
    side = f"merge `{rev.merge_sha[:12]}`" if rev.merge_sha else "no merge ref"
    footer = (
        f"\n<sub>PR head `{rev.pr_head_sha[:12]}` ({side}) against `{rev.base_sha[:12]}` "
        f"({request.base_ref or 'base'}); edited on every push · [full diff]({full_url})</sub>\n"
    )
    header = f"{COMMENT_TAG}\n"
    budget = COMMENT_LIMIT - len(header.encode()) - len(footer.encode())
    body = report_markdown(report, limit=budget, full_url=full_url, title="rollwright preview")
    if not body.endswith("\n"):
        body += "\n"
    return header + body + footer


def _one_line(text: str) -> str:
    """The first line, cut to MAX_LINE_BYTES, HTML-escaped: a warning can quote a file (an
    unreadable fleet), which must neither overflow the summary nor open markup in it."""
    first, _, rest = text.strip().partition("\n")
    clipped = first.encode("utf-8")[:MAX_LINE_BYTES].decode("utf-8", "ignore")
    more = " …" if rest or clipped != first else ""
    return html.escape(clipped, quote=False) + more


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore") + "\n… (cut; the full report has all of it)"


def _fenced(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text}\n{fence}"
