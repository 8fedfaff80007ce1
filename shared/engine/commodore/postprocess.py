"""Commodore's postprocessing filters on a component's compiled output: the inventory's
`parameters.commodore.postprocess.filters` of the component target, each `builtin`
(`helm_namespace`) or `jsonnet`, run in order when `enabled` (default true) with its
`filterargs`. A filter's output object rewrites `compiled/<target>/<path>/<key>.yaml` with
Commodore's YAML dumper.

Commodore skips a filter whose definition is invalid with a warning; rollwright refuses it,
since the catalog would silently lack what the filter was meant to do."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import _gojsonnet
import commodore
from commodore.helpers import yaml_load, yaml_load_all

from shared.engine.commodore.confine import Confinement
from shared.engine.commodore.workdir import Workdir
from shared.engine.commodore.yamlout import commodore_yaml
from shared.engine.errors import FleetError

BUILTINS = {"helm_namespace"}
REQUIRED = ("type", "path", "filter")


def _list_dir(directory: str, basename: bool) -> list[str]:
    files = [p for p in Path(directory).iterdir() if p.is_file()]
    return [p.name for p in files] if basename else [str(p) for p in files]


def _importer(workdir: Workdir, confined: Confinement) -> Any:
    """Commodore's filter import search: the importing file's directory, the working
    directory, Commodore's install directory, vendor/; no absolute imports, nothing outside."""
    search = [
        workdir.root.resolve(),
        Path(commodore.__install_dir__).resolve(),
        workdir.vendor.resolve(),
    ]

    def imports(base: str, rel: str) -> tuple[str, bytes]:
        if os.path.isabs(rel):
            raise confined.refuse("import", rel)
        for directory in [Path(base), *search]:
            path = directory / rel
            if path.is_file():
                confined.check("import", rel, path, libraries=True)
                return str(path), path.read_bytes()
        raise RuntimeError(f"file not found: {rel}")

    return imports


def run_filters(
    workdir: Workdir,
    target: str,
    component: str,
    component_dir: Path,
    node: dict[str, Any],
) -> None:
    """The filters of instance `target` of `component`, its files in `component_dir`."""
    confined = Confinement(workdir, target)
    compiled = workdir.compiled.resolve()
    filters = ((node["parameters"].get("commodore") or {}).get("postprocess") or {}).get(
        "filters"
    ) or []
    for index, spec in enumerate(filters):
        where = f"component {target!r}: parameters.commodore.postprocess.filters[{index}]"
        if not isinstance(spec, dict) or not all(k in spec for k in REQUIRED):
            raise FleetError(f"{where}: a filter needs type, path and filter")
        enabled = spec.get("enabled", True)
        if not isinstance(enabled, bool):
            raise FleetError(f"{where}: 'enabled' must be true or false")
        output_dir = workdir.compiled / target / str(spec["path"])
        if not Path(os.path.realpath(output_dir)).is_relative_to(compiled):
            raise FleetError(f"{where}.path: {spec['path']!r} leaves compiled/")
        kind, name = spec["type"], str(spec["filter"])
        args = dict(spec.get("filterargs") or {})
        if kind == "builtin":
            if name not in BUILTINS:
                raise FleetError(f"{where}: unknown builtin filter {name!r}")
            if "filterargs" not in spec:
                raise FleetError(f"{where}: builtin filter {name!r} needs filterargs")
            if not output_dir.exists():
                raise FleetError(f"{where}: path {spec['path']!r} is not in the output")
            if not enabled:
                continue
            if "namespace" not in args:
                raise FleetError(
                    f"{where}: builtin filter 'helm_namespace' needs filterargs 'namespace'"
                )
            create = args.get("create_namespace", "false")
            if isinstance(create, bool):
                create = "true" if create else "false"
            excluded = "|".join(json.dumps(e) for e in args.get("exclude_objects", []))
            file = Path(commodore.__install_dir__) / "filters" / "helm_namespace.jsonnet"
            ext = {
                "namespace": args["namespace"],
                "create_namespace": create,
                "exclude_objects": excluded,
                "chart_output_dir": str(output_dir),
            }
        elif kind == "jsonnet":
            file = component_dir / name
            if not Path(os.path.realpath(file)).is_relative_to(component_dir.resolve()):
                raise FleetError(f"{where}.filter: {name!r} refused: it is outside the component")
            if not file.is_file():
                raise FleetError(
                    f"{where}: Jsonnet filter {name!r} does not exist in the component"
                )
            if not enabled:
                continue
            ext = args
        else:
            raise FleetError(f"{where}: unknown filter type {kind!r}")
        _run(workdir, component, node, file, output_dir, ext, where, confined)


def _run(
    workdir: Workdir,
    component: str,
    node: dict[str, Any],
    file: Path,
    output_dir: Path,
    ext: dict[str, Any],
    where: str,
    confined: Confinement,
) -> None:
    # Commodore passes the component's name as both, also for an instance of another name.
    variables = {
        **ext,
        "target": component,
        "component": component,
        "output_path": str(output_dir),
    }
    natives = {
        "yaml_load": (("file",), confined.reader("yaml_load", yaml_load)),
        "yaml_load_all": (("file",), confined.reader("yaml_load_all", yaml_load_all)),
        "list_dir": (("dir", "basename"), confined.reader("list_dir", _list_dir)),
        "commodore_inventory": ((), lambda: node),
    }
    confined.refused = None
    try:
        text = _gojsonnet.evaluate_file(
            str(file),
            import_callback=_importer(workdir, confined),
            native_callbacks=natives,
            ext_vars=variables,
        )
    except (RuntimeError, UnicodeDecodeError) as err:
        # UnicodeDecodeError: gojsonnet's text of a refused import may come back mangled.
        reason = confined.refused or str(err)
        raise FleetError(workdir.relative(f"{where}: filter failed: {reason}")) from None
    for key, value in json.loads(text).items():
        out = output_dir / f"{key}.yaml"
        if not Path(os.path.realpath(out)).is_relative_to(output_dir.resolve()):
            raise FleetError(f"{where}: output {key!r} leaves the filter's path")
        os.makedirs(out.parent, exist_ok=True)
        out.write_text(commodore_yaml(value))
