"""The Helm engine, behind one small surface.

This is the only module that calls `helm_python` (the Helm v4 Go SDK through ctypes), through
`shared.engine.helm.binding`, which it imports where it calls into Go (start-up time). It
offers what the rest of rollwright needs: render a chart with final values, render a Go
template with Helm's own engine (sprig, `tpl`, `toYaml`, ...), read a chart's defaults and pull
a chart from a repository. Swapping in a `helm` CLI or another binding means rewriting this
file and `binding` only.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import logging
import os
import re
import sys
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from shared.engine.errors import FleetError
from shared.engine.helm.errors import reword

if TYPE_CHECKING:
    from shared.engine.helm import binding

log = logging.getLogger("rollwright.helm")


class _DebugOnly(logging.Filter):
    """Helm's Go log lines (`WARN unable to find exact version ...`) are rollwright's debug
    output, whatever level Helm gave them: they never reach a user's terminal raw."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


log.addFilter(_DebugOnly())
# The binding's own log comes here when it loads (`shared.engine.helm.binding`). Helm itself
# logs with Go's default logger, straight to file descriptor 2: see `_go_log_to_debug`.

# `2026/11/25 20:35:41 WARN unable to find exact version requested; ...`
_GO_LOG_LINE = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (?:DEBUG|INFO|WARN|ERROR) ")
_stderr_lock = threading.Lock()


@contextmanager
def _go_log_to_debug() -> Iterator[None]:
    """Around a Helm call that may log (pulls and repository lookups): descriptor 2 goes to
    a file, Helm's lines go to rollwright's debug log, anything else written there meanwhile
    (another thread's stderr) is written back. Renders are not wrapped: they do not log, and
    they run in parallel."""
    with _stderr_lock:
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                captured.seek(0)
                text = captured.read().decode("utf-8", errors="replace")
    others: list[str] = []
    for line in text.splitlines():
        if _GO_LOG_LINE.match(line):
            log.debug("%s", line.split(" ", 2)[2])
        elif line:
            others.append(line)
    if others:
        os.write(2, ("\n".join(others) + "\n").encode())


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
# A loaded chart never changes, and each of these is a call into Go and a JSON document:
# read once per chart (a fleet renders one chart for many releases, and every render asks
# for its metadata twice). Callers only read what they get.
_chart_meta = _Cache()
_chart_deps = _Cache()
_templates = _Cache()


def clear_caches() -> None:
    _charts.clear()
    _chart_crds.clear()
    _chart_meta.clear()
    _chart_deps.clear()
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


def fingerprint(path: Path) -> str:
    """Cheap identity of a chart on disk (see `charts_unchanged`)."""
    return _fingerprint(path)


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
        from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

        try:
            return binding.Chart.load(str(path))
        except binding.HelmError as err:
            raise FleetError(f"loading chart: {_clean(str(err))}", path=source) from None

    key = _fingerprint(path)
    return key, _charts.get(key, load)


def _load_without_schemas(path: Path, key: str, source: str) -> Any:
    """The chart with every values.schema.json (its own and its subcharts') left out: how
    `--skip-schema-validation` is had from a binding whose render always validates."""

    def load() -> Any:
        from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

        try:
            return binding.Chart.load_archive(_without_schemas(chart_archive(path, source)))
        except (binding.HelmError, OSError, tarfile.TarError) as err:
            raise FleetError(f"loading chart: {_clean(str(err))}", path=source) from None

    return _charts.get(key + ":no-schema", load)


def chart_archive(path: Path, source: str) -> bytes:
    """The chart as Helm packages it (`.helmignore` applied): an archive's bytes, or the
    loaded directory saved by Helm."""
    if path.is_file():
        return path.read_bytes()
    from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

    with tempfile.TemporaryDirectory() as tmp:
        try:
            saved = _load_chart(path, source).save(tmp)
        except binding.HelmError as err:
            raise FleetError(f"packaging chart: {_clean(str(err))}", path=source) from None
        return Path(saved).read_bytes()


def archive_members(data: bytes) -> list[tuple[str, bytes]]:
    """The files of a chart archive, in order."""
    members: list[tuple[str, bytes]] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
        for member in tf.getmembers():
            handle = tf.extractfile(member) if member.isfile() else None
            if handle is not None:
                members.append((member.name, handle.read()))
    return members


def _without_schemas(data: bytes) -> bytes:
    kept: list[tuple[str, bytes]] = []
    for name, content in archive_members(data):
        if name.rsplit("/", 1)[-1] == "values.schema.json":
            continue
        if name.endswith(".tgz") and "/charts/" in name:
            content = _without_schemas(content)  # a vendored subchart archive: its schema too
        kept.append((name, content))
    return tar_gz(kept)


def tar_gz(members: list[tuple[str, bytes]]) -> bytes:
    """A gzipped tar of `members` (name → bytes), byte-for-byte the same for the same input."""
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tf,
    ):
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def is_chart(path: Path) -> bool:
    return (path / "Chart.yaml").is_file() or (path.is_file() and path.name.endswith(".tgz"))


def chart_defaults(path: Path, source: str) -> dict[str, Any]:
    values: dict[str, Any] = _load_chart(path, source).values
    return values


def chart_metadata(path: Path, source: str) -> dict[str, Any]:
    """The chart's Chart.yaml as Helm loaded it (shared: not to be changed)."""
    key, chart = _load_chart_keyed(path, source)
    meta: dict[str, Any] = _chart_meta.get(key, lambda: chart.metadata)
    return meta


def loaded_dependencies(path: Path, source: str) -> list[dict[str, Any]]:
    """Metadata of the subcharts Helm loads from the chart's charts/ (by chart name; shared:
    not to be changed)."""
    key, chart = _load_chart_keyed(path, source)
    deps: list[dict[str, Any]] = _chart_deps.get(key, lambda: chart.dependencies)
    return deps


def parse_set(expression: str, *, string: bool) -> dict[str, Any]:
    """helm's `--set` (or, with `string`, `--set-string`) parsing of `name=value`."""
    from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

    try:
        if string:
            return binding.helm.parse_set_string_values(expression)
        return binding.helm.parse_set_string(expression)
    except binding.HelmError as err:
        raise FleetError(f"cannot parse {expression!r}: {_clean(str(err))}") from None


@functools.lru_cache(maxsize=4096)
def satisfies(constraint: str, version: str) -> bool:
    """Whether `version` meets a semver constraint exactly as Helm checks one (Masterminds
    semver through sprig's `semverCompare`, the library Helm's own checks use)."""
    from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

    text = "{{ semverCompare .Values.c .Values.v }}"
    try:
        out = _template_chart(text, wrap=False).render_with(
            {"c": constraint, "v": version}, {"name": "rollwright"}
        )
    except binding.HelmError as err:
        raise FleetError(f"version constraint {constraint!r}: {_clean(str(err))}") from None
    return out.get(_TEMPLATE_NAME, "").strip() == "true"


@functools.cache
def default_kube_version() -> str:
    """The Kubernetes version Helm assumes without `--kube-version`."""
    text = "{{ .Capabilities.KubeVersion.Version }}"
    return _template_chart(text, wrap=False).render_with({}, {"name": "rollwright"})[_TEMPLATE_NAME]


def render_chart(
    path: Path,
    values: dict[str, Any],
    *,
    release: str,
    namespace: str,
    source: str,
    include_crds: bool = True,
    kube_version: str | None = None,
    api_versions: tuple[str, ...] = (),
    skip_schema_validation: bool = False,
    files_root: Path | None = None,
) -> RenderedChart:
    """Render the chart at `path` offline with `values` laid over its defaults, as
    `helm template --kube-version --api-versions [--skip-schema-validation]` would.

    `source` is the repo-relative name used in error messages; `files_root` is the chart's
    directory in the repo when `path` is a built archive of it (errors then name its files).
    """
    from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

    key, chart = _load_chart_keyed(path, source)
    if skip_schema_validation:
        chart = _load_without_schemas(path, key, source)
    options: dict[str, Any] = {
        "name": release,
        "namespace": namespace,
        "is_install": True,
        "revision": 1,
    }
    if kube_version:
        options["kube_version"] = kube_version
    if api_versions:
        options["api_versions"] = list(api_versions)
    try:
        templates = chart.render_with(values, options)
    except binding.HelmError as err:
        raise _chart_error(str(err), files_root or path, source, values) from None
    templates = {k: v for k, v in templates.items() if not k.endswith("NOTES.txt")}
    crds: dict[str, str] = {}
    if include_crds:
        # A loaded chart never changes: read its crds/ from the Go side once.
        for crd in _chart_crds.get(key, lambda: chart.crds):
            crds[crd.get("filename") or crd["name"]] = crd["data"]
    return RenderedChart(templates=templates, crds=crds)


def render_chart_files(
    files: dict[str, bytes], values: dict[str, Any], *, release: str, namespace: str, source: str
) -> RenderedChart:
    """Render a chart given as its files (path inside the chart → bytes, `Chart.yaml`
    included), as `helm template` renders it: what Argo CD does with a published chart.
    `source` names the chart in errors, which point at `<source>/templates/<file>` and its
    line. Nothing is cached: the chart is one render's output."""
    from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

    name = yaml_chart_name(files.get("Chart.yaml", b""))
    members = [(f"{name}/{path}", data) for path, data in sorted(files.items())]
    try:
        chart: Any = binding.Chart.load_archive(tar_gz(members))
        templates = chart.render_with(
            values, {"name": release, "namespace": namespace, "is_install": True, "revision": 1}
        )
    except binding.HelmError as err:
        message = str(err)
        text = f"rendering chart: {reword(_clean(message), {'Values': values})}"
        match = _CHART_POSITION.search(message)
        if match and match.group("file").removeprefix("templates/") in {
            p.removeprefix("templates/") for p in files
        }:
            return_error = FleetError(
                text, path=f"{source}/{match.group('file')}", line=int(match["line"])
            )
        else:
            return_error = FleetError(text, path=source)
        raise return_error from None
    return RenderedChart(
        templates={k: v for k, v in templates.items() if not k.endswith("NOTES.txt")}
    )


def yaml_chart_name(chart_yaml: bytes) -> str:
    """A chart's `name:` read from its Chart.yaml bytes (the archive's top directory)."""
    match = re.search(rb"^name:\s*['\"]?([A-Za-z0-9_.-]+)", chart_yaml, re.M)
    return match.group(1).decode() if match else "chart"


_PARSE_ONLY = "rollwright.parse-only"


def parse_template(text: str, *, source: str) -> None:
    """Parse `text` as a Go template with Helm's engine and its functions, without running
    it: a syntax error raises a FleetError naming `source` and the line in `text`."""
    from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

    body = '{{- define "' + _PARSE_ONLY + '" }}' + text + "{{- end }}"
    chart = _template_chart(body, wrap=False)
    try:
        chart.render_with({}, {"name": "rollwright", "namespace": "default"})
    except binding.HelmError as err:
        raise _template_error(str(err), source) from None


# Where Helm says a template failed: `<chart>/templates/x.yaml:12:5` (or inside a subchart,
# `<chart>/charts/<sub>/templates/x.yaml:3`).
_CHART_POSITION = re.compile(
    r"[A-Za-z0-9_.-]+/(?P<file>(?:charts/[A-Za-z0-9_.-]+/)*templates/[^\s:()]+):(?P<line>\d+)"
)


def _chart_error(
    message: str, path: Path, source: str, values: dict[str, Any] | None = None
) -> FleetError:
    """A render error; for a chart directory in the repo it points at the template's line.
    Go template errors are reworded (shared.engine.helm.errors)."""
    text = f"rendering chart: {reword(_clean(message), {'Values': values or {}})}"
    match = _CHART_POSITION.search(message)
    if match and path.is_dir() and (path / match.group("file")).is_file():
        return FleetError(text, path=f"{source}/{match.group('file')}", line=int(match["line"]))
    if match and match.group(0) not in text:
        # Not a file of the repo (a remote chart): the rewording took the position out of
        # the words, and the problem's path is the declaring file, so say where it failed.
        text += f" (at {match.group(0)})"
    return FleetError(text, path=source)


_TEMPLATE_NAME = "rollwright/templates/t"
_CHART_YAML = b"apiVersion: v2\nname: rollwright\nversion: 0.0.0\n"


_HELPERS_NAME = "rollwright/templates/_helpers.tpl"


def _template_chart(
    text: str, *, wrap: bool = True, helpers: str = "", files: tuple[tuple[str, bytes], ...] = ()
) -> binding.Chart:
    # `.x` and `.Values.x` must both work: the body runs inside `with .Values`, and the values
    # carry themselves again under `Values` (see render_template), so the map is never empty
    # and `with` always runs. `$` stays the Helm root. The closing `{{ end }}` trims nothing:
    # a template's trailing newlines are its own.
    body = ("{{- with .Values }}" + text + "{{ end }}") if wrap else text
    members = [("rollwright/Chart.yaml", _CHART_YAML), (_TEMPLATE_NAME, body.encode())]
    if helpers:
        members.append((_HELPERS_NAME, helpers.encode()))
    members += [(f"rollwright/{name}", data) for name, data in files]
    digest = hashlib.sha256()
    for name, data in members:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)

    def load() -> Any:
        from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

        return binding.Chart.load_archive(tar_gz(members))

    chart: binding.Chart = _templates.get(digest.hexdigest(), load)
    return chart


def render_template(
    text: str,
    values: dict[str, Any],
    *,
    source: str,
    helpers: str = "",
    files: tuple[tuple[str, bytes], ...] = (),
    strict: bool = False,
    values_alias: bool = True,
) -> str:
    """Render a Go template with Helm's engine; `.Values.x` and `.x` both reach `values`.

    `helpers` are named templates (`define`) the text may `include`; `files` are reachable as
    `$.Files.Get "<name>"`; `strict` is `missingkey=error` (helmfile's mode). The output is
    the template's, byte for byte. Errors name `source` (repo-relative path) and its line.
    Without `values_alias`, `.` is `values` alone (`.Values` is only a key `values` has, as
    in gomplate's context; `values` must not be empty, or the body would not run).
    """
    from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

    chart = _template_chart(text, helpers=helpers, files=files)
    context = dict(values)
    if values_alias:
        context["Values"] = values
    options: dict[str, Any] = {"name": "rollwright", "namespace": "default", "strict": strict}
    try:
        out = chart.render_with(context, options)
    except binding.HelmError as err:
        raise _template_error(str(err), source, context) from None
    return out.get(_TEMPLATE_NAME, "")


_POSITION = re.compile(re.escape(_TEMPLATE_NAME) + r":(\d+)(?::(\d+))?")


# What the user's file did not write: the wrapper chart's names, and the named templates a
# rewritten helmfile function runs (shared.engine.helm.gotmpl), down to the message they fail with.
_NOISE = (
    (re.compile(r' executing "rollwright/templates/t"'), ""),
    (re.compile(r'<include "rollwright\.(\w+)"[^>]*>'), r"<\1>"),
    (
        re.compile(
            r"error calling include: (?:template: )?rollwright/templates/_helpers\.tpl:\d+:\d+: "
            r'executing "rollwright\.\w+" at <[^>]*>: error calling fail: '
        ),
        "",
    ),
)


def _template_error(message: str, source: str, context: dict[str, Any] | None = None) -> FleetError:
    match = _POSITION.search(message)
    line = int(match.group(1)) if match else None
    text = _POSITION.sub(lambda m: f"{source}:{m.group(1)}", _clean(message))
    text = text.replace("template: rollwright/templates/t", f"template {source}")
    for pattern, replacement in _NOISE:
        text = pattern.sub(replacement, text)
    # The position is the problem's own `path:line:`; the words are `reword`'s.
    reworded = reword(text, context)
    if reworded == text:
        return FleetError(f"template error: {text}", path=source, line=line)
    return FleetError(reworded, path=source, line=line)


def _clean(message: str) -> str:
    return " ".join(message.split())


class RepositoryUnreachable(FleetError):
    """A chart repository or registry that did not answer (network, TLS, 5xx): not the
    fleet's fault, so the activity retries it."""

    retryable = True


# Transport failures, as Go and Helm word them: the repository was not reached.
_UNREACHABLE = re.compile(
    r"dial tcp|connection refused|no such host|i/o timeout|TLS handshake|connection reset"
    r"|context deadline exceeded|proxyconnect|server misbehaving|network is unreachable"
    r"|x509: certificate|\b50[0234]\b|unexpected EOF",
    re.I,
)


def pull_chart(
    name: str,
    *,
    version: str | None,
    repo_url: str | None,
    destination: Path,
    source: str,
    display: str | None = None,
    username: str | None = None,
    password: str | None = None,
    plain_http: bool = False,
) -> Path:
    """Download a chart archive (HTTP repository or `oci://`) into `destination`.

    `display` names the chart in errors (default: name, version and repository). Loopback
    `oci://` registries are spoken to over plain HTTP (test and dev registries), others when
    `plain_http`. A repository that cannot be reached raises `RepositoryUnreachable`.
    """
    from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

    destination.mkdir(parents=True, exist_ok=True)
    plain_http = name.startswith("oci://") and (plain_http or _is_loopback_oci(name))
    what = display or f"chart {name!r} version {version or 'latest'!r} from {repo_url or name}"
    try:
        with _go_log_to_debug(), tempfile.TemporaryDirectory() as private:
            client = None
            if name.startswith("oci://") and username and password:
                store = Path(private) / "registry.json"
                client = binding.Registry(
                    plain_http=plain_http, username=username, password=password, store=store
                )
            try:
                result = binding.helm.pull(
                    name,
                    client=client,
                    destination=str(destination),
                    version=version,
                    repo_url=repo_url,
                    plain_http=plain_http,
                    username=username,
                    password=password,
                )
            finally:
                if client is not None:
                    client.close()
    except binding.HelmError as err:
        message = _clean(str(err))
        if password:
            message = message.replace(password, "***")
        if _UNREACHABLE.search(message):
            raise RepositoryUnreachable(
                f"pulling {what}: repository unreachable (will be retried): {message}",
                path=source,
            ) from None
        raise FleetError(f"pulling {what}: {message}", path=source) from None
    archives = sorted(destination.glob("*.tgz"))
    if not archives:
        raise FleetError(f"pulling {what}: no archive written ({result})", path=source)
    return archives[0]


def _is_loopback_oci(ref: str) -> bool:
    host = urlsplit(ref).hostname or ""
    return host in {"127.0.0.1", "localhost", "::1"}


def engine_version() -> str:
    from shared.engine.helm import binding  # noqa: PLC0415 (start-up time)

    return f"helm-sdk {binding.helm.helm_sdk_version()}"
