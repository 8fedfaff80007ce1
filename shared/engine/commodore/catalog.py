"""One cluster's catalog, compiled in a temporary Commodore working directory in Commodore's
order: bootstrap target, configuration packages, components and their instances from
`applications`, their checkouts and targets, the full inventory, secret references, Kapitan
compile, postprocessing filters; then `manifests/` from `compiled/<instance>/` and `refs/`
from the references.

    files = compile_catalog(tree, cluster)   # {"manifests/demo/x.yaml": b"...", ...}

With a `CompileRecord`, the commits it compiled from are recorded in it (the catalog commit's
message and Lieutenant's compileMeta, shared.engine.commodore.compilemeta).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.engine.commodore import inventory, postprocess, refs, vendor
from shared.engine.commodore.clusters import ClusterSpec
from shared.engine.commodore.compile import KapitanInventory, compile_target
from shared.engine.commodore.compilemeta import CompileRecord, VersionInfo
from shared.engine.commodore.inventory import Places
from shared.engine.commodore.repos import Mirrors, shown
from shared.engine.commodore.workdir import BOOTSTRAP, Workdir, copy_tree
from shared.engine.errors import FleetError
from shared.engine.tree import Tree

GLOBAL_CLASS = "commodore.yml"


def compile_catalog(
    tree: Tree,
    cluster: ClusterSpec,
    mirrors: Mirrors | None = None,
    record: CompileRecord | None = None,
) -> dict[str, bytes]:
    mirrors = mirrors or Mirrors()
    record = record if record is not None else CompileRecord()
    with tempfile.TemporaryDirectory(prefix="rollwright-commodore-") as tmp:
        workdir = Workdir(Path(tmp))
        workdir.create()
        places = Places(workdir, cluster.tenant_id, cluster.global_url)
        record.global_repo = _global(workdir, mirrors, cluster.global_url, cluster.global_revision)
        copy_tree(tree, workdir.classes / cluster.tenant_id)
        workdir.write_params(cluster.parameters(), cluster.facts, cluster.dynamic_facts)
        workdir.write_target(BOOTSTRAP, [])
        record.packages = _packages(workdir, mirrors, places)
        bootstrap = inventory.cluster_node(inventory.render(places))
        aliases = inventory.instances(bootstrap)
        if not aliases:
            raise FleetError(
                f"cluster {cluster.id!r}: 'applications' names no component: "
                "the catalog would be empty"
            )
        names = sorted(set(aliases.values()))
        directories = _components(
            workdir, mirrors, bootstrap["parameters"], aliases, record.instances
        )
        for alias, name in aliases.items():
            workdir.write_target(alias, names, directories[alias], component=name)
        workdir.write_target(BOOTSTRAP, names)
        nodes = inventory.render(places)
        inventory.check_overrides(nodes[BOOTSTRAP]["parameters"], aliases)
        inventory.check_instances(nodes, aliases)
        vendor.install(workdir, mirrors, names)
        refs.write_refs(workdir, nodes, aliases)
        kapitan = KapitanInventory(workdir)
        for alias in aliases:
            compile_target(
                workdir,
                alias,
                nodes[alias]["parameters"],
                kapitan,
                _component_paths(workdir, alias),
            )
        for alias, name in aliases.items():
            postprocess.run_filters(workdir, alias, name, directories[alias], nodes[alias])
        return _collect(workdir, list(aliases))


def _packages(workdir: Workdir, mirrors: Mirrors, places: Places) -> dict[str, VersionInfo]:
    """Configuration packages (`pkg.<name>` in applications), found while their classes are
    not there yet, each checked out at its version and linked as class folder `<name>`."""
    first = inventory.cluster_node(inventory.render(places, ignore_class_notfound=True))
    used: dict[str, VersionInfo] = {}
    for name in inventory.packages(first):
        spec = inventory.package_spec(first["parameters"], name)
        mirror, sha = mirrors.commit(spec.url, spec.version, what=f"package {name!r}")
        checkout = workdir.dependencies / f"pkg.{name}"
        workdir.link(mirror.tree(sha), checkout)
        directory = checkout / spec.path if spec.path else checkout
        if not directory.is_dir():
            raise FleetError(
                f"package {name!r} ({shown(spec.url)} {spec.version}) has no {spec.path}/"
            )
        workdir.link(directory, workdir.classes / name)
        used[name] = VersionInfo(spec.url, spec.version, sha, mirror.short(sha), spec.path)
    return used


def _component_paths(workdir: Workdir, name: str) -> Callable[[str], str]:
    """Messages of component `name` with its files named as in its repository."""
    prefix = f"{workdir.component_dir(name)}/"

    def describe(text: str) -> str:
        return workdir.relative(text.replace(prefix, ""))

    return describe


def _global(workdir: Workdir, mirrors: Mirrors, url: str, revision: str | None) -> VersionInfo:
    what = "global repository"
    mirror, sha = mirrors.commit(url, revision, what=what)
    target = workdir.classes / "global"
    workdir.link(mirror.tree(sha), target)
    if not (target / GLOBAL_CLASS).is_file():
        raise FleetError(
            f"global repository {shown(url)} has no {GLOBAL_CLASS} (class "
            "global.commodore, which every target includes)"
        )
    version = revision or mirror.default_branch()
    return VersionInfo(url, version, sha, mirror.short(sha))


def _components(
    workdir: Workdir,
    mirrors: Mirrors,
    parameters: dict[str, Any],
    aliases: dict[str, str],
    used: dict[str, VersionInfo],
) -> dict[str, Path]:
    """Each component checked out at its version, then each instance of another name at its
    own (by default its component's) into `dependencies/<instance>`; their classes and the
    components' libraries linked. Returns each instance's directory (`_base_directory`)."""
    names = sorted(set(aliases.values()))
    specs = {name: inventory.component_spec(parameters, name) for name in names}
    directories: dict[str, Path] = {}
    for instance, name in [(n, n) for n in names] + [(a, c) for a, c in aliases.items() if a != c]:
        spec = specs[name]
        if instance != name:
            spec = inventory.component_spec(parameters, instance, base=spec)
        what = f"component {name!r}" if instance == name else f"instance {instance!r} of {name!r}"
        mirror, sha = mirrors.commit(spec.url, spec.version, what=what)
        checkout = workdir.component_dir(instance)
        workdir.link(mirror.tree(sha), checkout)
        directory = checkout / spec.path if spec.path else checkout
        for folder, file in (("components", f"{name}.yml"), ("defaults", "defaults.yml")):
            source = directory / "class" / file
            if not source.is_file():
                raise FleetError(f"{what} ({shown(spec.url)} {spec.version}) has no class/{file}")
            workdir.link(source, workdir.classes / folder / f"{instance}.yml")
        if instance == name:
            _libraries(workdir, name, directory, names)
        directories[instance] = directory
        if instance in aliases:
            used[instance] = VersionInfo(
                spec.url, spec.version, sha, mirror.short(sha), spec.path, component=name
            )
    return directories


def _libraries(workdir: Workdir, name: str, directory: Path, names: list[str]) -> None:
    lib = directory / "lib"
    if not lib.is_dir():
        return
    others = [c for c in names if c != name and c.startswith(name)]
    for file in sorted(lib.iterdir()):
        if file.name.startswith("."):
            continue  # as Commodore: hidden files are no libraries
        if any(file.stem.startswith(c) for c in others) or not file.stem.startswith(name):
            raise FleetError(
                f"component {name!r}: library lib/{file.name} must be named after its "
                "component (Commodore refuses it)"
            )
        workdir.link(file, workdir.lib / file.name)


def _collect(workdir: Workdir, names: list[str]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for name in names:
        base = workdir.compiled / name
        for path in sorted(base.rglob("*")):
            if path.is_file():
                files["manifests/" + path.relative_to(base).as_posix()] = path.read_bytes()
    for path in sorted(workdir.refs.rglob("*")):
        if path.is_file():
            files["refs/" + path.relative_to(workdir.refs).as_posix()] = path.read_bytes()
    shutil.rmtree(workdir.compiled, ignore_errors=True)
    return dict(sorted(files.items()))
