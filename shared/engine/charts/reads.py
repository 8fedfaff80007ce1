"""Which values a Helm chart reads: its templates, its subcharts' under their keys, and the
keys Helm itself reads (dependency conditions and tags).

    chart_reads(path, "charts/service")   # Reads(paths={("image",), ("port",), ...})

A subchart reads its values under its name (or each alias it is used under) and its share of
`global`; a library chart's templates run with the parent's values, so they read the parent's
keys. Charts are read from the archive Helm would package (`.helmignore` applied, vendored
subcharts as directories or archives), cached by the chart's fingerprint.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import yaml

from shared.engine.helm.engine import archive_members, chart_archive, fingerprint
from shared.engine.helm.reads import Reads, chart_template, merge

_cache: dict[str, Reads] = {}
_lock = threading.Lock()
_LIMIT = 1024


def chart_reads(path: Path, source: str) -> Reads:
    """What the chart at `path` (a directory or an archive) reads of its values."""
    key = fingerprint(path)
    with _lock:
        found = _cache.get(key)
    if found is None:
        found = archive_reads(archive_members(chart_archive(path, source)))
        with _lock:
            if len(_cache) >= _LIMIT:
                _cache.clear()
            _cache[key] = found
    return found


def archive_reads(members: list[tuple[str, bytes]]) -> Reads:
    """What the chart packaged as `members` (name → bytes, one top directory) reads."""
    if not members:
        return Reads()
    top = members[0][0].split("/", 1)[0] + "/"
    files = {name[len(top) :]: data for name, data in members if name.startswith(top)}
    return _chart(files)[0]


def _chart(files: dict[str, bytes]) -> tuple[Reads, dict[str, Any]]:
    """(reads, Chart.yaml) of one chart's files (paths relative to the chart)."""
    meta = _metadata(files.get("Chart.yaml", b""))
    own = merge(
        chart_template(data.decode("utf-8", errors="replace"))
        for name, data in files.items()
        if name.startswith("templates/")
    )
    reads = own
    deps = [d for d in meta.get("dependencies") or [] if isinstance(d, dict)]
    for name, (sub, sub_meta) in _subcharts(files).items():
        if sub_meta.get("type") == "library":
            reads = reads | sub  # its helpers run with the parent's values
        keys = [str(d.get("alias") or name) for d in deps if d.get("name") == name] or [name]
        for key in keys:
            reads = reads | sub.under((key,))
        reads = reads | sub.below(("global",)).under(("global",))
    extra: set[tuple[str, ...]] = set()
    for dep in deps:
        for condition in str(dep.get("condition") or "").split(","):
            if condition.strip():
                extra.add(tuple(condition.strip().split(".")))
        for tag in dep.get("tags") or []:
            extra.add(("tags", str(tag)))
    return reads | Reads(frozenset(extra)), meta


def _subcharts(files: dict[str, bytes]) -> dict[str, tuple[Reads, dict[str, Any]]]:
    """The charts under charts/, by chart name: directories and archives."""
    dirs: dict[str, dict[str, bytes]] = {}
    found: dict[str, tuple[Reads, dict[str, Any]]] = {}
    for name, data in files.items():
        if not name.startswith("charts/"):
            continue
        rest = name[len("charts/") :]
        if "/" in rest:
            sub, _, inner = rest.partition("/")
            dirs.setdefault(sub, {})[inner] = data
        elif rest.endswith(".tgz"):
            members = archive_members(data)
            if members:
                top = members[0][0].split("/", 1)[0] + "/"
                inner_files = {n[len(top) :]: d for n, d in members if n.startswith(top)}
                reads, meta = _chart(inner_files)
                found[str(meta.get("name") or rest[: -len(".tgz")])] = (reads, meta)
    for sub, inner_files in dirs.items():
        if "Chart.yaml" in inner_files:
            reads, meta = _chart(inner_files)
            found[str(meta.get("name") or sub)] = (reads, meta)
    return found


def _metadata(data: bytes) -> dict[str, Any]:
    try:
        meta = yaml.safe_load(data.decode("utf-8", errors="replace"))
    except yaml.YAMLError:
        return {}  # Helm refuses such a chart when it renders it, with its own message
    return meta if isinstance(meta, dict) else {}


def clear_cache() -> None:
    with _lock:
        _cache.clear()
