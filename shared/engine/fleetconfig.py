"""`rollwright.yaml` at the root of a fleet repo: layout choice and render settings.

Every key is optional; without the file the layout is detected (`config/config.yaml` →
dimensions, `deployments/` → atlas). Unknown keys are errors, so typos do not pass silently.
"""

from __future__ import annotations

import fnmatch
import re
import zoneinfo
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from shared.engine import suggest, yamldoc
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.manifests import documents
from shared.engine.tree import Tree

CONFIG_FILE = "rollwright.yaml"

M = TypeVar("M", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class OutputSettings(_Strict):
    pattern: str = Field(
        default=documents.DEFAULT_PATTERN,
        description="File name of each rendered resource, relative to the root directory. "
        "Fields: " + ", ".join(sorted(documents.PATTERN_FIELDS)),
    )

    @field_validator("pattern")
    @classmethod
    def _check_pattern(cls, value: str) -> str:
        problem = documents.validate_pattern(value)
        if problem:
            raise ValueError(problem)
        return value


class RenderSettings(_Strict):
    crds: bool = Field(default=True, description="Render CRDs from charts' crds/ folders.")
    hooks: bool = Field(
        default=True,
        description="Render Helm hook resources under hooks/ (as `helm template` and Argo CD "
        "do); false drops them unless a release says `hooks: true`.",
    )
    tests: bool = Field(default=False, description="Keep Helm test resources (tests/).")
    cluster_scoped_kinds: list[str] = Field(
        default_factory=list,
        alias="clusterScopedKinds",
        description="Extra cluster-scoped kinds (beyond Kubernetes' own and CRDs in the render).",
    )


class Capabilities(_Strict):
    """What `.Capabilities` tells charts: the cluster's Kubernetes version and extra APIs.
    Also the `kubeVersion` / `apiVersions` keys of atlas helmfiles and their releases."""

    kube_version: str | None = Field(
        default=None,
        alias="kubeVersion",
        description="Kubernetes version of the cluster (`v1.31.2`), as `helm template "
        "--kube-version`. Also checked against a chart's `kubeVersion` constraint.",
    )
    api_versions: list[str] | None = Field(
        default=None,
        alias="apiVersions",
        description="Extra API versions (`monitoring.coreos.com/v1`, or "
        "`monitoring.coreos.com/v1/ServiceMonitor`), as `helm template --api-versions`.",
    )

    @field_validator("kube_version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        # `kubeVersion: 1.30` is a float in YAML; a version is text.
        return (
            str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        )


class ClusterCapabilities(Capabilities):
    roots: list[str] = Field(
        description="Globs of root ids (`prod/*`) these capabilities apply to; the last "
        "matching entry wins."
    )


class AtlasSettings(_Strict):
    """How the atlas layout reads a fleet (docs/formats/atlas.md)."""

    namespaces: Literal["atlas", "template-first"] = Field(
        default="atlas",
        description="`atlas`: a release's namespace is `apps[].namespace`, else the "
        "deployment's `settings.namespace`, else the template release's `namespace:`, else "
        "the deployment name (ATLAS). `template-first`: the template release's `namespace:` "
        "wins over the deployment's (rollwright's earlier rule).",
    )
    group_values: Literal["innermost", "all"] = Field(
        default="innermost",
        alias="groupValues",
        description="`innermost`: a cluster reads the group.values.* and apps/ of its parent "
        "directory only (ATLAS). `all`: of every group directory above it, outermost first.",
    )
    capabilities: Capabilities = Field(
        default_factory=Capabilities,
        description="Fleet-wide `.Capabilities` (below a template's and a release's own).",
    )
    clusters: list[ClusterCapabilities] = Field(
        default_factory=list,
        description="Per-cluster `.Capabilities`, over the fleet-wide ones.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="The environment Go templates see through `env` and `requiredEnv`: "
        "renders never read the worker's own environment.",
    )


class ExtraInput(_Strict):
    path: str = Field(description="Glob of repo paths (fnmatch, `**` allowed).")
    roots: list[str] = Field(
        default_factory=lambda: ["*"], description="Globs of root ids affected by those paths."
    )


class AffectedSettings(_Strict):
    extra_inputs: list[ExtraInput] = Field(
        default_factory=list,
        alias="extraInputs",
        description="Files outside the fleet inputs whose change should re-render roots.",
    )


_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$")
# No credentials in https URLs (the URL shows in messages); ssh users are not secrets.
_REMOTE_URL = re.compile(r"^https://[^\s@]+$|^ssh://\S+$|^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+$")
_BRANCH = re.compile(r"^(?!/|-)(?!.*(?:\.\.|//|@\{|\.lock$|/$|\.$))[A-Za-z0-9._/-]+$")
ROOT_FIELD = "{root}"


def target_path(template: str, root: str) -> str:
    """Where a root's files go under a publish target: the template with `{root}` filled
    in, as a directory (`prod/eu/`), or "" for the target's top level."""
    path = template.replace(ROOT_FIELD, root).strip("/")
    return f"{path}/" if path else ""


def _check_template(value: str) -> str:
    """A `{root}` path template: relative, no `..`, `{root}` its only field."""
    if ROOT_FIELD not in value:
        raise ValueError(
            "must contain {root}: without it every root would replace the others' files"
        )
    rest = value.replace(ROOT_FIELD, "")
    if "{" in rest or "}" in rest:
        raise ValueError("{root} is the only field a publish path may use")
    if value.startswith("/") or "\\" in value:
        raise ValueError("must be a relative POSIX path (no leading '/')")
    if any(part in (".", "..") for part in value.split("/")):
        raise ValueError("must not contain '.' or '..' segments")
    return value


class GitPublishSettings(_Strict):
    repository: str = Field(
        default="",
        description="Repository to publish to: empty for the fleet repo itself, `owner/name` "
        "on the same GitHub (same owner as the fleet repo; pushed with the installation "
        "token), or an `https://` / `ssh://` / `git@host:path` URL pushed with the worker's "
        "own git credentials (never the installation token).",
    )
    branch: str = Field(default="rendered", description="Branch that receives the renders.")
    path: str = Field(
        default="{root}/",
        description="Where a root's tree goes in that branch; `{root}` is the root id. Only "
        "this subtree is replaced.",
    )

    @field_validator("repository")
    @classmethod
    def _check_repository(cls, value: str) -> str:
        if value and not (_REPOSITORY.match(value) or _REMOTE_URL.match(value)):
            raise ValueError(
                "expected `owner/name` or an https://, ssh:// or git@host:path URL (local "
                "paths are not publish targets)"
            )
        return value

    @field_validator("branch")
    @classmethod
    def _check_branch(cls, value: str) -> str:
        if not _BRANCH.match(value):
            raise ValueError(f"{value!r} is not a valid branch name")
        return value

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        return _check_template(value)


class S3PublishSettings(_Strict):
    bucket: str = Field(default="", description="Bucket (the worker's S3 endpoint and keys).")
    prefix: str = Field(
        default="{root}/", description="Key prefix per root; `{root}` is the root id."
    )

    @field_validator("prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        return _check_template(value)


class PublishSettings(_Strict):
    """Where approved renders go (docs/publishing.md)."""

    target: Literal["blob", "git", "s3"] = Field(
        default="blob",
        description="`blob`: the service's blob store (embedded stack); `git`: a branch or "
        "repository Argo CD / Flux syncs; `s3`: a prefix for Flux Bucket sources.",
    )
    secrets: Literal["refuse", "sops"] = Field(
        default="refuse",
        description="A render with secret values, published to git or S3: `refuse` to "
        "publish it, or `sops` to re-encrypt each file holding secret values for the "
        "recipients of the fleet's .sops.yaml creation rules.",
    )
    git: GitPublishSettings = Field(default_factory=GitPublishSettings)
    s3: S3PublishSettings = Field(default_factory=S3PublishSettings)

    @model_validator(mode="after")
    def _check_target(self) -> PublishSettings:
        if self.target == "s3" and not self.s3.bucket:
            raise ValueError("target s3 needs s3.bucket")
        return self


class NoiseRuleSettings(_Strict):
    """One noise rule: exactly one of `label`, `annotation`, `key`, `pointer`."""

    label: str | None = Field(
        default=None, description="Glob of a label key under any `metadata.labels`."
    )
    annotation: str | None = Field(
        default=None, description="Glob of an annotation key under any `metadata.annotations`."
    )
    key: str | None = Field(default=None, description="Glob of a mapping key at any depth.")
    pointer: str | None = Field(
        default=None,
        description="JSON pointer from the document's top (`/spec/replicas`); `*` globs one "
        "segment.",
    )
    kinds: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs of the document kinds the rule applies to (default: all).",
    )

    @model_validator(mode="after")
    def _one_target(self) -> NoiseRuleSettings:
        given = [name for name, value in self._targets() if value is not None]
        if len(given) != 1:
            raise ValueError(
                "a noise rule needs exactly one of label, annotation, key, pointer"
                + (f" (got {', '.join(given)})" if given else "")
            )
        if self.pointer is not None and not self.pointer.startswith("/"):
            raise ValueError("pointer must start with '/' (a JSON pointer)")
        return self

    def _targets(self) -> list[tuple[str, str | None]]:
        return [
            ("label", self.label),
            ("annotation", self.annotation),
            ("key", self.key),
            ("pointer", self.pointer),
        ]

    def target(self) -> tuple[Literal["label", "annotation", "key", "pointer"], str]:
        """(which kind of rule, its pattern)."""
        for name, value in self._targets():
            if value is not None:
                return name, value  # type: ignore[return-value]
        raise AssertionError("validated: one target is set")


class PreviewSettings(_Strict):
    """Pull request previews and `rollwright diff` (docs/previews.md)."""

    default_noise: bool = Field(
        default=True,
        alias="defaultNoise",
        description="Hide the built-in noise: labels `helm.sh/chart` and "
        "`app.kubernetes.io/version`, annotations `checksum/*`, `caBundle` fields.",
    )
    noise: list[NoiseRuleSettings] = Field(
        default_factory=list,
        description="More noise rules: a changed resource whose only differences match them "
        "is hidden from previews and listed as hidden.",
    )


_DURATION = r"^(0|([0-9]+[smhdw])+)$"
_DURATION_PART = re.compile(r"([0-9]+)([smhdw])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration_seconds(text: str) -> int:
    """Seconds of a duration such as `0`, `45s`, `30m`, `2h`, `1d`, `1w`, `1h30m`."""
    if not re.match(_DURATION, text):
        raise ValueError(f"{text!r} is not a duration (like 30m, 2h, 1d or 1h30m)")
    return sum(int(n) * _DURATION_UNITS[unit] for n, unit in _DURATION_PART.findall(text))


def _check_timezone(value: str) -> str:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {value!r} (an IANA name such as Europe/Berlin or UTC)"
        ) from None
    return value


class PromotionWindow(_Strict):
    """One promotion window rule: exactly one of `allow` and `deny` (docs/promotion.md)."""

    allow: str | None = Field(
        default=None,
        description="Occurrences that open an allow window: a cron expression (5 fields: "
        "minute hour day-of-month month day-of-week) or an RFC 5545 rule "
        "`RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH;BYHOUR=9` (FREQ DAILY, WEEKLY, MONTHLY or "
        "YEARLY), read in `timezone`.",
    )
    deny: str | None = Field(
        default=None, description="Like `allow`, for a window that closes promotions."
    )
    duration: str = Field(
        pattern=_DURATION,
        description="How long each window lasts from its start (elapsed time): 30m, 8h, 2d.",
    )
    timezone: str | None = Field(
        default=None,
        description="IANA time zone of the expression (default: rollout.timezone).",
    )
    nodes: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs of sequence nodes the rule gates (`prod*`, `stage/*`); `*` "
        "matches across `/`. Default: every node.",
    )

    @field_validator("timezone")
    @classmethod
    def _check_zone(cls, value: str | None) -> str | None:
        return None if value is None else _check_timezone(value)

    @model_validator(mode="after")
    def _check_rule(self) -> PromotionWindow:
        # Start-up time: croniter and dateutil load only for fleets that have windows.
        from shared.engine.schedule import parse_schedule  # noqa: PLC0415

        if (self.allow is None) == (self.deny is None):
            raise ValueError("a window needs exactly one of allow and deny")
        parse_schedule(self.expression)
        if duration_seconds(self.duration) <= 0:
            raise ValueError("duration must be longer than 0")
        return self

    @property
    def kind(self) -> Literal["allow", "deny"]:
        return "allow" if self.allow is not None else "deny"

    @property
    def expression(self) -> str:
        return self.allow if self.allow is not None else (self.deny or "")


class RolloutSettings(_Strict):
    """Patch promotion (docs/promotion.md): step size, default soak, promotion windows."""

    step: str | None = Field(
        default=None,
        pattern=r"^[a-z][a-z0-9_]*$",
        description="How far one promotion moves a patch by default: a dimension of "
        "config/config.yaml, singular or as written (environment, sector, region, or any "
        "other). Default: the last dimension, one place at a time (the finest). `rollwright "
        "promote --to` may name any node.",
    )
    soak: str = Field(
        default="0",
        pattern=_DURATION,
        description="Soak time of nodes without their own `soak` in config/config.yaml: how "
        "long a patch stays healthy on a node before it moves on (0, 30m, 2h, 1d).",
    )
    timezone: str = Field(default="UTC", description="Default time zone of the windows.")
    rollback: Literal["manual", "auto"] = Field(
        default="manual",
        description="When a deployment under the node a patch was promoted to fails or is "
        "unhealthy: `manual` halts the rollout (people decide; Resume tries again); `auto` "
        "also commits the revert of that promotion, so the previous render is deployed and "
        "verified again (docs/verification.md).",
    )
    windows: list[PromotionWindow] = Field(
        default_factory=list,
        description="Promotion windows. Deny beats allow; without allow rules for a node, "
        "promotions to it are allowed whenever no deny window is in force.",
    )

    @field_validator("timezone")
    @classmethod
    def _check_zone(cls, value: str) -> str:
        return _check_timezone(value)

    @property
    def soak_seconds(self) -> int:
        return duration_seconds(self.soak)


_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class ArgoCDVerifySettings(_Strict):
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


class HttpVerifySettings(_Strict):
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
        default="30s", pattern=_DURATION, description="Time between attempts (30s, 1m)."
    )


class VerifyRule(_Strict):
    """How the deployments of some roots are verified after publish."""

    roots: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs of root ids the rule applies to; the first matching rule wins.",
    )
    timeout: str = Field(
        default="15m",
        pattern=_DURATION,
        description="How long the Applications may take to be Synced at the published commit "
        "and Healthy, and the HTTP check to pass; then the deployment is `unhealthy`.",
    )
    interval: str = Field(
        default="10s", pattern=_DURATION, description="How often Argo CD is asked (10s, 1m)."
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


# A GitHub login (bots included) or a team as `@org/team-slug`.
_APPROVER = re.compile(
    r"^(@[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9][A-Za-z0-9._-]*|[A-Za-z0-9][A-Za-z0-9-]*(\[bot\])?)$"
)
ReviewMode = Literal["always", "on-change", "never"]


def _check_logins(value: list[str]) -> list[str]:
    for entry in value:
        if not _APPROVER.match(entry):
            raise ValueError(f"{entry!r} is neither a GitHub login nor a team (@org/team)")
    return value


class ReviewRule(_Strict):
    """Who reviews the deployments of the roots a rule matches (docs/governance.md)."""

    roots: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs of root ids (`prod/*`; `*` matches across `/`). Default: every root.",
    )
    environments: list[str] | None = Field(
        default=None,
        description="dimensions layout only: globs of the root's first dimension (its "
        "environment, the second segment of the root id). A rule with `environments` never "
        "matches an atlas root.",
    )
    review: ReviewMode = Field(
        default="on-change",
        description="When a deployment waits for a review: `on-change` (a non-empty diff, a "
        "manual deployment or a diverged revision), `always` (also an empty diff), `never` "
        "(merge deployments publish without review; manual and diverged ones still ask).",
    )
    approvers: list[str] = Field(
        default_factory=list,
        description="Who may approve: GitHub logins and teams (`@org/team-slug`). Empty: "
        "anyone with write access. Only users with write access to the repository ever count.",
    )
    distinct_approver: bool = Field(
        default=False,
        alias="distinctApprover",
        description="The person who pushed or asked for the deployment cannot approve it.",
    )

    @field_validator("approvers")
    @classmethod
    def _check_approvers(cls, value: list[str]) -> list[str]:
        return _check_logins(value)


class ReviewSettings(_Strict):
    """Review policy (docs/governance.md): the last rule matching a root wins."""

    rules: list[ReviewRule] = Field(
        default_factory=list,
        description="Review rules by root pattern; roots no rule matches get the defaults "
        "(review on change, anyone with write access approves).",
    )
    admins: list[str] = Field(
        default_factory=list,
        description="Logins and teams (`@org/team`) whose approval satisfies every rule and "
        "every OWNERS file (they still need write access).",
    )

    @field_validator("admins")
    @classmethod
    def _check_admins(cls, value: list[str]) -> list[str]:
        return _check_logins(value)

    def rule_for(self, root: str, layout: str) -> tuple[int, ReviewRule] | None:
        """The last rule matching `root` and its index, or None (the defaults apply)."""
        found: tuple[int, ReviewRule] | None = None
        parts = root.split("/")
        for index, rule in enumerate(self.rules):
            if not any(fnmatch.fnmatchcase(root, glob) for glob in rule.roots):
                continue
            if rule.environments is not None:
                if layout != "dimensions" or len(parts) < 2:
                    continue
                if not any(fnmatch.fnmatchcase(parts[1], g) for g in rule.environments):
                    continue
            found = (index, rule)
        return found


class FleetConfig(_Strict):
    """The whole `rollwright.yaml`."""

    layout: Literal["atlas", "dimensions"] | None = Field(
        default=None, description="Fleet layout; detected when absent."
    )
    strict: bool = Field(
        default=False,
        description="Values keys the fleet sets that no template reads (typos such as "
        "`imgae:`) are errors: the renders of the roots they reach refuse, as for every "
        "content problem. Default: warnings (`rollwright validate`, check runs).",
    )
    output: OutputSettings = Field(default_factory=OutputSettings)
    render: RenderSettings = Field(default_factory=RenderSettings)
    atlas: AtlasSettings = Field(default_factory=AtlasSettings)
    affected: AffectedSettings = Field(default_factory=AffectedSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    preview: PreviewSettings = Field(default_factory=PreviewSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    verify: list[VerifyRule] = Field(
        default_factory=list,
        description="Delivery verification after publish (docs/verification.md): the first "
        "rule whose `roots` match a root applies; no match, no verification.",
    )

    @model_validator(mode="after")
    def _verify_needs_git(self) -> FleetConfig:
        # Argo CD syncs git: without a published commit there is nothing to be Synced at.
        if self.publish.target != "git" and any(rule.argocd for rule in self.verify):
            raise ValueError("verify rules with argocd need publish.target git")
        return self

    def verify_rule(self, root: str) -> VerifyRule | None:
        """The verify rule of a root: the first whose `roots` globs match it."""
        return next(
            (r for r in self.verify if any(fnmatch.fnmatchcase(root, g) for g in r.roots)), None
        )


def load(tree: Tree) -> FleetConfig:
    if not tree.is_file(CONFIG_FILE):
        return FleetConfig()
    text = tree.read_text(CONFIG_FILE)
    data = yamldoc.loads(text, CONFIG_FILE) or {}
    return parse_model(FleetConfig, data, text=text, source=CONFIG_FILE)


def parse_model(model: type[M], data: Any, *, text: str, source: str) -> M:
    """Validate `data` with a pydantic model; errors become `path:line: message` problems."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise FleetErrors(validation_problems(err, text=text, source=source, model=model)) from None


def validation_problems(
    err: ValidationError, *, text: str, source: str, model: type[BaseModel] | None = None
) -> list[Problem]:
    problems = []
    for item in err.errors():
        loc = tuple(p for p in item["loc"] if isinstance(p, str | int))
        # pydantic adds the union member / validator name to loc; keep real keys only
        line = yamldoc.key_line(text, loc)
        where = "/".join(str(p) for p in loc) or "(top level)"
        kind = item["type"]
        if kind == "extra_forbidden":
            known = known_keys(model, loc[:-1]) if model is not None and loc else []
            message = f"unknown key {where!r}{suggest.hint(str(loc[-1]), known) if loc else ''}"
        elif kind == "missing":
            message = f"missing required key {where!r}"
        else:
            message = f"{where}: {item['msg']}"
        problems.append(Problem(source, line, message))
    return problems


def known_keys(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The keys a model accepts at `loc` (its JSON Schema's properties there, aliases
    included): what "did you mean" picks from. Best effort: [] where the schema is unclear."""
    try:
        schema = model.model_json_schema(by_alias=True)
    except Exception:  # a schema pydantic cannot express: no suggestion, not an error
        return []
    defs = schema.get("$defs", {})

    def resolve(node: Any) -> list[dict[str, Any]]:
        """The object schemas `node` may be (through $ref, anyOf / oneOf / allOf)."""
        if not isinstance(node, dict):
            return []
        if "$ref" in node:
            return resolve(defs.get(str(node["$ref"]).rsplit("/", 1)[-1]))
        for key in ("anyOf", "oneOf", "allOf"):
            if key in node:
                return [s for option in node[key] for s in resolve(option)]
        return [node]

    nodes = resolve(schema)
    for part in loc:
        step: list[dict[str, Any]] = []
        for node in nodes:
            if isinstance(part, int):
                step += resolve(node.get("items"))
            else:
                step += resolve((node.get("properties") or {}).get(part))
                extra = node.get("additionalProperties")
                if isinstance(extra, dict):
                    step += resolve(extra)
        nodes = step
    return sorted({str(k) for node in nodes for k in (node.get("properties") or {})})


def require(condition: bool, message: str, *, path: str, line: int | None = None) -> None:
    if not condition:
        raise FleetError(message, path=path, line=line)
