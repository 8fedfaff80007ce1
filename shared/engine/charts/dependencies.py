"""Chart.yaml dependencies, resolved as `helm dependency build` resolves them.

helmfile builds a local chart's dependencies before it templates it; `helm template` refuses
a chart whose Chart.yaml lists a dependency that is not in its `charts/`. So, for a chart of
the fleet repository:

- a dependency already in `charts/` (a directory or an archive) with the version asked for
  (the Chart.lock version when there is a lock, else one that meets the constraint) is used
  as it is;
- any other is fetched like `helm dependency build` would: with a Chart.lock, the locked
  version; without, the newest version meeting the constraint. `repository:` is an HTTP
  chart repository, `oci://…`, `@name` / `alias:name` (a `repositories:` entry of the
  release's helmfile, as helmfile registers them with helm) or `file://<path>` (a chart
  directory of the repository, packaged as it is). Remote archives go through
  `shared.engine.charts.remote`, so they are cached by digest and reached through the worker's
  mirrors and credentials;
- the chart is then rendered from an archive of its files with the fetched dependencies in
  `charts/` (built once per content, cached by digest). Aliases, conditions, tags and
  import-values are Helm's own business at render time.

A dependency that cannot be had is an error naming the chart and the dependency; so is one
missing from a pulled (packaged) chart, which Helm refuses as well.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import tempfile
import threading
from pathlib import Path
from typing import Any

from shared.engine import yamldoc
from shared.engine.charts import remote
from shared.engine.errors import FleetError
from shared.engine.helm.engine import (
    archive_members,
    chart_archive,
    chart_metadata,
    fingerprint,
    loaded_dependencies,
    satisfies,
    tar_gz,
)
from shared.engine.release import ChartSource, Repository
from shared.engine.tree import Tree

_built: dict[tuple[str, tuple[str, ...]], Path] = {}
_lock = threading.Lock()


def prepare(
    path: Path,
    *,
    source: str,
    origin: str,
    tree: Tree,
    repo_path: str | None,
    repositories: tuple[Repository, ...],
    refuse: str | None = None,
) -> Path:
    """The chart to render for `path`: itself when nothing is missing, else a built archive.

    `source` names the chart in messages; `origin` is the file that declared the release;
    `repo_path` is the chart's repo-relative directory (None for a pulled or archived chart,
    whose missing dependencies are refused); `refuse` is why missing dependencies may not be
    fetched (`skipDeps`, a nested chart).
    """
    meta = chart_metadata(path, source)
    wanted = [d for d in meta.get("dependencies") or [] if isinstance(d, dict)]
    if not wanted:
        return path
    present = loaded_dependencies(path, source)
    locked = _lock_versions(path) if repo_path is not None else {}
    missing: list[tuple[dict[str, Any], str | None]] = []
    for dep in wanted:
        name = str(dep.get("name") or "")
        constraint = str(dep.get("version") or "").strip()
        pin = locked.get((name, str(dep.get("repository") or "")))
        if locked and (pin is None or (constraint and not satisfies(constraint, pin))):
            raise FleetError(
                f"chart {source!r}: Chart.lock is out of sync with Chart.yaml for dependency "
                f"{name!r} (helm dependency build refuses it too): run helm dependency update",
                path=f"{repo_path}/Chart.lock" if repo_path else origin,
            )
        if not any(_matches(have, name, pin, constraint) for have in present):
            missing.append((dep, pin))
    if not missing:
        return path
    what = f"chart {source!r}"
    if repo_path is None or refuse is not None:
        dep = missing[0][0]
        why = refuse or "the chart archive does not contain it (helm refuses such a chart too)"
        raise FleetError(f"{what}: dependency {dep.get('name')!r}: {why}", path=origin)
    fetched: dict[str, bytes] = {}
    replaced: set[str] = set()
    for dep, pin in missing:
        name = str(dep.get("name") or "")
        try:
            archive = _fetch(dep, pin, path, repo_path, tree, repositories, origin)
        except FleetError as err:
            wrapped = FleetError(
                f"{what}: dependency {name!r} (repository "
                f"{dep.get('repository') or '(none)'!r}, version {dep.get('version') or '*'!r}): "
                f"{err.problem.message}",
                path=origin,
                line=err.line if err.path == origin else None,
            )
            wrapped.retryable = err.retryable
            raise wrapped from err
        version = str(chart_metadata(archive, source).get("version", "0"))
        fetched[f"charts/{name}-{version}.tgz"] = archive.read_bytes()
        replaced.add(name)
    return _build(path, fetched, replaced, source)


def _matches(have: dict[str, Any], name: str, pin: str | None, constraint: str) -> bool:
    if have.get("name") != name:
        return False
    version = str(have.get("version") or "")
    if pin is not None:
        return version.lstrip("v") == pin.lstrip("v")
    return not constraint or satisfies(constraint, version)


def _lock_versions(path: Path) -> dict[tuple[str, str], str]:
    """(name, repository) → version of the chart's Chart.lock, if it has one."""
    lock = path / "Chart.lock"
    if not lock.is_file():
        return {}
    data = yamldoc.loads(lock.read_text(encoding="utf-8"), "Chart.lock")
    listed = data.get("dependencies") if isinstance(data, dict) else None
    out: dict[tuple[str, str], str] = {}
    for dep in listed if isinstance(listed, list) else []:
        if isinstance(dep, dict) and dep.get("name") and dep.get("version"):
            out[(str(dep["name"]), str(dep.get("repository") or ""))] = str(dep["version"])
    return out


def _fetch(
    dep: dict[str, Any],
    pin: str | None,
    chart_dir: Path,
    repo_path: str,
    tree: Tree,
    repositories: tuple[Repository, ...],
    origin: str,
) -> Path:
    name = str(dep.get("name") or "")
    repository = str(dep.get("repository") or "").strip()
    version = pin or str(dep.get("version") or "").strip() or None
    if not repository:
        raise FleetError("it has no repository and is not in charts/", path=origin)
    if repository.startswith("file://"):
        return _local(repository, str(dep.get("version") or ""), chart_dir, repo_path, tree)
    if repository.startswith(("@", "alias:")):
        wanted = repository.removeprefix("@").removeprefix("alias:")
        found = next((r for r in repositories if r.name == wanted), None)
        if found is None:
            known = ", ".join(r.name for r in repositories) or "none"
            raise FleetError(
                f"no repository named {wanted!r} in the helmfile's repositories: (known: {known})",
                path=origin,
            )
        repository, plain_http = found.url, found.plain_http
    else:
        plain_http = False
    if repository.startswith("oci://"):
        source = ChartSource(
            "remote-chart",
            ref=f"{repository.rstrip('/')}/{name}",
            version=version,
            plain_http=plain_http,
        )
    else:
        source = ChartSource(
            "remote-chart", ref=f"dep/{name}", version=version, repo_url=repository
        )
    return remote.fetch(source, origin)


def _local(repository: str, constraint: str, chart_dir: Path, repo_path: str, tree: Tree) -> Path:
    """A `file://` dependency: a chart directory of the repository, packaged as it is."""
    rel = posixpath.normpath(posixpath.join(repo_path, repository.removeprefix("file://")))
    if rel == ".." or rel.startswith("../") or repository.startswith("file:///"):
        raise FleetError(f"{repository} points outside the repository")
    if rel == "deployments" or rel.startswith("deployments/"):
        raise FleetError(f"{repository}: charts may not be read from deployments/")
    local = tree.local_path(rel)
    if not (local / "Chart.yaml").is_file():
        raise FleetError(f"{repository}: no chart at {rel}")
    meta = chart_metadata(local, rel)
    version = str(meta.get("version") or "")
    if constraint and not satisfies(constraint, version):
        raise FleetError(f"{rel} is version {version}, which does not meet {constraint!r}")
    # Its own dependencies must be there: `helm dependency build` does not fetch them.
    nested = prepare(
        local,
        source=rel,
        origin=f"{rel}/Chart.yaml",
        tree=tree,
        repo_path=rel,
        repositories=(),
        refuse="a file:// dependency's own dependencies must be in its charts/ "
        "(helm dependency build does not fetch them)",
    )
    return _store(chart_archive(nested, rel))


def _build(path: Path, fetched: dict[str, bytes], replaced: set[str], source: str) -> Path:
    """An archive of the chart with `fetched` in charts/ instead of stale copies of the
    `replaced` dependencies (what `helm dependency build` leaves in charts/)."""
    key = (
        fingerprint(path),
        tuple(sorted(hashlib.sha256(d).hexdigest() for d in fetched.values())),
    )
    with _lock:
        found = _built.get(key)
    if found is not None and found.is_file():
        return found
    stale = {
        str(d.get("name")): d
        for d in loaded_dependencies(path, source)
        if str(d.get("name")) in replaced
    }
    members: list[tuple[str, bytes]] = []
    base = ""
    # The chart as Helm packages it (.helmignore applied), without the stale copies.
    for name, data in archive_members(chart_archive(path, source)):
        parts = name.split("/")
        base = parts[0]
        if len(parts) >= 3 and parts[1] == "charts" and _stale(parts[2], stale):
            continue
        members.append((name, data))
    members += [(f"{base}/{name}", data) for name, data in sorted(fetched.items())]
    built = _store(tar_gz(members))
    leftovers = {
        f"{d.get('name')}-{d.get('version')}.tgz"
        for d in loaded_dependencies(built, source)
        if str(d.get("name")) in replaced
    } - {name.removeprefix("charts/") for name in fetched}
    doubled = sorted(leftovers)
    if doubled:
        raise FleetError(
            f"chart {source!r}: charts/ holds another copy of {', '.join(doubled)} under an "
            "unexpected file name; remove it or vendor the version Chart.yaml asks for",
            path=source,
        )
    with _lock:
        _built[key] = built
    return built


def _stale(entry: str, stale: dict[str, dict[str, Any]]) -> bool:
    """Whether `charts/<entry>` is an old copy of a dependency being replaced."""
    return any(entry in (name, f"{name}-{meta.get('version')}.tgz") for name, meta in stale.items())


def _store(data: bytes) -> Path:
    """Put a built archive in the chart cache under its digest."""
    digest = hashlib.sha256(data).hexdigest()
    target = remote.cache_dir() / "built" / f"{digest}.tgz"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".tmp", dir=target.parent)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, target)
    return target
