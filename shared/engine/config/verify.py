"""rollwright.yaml `verify`: how deployments are verified after publish, through Argo CD and
an HTTP check (docs/verification.md)."""

from __future__ import annotations

from pydantic import Field, model_validator

from shared.engine.config.durations import DURATION_PATTERN, duration_seconds
from shared.engine.config.parsing import StrictModel

_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class ArgoCDVerifySettings(StrictModel):
    """Wait for a root's Argo CD Applications (docs/verification.md)."""

    server: str = Field(
        pattern=r"^https?://\S+$",
        description="Argo CD's URL (`https://argocd.example.com`); its REST API is under "
        "`/api/v1/`.",
    )
    token_env: str = Field(
        default="ARGOCD_TOKEN",
        alias="tokenEnv",
        pattern=_ENV_NAME,
        description="Name of the worker's environment variable holding an Argo CD API token "
        "(a project role or account token with `applications, get`). The token itself never "
        "goes in this file.",
    )
    applications: str | None = Field(
        default=None,
        description="Glob of the root's Application names; `{root}` is the root id with `/` "
        "as `-` (`{root}-*`).",
    )
    selector: str | None = Field(
        default=None,
        description="Label selector of the root's Applications (`rollwright.dev/root={root}`; "
        "`{root}` as in `applications`).",
    )

    @model_validator(mode="after")
    def _one_way(self) -> ArgoCDVerifySettings:
        if (self.applications is None) == (self.selector is None):
            raise ValueError("argocd needs exactly one of applications and selector")
        return self


class HttpVerifySettings(StrictModel):
    """The external validation component: one URL that must answer `status`."""

    url: str = Field(
        pattern=r"^https?://\S+$",
        description="URL template: `{root}` (the root id), `{revision}` (the fleet commit "
        "deployed), `{commit}` (the published commit; empty unless publishing to git).",
    )
    status: int = Field(default=200, ge=100, le=599, description="The status that means healthy.")
    retries: int = Field(
        default=5, ge=0, le=100, description="Further attempts after a wrong answer or none."
    )
    interval: str = Field(
        default="30s", pattern=DURATION_PATTERN, description="Time between attempts (30s, 1m)."
    )


class VerifyRule(StrictModel):
    """How the deployments of some roots are verified after publish."""

    roots: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs of root ids the rule applies to; the first matching rule wins.",
    )
    timeout: str = Field(
        default="15m",
        pattern=DURATION_PATTERN,
        description="How long the Applications may take to be Synced at the published commit "
        "and Healthy, and the HTTP check to pass; then the deployment is `unhealthy`.",
    )
    interval: str = Field(
        default="10s", pattern=DURATION_PATTERN, description="How often Argo CD is asked (10s, 1m)."
    )
    argocd: ArgoCDVerifySettings | None = Field(
        default=None, description="Wait for the root's Argo CD Applications."
    )
    http: HttpVerifySettings | None = Field(
        default=None, description="An HTTP check, alone or after Argo CD."
    )

    @model_validator(mode="after")
    def _something(self) -> VerifyRule:
        if self.argocd is None and self.http is None:
            raise ValueError("a verify rule needs argocd, http or both")
        if duration_seconds(self.timeout) <= 0:
            raise ValueError("timeout must be longer than 0")
        return self

    @property
    def timeout_seconds(self) -> int:
        return duration_seconds(self.timeout)

    @property
    def interval_seconds(self) -> int:
        return max(1, duration_seconds(self.interval))
