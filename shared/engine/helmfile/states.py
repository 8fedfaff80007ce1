"""helmfile state files as kube-renderer's helmfile (v0.148) reads them.

A state file is a Go template (helmfile v0 renders every `helmfile.yaml`, not only
`.gotmpl` ones): a first pass renders it without values to read `environments` and `bases`,
the environment `default`'s values are loaded (inline maps and files, `.gotmpl` files
rendered), and a second pass renders it with `.Values`, `.StateValues` and
`.Environment.Values` set to them. `bases` are layered into the same state (their releases
first, their environments merged); `helmfiles` are sub-states loaded on their own, seeing
only the values their entry passes, never the parent's environment. States are returned in
the order `helmfile build` prints them: a state's sub-helmfiles before the state itself.

What kube-renderer's helmfile reads and rollwright cannot reproduce (selectors on
sub-helmfiles, `secrets`, hooks, other environments, helm binaries other than Helm itself) is
refused with the file and line, never ignored.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.engine import yamldoc
from shared.engine.errors import FleetError
from shared.engine.helm import gotmpl
from shared.engine.helm.engine import parse_set
from shared.engine.release import Repository
from shared.engine.tree import Tree
from shared.engine.values import deep_merge

ENVIRONMENT = "default"  # kube-renderer runs helmfile without --environment
STATE_KEYS = frozenset(
    {"environments", "bases", "helmfiles", "releases", "repositories", "helmBinary", "helmDefaults"}
)
RELEASE_KEYS = frozenset(
    {
        "name",
        "chart",
        "version",
        "namespace",
        "labels",
        "values",
        "set",
        "needs",
        "installed",
        "condition",
        "transformers",
        "createNamespace",
    }
)
_CONTEXT_KEYS = ("Values", "StateValues", "Environment", "Namespace", "Release")
_PART_SEPARATOR = re.compile(r"\n---\n")


@dataclass
class Release:
    name: str
    chart: str
    namespace: str
    labels: dict[str, str]
    values: dict[str, Any]  # its `values` and `set`, merged in helm's order
    listed: dict[str, Any]  # its `values` alone, merged (what `helmfile build` embeds)
    inputs: set[str]  # the values files it read (and what their templates read)
    installed: bool
    condition: str
    needs: list[str]
    transformers: list[dict[str, Any]]
    version: str | None
    raw: dict[str, Any]  # the release as its state file wrote it (after templating)
    state: str  # the file that declared it
    line: int | None
    base: str  # the directory its chart and values paths are relative to


@dataclass
class State:
    path: str
    values: dict[str, Any]  # the environment's values (`.Values`, kube-renderer's state values)
    releases: list[Release] = field(default_factory=list)
    repositories: list[Repository] = field(default_factory=list)
    helm_binary: str = ""
    # Every path loading it read, listed or looked for (its file, bases, values files, files
    # its templates read), its parents' included: what it depends on.
    inputs: set[str] = field(default_factory=set)


def _dir(path: str) -> str:
    return posixpath.dirname(path)


def _join(base: str, rel: str) -> str:
    joined = posixpath.normpath(posixpath.join(base, rel)) if base else posixpath.normpath(rel)
    if joined == ".." or joined.startswith("../") or rel.startswith("/"):
        raise ValueError(f"{rel!r} points outside the repository")
    return "" if joined == "." else joined


class Recorder:
    """A `Tree` that notes every path read, listed or looked for into each open record."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.records: list[set[str]] = []

    def _note(self, rel: str) -> None:
        for record in self.records:
            record.add(rel)

    def is_file(self, rel: str) -> bool:
        self._note(rel)
        return self.tree.is_file(rel)

    def is_dir(self, rel: str) -> bool:
        self._note(rel)
        return self.tree.is_dir(rel)

    def listdir(self, rel: str) -> list[str]:
        self._note(rel)
        return self.tree.listdir(rel)

    def read_text(self, rel: str) -> str:
        self._note(rel)
        return self.tree.read_text(rel)

    @contextmanager
    def apart(self) -> Iterator[set[str]]:
        """A record of its own, the open ones left out while it lasts."""
        record: set[str] = set()
        kept, self.records = self.records, [record]
        try:
            yield record
        finally:
            self.records = kept

    def local_path(self, rel: str) -> Path:
        return self.tree.local_path(rel)


class Loader:
    """Reads the state files of one tree; `states(path)` walks them from the top."""

    def __init__(self, tree: Tree) -> None:
        self.tree = Recorder(tree)

    def states(self, path: str, overrides: dict[str, Any] | None = None) -> list[State]:
        """The states from the top-level `path` down; `overrides` are helmfile's
        `--state-values-file` values (kube-renderer before 0.1.17 passes its root
        `values.yaml`): the top-level state's alone, over its environment's."""
        return self._walk(path, overrides or {}, [], set())

    def _walk(
        self, path: str, overrides: dict[str, Any], seen: list[str], inherited: set[str]
    ) -> list[State]:
        if path in seen:
            raise FleetError(f"helmfiles loop back to {path}", path=seen[-1])
        record: set[str] = set()
        self.tree.records.append(record)
        try:
            loaded = self._load(path, overrides, [*seen, path])
        finally:
            self.tree.records.pop()
        loaded.state.inputs = record | inherited
        out: list[State] = []
        for sub_path, sub_values in loaded.subs:
            out.extend(self._walk(sub_path, sub_values, [*seen, path], loaded.state.inputs))
        out.append(loaded.state)
        return out

    # --- one file ----------------------------------------------------------------------------

    def _load(self, path: str, overrides: dict[str, Any], seen: list[str]) -> _Loaded:
        text = self._text(path, seen[-2] if len(seen) > 1 else path)
        base = _dir(path)
        result = _Loaded(State(path, {}))
        env: dict[str, Any] = {}
        offset = 0
        for part in _PART_SEPARATOR.split(text):
            # helmfile's first pass already sees the overrides (its initial environment)
            first = self._render(part, path, base, deep_merge(env, overrides), offset, strict=False)
            for base_path, line in _list_of_paths(first, "bases", path, offset):
                layered = self._load(self._path(base, base_path, path, line), {}, seen)
                env = deep_merge(env, layered.state.values)
                result.absorb(layered)
            env = deep_merge(env, self._environment(first, path, base, env, offset))
            env = deep_merge(env, overrides)
            doc = self._render(part, path, base, env, offset, strict=True)
            self._read_state(doc, path, base, env, offset, result)
            offset += part.count("\n") + 2
        result.state.values = env
        return result

    def _text(self, path: str, referrer: str) -> str:
        try:
            return self.tree.read_text(path)
        except (FileNotFoundError, IsADirectoryError):
            raise FleetError(f"helmfile {path} not found", path=referrer) from None
        except UnicodeDecodeError:
            raise FleetError("not valid UTF-8 text", path=path) from None

    def _render(
        self, part: str, path: str, base: str, env: dict[str, Any], offset: int, *, strict: bool
    ) -> dict[str, Any]:
        host = gotmpl.Host(self.tree, {}, None, base=base, reserved=())
        try:
            out = gotmpl.render(part, context(env), source=path, host=host, strict=strict)
            data = yamldoc.loads(out, path) if out.strip() else {}
        except FleetError as err:
            line = err.line + offset if err.line is not None else None
            raise FleetError(err.problem.message, path=path, line=line) from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise FleetError("a helmfile state must be a mapping", path=path, line=offset + 1)
        return data

    def _environment(
        self, doc: dict[str, Any], path: str, base: str, env: dict[str, Any], offset: int
    ) -> dict[str, Any]:
        envs = doc.get("environments") or {}
        if not isinstance(envs, dict):
            raise FleetError(
                "environments must be a mapping",
                path=path,
                line=self.line_of(path, ("environments",), offset),
            )
        spec = envs.get(ENVIRONMENT) or {}
        if not isinstance(spec, dict):
            raise FleetError(f"environments.{ENVIRONMENT} must be a mapping", path=path)
        unknown = sorted(set(spec) - {"values", "missingFileHandler"})
        if unknown:
            line = self.line_of(path, ("environments", ENVIRONMENT, unknown[0]), offset)
            raise FleetError(
                f"environments.{ENVIRONMENT}.{unknown[0]} is not supported by the helmfile "
                "layout (only values)",
                path=path,
                line=line,
            )
        values: dict[str, Any] = {}
        entries = spec.get("values") or []
        if not isinstance(entries, list):
            raise FleetError(f"environments.{ENVIRONMENT}.values must be a list", path=path)
        for entry in entries:
            if isinstance(entry, dict):
                values = deep_merge(values, entry)
            elif isinstance(entry, str):
                ctx = context(deep_merge(env, values))
                values = deep_merge(values, self.values_file(base, entry, path, ctx))
            else:
                raise FleetError(
                    f"environments.{ENVIRONMENT}.values entries are maps or file paths",
                    path=path,
                )
        return values

    def values_file(
        self, base: str, rel: str, referrer: str, ctx: dict[str, Any]
    ) -> dict[str, Any]:
        """A values file (relative to `base`); `.gotmpl` files are rendered with `ctx`."""
        path = self._path(base, rel, referrer, None)
        text = self._text(path, referrer)
        if path.endswith(".gotmpl"):
            host = gotmpl.Host(self.tree, {}, None, base=_dir(path), reserved=())
            text = gotmpl.render(text, ctx, source=path, host=host)
        data = yamldoc.loads(text, path) if text.strip() else {}
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise FleetError("a values file must hold a mapping", path=path)
        return data

    def _path(self, base: str, rel: str, referrer: str, line: int | None) -> str:
        try:
            return _join(base, rel)
        except ValueError as err:
            raise FleetError(str(err), path=referrer, line=line) from None

    def line_of(self, path: str, keys: tuple[str | int, ...], offset: int) -> int | None:
        try:
            return yamldoc.key_line(self.tree.read_text(path), keys)
        except (OSError, UnicodeDecodeError, FleetError):
            return None

    # --- the rendered state ------------------------------------------------------------------

    def _read_state(
        self,
        doc: dict[str, Any],
        path: str,
        base: str,
        env: dict[str, Any],
        offset: int,
        result: _Loaded,
    ) -> None:
        unknown = sorted(set(doc) - STATE_KEYS)
        if unknown:
            raise FleetError(
                f"'{unknown[0]}' is not supported by the helmfile layout (it reads "
                f"{', '.join(sorted(STATE_KEYS))})",
                path=path,
                line=self.line_of(path, (unknown[0],), offset),
            )
        if doc.get("helmDefaults"):
            raise FleetError(
                "helmDefaults is not supported by the helmfile layout: its flags would change "
                "what helm renders",
                path=path,
                line=self.line_of(path, ("helmDefaults",), offset),
            )
        binary = doc.get("helmBinary")
        if binary not in (None, "", "helm"):
            raise FleetError(
                f"helmBinary {binary!r}: {binary}: not found (rollwright renders with its "
                "embedded Helm; leave helmBinary out or set it to helm)",
                path=path,
                line=self.line_of(path, ("helmBinary",), offset),
            )
        for entry in doc.get("repositories") or []:
            if not isinstance(entry, dict) or not entry.get("name") or not entry.get("url"):
                raise FleetError("repositories entries need a name and a url", path=path)
            url = str(entry["url"])
            if entry.get("oci") and not url.startswith("oci://"):
                url = "oci://" + url
            result.state.repositories.append(Repository(str(entry["name"]), url))
        for index, (sub, line) in enumerate(_helmfile_entries(doc, path, self, offset)):
            del index
            pattern, values = self._sub_values(sub, base, path, line, env)
            # What a glob finds depends on the files it lists, but no state's content does:
            # a file it finds, or no longer finds, is an input of the states read from it.
            with self.tree.apart():
                matches = self._glob(pattern, path, line)
            result.subs.extend((match, values) for match in matches)
        releases = doc.get("releases") or []
        if not isinstance(releases, list):
            raise FleetError(
                "releases must be a list", path=path, line=self.line_of(path, ("releases",), offset)
            )
        for index, raw in enumerate(releases):
            line = self.line_of(path, ("releases", index), offset)
            result.state.releases.append(self._release(raw, path, base, env, line))

    def _sub_values(
        self, entry: Any, base: str, path: str, line: int | None, env: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        if isinstance(entry, str):
            return self._path(base, entry, path, line), {}
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise FleetError(
                "helmfiles entries are paths or maps with a path", path=path, line=line
            )
        unknown = sorted(set(entry) - {"path", "values"})
        if unknown:
            raise FleetError(
                f"helmfiles entry key '{unknown[0]}' is not supported by the helmfile layout "
                "(path and values)",
                path=path,
                line=line,
            )
        values: dict[str, Any] = {}
        for item in entry.get("values") or []:
            if isinstance(item, dict):
                values = deep_merge(values, item)
            else:
                values = deep_merge(values, self.values_file(base, str(item), path, context(env)))
        return self._path(base, entry["path"], path, line), values

    def _glob(self, pattern: str, referrer: str, line: int | None) -> list[str]:
        if "**" in pattern:
            raise FleetError(
                f"helmfiles {pattern!r}: ** is not a helmfile glob", path=referrer, line=line
            )
        found = [""]
        for segment in pattern.split("/"):
            nxt: list[str] = []
            for prefix in found:
                where = prefix or ""
                if not any(c in segment for c in "*?["):
                    candidate = f"{where}/{segment}" if where else segment
                    if self.tree.is_file(candidate) or self.tree.is_dir(candidate):
                        nxt.append(candidate)
                    continue
                if where and not self.tree.is_dir(where):
                    continue
                for name in sorted(self.tree.listdir(where)):
                    if not name.startswith(".") and fnmatch.fnmatchcase(name, segment):
                        nxt.append(f"{where}/{name}" if where else name)
            found = nxt
        files = [f for f in found if self.tree.is_file(f)]
        if not files:
            raise FleetError(f"helmfiles {pattern!r} matches no file", path=referrer, line=line)
        return files

    def _release(
        self, raw: Any, path: str, base: str, env: dict[str, Any], line: int | None
    ) -> Release:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise FleetError("a release needs a name", path=path, line=line)
        name = raw["name"]
        unknown = sorted(set(raw) - RELEASE_KEYS)
        if unknown:
            raise FleetError(
                f"release {name!r}: '{unknown[0]}' is not supported by the helmfile layout "
                f"(it reads {', '.join(sorted(RELEASE_KEYS))})",
                path=path,
                line=line,
            )
        chart = raw.get("chart")
        if not isinstance(chart, str) or not chart:
            raise FleetError(f"release {name!r} needs a chart", path=path, line=line)
        namespace = str(raw.get("namespace") or "")
        labels = {str(k): str(v) for k, v in (raw.get("labels") or {}).items()}
        ctx = context(
            env, release={"Name": name, "Namespace": namespace, "Labels": labels, "Chart": chart}
        )
        values: dict[str, Any] = {}
        with self.tree.apart() as reads:  # its values files matter to this release alone
            for entry in raw.get("values") or []:
                if isinstance(entry, dict):
                    values = deep_merge(values, entry)
                elif isinstance(entry, str):
                    values = deep_merge(values, self.values_file(base, entry, path, ctx))
                else:
                    raise FleetError(
                        f"release {name!r}: values entries are maps or file paths",
                        path=path,
                        line=line,
                    )
        listed = values
        for entry in raw.get("set") or []:
            values = deep_merge(values, _set_entry(entry, name, path, line))
        installed = raw.get("installed", True)
        if not isinstance(installed, bool):
            raise FleetError(
                f"release {name!r}: installed must be true or false", path=path, line=line
            )
        transformers = raw.get("transformers") or []
        if not isinstance(transformers, list) or not all(isinstance(t, dict) for t in transformers):
            raise FleetError(
                f"release {name!r}: transformers must be inline kustomize transformer objects",
                path=path,
                line=line,
            )
        needs = [str(n) for n in raw.get("needs") or []]
        version = raw.get("version")
        return Release(
            name=name,
            chart=chart,
            namespace=namespace,
            labels=labels,
            values=values,
            listed=listed,
            inputs=reads,
            installed=installed,
            condition=str(raw.get("condition") or ""),
            needs=needs,
            transformers=transformers,
            version=str(version) if version is not None else None,
            raw=raw,
            state=path,
            line=line,
            base=base,
        )


@dataclass
class _Loaded:
    state: State
    subs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def absorb(self, layered: _Loaded) -> None:
        """A base's releases, repositories and sub-helmfiles become this state's."""
        self.state.releases.extend(layered.state.releases)
        self.state.repositories.extend(layered.state.repositories)
        self.subs.extend(layered.subs)


def context(env: dict[str, Any], release: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a state template sees: `.Values` and `.StateValues` (the environment's values),
    `.Environment`, `.Namespace`, and `.Release` in a release's values templates. Helm's
    engine renders it with `.` and `.Values` both reaching this map (shared.engine.helm)."""
    clash = [k for k in _CONTEXT_KEYS if k in env]
    if clash:
        raise FleetError(
            f"environment values may not have the top-level key {clash[0]!r}: helmfile's "
            "template context uses that name"
        )
    ctx = dict(env)
    ctx["StateValues"] = env
    ctx["Environment"] = {"Name": ENVIRONMENT, "Values": env, "KubeContext": ""}
    ctx["Namespace"] = ""
    if release is not None:
        ctx["Release"] = release
    return ctx


def _list_of_paths(
    doc: dict[str, Any], key: str, path: str, offset: int
) -> list[tuple[str, int | None]]:
    items = doc.get(key) or []
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise FleetError(f"{key} must be a list of file paths", path=path)
    return [(item, None) for item in items]


def _helmfile_entries(
    doc: dict[str, Any], path: str, loader: Loader, offset: int
) -> list[tuple[Any, int | None]]:
    items = doc.get("helmfiles") or []
    if not isinstance(items, list):
        raise FleetError("helmfiles must be a list", path=path)
    return [(item, loader.line_of(path, ("helmfiles", i), offset)) for i, item in enumerate(items)]


def _set_entry(entry: Any, release: str, path: str, line: int | None) -> dict[str, Any]:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise FleetError(f"release {release!r}: set entries need a name", path=path, line=line)
    if "file" in entry or "values" in entry:
        raise FleetError(
            f"release {release!r}: set with file or values is not supported (name and value)",
            path=path,
            line=line,
        )
    value = entry.get("value")
    text = (
        "true"
        if value is True
        else "false"
        if value is False
        else ""
        if value is None
        else str(value)
    )
    escaped = text.replace("\\", "\\\\").replace(",", "\\,")
    try:
        return parse_set(f"{entry['name']}={escaped}", string=False)
    except FleetError as err:
        raise FleetError(
            f"release {release!r}: set: {err.problem.message}", path=path, line=line
        ) from None
