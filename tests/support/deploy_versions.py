"""Other versions of the workflows, for tests: DeployWorkflow before a patch and the same
change made without its `workflow.patched` check (replay tests), and versions with shorter
limits for the dev-server tests. Own module, imported like workflow code (payloads passed
through the sandbox), so a test worker can run them."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shared.contracts.activityrefs import (
        ACT_RECORD_DEPLOYMENT,
    )
    from shared.contracts.deploy import (
        DEPLOYMENT_WORKFLOW,
        DeployInput,
        DeploymentInput,
        DeploymentRecord,
        DeploymentResult,
    )
    from workflows.deploy import DeployWorkflow
    from workflows.deployment import DeploymentWorkflow


@workflow.defn(name="DeployWorkflow")
class DeployBeforeBounded(DeployWorkflow):
    """DeployWorkflow before bounded histories (patch "deploy-bounded-queue"): every queued
    check run rewritten with the whole queue, continue-as-new only between deployments."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    def _bounds_history(self) -> bool:
        return False


@workflow.defn(name="DeployWorkflow")
class DeployBeforeRecordQueued(DeployBeforeBounded):
    """DeployWorkflow before queued items were recorded in SQL (patch "record-queued")."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    async def _record_queued(self, yields: bool = False) -> None:
        self.unrecorded = []


@workflow.defn(name="DeployWorkflow")
class DeployRecordingUnpatched(DeployBeforeBounded):
    """Queued items recorded without the patch check: what the patch guards against."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    async def _record_queued(self, yields: bool = False) -> None:
        self.unrecorded = []
        for item in self.queue:
            await workflow.execute_activity(
                ACT_RECORD_DEPLOYMENT.name,
                DeploymentRecord(
                    deployment_id=item.deployment_id,
                    repo=self.inp.repo.full_name,
                    root=self.inp.root,
                    revision=item.revision,
                    trigger=item.trigger,
                    state="queued",
                    at=workflow.now(),
                ),
                start_to_close_timeout=timedelta(seconds=30),
            )


@workflow.defn(name="DeployWorkflow")
class DeployBeforeSignalsFirst(DeployBeforeBounded):
    """DeployWorkflow before signals that came in during housekeeping were handled before the
    next item (patch "deploy-signals-before-next-item")."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    def _signals_came_in(self) -> bool:
        return False


@workflow.defn(name="DeployWorkflow")
class DeploySignalsFirstUnpatched(DeployBeforeBounded):
    """The same change without its patch check."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    def _signals_came_in(self) -> bool:
        return self._has_work()


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentNoticingLossFast(DeploymentWorkflow):
    """DeploymentWorkflow that takes a pinned task nobody starts within 2 s (not 30 s) for a
    lost worker: worker-loss tests run on the dev server in real time."""

    pinned_start = timedelta(seconds=2)

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)


@workflow.defn(name="DeployWorkflow")
class DeployNotDetaching(DeployWorkflow):
    """DeployWorkflow that continues as new only between deployments, as before bounded
    queues. For scenarios on the time-skipping test server, which stops skipping time once an
    abandoned child of a closed run ends (the real server does not); the detaching itself is
    tested on the dev server."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    def _detaches(self) -> bool:
        return False


@workflow.defn(name="DeployWorkflow")
class DeployCheckingDetachedFast(DeployWorkflow):
    """DeployWorkflow that asks after a deployment an earlier run started every 2 s (not every
    30 minutes): the dev-server tests of a deployment that ends without telling."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    def _detached_check(self) -> timedelta:
        return timedelta(seconds=2)


@workflow.defn(name="DeployWorkflow")
class DeployBoundedUnpatched(DeployWorkflow):
    """Bounded queues without the patch check: what "deploy-bounded-queue" guards against."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    def _bounds_history(self) -> bool:
        return True


@workflow.defn(name="DeployWorkflow")
class DeployQueueOfThree(DeployWorkflow):
    """DeployWorkflow whose queue holds three merges (not 10,000): the refusal of a merge past
    the most a root's queue keeps."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    def _max_queued(self) -> int:
        return 3


@workflow.defn(name="DeployWorkflow")
class DeployWritingEveryBatch(DeployWorkflow):
    """DeployWorkflow before "deploy-writes-yield": every changed check run and row written
    before the next deployment starts."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    def _writes_yield(self) -> bool:
        return False


@workflow.defn(name="DeployWorkflow")
class DeployYieldingUnpatched(DeployWorkflow):
    """Writes that yield without the patch check: what "deploy-writes-yield" guards against."""

    @workflow.run
    async def run(self, inp: DeployInput) -> None:
        await super().run(inp)

    def _writes_yield(self) -> bool:
        return self.bounded
