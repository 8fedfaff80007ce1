"""The Helm engine, behind one small surface.

This is the only module that imports `helm_python` (the Helm v4 Go SDK through ctypes). It
offers what the rest of rollwright needs: render a chart with final values, render a Go
template with Helm's own engine (sprig, `tpl`, `toYaml`, ...), read a chart's defaults and pull
a chart from a repository. Swapping in a `helm` CLI or another binding means rewriting this
file only.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import helm_python as _helm

from shared.engine.errors import FleetError

# helm_python logs through its own logger; keep the Go side quiet unless asked.
_helm.disable_logging()


@dataclass(frozen=True)
class RenderedChart:
    """Templates (`chart/templates/x.yaml` → text) and CRD files, as Helm produced them."""

    templates: dict[str, str]
    crds: dict[str, str] = field(default_factory=dict)


class _Cache:
    """Loaded charts keyed by a fingerprint of their files, shared by threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._charts: dict[str, Any] = {}

    def get(self, key: str, load: Any) -> Any:
        with self._lock:
            chart = self._charts.get(key)
        if chart is None:
            chart = load()
            with self._lock:
                # Another thread may have loaded it meanwhile; keep one.
                chart = self._charts.setdefault(key, chart)
        return chart

    def clear(self) -> None:
        with self._lock:
            self._charts.clear()


_charts = _Cache()
_chart_crds = _Cache()
_templates = _Cache()


def clear_caches() -> None:
    _charts.clear()
    _chart_crds.clear()
    _templates.clear()


_stable = threading.local()


@contextmanager
def charts_unchanged() -> Iterator[None]:
    """Within the block, chart files on disk are taken not to change: each chart path is
    fingerprinted once instead of on every render (a root renders one chart for many
    releases, and walking the chart directory costs as much as a third of a render)."""
    if getattr(_stable, "fingerprints", None) is not None:
        yield
        return
    _stable.fingerprints = {}
    try:
        yield
    finally:
        _stable.fingerprints = None


def _fingerprint(path: Path) -> str:
    memo: dict[Path, str] | None = getattr(_stable, "fingerprints", None)
    if memo is None:
        return _chart_fingerprint(path)
    found = memo.get(path)
    if found is None:
        found = memo[path] = _chart_fingerprint(path)
    return found


def _chart_fingerprint(path: Path) -> str:
    """Cheap identity of a chart on disk: names, sizes and mtimes of its files."""
    digest = hashlib.sha256(str(path.resolve()).encode())
    if path.is_file():
        st = path.stat()
        digest.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        return digest.hexdigest()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames):
            st = os.stat(os.path.join(dirpath, name))
            digest.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _load_chart(path: Path, source: str) -> Any:
    return _load_chart_keyed(path, source)[1]


def _load_chart_keyed(path: Path, source: str) -> tuple[str, Any]:
    """The loaded chart and its fingerprint (which keys what is cached about it)."""

    def load() -> Any:
        try:
            return _helm.Chart.load(str(path))
        except _helm.HelmError as err:
            raise FleetError(f"loading chart: {_clean(str(err))}", path=source) from None

    key = _fingerprint(path)
    return key, _charts.get(key, load)


def is_chart(path: Path) -> bool:
    return (path / "Chart.yaml").is_file() or (path.is_file() and path.name.endswith(".tgz"))


def chart_defaults(path: Path, source: str) -> dict[str, Any]:
    values: dict[str, Any] = _load_chart(path, source).values
    return values


def chart_metadata(path: Path, source: str) -> dict[str, Any]:
    meta: dict[str, Any] = _load_chart(path, source).metadata
    return meta


def render_chart(
    path: Path,
    values: dict[str, Any],
    *,
    release: str,
    namespace: str,
    source: str,
    include_crds: bool = True,
) -> RenderedChart:
    """Render the chart at `path` offline with `values` laid over its defaults.

    `source` is the repo-relative name used in error messages.
    """
    key, chart = _load_chart_keyed(path, source)
    try:
        templates: dict[str, str] = chart.render(
            values, name=release, namespace=namespace, is_install=True, revision=1
        )
    except _helm.HelmError as err:
        raise _chart_error(str(err), path, source) from None
    templates = {k: v for k, v in templates.items() if not k.endswith("NOTES.txt")}
    crds: dict[str, str] = {}
    if include_crds:
        # A loaded chart never changes: read its crds/ from the Go side once.
        for crd in _chart_crds.get(key, lambda: chart.crds):
            crds[crd.get("filename") or crd["name"]] = crd["data"]
    return RenderedChart(templates=templates, crds=crds)


# Where Helm says a template failed: `<chart>/templates/x.yaml:12:5` (or inside a subchart,
# `<chart>/charts/<sub>/templates/x.yaml:3`).
_CHART_POSITION = re.compile(
    r"[A-Za-z0-9_.-]+/(?P<file>(?:charts/[A-Za-z0-9_.-]+/)*templates/[^\s:()]+):(?P<line>\d+)"
)


def _chart_error(message: str, path: Path, source: str) -> FleetError:
    """A render error; for a chart directory in the repo it points at the template's line."""
    text = f"rendering chart: {_clean(message)}"
    match = _CHART_POSITION.search(message)
    if match and path.is_dir() and (path / match.group("file")).is_file():
        return FleetError(text, path=f"{source}/{match.group('file')}", line=int(match["line"]))
    return FleetError(text, path=source)


_TEMPLATE_NAME = "rollwright/templates/t"
_CHART_YAML = b"apiVersion: v2\nname: rollwright\nversion: 0.0.0\n"


def _template_chart(text: str) -> Any:
    # `.x` and `.Values.x` must both work: the body runs inside `with .Values`, and the values
    # carry themselves again under `Values` (see render_template). `$` stays the Helm root.
    body = "{{- with .Values }}" + text + "{{- end }}"
    data = body.encode()
    key = hashlib.sha256(data).hexdigest()

    def load() -> Any:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            for name, content in (("rollwright/Chart.yaml", _CHART_YAML), (_TEMPLATE_NAME, data)):
                info = tarfile.TarInfo(name)
                info.size = len(content)
                tf.addfile(info, io.BytesIO(content))
        return _helm.Chart.load_archive(buf.getvalue())

    return _templates.get(key, load)


def render_template(text: str, values: dict[str, Any], *, source: str) -> str:
    """Render a Go template with Helm's engine; `.Values.x` and `.x` both reach `values`.

    Errors name `source` (repo-relative path) and the template line.
    """
    chart = _template_chart(text)
    context = dict(values)
    context["Values"] = values
    try:
        out: dict[str, str] = chart.render(context, name="rollwright", namespace="default")
    except _helm.HelmError as err:
        raise _template_error(str(err), source) from None
    return out.get(_TEMPLATE_NAME, "")


_POSITION = re.compile(re.escape(_TEMPLATE_NAME) + r":(\d+)(?::(\d+))?")


def _template_error(message: str, source: str) -> FleetError:
    match = _POSITION.search(message)
    line = int(match.group(1)) if match else None
    text = _POSITION.sub(lambda m: f"{source}:{m.group(1)}", _clean(message))
    text = text.replace("template: rollwright/templates/t", f"template {source}")
    return FleetError(f"template error: {text}", path=source, line=line)


def _clean(message: str) -> str:
    return " ".join(message.split())


def pull_chart(
    name: str,
    *,
    version: str | None,
    repo_url: str | None,
    destination: Path,
    source: str,
    display: str | None = None,
) -> Path:
    """Download a chart archive (HTTP repository or `oci://`) into `destination`.

    `display` names the chart in errors (default: name, version and repository).
    Loopback `oci://` registries are spoken to over plain HTTP (test and dev registries).
    """
    destination.mkdir(parents=True, exist_ok=True)
    plain_http = name.startswith("oci://") and _is_loopback_oci(name)
    what = display or f"chart {name!r} version {version or 'latest'!r} from {repo_url or name}"
    try:
        result = _helm.pull(
            name,
            destination=str(destination),
            version=version,
            repo_url=repo_url,
            plain_http=plain_http,
        )
    except _helm.HelmError as err:
        raise FleetError(f"pulling {what}: {_clean(str(err))}", path=source) from None
    archives = sorted(destination.glob("*.tgz"))
    if not archives:
        raise FleetError(f"pulling {what}: no archive written ({result})", path=source)
    return archives[0]


def _is_loopback_oci(ref: str) -> bool:
    host = urlsplit(ref).hostname or ""
    return host in {"127.0.0.1", "localhost", "::1"}


def engine_version() -> str:
    return f"helm-sdk {_helm.helm_sdk_version()}"
