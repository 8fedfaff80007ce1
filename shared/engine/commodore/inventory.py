"""The cluster's inventory as Commodore renders it: reclass-rs over the working directory, its
errors placed in the file and line they come from, and the components it asks for.

    nodes = render(Places(workdir, "t-acme", global_url))   # {"cluster": {...}, "demo": …}
    aliases = instances(nodes["cluster"])     # {"demo": "demo", "demo-b": "demo"}: applications
    spec = component_spec(nodes["cluster"]["parameters"], "demo")   # url, version, path
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import reclass_rs

from shared.engine.commodore.repos import shown
from shared.engine.commodore.workdir import BOOTSTRAP, Workdir, parameters_key
from shared.engine.errors import FleetError

PACKAGE_PREFIX = "pkg."
_RESERVED_PACKAGE = re.compile(r"^(components|defaults|global|params)$")
_CLASS_NOT_FOUND = re.compile(r"Class (\S+) not found")
_REFERENCE = re.compile(r"reference '(\$\{[^']*\})'")
_DESERIALIZING = re.compile(r"Deserializing (\S+): (.*?) at line (\d+)")


@dataclass(frozen=True)
class Places:
    """Where the working directory's files come from, to name them in messages."""

    workdir: Workdir
    tenant: str
    global_url: str

    def error(self, message: str, path: Path | None = None, line: int | None = None) -> FleetError:
        """`message` placed at a working-directory file: a tenant file by its path in the
        fleet repository, the global repository's and components' files named in the
        message."""
        message = self.workdir.relative(message)
        if path is None:
            return FleetError(message)
        if path.is_symlink():  # a component's class, linked: name the file it links to
            path = Path(os.path.normpath(path.parent / os.readlink(path)))
        rel = path.relative_to(self.workdir.root).as_posix()
        at = f":{line}" if line is not None else ""
        tenant_dir = f"inventory/classes/{self.tenant}/"
        if rel.startswith(tenant_dir):
            return FleetError(message, path=rel.removeprefix(tenant_dir), line=line)
        if rel.startswith("inventory/classes/global/"):
            inner = rel.removeprefix("inventory/classes/global/")
            return FleetError(f"global repository {shown(self.global_url)} {inner}{at}: {message}")
        if rel.startswith("inventory/classes/"):
            package, _, inner = rel.removeprefix("inventory/classes/").partition("/")
            if package not in ("params", "components", "defaults") and inner:
                return FleetError(f"package {package!r} {inner}{at}: {message}")
        if rel.startswith("dependencies/"):
            name, _, inner = rel.removeprefix("dependencies/").partition("/")
            return FleetError(f"component {name!r} {inner}{at}: {message}")
        return FleetError(f"{rel}{at}: {message}")

    def class_file(self, name: str) -> Path | None:
        base = self.workdir.classes.joinpath(*name.split("."))
        for candidate in (
            base.with_name(base.name + ".yml"),
            base.with_name(base.name + ".yaml"),
            base / "init.yml",
            base / "init.yaml",
        ):
            if candidate.is_file():
                return candidate
        return None

    def _class_files(self) -> list[Path]:
        """Every class file, through the linked global repository and components."""
        found = []
        for folder, _, files in os.walk(self.workdir.classes, followlinks=True):
            found += [Path(folder) / f for f in files if f.endswith((".yml", ".yaml"))]
        return sorted(found)

    def find(self, needle: str, *, classes_key: bool = False) -> tuple[Path, int] | None:
        """The first class file line holding `needle` (with `classes_key`: a `classes:` entry
        naming class `needle`, relative entries resolved): where an error reclass-rs reports
        without a place comes from."""
        for path in self._class_files():
            try:
                lines = path.read_text().splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            folder = path.parent.relative_to(self.workdir.classes).as_posix().replace("/", ".")
            for number, text in enumerate(lines, start=1):
                if not classes_key:
                    if needle in text:
                        return path, number
                    continue
                entry = text.strip()
                if not entry.startswith("-"):
                    continue
                entry = entry[1:].strip().strip("'\"")
                if entry.startswith(".") and folder not in ("", "."):
                    entry = folder + entry
                if entry == needle:
                    return path, number
        return None


def render(places: Places, *, ignore_class_notfound: bool = False) -> dict[str, dict[str, Any]]:
    """Every target's node (`parameters`, `classes`, `applications`, …), as Commodore's
    `kapitan_inventory` returns them (classes not found ignored only while looking for
    packages, whose classes are not there yet)."""
    workdir = places.workdir
    reclass = reclass_rs.Reclass(
        nodes_path=str(workdir.targets),
        classes_path=str(workdir.classes),
        ignore_class_notfound=ignore_class_notfound,
    )
    try:
        inventory = reclass.inventory().as_dict()
    except ValueError as err:
        raise _placed(places, str(err)) from None
    nodes: dict[str, dict[str, Any]] = inventory["nodes"]
    return nodes


def _placed(places: Places, message: str) -> FleetError:
    text = message.removeprefix("Error while rendering inventory: ")
    missing = _CLASS_NOT_FOUND.search(text)
    if missing:
        found = places.find(missing.group(1), classes_key=True)
        if found:
            return places.error(f"class {missing.group(1)!r} not found", *found)
        return places.error(f"class {missing.group(1)!r} not found ({text})")
    reference = _REFERENCE.search(text)
    if reference:
        found = places.find(reference.group(1))
        reason = text.split(": ", 1)[-1] if ": " in text else text
        if found:
            return places.error(
                f"reference {reference.group(1)} resolves to nothing: {reason}", *found
            )
    broken = _DESERIALIZING.search(text)
    if broken:
        path = places.class_file(broken.group(1))
        if path is not None:
            return places.error(f"invalid YAML: {broken.group(2)}", path, int(broken.group(3)))
    return places.error(f"rendering the inventory: {text}")


def instances(cluster: dict[str, Any]) -> dict[str, str]:
    """Instance → component, from `applications` (after `~` removals): `name` is the
    instance `name` of component `name`, `component as alias` the instance `alias`; sorted."""
    found: dict[str, set[str]] = {}
    for app in cluster.get("applications", []):
        if app.startswith(PACKAGE_PREFIX):
            continue  # a configuration package (`packages`)
        component, _, alias = app.partition(" as ")
        found.setdefault(alias or component, set()).add(component)
    out: dict[str, str] = {}
    for alias, components in sorted(found.items()):
        if len(components) > 1:
            others = sorted(components - {alias})
            if alias in components:
                raise FleetError(
                    f"applications: component {others[0]!r} aliases existing component {alias!r}"
                )
            raise FleetError(
                f"applications: duplicate component alias {alias!r}: components "
                f"{', '.join(repr(c) for c in sorted(components))} are aliased to it"
            )
        out[alias] = next(iter(components))
    return out


def packages(cluster: dict[str, Any]) -> list[str]:
    """The configuration packages `applications` names (`pkg.<name>`), sorted."""
    names = set()
    for app in cluster.get("applications", []):
        if not app.startswith(PACKAGE_PREFIX):
            continue
        name = app.removeprefix(PACKAGE_PREFIX)
        if _RESERVED_PACKAGE.match(name):
            raise FleetError(f"applications: can't use reserved name {name!r} as package name")
        if name.startswith("t-"):
            raise FleetError(
                f"applications: package {name!r}: the prefix 't-' is reserved for tenants"
            )
        names.add(name)
    return sorted(names)


@dataclass(frozen=True)
class ComponentSpec:
    name: str
    url: str
    version: str
    path: str


def component_spec(
    parameters: dict[str, Any], name: str, base: ComponentSpec | None = None
) -> ComponentSpec:
    """`parameters.components.<name>`: url and version required, as Commodore requires; an
    instance's fields default to its component's (`base`)."""
    specs = parameters.get("components")
    if not specs:
        raise FleetError("components list ('parameters.components') missing")
    if name not in specs and base is None:
        raise FleetError(
            f"unknown component {name!r}: applications names it; add it to "
            "'parameters.components' with url and version"
        )
    spec = specs.get(name) or {}
    if base is None:
        for key in ("url", "version"):
            if key not in spec:
                raise FleetError(
                    f"component {name!r} is missing field {key!r} in 'parameters.components.{name}'"
                )
    path = str(spec.get("path", "") or "").removeprefix("/")
    if base is not None:
        return ComponentSpec(
            name,
            str(spec.get("url", base.url)),
            str(spec.get("version", base.version)),
            path or base.path,
        )
    return ComponentSpec(name, str(spec["url"]), str(spec["version"]), path)


def package_spec(parameters: dict[str, Any], name: str) -> ComponentSpec:
    """`parameters.packages.<name>`: url and version required, as Commodore requires."""
    spec = (parameters.get("packages") or {}).get(name)
    if spec is None:
        raise FleetError(
            f"unknown package {name!r}: applications names it; add it to "
            "'parameters.packages' with url and version"
        )
    for key in ("url", "version"):
        if key not in (spec or {}):
            raise FleetError(
                f"package {name!r} is missing field {key!r} in 'parameters.packages.{name}'"
            )
    path = str(spec.get("path", "") or "").removeprefix("/")
    return ComponentSpec(name, str(spec["url"]), str(spec["version"]), path)


def check_instances(nodes: dict[str, dict[str, Any]], aliases: dict[str, str]) -> None:
    """Commodore's rules for instances: the component says `multi_instance`, and an instance
    with a URL or version of its own needs `multi_version` in the component and instance."""
    cluster = nodes[BOOTSTRAP]["parameters"]
    for alias, component in aliases.items():
        if alias == component:
            continue
        key = parameters_key(component)
        meta = (cluster.get(key) or {}).get("_metadata") or {}
        if not meta.get("multi_instance", False):
            raise FleetError(
                f"component {component!r} with alias {alias!r} does not support instantiation "
                "(its _metadata.multi_instance is not true)"
            )
        own = (cluster.get("components") or {}).get(alias) or {}
        if own.get("url") is not None or own.get("version") is not None:
            alias_meta = (nodes[alias]["parameters"].get(key) or {}).get("_metadata") or {}
            if not (meta.get("multi_version", False) and alias_meta.get("multi_version", False)):
                raise FleetError(
                    f"component {component!r} with alias {alias!r} does not support "
                    "overriding the instance's version (_metadata.multi_version)"
                )


def check_overrides(parameters: dict[str, Any], aliases: dict[str, str]) -> None:
    """Commodore refuses a version override for a component nobody gave a URL (an instance's
    entry needs none: it falls back to its component's)."""
    if parameters.get("component_versions"):
        raise FleetError(
            "'parameters.component_versions' is no longer supported by Commodore; use "
            "'parameters.components'"
        )
    specs = parameters.get("components") or {}
    instances = {a for a, c in aliases.items() if a != c}
    missing = []
    for name, spec in sorted(specs.items()):
        if name in instances:
            if aliases[name] not in specs:
                missing.append(f"{aliases[name]!r} (imported as {name})")
        elif not isinstance(spec, dict) or "url" not in spec:
            missing.append(repr(name))
    if missing:
        raise FleetError(
            f"version override specified for component {', '.join(missing)} which has no URL"
        )
    for name, spec in sorted((parameters.get("packages") or {}).items()):
        if not isinstance(spec, dict) or "url" not in spec:
            raise FleetError(f"version override specified for package {name!r} which has no URL")


def cluster_node(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return nodes[BOOTSTRAP]
