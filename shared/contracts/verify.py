"""Delivery verification (docs/verification.md): activity names and payloads.

The deployment asks `verify_plan` which rule of `rollwright.yaml` applies to its root (read at
the deployment's revision), then runs `verify_delivery` with that plan. A plan names the
environment variable that holds the Argo CD token, never the token: payloads land in
Temporal's history.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.contracts.deploy import Payload, RepoRef

Verdict = Literal["verified", "unhealthy"]


class VerifyPlanRequest(Payload):
    repo: RepoRef
    root: str
    revision: str
    deployment_id: str
    commit: str | None = None  # the published commit (git targets)


class ArgoCDPlan(Payload):
    server: str
    token_env: str  # the worker's environment variable holding the token
    applications: str | None = None  # glob of names, `{root}` filled in
    selector: str | None = None  # label selector, `{root}` filled in


class HttpPlan(Payload):
    url: str  # filled in
    status: int = 200
    retries: int = 5
    interval_seconds: int = 30


class PublishedSource(Payload):
    """Where the published commit lives, for telling whether a later commit of the branch
    still holds the root's render (another root published on top of it)."""

    repo: RepoRef  # the publish target as the worker's git mirror fetches it
    path: str  # the root's directory in it (`staging/cluster-a/`; "" for the top)


class VerifyPlan(Payload):
    root: str
    revision: str
    commit: str | None = None
    source: PublishedSource | None = None  # None: only the commit itself counts
    timeout_seconds: int = 900
    interval_seconds: int = 10
    argocd: ArgoCDPlan | None = None
    http: HttpPlan | None = None

    def describe(self) -> str:
        """What is waited for, for the check run (Markdown)."""
        parts = []
        if self.argocd is not None:
            which = (
                f"named `{self.argocd.applications}`"
                if self.argocd.applications is not None
                else f"selected by `{self.argocd.selector}`"
            )
            at = f"`{self.commit[:12]}`" if self.commit else "the published commit"
            parts.append(f"Argo CD Applications {which} Synced at {at} and Healthy")
        if self.http is not None:
            parts.append(f"`{self.http.url}` answering {self.http.status}")
        minutes = f"{self.timeout_seconds / 60:g} min"
        return "Waiting for " + ", then ".join(parts) + f" (at most {minutes})."


class VerifyPlanResult(Payload):
    plan: VerifyPlan | None = None  # None: no rule applies to the root


class VerifyRequest(Payload):
    repo: RepoRef
    deployment_id: str
    plan: VerifyPlan


class ApplicationHealth(Payload):
    """One Argo CD Application as verification last saw it."""

    name: str
    sync: str = "Unknown"
    revision: str = ""
    health: str = "Unknown"
    health_message: str = ""
    operation: str = ""  # phase of the last sync operation, and its message
    conditions: list[str] = Field(default_factory=list)


class VerifyResult(Payload):
    verdict: Verdict
    reason: str  # one line: why
    applications: list[ApplicationHealth] = Field(default_factory=list)
    http_status: int | None = None

    def markdown(self) -> str:
        """The check run's and the job page's account of the verdict."""
        lines = [self.reason]
        if self.applications:
            lines += [
                "",
                "| Application | Sync | Revision | Health | Operation | Conditions |",
                "|---|---|---|---|---|---|",
            ]
            for app in self.applications:
                health = app.health + (f": {app.health_message}" if app.health_message else "")
                lines.append(
                    f"| `{app.name}` | {app.sync} | `{app.revision[:12]}` | {_cell(health)} | "
                    f"{_cell(app.operation)} | {_cell('; '.join(app.conditions))} |"
                )
        if self.http_status is not None:
            lines += ["", f"HTTP check answered {self.http_status}."]
        return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
