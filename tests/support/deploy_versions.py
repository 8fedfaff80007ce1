"""Other versions of DeployWorkflow, for replay tests: the code before a patch, and the same
change made without its `workflow.patched` check. Own module, imported like workflow code
(payloads passed through the sandbox), so a test worker can run them."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shared.contracts.deploy import (
        DEPLOYMENT_WORKFLOW,
        DeploymentInput,
        DeploymentResult,
        DispatchInput,
        DispatchResult,
    )
    from workflows import calls
    from workflows.deployment import DeploymentWorkflow
    from workflows.dispatch import DispatchWorkflow


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentBeforeReviewOrigin(DeploymentWorkflow):
    """DeploymentWorkflow before review clicks were checked against the deployment's own
    check run and recorded (patch "review-checks-origin")."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _checks_origin(self) -> bool:
        return False

    def _governs(self) -> bool:
        return False


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentReviewOriginUnpatched(DeploymentWorkflow):
    """The same change without its patch check."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _checks_origin(self) -> bool:
        return True


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentBeforeVerify(DeploymentWorkflow):
    """DeploymentWorkflow before delivery verification (patch "verify-delivery"): it ended
    at "published"."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _verifies(self) -> bool:
        return False


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentVerifyUnpatched(DeploymentWorkflow):
    """The same change without its patch check."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _verifies(self) -> bool:
        return True


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentBeforeGovernance(DeploymentWorkflow):
    """DeploymentWorkflow before review policies (patch "governance-review-policy"): the
    first click on the deployment's own check run decided."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _governs(self) -> bool:
        return False


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentGovernanceUnpatched(DeploymentWorkflow):
    """The same change without its patch check."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _governs(self) -> bool:
        return True


@workflow.defn(name="DispatchWorkflow")
class DispatchBeforeFleetReports(DispatchWorkflow):
    """DispatchWorkflow before an unreadable fleet got a `rollwright` check run (patch
    "dispatch-reports-unreadable-fleet"): the dispatch failed."""

    @workflow.run
    async def run(self, inp: DispatchInput) -> DispatchResult:
        return await super().run(inp)

    def _reports_unreadable_fleet(self) -> bool:
        return False


@workflow.defn(name="DispatchWorkflow")
class DispatchFleetReportsUnpatched(DispatchWorkflow):
    """The same change without its patch check."""

    @workflow.run
    async def run(self, inp: DispatchInput) -> DispatchResult:
        return await super().run(inp)

    def _reports_unreadable_fleet(self) -> bool:
        return True


@workflow.defn(name="DispatchWorkflow")
class DispatchBeforeDeliveryOrder(DispatchWorkflow):
    """DispatchWorkflow before it waited for the previous delivery's dispatch (patch
    "dispatch-in-delivery-order")."""

    @workflow.run
    async def run(self, inp: DispatchInput) -> DispatchResult:
        return await super().run(inp)

    def _in_delivery_order(self) -> bool:
        return False


@workflow.defn(name="DispatchWorkflow")
class DispatchDeliveryOrderUnpatched(DispatchWorkflow):
    """The same change without its patch check."""

    @workflow.run
    async def run(self, inp: DispatchInput) -> DispatchResult:
        return await super().run(inp)

    def _in_delivery_order(self) -> bool:
        return True


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentNoticingLossFast(DeploymentWorkflow):
    """DeploymentWorkflow that takes a pinned task nobody starts within 2 s (not 30 s) for a
    lost worker: worker-loss tests run on the dev server in real time."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _pinned(self, options: calls.Options) -> calls.Options:
        return dataclasses.replace(options, schedule_to_start=timedelta(seconds=2))


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentBeforeWorkerLoss(DeploymentNoticingLossFast):
    """DeploymentWorkflow before lost workers were replaced and the checkout removal stopped
    holding the deployment (patches "deployment-repins-lost-workers", "cleanup-never-blocks")."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _repins(self) -> bool:
        return False

    def _cleans_up_behind(self) -> bool:
        return False

    def _governs(self) -> bool:
        return False


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentWorkerLossUnpatched(DeploymentWorkflow):
    """The same changes without their patch checks."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _repins(self) -> bool:
        return True

    def _cleans_up_behind(self) -> bool:
        return True


@workflow.defn(name="DispatchWorkflow")
class DispatchWaitingOnSharedQueue(DispatchWorkflow):
    """DispatchWorkflow that awaited the previous dispatch on the shared queue, before the
    waits queue (whose waiters could take every shared slot)."""

    @workflow.run
    async def run(self, inp: DispatchInput) -> DispatchResult:
        return await super().run(inp)

    def _waits_queue(self) -> str | None:
        return None


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentBeforeBusyWorkers(DeploymentNoticingLossFast):
    """DeploymentWorkflow before "deployment-waits-for-busy-workers": every pinned task nobody
    took within the start limit was a lost worker."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _waits_for_busy_workers(self) -> bool:
        return False


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentBusyWorkersUnpatched(DeploymentWorkflow):
    """The same change without its patch check."""

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)

    def _waits_for_busy_workers(self) -> bool:
        return True
