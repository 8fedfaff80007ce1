"""The workflow classes a worker registers: the one module of `workflows` that processes import.

The worker registers these; the gateway starts and signals workflows by name with the payloads
of shared/contracts and imports nothing from `workflows` (a contract in pyproject.toml).
"""

from __future__ import annotations

from workflows.deployment import DeploymentWorkflow
from workflows.dispatch import DispatchWorkflow
from workflows.hotfix import HotfixWorkflow
from workflows.preview import PreviewWorkflow
from workflows.promotion import PromotionWorkflow
from workflows.revision import RevisionReviewWorkflow
from workflows.rootqueue.workflow import RootQueueWorkflow

WORKFLOWS: tuple[type, ...] = (
    DispatchWorkflow,
    RootQueueWorkflow,
    DeploymentWorkflow,
    PreviewWorkflow,
    PromotionWorkflow,
    RevisionReviewWorkflow,
    HotfixWorkflow,
)
