"""HotfixWorkflow: deploying an unmerged pull request's head (`hotfix:<owner>/<repo>:<pr>`).

The gateway signal-with-starts it with `hotfix` for each `/rollwright hotfix <root>…` comment
and signals `pr_closed` when the pull request closes. Commands are handled one at a time, in
order:

1. `hotfix_judge` (a worker: rollwright.yaml's `hotfix` on the default branch, the pull request,
   its reviews and checks, the commenter's access) says whether the command may deploy;
2. allowed: each root's queue gets the head as a manual deployment marked as a hotfix
   (`signal_deploys`), which always waits for review and, once published, locks the root;
3. the sticky `rollwright:hotfix` comment says what happened, and the audit trail has a row
   per root, counted or refused.

When the pull request is merged, every root hotfixed is told (`hotfix_merged`) and its lock
opens; closed without a merge, the locks stay until someone clicks Unlock. The workflow ends
then. It continues as new after many commands.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from shared.contracts.activityrefs import (
        ACT_HOTFIX_COMMENT,
        ACT_HOTFIX_JUDGE,
        ACT_HOTFIX_MERGED,
        ACT_RECORD_AUDIT,
        ACT_SIGNAL_DEPLOYS,
    )
    from shared.contracts.deploy import (
        AuditRecord,
        HotfixMerged,
        HotfixRef,
        NewRevision,
        SignalDeploysRequest,
    )
    from shared.contracts.hotfix import (
        HOTFIX_COMMENT_MARKER,
        HOTFIX_WORKFLOW,
        SIGNAL_HOTFIX,
        SIGNAL_HOTFIX_CLOSED,
        HotfixCommand,
        HotfixCommentRequest,
        HotfixInput,
        HotfixJudgeRequest,
        HotfixMergedRequest,
        HotfixVerdict,
    )
    from shared.contracts.preview import PullRequestClosed
    from workflows import calls
    from workflows.hotfixwords import comment_body, refused_verdict
    from workflows.quoting import quoted

MAX_HISTORY_EVENTS = 2_000
MAX_COMMANDS_PER_RUN = 50


@workflow.defn(name=HOTFIX_WORKFLOW)
class HotfixWorkflow:
    @workflow.init
    def __init__(self, inp: HotfixInput) -> None:
        self.inp = inp
        self.pending: list[HotfixCommand] = list(inp.pending)
        self.hotfixed: list[str] = list(inp.hotfixed)
        self.closed: PullRequestClosed | None = inp.closed
        self.handled = 0

    @workflow.signal(name=SIGNAL_HOTFIX)
    def hotfix(self, command: HotfixCommand) -> None:
        self.pending.append(command)

    @workflow.signal(name=SIGNAL_HOTFIX_CLOSED)
    def pr_closed(self, closed: PullRequestClosed) -> None:
        self.closed = closed

    @workflow.query(name="hotfixed")
    def roots_hotfixed(self) -> list[str]:
        return list(self.hotfixed)

    @workflow.run
    async def run(self, inp: HotfixInput) -> list[str]:
        while True:
            await workflow.wait_condition(lambda: bool(self.pending) or self.closed is not None)
            # Commands made before the pull request closed still count: they were judged on
            # the pull request as it was (a closed one is refused by the judge).
            while self.pending:
                await self._handle(self.pending.pop(0))
                self.handled += 1
                if self._should_continue_as_new():
                    self._continue_as_new()
            if self.closed is not None:
                await self._closed(self.closed)
                return self.hotfixed

    async def _handle(self, command: HotfixCommand) -> None:
        repo, pr = self.inp.repo, self.inp.pr
        if command.problem:
            verdict = refused_verdict(command.problem)
            await self._comment(comment_body(pr, command, verdict, []))
            return
        try:
            verdict = await calls.run(
                ACT_HOTFIX_JUDGE,
                HotfixJudgeRequest(repo=repo, pr=pr, command=command),
                options=calls.JUDGE_CLICK,
            )
        except ActivityError as err:
            # GitHub or the mirror did not answer after a few attempts: refused, and the
            # comment says so; commenting again asks again.
            verdict = refused_verdict(f"it could not be judged: {quoted(err)}")
        queued: list[str] = []
        if verdict.allowed:
            queued = await self._queue(command, verdict)
        for root in command.roots:
            await self._audit(command, root, verdict, counted=root in queued)
        await self._comment(comment_body(pr, command, verdict, queued))

    async def _queue(self, command: HotfixCommand, verdict: HotfixVerdict) -> list[str]:
        revision = NewRevision(
            revision=verdict.head_sha,
            trigger="manual",
            reason="hotfix",
            requested_by=command.by,
            hotfix=HotfixRef(pr=self.inp.pr, head=verdict.head_sha, url=verdict.url),
        )
        try:
            await calls.run(
                ACT_SIGNAL_DEPLOYS,
                SignalDeploysRequest(repo=self.inp.repo, roots=command.roots, revision=revision),
                options=calls.SIGNAL_DEPLOYS,
            )
        except ActivityError as err:
            workflow.logger.warning("hotfix not queued: %s", quoted(err))
            verdict.allowed = False
            verdict.reasons.append(f"the roots' queues could not be reached: {quoted(err)}")
            return []
        self.hotfixed += [root for root in command.roots if root not in self.hotfixed]
        return list(command.roots)

    async def _closed(self, closed: PullRequestClosed) -> None:
        if not closed.merged or not self.hotfixed:
            return
        merged = HotfixMerged(
            pr=self.inp.pr, merge_commit_sha=closed.merge_commit_sha, by=closed.sender
        )
        # Retried until the queues answer: a lock left closed would hold every later merge.
        await calls.run(
            ACT_HOTFIX_MERGED,
            HotfixMergedRequest(repo=self.inp.repo, roots=self.hotfixed, merged=merged),
            options=calls.SIGNAL_DEPLOYS,
        )

    async def _audit(
        self, command: HotfixCommand, root: str, verdict: HotfixVerdict, *, counted: bool
    ) -> None:
        reason = (
            f"pull request #{self.inp.pr} at {verdict.head_sha[:12]}"
            if counted
            else "; ".join(verdict.reasons)
        )
        record = AuditRecord(
            repo=self.inp.repo.full_name,
            root=root,
            action="hotfix",
            actor=command.by,
            source="pr_comment",
            counted=counted,
            reason=reason,
            at=workflow.now(),
        )
        try:
            await calls.run(ACT_RECORD_AUDIT, record, options=calls.RECORD)
        except ActivityError as err:
            workflow.logger.warning("hotfix audit row not written: %s", err.cause or err)

    async def _comment(self, body: str) -> None:
        try:
            await calls.run(
                ACT_HOTFIX_COMMENT,
                HotfixCommentRequest(repo=self.inp.repo, pr=self.inp.pr, body=body),
                options=calls.GITHUB,
            )
        except ActivityError as err:
            # The comment only reports: the deployments' check runs say the rest.
            workflow.logger.warning("%s comment not written: %s", HOTFIX_COMMENT_MARKER, err.cause)

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return (
            self.handled >= MAX_COMMANDS_PER_RUN
            or info.is_continue_as_new_suggested()
            or info.get_current_history_length() > MAX_HISTORY_EVENTS
        )

    def _continue_as_new(self) -> None:
        workflow.continue_as_new(
            HotfixInput(
                repo=self.inp.repo,
                pr=self.inp.pr,
                pending=self.pending,
                hotfixed=self.hotfixed,
                closed=self.closed,
            )
        )
