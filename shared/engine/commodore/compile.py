"""One component target compiled as Commodore has Kapitan compile it: each Jsonnet entry of
`parameters.kapitan.compile` evaluated by gojsonnet with Kapitan's natives and import search,
each top-level key of its output one file under `compiled/<target>/<output_path>/`, secret
reference tags replaced by Kapitan's compiled tags, written with Kapitan's YAML dumper.

Only Jsonnet inputs with YAML output are supported; anything else is refused by name rather
than skipped (docs/formats/commodore.md)."""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _gojsonnet
import commodore
import kapitan.resources
from kapitan.errors import KapitanError
from kapitan.inventory.backends.reclass_rs import ReclassRsInventory
from kapitan.refs.base import RefController, Revealer
from kapitan.utils import prune_empty

from shared.engine.commodore.confine import Confinement
from shared.engine.commodore.workdir import Workdir
from shared.engine.commodore.yamlout import kapitan_yaml
from shared.engine.errors import FleetError

SUPPORTED_INPUT = "jsonnet"
_FRAME = re.compile(r"^\s*(\S+?):(\d+):\d+")


def search_paths(workdir: Workdir) -> list[str]:
    """Commodore's Kapitan search paths: vendor/, the working directory, Commodore's
    install directory (its `lib/commodore.libjsonnet` and `lib/kube.libjsonnet`)."""
    return [str(workdir.vendor), str(workdir.root), str(commodore.__install_dir__)]


class KapitanInventory:
    """Kapitan's own view of the inventory (`kap.inventory()`): its reclass-rs backend's
    targets, as its `inventory` native returns them."""

    def __init__(self, workdir: Workdir) -> None:
        self._inventory = ReclassRsInventory(inventory_path=str(workdir.inventory))

    def native(self, target: str | None = None, inv_path: str | None = None) -> Any:
        if inv_path not in (None, "inventory", "inventory/", "./inventory"):
            raise ValueError(f"inventory {inv_path!r}: only the cluster's inventory is available")
        if target:
            found = self._inventory.get_target(target)
            if found is None:
                raise ValueError(f"inventory: no target {target!r}")
            return found.model_dump(by_alias=True)
        return self._inventory.inventory


def natives(paths: list[str], inventory: KapitanInventory, confined: Confinement) -> dict[str, Any]:
    callbacks: dict[str, Any] = confined.natives(kapitan.resources.resource_callbacks(paths), paths)
    callbacks["inventory"] = (("target", "inv_path"), inventory.native)
    return callbacks


def compile_target(
    workdir: Workdir,
    target: str,
    parameters: dict[str, Any],
    inventory: KapitanInventory,
    describe: Callable[[str], str],
) -> None:
    """Compile `target`'s Kapitan entries into `compiled/<target>/`. `describe` turns a
    message holding working-directory paths into one naming components and repositories."""
    entries = (parameters.get("kapitan") or {}).get("compile") or []
    if (parameters.get("kapitan") or {}).get("dependencies"):
        raise FleetError(
            f"component {target!r}: parameters.kapitan.dependencies (fetched Helm charts, "
            "git or http files) are not supported by the commodore layout yet"
        )
    paths = search_paths(workdir)
    confined = Confinement(workdir, target)
    compiled = workdir.compiled.resolve()
    controller = RefController(str(workdir.refs))
    revealer = Revealer(controller)
    for index, entry in enumerate(entries):
        where = f"component {target!r}: parameters.kapitan.compile[{index}]"
        kind = entry.get("input_type")
        if kind != SUPPORTED_INPUT:
            raise FleetError(
                f"{where}: input_type {kind!r} is not supported by the commodore layout "
                "(Jsonnet only)"
            )
        output_type = entry.get("output_type", "yaml")
        if output_type not in ("yaml", "yml"):
            raise FleetError(f"{where}: output_type {output_type!r} is not supported (yaml only)")
        out_dir = workdir.compiled / target.replace(".", "/") / str(entry.get("output_path", ""))
        if not Path(os.path.realpath(out_dir)).is_relative_to(compiled):
            raise FleetError(
                f"{where}.output_path: {entry.get('output_path')!r} leaves compiled/{target}/"
            )
        out_dir.mkdir(parents=True, exist_ok=True)
        for number, input_path in enumerate(entry.get("input_paths") or []):
            found = _expand(str(input_path), paths)
            if not found and not entry.get("ignore_missing", False):
                raise FleetError(describe(f"{where}: input {input_path} not found"))
            for path in found:
                if not confined.allows(path):
                    raise FleetError(
                        describe(
                            f"{where}.input_paths[{number}]: {str(input_path)!r} refused: "
                            "it is outside the component's working directory"
                        )
                    )
            for path in found:
                _compile_file(
                    path, out_dir, target, paths, inventory, revealer, entry, describe, confined
                )


def _expand(input_path: str, paths: list[str]) -> list[str]:
    """Kapitan's resolution of an input path: globbed or joined under each search path."""
    found: set[str] = set()
    for base in paths:
        joined = os.path.join(base, input_path)
        if glob.has_magic(input_path):
            found.update(glob.glob(joined))
        elif os.path.lexists(joined):
            found.add(joined)
    return sorted(found)


def _jsonnet_error(target: str, text: str, reason: str | None = None) -> str:
    """gojsonnet's message as `component 'x': <file>:<line>: <error>`, its first frame the
    place (a component file, relative to the working directory, as the component names it);
    `reason` in place of the error gojsonnet gives (a native's refusal)."""
    lines = text.strip().splitlines()
    first = reason or (lines[0] if lines else text)
    frame = next((m for m in map(_FRAME.search, lines[1:]) if m), None)
    if frame is None:
        return f"component {target!r}: Jsonnet error: {first}"
    return f"component {target!r}: {frame.group(1)}:{frame.group(2)}: Jsonnet error: {first}"


def _compile_file(
    path: str,
    out_dir: Path,
    target: str,
    paths: list[str],
    inventory: KapitanInventory,
    revealer: Revealer,
    entry: dict[str, Any],
    describe: Callable[[str], str],
    confined: Confinement,
) -> None:
    def search(cwd: str, name: str) -> tuple[str, bytes]:
        found: tuple[str, bytes] = kapitan.resources.search_imports(cwd, name, paths)
        return found

    confined.refused = None
    try:
        text = _gojsonnet.evaluate_file(
            path,
            import_callback=confined.imports(search, paths),
            native_callbacks=natives(paths, inventory, confined),
            ext_vars={"target": target},
        )
    except (RuntimeError, UnicodeDecodeError) as err:
        # UnicodeDecodeError: gojsonnet's text of a refused import may come back mangled.
        message = _jsonnet_error(target, str(err), confined.refused)
        raise FleetError(describe(message)) from None
    finally:
        # Kapitan caches imported files by path for the whole process; working directories
        # are temporary, so a later render must not see this one's files.
        kapitan.resources.JSONNET_CACHE.clear()
    output = json.loads(text)
    if not isinstance(output, dict):
        output = {os.path.splitext(os.path.basename(path))[0]: output}
    for key, value in output.items():
        if entry.get("prune", False):
            value = prune_empty(value)
        try:
            value = revealer.compile_obj(value, target_name=target)
        except (KapitanError, KeyError, ValueError) as err:
            raise FleetError(
                f"component {target!r}: output {key!r}: secret reference: {err}"
            ) from None
        file = out_dir / f"{key}.yaml"
        if not Path(os.path.realpath(file)).is_relative_to(out_dir.resolve()):
            raise FleetError(f"component {target!r}: output {key!r} leaves its output_path")
        file.parent.mkdir(parents=True, exist_ok=True)
        # Kapitan opens the file before it sees that the value is empty: an empty file.
        file.write_text(kapitan_yaml(value) if value else "")
