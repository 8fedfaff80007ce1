"""Builders for the tests of the plain workflow rules: a deployment's input and diff."""

from __future__ import annotations

from typing import Any

from shared.contracts.deploy import DeploymentInput, DiffSummary, RepoRef

REPO = RepoRef(owner="acme", name="fleet")
ROOT = "prod/eu-west"
REVISION = "a" * 40


def deployment_input(**fields: Any) -> DeploymentInput:
    values: dict[str, Any] = {
        "deployment_id": "dep-1",
        "repo": REPO,
        "root": ROOT,
        "revision": REVISION,
        "trigger": "merge",
        "relation": "ahead",
    }
    return DeploymentInput.model_validate(values | fields)


def diff(added: int = 0, removed: int = 0, changed: int = 0) -> DiffSummary:
    empty = not (added or removed or changed)
    return DiffSummary(
        added=added, removed=removed, changed=changed, empty=empty, text="", full_key="k"
    )
