"""One deployment of one root to one revision: the Temporal workflow (`workflow`) and the plain
rules it runs by, each testable without a Temporal server: the review gate (`review`), worker
pinning (`pinning`) and what the deployment writes down (`records`)."""

from workflows.deployment.workflow import DeploymentWorkflow

__all__ = ["DeploymentWorkflow"]
