"""A cluster's Commodore working directory, laid out as Commodore lays it out, so that class
names, `${_base_directory}` and Jsonnet imports resolve as they do there:

    inventory/classes/global/            the global repository at its revision
    inventory/classes/<tenant>/          the tenant repository (the fleet repository)
    inventory/classes/params/cluster.yml `parameters.cluster`, `facts`, `dynamic_facts`
    inventory/classes/components/<c>.yml -> ../../../dependencies/<c>/class/<c>.yml
    inventory/classes/defaults/<c>.yml   -> ../../../dependencies/<c>/class/defaults.yml
    inventory/targets/cluster.yml        the bootstrap target
    inventory/targets/<c>.yml            one target per component
    dependencies/<c>/                    each component at its version
    dependencies/lib/<lib>               -> ../<c>/lib/<lib>: component libraries
    vendor/<c>, vendor/lib               what jsonnet-bundler links for Commodore's local deps
    compiled/<c>/                        Kapitan's output, then the filters'
    catalog/refs/                        secret reference files
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import commodore

from shared.engine.commodore.yamlout import commodore_yaml
from shared.engine.tree import Tree, join

BOOTSTRAP = "cluster"


def parameters_key(component: str) -> str:
    """A component's key in `parameters`: its name with dashes as underscores."""
    return component.replace("-", "_")


@dataclass(frozen=True)
class Workdir:
    root: Path

    @property
    def inventory(self) -> Path:
        return self.root / "inventory"

    @property
    def classes(self) -> Path:
        return self.inventory / "classes"

    @property
    def targets(self) -> Path:
        return self.inventory / "targets"

    @property
    def dependencies(self) -> Path:
        return self.root / "dependencies"

    @property
    def lib(self) -> Path:
        return self.dependencies / "lib"

    @property
    def vendor(self) -> Path:
        return self.root / "vendor"

    @property
    def compiled(self) -> Path:
        return self.root / "compiled"

    @property
    def refs(self) -> Path:
        return self.root / "catalog" / "refs"

    def component_dir(self, name: str) -> Path:
        return self.dependencies / name

    def create(self) -> None:
        for d in (
            self.classes / "components",
            self.classes / "defaults",
            self.classes / "params",
            self.targets,
            self.lib,
            self.vendor,
            self.compiled,
            self.refs,
        ):
            d.mkdir(parents=True, exist_ok=True)

    def write_params(self, cluster: dict[str, Any], facts: Any, dynamic_facts: Any) -> None:
        data = {
            "parameters": {
                BOOTSTRAP: cluster,
                "facts": facts,
                "dynamic_facts": dynamic_facts,
            }
        }
        (self.classes / "params" / f"{BOOTSTRAP}.yml").write_text(commodore_yaml(data))

    def write_target(
        self,
        target: str,
        components: list[str],
        base_directory: Path | None = None,
        component: str | None = None,
    ) -> None:
        """Commodore's `render_target`: the params class, every component's defaults
        (sorted; an instance's own in place of its component's), `global.commodore` and, for
        a component instance, its class; an instance of another name reads its parameters
        through the component's key."""
        component = component or target
        classes = [f"params.{BOOTSTRAP}"]
        for c in sorted(components):
            name = target if c == component and target != component else c
            if (self.classes / "defaults" / f"{name}.yml").is_file():
                classes.append(f"defaults.{name}")
        classes.append("global.commodore")
        parameters: dict[str, Any] = {"_instance": target}
        if target != BOOTSTRAP:
            classes.append(f"components.{target}")
            parameters["_base_directory"] = str(base_directory or self.component_dir(target))
            parameters["_kustomize_wrapper"] = str(commodore.__kustomize_wrapper__)
            parameters["_python3"] = sys.executable
            parameters["kapitan"] = {"vars": {"target": target}}
        if component != target:
            own, shared = parameters_key(target), parameters_key(component)
            parameters[own] = {}
            parameters[shared] = f"${{{own}}}"
        text = commodore_yaml({"classes": classes, "parameters": parameters})
        (self.targets / f"{target}.yml").write_text(text)

    def link(self, source: Path, dest: Path) -> None:
        """A relative symlink `dest` -> `source`, as Commodore's `relsymlink`."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        os.symlink(os.path.relpath(source, start=dest.parent), dest)

    def relative(self, text: str) -> str:
        """`text` with this directory's absolute paths made relative to it (messages)."""
        return text.replace(str(self.root) + os.sep, "").replace(str(self.root), ".")


def copy_tree(tree: Tree, dest: Path, rel: str = "") -> None:
    """The YAML files of `tree` (the tenant repository) below `dest`: what reclass reads."""
    for name in tree.listdir(rel):
        path = join(rel, name)
        if name == ".git":
            continue
        if tree.is_dir(path):
            copy_tree(tree, dest, path)
        elif name.endswith((".yml", ".yaml")):
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(tree.read_text(path))
