"""A DeploymentWorkflow with a shorter limit, for the dev-server tests of lost workers. Own
module, imported like workflow code (payloads passed through the sandbox), so a test worker
can run it."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shared.contracts.deploy import DEPLOYMENT_WORKFLOW, DeploymentInput, DeploymentResult
    from workflows.deployment import DeploymentWorkflow


@workflow.defn(name=DEPLOYMENT_WORKFLOW)
class DeploymentNoticingLossFast(DeploymentWorkflow):
    """DeploymentWorkflow that takes a pinned task nobody starts within 2 s (not 30 s) for a
    lost worker: worker-loss tests run on the dev server in real time."""

    pinned_start = timedelta(seconds=2)

    @workflow.run
    async def run(self, inp: DeploymentInput) -> DeploymentResult:
        return await super().run(inp)
