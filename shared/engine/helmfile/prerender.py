"""kube-renderer's gomplate pre-render (0.1.2 to 0.1.16), and which kube-renderer reads a
repository.

    reading = read(tree, settings, "helmfile.yaml")
    reading.era          # CURRENT, or the pre-0.1.17 era that reads this repository
    reading.tree         # the repository as kube-renderer's helmfile sees it
    reading.overrides    # the root values.yaml as helmfile's --state-values-file ({} after 0.1.16)

From 0.1.2 to 0.1.16, when the repository has a root `values.yaml`, kube-renderer renders every
template file of its copy of the repository with gomplate over `{<key>: <values.yaml>}`, writes
the result without the suffix (over a file of that name), deletes the template, and passes
`values.yaml` to helmfile as `--state-values-file` (the top-level state's values, over its
environment's). The suffix is `.gotmpl` up to 0.1.10 and `.tmpl` from 0.1.11; the key is
`Values` up to 0.1.13 and `StateValues` from 0.1.14. 0.1.17 dropped all of it.

Without `helmfile.kubeRenderer` in rollwright.yaml the era is read from the repository, and
where two eras would read it differently the repository is refused with the setting to pin:
- no root `values.yaml`: every version reads it alike;
- `*.tmpl` files: the `.tmpl` era; its key is the one every template renders with (both
  rendering them differently is refused); a `.gotmpl` file no helmfile state reads beside
  them is refused (0.1.10 pre-renders it and not the `.tmpl` files);
- `*.gotmpl` files (no `*.tmpl`) that no state reads: the `.gotmpl` era. A `.gotmpl` file a
  state reads (a templated values file) is helmfile's: 0.1.10 would have replaced it and
  helmfile failed, so that era does not read the repository; both kinds are refused;
- otherwise `values.yaml` only changes the state values: the states are loaded with and
  without it, and when both load and differ the repository is refused.

gomplate is `shared.engine.helmfile.gomplate` (what it does not reproduce is refused with the
template's line). The pre-rendered files are served from memory; a chart or manifest directory
holding one is rendered from a copy of the repository with them in place.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shared.engine import yamldoc
from shared.engine.config.helmfile import HelmfileSettings
from shared.engine.errors import FleetError
from shared.engine.helmfile import gomplate, options
from shared.engine.helmfile.states import Loader, State
from shared.engine.tree import Tree

VALUES = "values.yaml"
SETTING = "helmfile.kubeRenderer in rollwright.yaml"


@dataclass(frozen=True)
class Era:
    """Versions 0.1.<first> to 0.1.<last> of kube-renderer, which read a repository alike."""

    first: int
    last: int
    suffix: str  # of the template files it pre-renders; "" for none
    key: str  # the context key of values.yaml in them
    state_values: bool  # values.yaml is helmfile's --state-values-file

    @property
    def versions(self) -> str:
        if self.first == self.last:
            return f"0.1.{self.first}"
        return f"0.1.{self.first} to 0.1.{self.last}"

    def pinned(self, minor: int) -> Era:
        """The era narrowed to one version (what differs within it is then known)."""
        return replace(self, first=minor, last=minor)


GOTMPL = Era(2, 10, ".gotmpl", "Values", True)
TMPL_VALUES = Era(11, 13, ".tmpl", "Values", True)
TMPL = Era(14, 16, ".tmpl", "StateValues", True)
CURRENT = Era(17, 20, "", "", False)
LATEST = 20  # the version the helmfile layout reads a repository as when nothing differs
# values.yaml as state values with nothing to pre-render: no template files, or only
# `.gotmpl` files helmfile reads (which 0.1.10 would have pre-rendered away).
STATE_VALUES = Era(2, 16, "", "", True)
STATE_VALUES_TMPL = Era(11, 16, "", "", True)


def era_of(minor: int) -> Era:
    """kube-renderer 0.1.<minor>, as an era of one version."""
    for era in (GOTMPL, TMPL_VALUES, TMPL, CURRENT):
        if minor <= era.last:
            return era.pinned(minor)
    raise ValueError(f"kube-renderer 0.1.{minor} is not one of the helmfile-based versions")


def is_current(era: Era) -> bool:
    """Whether the era reads a repository as the helmfile layout's own version does."""
    return era.first >= CURRENT.first


@dataclass
class Reading:
    era: Era
    why: str  # how the era was chosen, for messages
    tree: Tree
    overrides: dict[str, Any] = field(default_factory=dict)
    # What the choice and the pre-render read: every root reads them.
    sources: frozenset[str] = frozenset({VALUES})
    pinned: bool = False  # by rollwright.yaml

    @property
    def legacy(self) -> bool:
        """Whether the reading is not 0.1.20's (shared.engine.helmfile.legacy applies): an
        earlier era, or a pinned 0.1.17 to 0.1.19, which pre-render alike but differ in
        other steps."""
        return not is_current(self.era) or (self.pinned and self.era.first < LATEST)

    def context(self) -> str:
        """What an error of this reading is prefixed with ("" for 0.1.20's)."""
        if not self.legacy:
            return ""
        return f"read as kube-renderer {self.era.versions} does ({self.why})"

    def explain(self, err: FleetError) -> FleetError:
        """An error met in this reading, saying which reading it is and, when it names a
        template the pre-render replaced, what became of it."""
        doing = self.context()
        if not doing or doing in err.problem.message:
            return err
        message = err.problem.message
        if isinstance(self.tree, PreRendered):
            gone = [p for p in sorted(self.tree.removed) if p in message]
            if gone:
                message += (
                    f" (kube-renderer pre-renders {gone[0]} into {gone[0][: -len(self.era.suffix)]}"
                    " and deletes it)"
                )
        found = FleetError(f"{doing}: {message}", path=err.path, line=err.line)
        found.retryable = err.retryable
        return found


class _Inconsistent(Exception):
    """The era cannot be the one that reads the repository: kube-renderer would fail."""

    def __init__(self, error: FleetError) -> None:
        super().__init__(str(error))
        self.error = error


def read(tree: Tree, settings: HelmfileSettings, top: str) -> Reading:
    minor = settings.minor()
    if not tree.is_file(VALUES):
        era = CURRENT if minor is None else era_of(minor)
        # Without values.yaml kube-renderer pre-renders nothing in any version.
        return Reading(era, f"{SETTING}, no root {VALUES}", tree, pinned=minor is not None)
    if minor is not None and is_current(era_of(minor)):
        return Reading(era_of(minor), f"{SETTING}: {settings.kube_renderer}", tree, pinned=True)
    try:
        values = _values(tree)
    except FleetError:
        if minor is not None:
            raise
        # helmfile before 0.1.17 fails on it; 0.1.17 on does not read it
        return Reading(CURRENT, "", tree)
    suffixed = _suffixed(tree)
    sources = frozenset({VALUES, *suffixed[".tmpl"], *suffixed[".gotmpl"]})
    if minor is not None:
        era = era_of(minor)
        why = f"{SETTING}: {settings.kube_renderer}"
        try:
            found = _reading(tree, era, why, values, suffixed, sources)
        except _Inconsistent as err:
            raise _with(err.error, era, why) from None
        found.pinned = True
        return found
    tmpl, gotmpl = suffixed[".tmpl"], suffixed[".gotmpl"]
    helmfiles = _helmfile_reads(tree, top, values) if gotmpl else set()
    unread = [p for p in gotmpl if p not in helmfiles]
    if tmpl and unread:
        raise _ambiguous(
            unread[0],
            f"with {VALUES} at the root, kube-renderer 0.1.2 to 0.1.10 pre-renders it and not "
            f"{tmpl[0]}, 0.1.11 to 0.1.16 pre-render {tmpl[0]} and not it",
        )
    if tmpl:
        return _tmpl_reading(tree, values, suffixed, sources)
    if unread:
        read_ones = sorted(set(gotmpl) - set(unread))
        if read_ones:
            raise _ambiguous(
                unread[0],
                f"with {VALUES} at the root, kube-renderer 0.1.2 to 0.1.10 pre-renders it and "
                f"{read_ones[0]}, which a helmfile state reads as a values template (helmfile "
                "would then fail), later versions neither",
            )
        why = f"{VALUES} at the root and *.gotmpl files no helmfile state reads"
        try:
            return _reading(tree, GOTMPL, why, values, suffixed, sources)
        except _Inconsistent as err:
            raise _with(err.error, GOTMPL, why) from None
    return _state_values_reading(tree, top, values, suffixed, sources)


def _with(error: FleetError, era: Era, why: str) -> FleetError:
    return error.within(f"read as kube-renderer {era.versions} does ({why})")


def _ambiguous(path: str, detail: str) -> FleetError:
    return FleetError(
        f"{detail}: which kube-renderer this repository is for cannot be told; set {SETTING} "
        "(docs/formats/helmfile.md, gomplate pre-render)",
        path=path,
    )


def _values(tree: Tree) -> Any:
    try:
        data = yamldoc.loads(tree.read_text(VALUES), VALUES)
    except UnicodeDecodeError:
        raise FleetError("not valid UTF-8 text", path=VALUES) from None
    if data is not None and not isinstance(data, dict):
        raise FleetError(
            "kube-renderer before 0.1.17 passes the root values.yaml to helmfile as state "
            "values: it must hold a mapping",
            path=VALUES,
        )
    return data


def _suffixed(tree: Tree) -> dict[str, list[str]]:
    """The files of the tree ending in `.tmpl` and `.gotmpl` (kube-renderer's `find` over its
    copy of the repository; a checkout's `.git` is not part of a revision)."""
    out: dict[str, list[str]] = {".tmpl": [], ".gotmpl": []}
    prefetch = getattr(tree, "prefetch", None)
    if callable(prefetch):
        prefetch("")
    pending = [""]
    while pending:
        here = pending.pop()
        for name in tree.listdir(here):
            path = f"{here}/{name}" if here else name
            if tree.is_dir(path):
                if name != ".git":
                    pending.append(path)
                continue
            for suffix, found in out.items():
                if name.endswith(suffix) and tree.is_file(path):
                    found.append(path)
    return {suffix: sorted(found) for suffix, found in out.items()}


def _helmfile_reads(tree: Tree, top: str, values: Any) -> set[str]:
    """Every file the states read when nothing is pre-rendered (0.1.11 on); none when they
    do not load that way."""
    try:
        states = Loader(tree).states(top, values or {})
    except FleetError:
        return set()
    found: set[str] = set()
    for state in states:
        found |= state.inputs
        for release in state.releases:
            found |= release.inputs
    return found


def _tmpl_reading(
    tree: Tree, values: Any, suffixed: dict[str, list[str]], sources: frozenset[str]
) -> Reading:
    """The `.tmpl` era whose key every template renders with."""
    why = f"{VALUES} and *.tmpl files at the root"
    done: dict[Era, PreRendered] = {}
    failed: dict[Era, _Inconsistent] = {}
    for era in (TMPL, TMPL_VALUES):
        try:
            done[era] = _prerender(tree, era, values, suffixed)
        except _Inconsistent as err:
            failed[era] = err
    if not done:
        raise _with(failed[TMPL].error, TMPL, why)
    if len(done) == 2:
        ours, theirs = done[TMPL].rendered, done[TMPL_VALUES].rendered
        differing = [path for path in sorted(ours) if ours[path] != theirs[path]]
        if differing:
            raise _ambiguous(
                f"{differing[0]}.tmpl",
                "kube-renderer 0.1.11 to 0.1.13 (context key Values) and 0.1.14 to 0.1.16 "
                "(StateValues) render this template differently",
            )
    era = TMPL if TMPL in done else TMPL_VALUES
    why = f"{why}, templates reading .{era.key}"
    return Reading(era, why, done[era], values or {}, sources)


def _state_values_reading(
    tree: Tree, top: str, values: Any, suffixed: dict[str, list[str]], sources: frozenset[str]
) -> Reading:
    """Nothing to pre-render: values.yaml is the state values before 0.1.17 and nothing after;
    the reading that loads is the one, and both loading alike need no choice."""
    why = f"{VALUES} at the root, without templates, read as state values"
    old: Any = _load(tree, top, values or {})
    new: Any = _load(tree, top, {})
    if isinstance(new, list) and (isinstance(old, FleetError) or _same(old, new)):
        return Reading(CURRENT, "", tree, {}, sources)
    if isinstance(old, list) and isinstance(new, FleetError):
        era = STATE_VALUES_TMPL if suffixed[".gotmpl"] else STATE_VALUES
        return Reading(era, why, tree, values or {}, sources)
    if isinstance(old, FleetError):
        return Reading(CURRENT, "", tree, {}, sources)  # the error shows where it loads
    raise _ambiguous(
        VALUES,
        "kube-renderer before 0.1.17 passes it to helmfile as the state values, later "
        "versions do not read it, and the helmfile states read differently with and without it",
    )


def _load(tree: Tree, top: str, overrides: dict[str, Any]) -> list[State] | FleetError:
    try:
        return Loader(tree).states(top, overrides)
    except FleetError as err:
        return err


def _same(a: list[State], b: list[State]) -> bool:
    return _signature(a) == _signature(b)


def _signature(states: list[State]) -> str:
    """What kube-renderer reads of the states: the releases, the `.kube-renderer` options,
    and the top-level values when a bootstrap template sees them."""
    out = []
    for i, state in enumerate(states):
        section = options.section(state.values)
        if i == len(states) - 1 and section.get("bootstrap_template"):
            section = state.values
        out.append(
            {
                "path": state.path,
                "values": section,
                "releases": [[r.raw, r.values, r.listed] for r in state.releases],
            }
        )
    return json.dumps(out, sort_keys=True, default=str)


def _reading(
    tree: Tree,
    era: Era,
    why: str,
    values: Any,
    suffixed: dict[str, list[str]],
    sources: frozenset[str],
) -> Reading:
    if not era.suffix or not era.state_values:
        return Reading(era, why, tree, (values or {}) if era.state_values else {}, sources)
    return Reading(era, why, _prerender(tree, era, values, suffixed), values or {}, sources)


# --- the pre-render --------------------------------------------------------------------------


def _prerender(tree: Tree, era: Era, values: Any, suffixed: dict[str, list[str]]) -> PreRendered:
    files = suffixed[era.suffix]
    rendered: dict[str, str] = {}
    for path in files:
        target = path[: -len(era.suffix)]
        if target == VALUES or target.endswith(era.suffix):
            # kube-renderer's loop re-reads values.yaml for each file and lists the files it
            # writes: the result depends on the order `find` returns them in.
            raise FleetError(
                f"kube-renderer {era.versions} pre-renders it into {target}, and the result "
                "depends on the order it finds the templates in; not reproduced",
                path=path,
            )
        rendered[target] = _render(tree, era, path, values)
    return PreRendered(tree, rendered, frozenset(files))


def _render(tree: Tree, era: Era, path: str, values: Any) -> str:
    try:
        text = tree.read_text(path)
    except UnicodeDecodeError:
        raise FleetError("not valid UTF-8 text (a gomplate template)", path=path) from None
    doing = f"kube-renderer {era.versions} pre-renders it with gomplate"
    try:
        return gomplate.render(text, {era.key: values}, source=path)
    except gomplate.NotInContext as err:
        raise _Inconsistent(
            FleetError(
                f"{doing}{_column(err)}: {err.message} (.{era.key} is)",
                path=path,
                line=err.line or None,
            )
        ) from None
    except gomplate.Unsupported as err:
        message = f"{doing}{_column(err)}: {err.message}"
        raise FleetError(message, path=path, line=err.line or None) from None
    except FleetError as err:
        raise _Inconsistent(err.within(doing)) from None


def _column(err: gomplate.Unsupported) -> str:
    return f" (column {err.column})" if err.column else ""


class PreRendered:
    """A tree with kube-renderer's pre-render applied: `rendered` files (path → text) in
    place, the templates in `removed` gone. A local path under which something changed is in
    a copy of the repository (charts and kustomize read files from disk)."""

    def __init__(self, tree: Tree, rendered: dict[str, str], removed: frozenset[str]) -> None:
        self.base = tree
        self.rendered = rendered
        self.removed = removed - set(rendered)
        self._copy: Path | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PreRendered({self.base!r})"

    def is_file(self, rel: str) -> bool:
        return rel in self.rendered or (rel not in self.removed and self.base.is_file(rel))

    def is_dir(self, rel: str) -> bool:
        return self.base.is_dir(rel)

    def listdir(self, rel: str) -> list[str]:
        names = set(self.base.listdir(rel))
        prefix = f"{rel}/" if rel else ""
        for path in self.removed:
            if path.startswith(prefix) and "/" not in path[len(prefix) :]:
                names.discard(path[len(prefix) :])
        for path in self.rendered:
            if path.startswith(prefix) and "/" not in path[len(prefix) :]:
                names.add(path[len(prefix) :])
        return sorted(names)

    def read_text(self, rel: str) -> str:
        if rel in self.rendered:
            return self.rendered[rel]
        if rel in self.removed:
            raise FileNotFoundError(rel)
        return self.base.read_text(rel)

    def local_path(self, rel: str) -> Path:
        changed = [*self.rendered, *self.removed]
        if not any(p == rel or not rel or p.startswith(f"{rel}/") for p in changed):
            return self.base.local_path(rel)
        return self._materialized() / rel if rel else self._materialized()

    def _materialized(self) -> Path:
        with self._lock:
            if self._copy is None:
                where = Path(tempfile.mkdtemp(prefix="rollwright-prerender-"))
                weakref.finalize(self, shutil.rmtree, where, True)
                copy = where / "source"
                shutil.copytree(
                    self.base.local_path(""),
                    copy,
                    symlinks=True,
                    ignore=shutil.ignore_patterns(".git"),
                )
                for path in self.removed:
                    (copy / path).unlink()
                for path, text in self.rendered.items():
                    target = copy / path
                    if target.is_symlink():
                        target.unlink()
                    target.write_text(text, encoding="utf-8")
                self._copy = copy
            return self._copy
