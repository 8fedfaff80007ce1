"""`rollwright.yaml` at the root of a fleet repo, whole: layout choice and every section.

Every key is optional; without the file the layout is detected (`config/config.yaml` →
dimensions, `deployments/` → atlas). Unknown keys are errors, so typos do not pass silently."""

from __future__ import annotations

import fnmatch

from pydantic import Field, field_validator, model_validator

from shared.engine import yamldoc
from shared.engine.config.affected import AffectedSettings
from shared.engine.config.atlas import AtlasSettings
from shared.engine.config.commodore import CommodoreSettings
from shared.engine.config.helmfile import HelmfileSettings
from shared.engine.config.hotfix import HotfixSettings
from shared.engine.config.output import OutputSettings, RenderSettings
from shared.engine.config.parsing import StrictModel, parse_model
from shared.engine.config.policies import PolicySet, check_unique
from shared.engine.config.preview import PreviewSettings
from shared.engine.config.publish import PublishSettings
from shared.engine.config.review import ReviewSettings
from shared.engine.config.rollout import RolloutSettings
from shared.engine.config.schemas import SchemaSettings
from shared.engine.config.verify import VerifyRule
from shared.engine.layout import LayoutName
from shared.engine.tree import Tree

CONFIG_FILE = "rollwright.yaml"


class FleetConfig(StrictModel):
    """The whole `rollwright.yaml`."""

    layout: LayoutName | None = Field(
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
    commodore: CommodoreSettings = Field(default_factory=CommodoreSettings)
    helmfile: HelmfileSettings = Field(default_factory=HelmfileSettings)
    affected: AffectedSettings = Field(default_factory=AffectedSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    preview: PreviewSettings = Field(default_factory=PreviewSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    hotfix: HotfixSettings | None = Field(
        default=None,
        description="Hotfixes from unmerged pull requests (docs/governance.md): what a pull "
        "request must meet before `/rollwright hotfix <root>` deploys its head. Absent: none.",
    )
    policies: list[PolicySet] = Field(
        default_factory=list,
        description="Policy sets over the rendered manifests (docs/governance.md): Rego and "
        "ValidatingAdmissionPolicy checks whose failing `deny` results wait for an owner of "
        "the set to approve.",
    )
    schemas: SchemaSettings = Field(
        default_factory=SchemaSettings,
        description="Rendered objects checked against the API server's schemas and the "
        "render's CRDs (docs/formats/rollwright-yaml.md).",
    )
    verify: list[VerifyRule] = Field(
        default_factory=list,
        description="Delivery verification after publish (docs/verification.md): the first "
        "rule whose `roots` match a root applies; no match, no verification.",
    )

    @field_validator("policies")
    @classmethod
    def _unique_policy_sets(cls, value: list[PolicySet]) -> list[PolicySet]:
        return check_unique(value)

    @model_validator(mode="after")
    def _verify_needs_git(self) -> FleetConfig:
        # Argo CD syncs git: without a published commit there is nothing to be Synced at.
        if self.publish.target != "git" and any(rule.argocd for rule in self.verify):
            raise ValueError("verify rules with argocd need publish.target git")
        return self

    @model_validator(mode="after")
    def _catalog_needs_commodore(self) -> FleetConfig:
        # Only a commodore cluster has a catalog repository to publish to.
        if self.publish.target == "catalog" and self.layout != "commodore":
            raise ValueError("publish.target catalog needs layout: commodore")
        return self

    def verify_rule(self, root: str) -> VerifyRule | None:
        """The verify rule of a root: the first whose `roots` globs match it."""
        return next(
            (r for r in self.verify if any(fnmatch.fnmatchcase(root, g) for g in r.roots)), None
        )

    @classmethod
    def load(cls, tree: Tree) -> FleetConfig:
        """The fleet's `rollwright.yaml`, or every default without the file."""
        if not tree.is_file(CONFIG_FILE):
            return cls()
        text = tree.read_text(CONFIG_FILE)
        data = yamldoc.loads(text, CONFIG_FILE) or {}
        return parse_model(cls, data, text=text, source=CONFIG_FILE)
