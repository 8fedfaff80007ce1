"""OWNERS files (docs/governance.md): which applications a deployment's rendered diff touches,
and whose approval each of them needs.

- dimensions layout: `config/<cluster-type>/<name>/OWNERS` of each application or
  ApplicationSet whose `templates/<name>.yaml` changed, or whose entry under `applications:` /
  `applicationsets:` of the chart's `values.yaml` changed.
- atlas layout: `OWNERS` in the directory of a deployment definition (the one this cluster
  uses) and in `templates/<template>/`, for each deployment with a changed file. Files are
  attributed to a deployment by the output pattern's first segment `{deployment}/`; with a
  pattern that does not start so, every deployment of the root counts as touched (a
  requirement too many, never one too few).

The owners are the file's `approvers` (Kubernetes style; `@org/team` entries are teams).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from posixpath import join
from typing import Any

from shared.contracts.governance import OwnersRequirement
from shared.engine import yamldoc
from shared.engine.atlas.files import TEMPLATES
from shared.engine.atlas.layout import AtlasLayout
from shared.engine.atlas.planner import Planner
from shared.engine.config.fleet import FleetConfig
from shared.engine.config.parsing import parse_model
from shared.engine.dimensions.models import OWNERS_FILE, Owners
from shared.engine.tree import Tree

DEPLOYMENT_FIRST = "{deployment}/"
VALUES_FILE = "values.yaml"
SECTIONS = ("applications", "applicationsets")


def changed_paths(old: dict[str, str], new: dict[str, str]) -> set[str]:
    """Paths whose digest differs between two renders (added and removed ones included)."""
    return {p for p in old.keys() | new.keys() if old.get(p) != new.get(p)}


def owners_for(
    tree: Tree,
    config: FleetConfig,
    layout: str,
    root: str,
    changed: set[str],
    read: Callable[[str, str], bytes | None],
    *,
    planner: Planner | None = None,
) -> list[OwnersRequirement]:
    """The OWNERS requirements of a deployment of `root` whose render changed `changed`.
    `read(side, path)` returns a rendered file of the "old" or "new" render (None: absent).
    An atlas fleet's `planner` of the same tree, when one is at hand, saves finding every
    cluster of the fleet again."""
    if not changed:
        return []
    if layout == "dimensions":
        return _dimensions(tree, root, changed, read)
    if layout == "atlas":
        return _atlas(tree, config, root, changed, planner)
    return []  # the helmfile layout has no OWNERS files (kube-renderer has no such notion)


def _dimensions(
    tree: Tree, root: str, changed: set[str], read: Callable[[str, str], bytes | None]
) -> list[OwnersRequirement]:
    ctype = root.split("/", 1)[0]
    names = {
        p.removeprefix("templates/").removesuffix(".yaml")
        for p in changed
        if p.startswith("templates/") and p.endswith(".yaml") and p.count("/") == 1
    }
    if VALUES_FILE in changed:
        old, new = (_sections(read(side, VALUES_FILE)) for side in ("old", "new"))
        for section in SECTIONS:
            before, after = old.get(section, {}), new.get(section, {})
            names |= {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
    found = []
    for name in sorted(names):
        path = join("config", ctype, name, OWNERS_FILE)
        owners = _owners(tree, path)
        if owners:  # an OWNERS file without approvers asks nobody
            found.append(_requirement(name, name, path, owners))
    return found


def _sections(raw: bytes | None) -> dict[str, dict[str, Any]]:
    if raw is None:
        return {}
    data = yamldoc.loads(raw.decode(), VALUES_FILE) or {}
    if not isinstance(data, dict):
        return {}
    return {s: v for s in SECTIONS if isinstance(v := data.get(s), dict)}


def _atlas(
    tree: Tree, config: FleetConfig, root: str, changed: set[str], planner: Planner | None
) -> list[OwnersRequirement]:
    plans = (planner or AtlasLayout(tree, config).planner).plans(root)
    if config.output.pattern.startswith(DEPLOYMENT_FIRST):
        touched = {p.split("/", 1)[0] for p in changed}
    else:
        touched = {plan.deployment for plan in plans}
    found: dict[str, OwnersRequirement] = {}
    for plan in plans:
        deployment = plan.deployment
        if deployment not in touched:
            continue
        places = [
            (deployment, join(plan.instance.deployment.defn.dir, OWNERS_FILE)),
            (f"template {plan.template}", join(TEMPLATES, plan.template, OWNERS_FILE)),
        ]
        for application, path in places:
            if path in found:
                continue
            owners = _owners(tree, path)
            if owners:
                found[path] = _requirement(application, application, path, owners)
    return sorted(found.values(), key=lambda r: r.name)


def _owners(tree: Tree, path: str) -> list[str] | None:
    if not tree.is_file(path):
        return None
    text = tree.read_text(path)
    model = parse_model(Owners, yamldoc.loads(text, path) or {}, text=text, source=path)
    return list(model.approvers)


def _requirement(key: str, application: str, path: str, owners: Iterable[str]) -> OwnersRequirement:
    return OwnersRequirement(
        name=f"owners:{key}", application=application, path=path, owners=list(owners)
    )
