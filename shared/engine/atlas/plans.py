"""What planning an atlas root produces: a `LoadedDeployment` per deployment.yaml, a
`Helmfile` per rendered app template, an `InstancePlan` per enabled `apps:` entry, and a
`ReleasePlan` per template release (built from the `ReleaseParts` the helmfile's release
reads). `shared.engine.atlas.planner` builds and caches them."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from shared.engine import yamldoc
from shared.engine.atlas.discovery import Cluster, DeploymentDef
from shared.engine.atlas.files import AppInstance, DeploymentFile, HelmfileTemplate, HelmRelease
from shared.engine.atlas.values import Layer, LevelSource, TemplateValue
from shared.engine.manifests.patches import PatchOrigin
from shared.engine.release import ChartSource


@dataclass(frozen=True)
class LoadedDeployment:
    """A parsed deployment.yaml."""

    defn: DeploymentDef
    path: str
    text: str
    model: DeploymentFile

    def line(self, *keys: str | int) -> int | None:
        return yamldoc.key_line(self.text, keys)


@dataclass(frozen=True)
class Helmfile:
    """A template's helmfile as rendered for one instance."""

    template: str
    path: str  # templates/<t>/helmfile.yaml.gotmpl
    source_text: str
    text: str  # after Go templating
    model: HelmfileTemplate

    @property
    def dir(self) -> str:
        return posixpath.dirname(self.path)

    def line(self, keys: tuple[str | int, ...], needle: str | None = None) -> int | None:
        """Line of `keys` in the source file: found by `needle` when templating moved lines."""
        if needle and self.text != self.source_text:
            hits = [i + 1 for i, ln in enumerate(self.source_text.splitlines()) if needle in ln]
            if len(hits) == 1:
                return hits[0]
        return yamldoc.key_line(self.text, keys)


@dataclass
class InstancePlan:
    """One entry of a deployment's `apps:` on one cluster, with its environment."""

    cluster: Cluster
    deployment: LoadedDeployment
    index: int
    instance: AppInstance
    namespace: str | None  # `apps[].namespace`, else the deployment's `settings.namespace`
    atlas: dict[str, Any]  # the atlas metadata (docs/formats/atlas.md)
    levels: list[LevelSource]
    env: dict[str, Any]
    env_layers: list[Layer]
    helmfile: Helmfile

    @property
    def where(self) -> str:
        return f"apps[{self.index}]"


@dataclass
class ReleaseParts:
    """What one release of a rendered helmfile reads: the same for every instance that
    renders the helmfile to the same text. Shared between plans: read only."""

    source: ChartSource
    template_values: list[TemplateValue] = field(default_factory=list)
    template_secrets: list[str] = field(default_factory=list)
    json_patches: list[dict[str, Any]] = field(default_factory=list)
    strategic_merge_patches: list[dict[str, Any]] = field(default_factory=list)
    json_patch_origins: list[PatchOrigin] = field(default_factory=list)
    strategic_patch_origins: list[PatchOrigin] = field(default_factory=list)
    overrides: list[Layer] = field(default_factory=list)  # `set:` / `setString:`


@dataclass
class ReleasePlan:
    """One release of one root, everything but its values resolved."""

    id: str
    name: str
    namespace: str
    labels: dict[str, str]
    source: ChartSource
    index: int  # position in the helmfile's releases
    release: HelmRelease
    instance: InstancePlan
    template_values: list[TemplateValue] = field(default_factory=list)
    template_secrets: list[str] = field(default_factory=list)
    json_patches: list[dict[str, Any]] = field(default_factory=list)
    strategic_merge_patches: list[dict[str, Any]] = field(default_factory=list)
    json_patch_origins: list[PatchOrigin] = field(default_factory=list)
    strategic_patch_origins: list[PatchOrigin] = field(default_factory=list)
    overrides: list[Layer] = field(default_factory=list)

    @property
    def deployment(self) -> str:
        return self.instance.deployment.defn.name

    @property
    def template(self) -> str:
        return self.instance.helmfile.template
