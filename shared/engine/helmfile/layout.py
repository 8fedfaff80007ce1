"""The helmfile layout: a kube-renderer repository as rollwright roots.

    layout = HelmfileLayout(WorkTree(Path("examples/helmfile-fleet")), FleetConfig())
    layout.roots()                   # ['apps/web', 'platform/cache']: output directories
    layout.render_files("apps/web")  # {"web/Deployment.apps_web.yaml": b"# Source: ..."}

A **root** is one output directory of kube-renderer: `<helmfile_dir>/<target_dir or release>`
of a release, holding that release's files and those of the releases whose `target_release`
names it. Render files are the bytes kube-renderer writes there (docs/formats/helmfile.md).
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from shared.engine import conformance, suggest, yamldoc
from shared.engine.config.fleet import FleetConfig
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.helmfile import (
    bootstrap,
    chartify,
    helmout,
    inputs,
    legacy,
    options,
    pipeline,
    prerender,
)
from shared.engine.helmfile.bootstrap import Bootstrap, Placement
from shared.engine.helmfile.options import OptionError, Options
from shared.engine.helmfile.states import Loader, Release, State
from shared.engine.layout import ReleaseInfo, render_problems
from shared.engine.secrets.origin import hash_secret_objects
from shared.engine.tree import Tree
from shared.engine.values import deep_merge

T = TypeVar("T")
TOP_LEVEL = ("helmfile.yaml", "helmfile.yaml.gotmpl")
# kube-renderer's CI renders with the helm 3.10.2 binary, whose default is Kubernetes 1.25.
DEFAULT_KUBE_VERSION = "v1.25.0"


@dataclass
class Planned:
    """One enabled release: its state, options and the root its files go to."""

    release: Release
    state: State
    options: Options
    root: str = ""


@dataclass
class Plan:
    releases: dict[str, Planned] = field(default_factory=dict)
    roots: dict[str, list[str]] = field(default_factory=dict)  # root → release names
    bootstrap: Bootstrap | None = None  # its root has no release
    states: list[State] = field(default_factory=list)


class HelmfileLayout:
    name = "helmfile"

    def __init__(self, tree: Tree, config: FleetConfig) -> None:
        self.tree = tree
        self.config = config
        self._plan: Plan | None = None
        self._reading: prerender.Reading | None = None
        self._schema_warnings: dict[str, list[Problem]] = {}  # root → conformance warnings

    # --- planning ----------------------------------------------------------------------------

    def top_level(self) -> str:
        for name in TOP_LEVEL:
            if self.tree.is_file(name):
                return name
        if self.tree.is_dir("helmfile.d"):
            raise FleetError(
                "helmfile.d/ without a helmfile.yaml: kube-renderer 0.1.17 on reads "
                "helmfile.yaml only (list helmfile.d/*.yaml under its helmfiles:); earlier "
                "versions' reading of each file of helmfile.d/ is not reproduced",
                path="helmfile.d",
            )
        raise FleetError("no helmfile.yaml at the repository root", path="helmfile.yaml")

    def reading(self) -> prerender.Reading:
        """Which kube-renderer reads the repository, and the tree its helmfile sees (the
        gomplate pre-render of kube-renderer before 0.1.17: shared.engine.helmfile.prerender)."""
        if self._reading is None:
            top = self.top_level()
            found = prerender.read(self.tree, self.config.helmfile, top)
            if not prerender.is_current(found.era) and top != "helmfile.yaml":
                raise FleetError(
                    f"{found.context()}: kube-renderer before 0.1.17 reads helmfile.yaml (or "
                    f"each file of helmfile.d/, not reproduced), not {top}",
                    path=top,
                )
            self._reading = found
        return self._reading

    def plan(self) -> Plan:
        if self._plan is None:
            self._plan = self._in_reading(self._make_plan)
        return self._plan

    def _in_reading(self, action: Callable[[], T]) -> T:
        """`action`, its errors saying which kube-renderer's reading they come from."""
        reading = self.reading()
        try:
            return action()
        except FleetError as err:
            raise reading.explain(err) from None

    def states(self) -> list[State]:
        reading = self.reading()
        return Loader(reading.tree).states(self.top_level(), reading.overrides)

    def _make_plan(self) -> Plan:
        states = self.states()
        plan = Plan(states=states)
        for state in states:
            for release in state.releases:
                if not _enabled(release, state):
                    continue
                if release.name in plan.releases:
                    other = plan.releases[release.name].release
                    raise FleetError(
                        f"release {release.name!r} is declared twice ({other.state} and "
                        f"{release.state}): kube-renderer keys releases by name",
                        path=release.state,
                        line=release.line,
                    )
                if not release.installed:
                    raise FleetError(
                        f"release {release.name!r} has installed: false: helmfile does not "
                        "template it and kube-renderer then fails; remove it or set a condition",
                        path=release.state,
                        line=release.line,
                    )
                plan.releases[release.name] = Planned(release, state, _options(release, state))
        _check_needs(plan)
        if not plan.releases:
            raise FleetError(
                "the helmfile renders no release (every release is disabled or there is none)",
                path=self.top_level(),
            )
        _place(plan)
        legacy.check(
            self.tree,
            self.reading(),
            [legacy.Planned(p.release, p.state, p.options) for p in plan.releases.values()],
            states,
        )
        _add_bootstrap(plan, states)
        _check_nesting(plan)
        return plan

    # --- Layout ------------------------------------------------------------------------------

    def roots(self) -> list[str]:
        return sorted(self.plan().roots)

    def _root(self, root: str) -> list[Planned]:
        plan = self.plan()
        if root not in plan.roots:
            raise FleetError(f"unknown root {root!r}{suggest.hint(root, sorted(plan.roots))}")
        return [plan.releases[name] for name in plan.roots[root]]

    def releases(self, root: str) -> list[ReleaseInfo]:
        return [
            ReleaseInfo(
                id=p.release.name,
                template=p.release.chart,
                namespace=p.release.namespace,
                labels=p.release.labels,
            )
            for p in self._root(root)
        ]

    def values(self, root: str, release: str | None) -> dict[str, Any]:
        found = self._bootstrap(root)
        if found is not None and release is None:
            return found.context  # what the bootstrap template sees
        planned = self._root(root)
        names = [p.release.name for p in planned]
        if release is None and len(planned) == 1:
            return planned[0].release.values
        if release not in names:
            raise FleetError(
                f"root {root!r} has the releases {', '.join(names)}; name one with --release"
            )
        return next(p.release.values for p in planned if p.release.name == release)

    def redacted_values(self, root: str, release: str | None) -> dict[str, Any]:
        return self.values(root, release)  # no secrets: helmfile `secrets` are refused

    def secret_values(self) -> list[Any]:
        return []

    def _bootstrap(self, root: str) -> Bootstrap | None:
        found = self.plan().bootstrap
        return found if found is not None and found.root == root else None

    def render_files(self, root: str) -> dict[str, bytes]:
        found = self._bootstrap(root)
        if found is not None:
            return {path: text.encode("utf-8") for path, text in found.files.items()}
        files: dict[str, bytes] = {}
        owners: dict[str, str] = {}
        checked: list[conformance.Rendered] = []
        for planned in self._root(root):
            release_files = self._release_files(planned)
            checked += self._checked(planned, release_files)
            for path, text in release_files.items():
                if path in files:
                    raise FleetError(
                        f"releases {owners[path]!r} and {planned.release.name!r} both write "
                        f"{root}/{path} (kube-renderer would keep whichever it copied last)",
                        path=planned.release.state,
                        line=planned.release.line,
                    )
                files[path] = text.encode("utf-8")
                owners[path] = planned.release.name
        if not files:
            raise FleetError(f"root {root!r} renders no file")
        outcome = conformance.check_root(root, checked, self.config)
        self._schema_warnings[root] = outcome.warnings
        if outcome.refusals:
            raise FleetErrors(outcome.refusals)
        return dict(sorted(files.items()))

    def _checked(self, planned: Planned, files: dict[str, str]) -> list[conformance.Rendered]:
        """The release's objects with where they came from, for the schema checks: its
        plain YAML values files, traced in name order (helmfile merges them in the order
        its `values` lists them, which the state file holds after templating)."""
        release = planned.release
        values_files = tuple(
            conformance.ValuesFile.at(self.reading().tree, rel)  # pre-rendered ones included
            for rel in sorted(release.inputs)
            if rel.endswith((".yaml", ".yml")) and not rel.endswith(".sops.yaml")
        )
        version = self._kube_version(release.name)
        out = []
        for path, text in sorted(files.items()):
            for doc in yamldoc.loads_all(text, path):
                if isinstance(doc, dict):
                    out.append(
                        conformance.Rendered(
                            doc, release.name, release.state, release.line, version, values_files
                        )
                    )
        return out

    def _release_files(self, planned: Planned) -> dict[str, str]:
        return self._in_reading(lambda: self._render_release(planned))

    def _render_release(self, planned: Planned) -> dict[str, str]:
        release = planned.release
        where = pipeline.Where(release.name, release.state, release.line)
        era = self.reading().era
        if not self.reading().legacy:
            opts = planned.options
            variants = [legacy.Steps(helmout.Flags(opts.crds, opts.hooks, opts.tests))]
        else:
            variants = legacy.variants(era, planned.options)
        streams = [self._stream(planned, steps, where) for steps in variants]
        if any(other != streams[0] for other in streams[1:]):
            raise where.error(
                f"kube-renderer {era.versions} renders it differently: Helm's CRDs, hooks and "
                "tests are rendered by default before 0.1.14, tests with hooks in 0.1.14; set "
                f"{prerender.SETTING} to the version the repository is for"
            )
        stream = streams[0]
        if not stream.strip():
            raise where.error(
                "renders no object (kube-renderer would write an empty file); check its chart, "
                "values and flags"
            )
        # kube-renderer before 0.1.17 appends the yq generator's documents in name order
        segments = legacy.yq_segments(era) if self.reading().legacy else (True,)
        return pipeline.generate(
            stream, planned.options, where, lexical=era.last < 17, segments=segments
        )

    def _stream(self, planned: Planned, steps: legacy.Steps, where: pipeline.Where) -> str:
        """Steps 1 to 4 of kube-renderer on the release, as `steps` say."""
        how = chartify.Render(steps.flags, self._kube_version(planned.release.name))
        tree = self.reading().tree
        files = chartify.output_files(planned.release, tree, how, planned.state.repositories)
        return pipeline.release_stream(
            files, planned.options, where, drops_empty=steps.drops_empty, repairs=steps.repairs
        )

    def _kube_version(self, release: str) -> str:
        tree = self.reading().tree
        for name in (f"kubeversion-{release}", "kubeversion"):
            if tree.is_file(name):
                return tree.read_text(name).rstrip("\n")
        return DEFAULT_KUBE_VERSION

    def render_redacted(self, root: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
        plain = self.render_files(root)
        return plain, hash_secret_objects(plain)

    def affected(self, changed: set[str]) -> set[str]:
        """The roots that read one of `changed` (shared.engine.helmfile.inputs)."""
        if not changed:
            return set()
        return {root for root in self.roots() if self.inputs(root).touched(changed)}

    def inputs(self, root: str) -> inputs.Inputs:
        plan = self.plan()
        # The choice of kube-renderer's reading and its pre-render read these for every root.
        read = inputs.Inputs(self.reading().sources)
        if self._bootstrap(root) is not None:
            return inputs.bootstrap_inputs(plan.states) | read
        found = read
        for planned in self._root(root):
            found |= inputs.release_inputs(self.tree, planned.release, planned.state)
        return found

    def validate(self) -> list[Problem]:
        return render_problems(self)

    def unread_values(self, root: str | None) -> list[Problem]:
        return []

    def render_warnings(self, root: str) -> list[Problem]:
        # A release that renders no object is an error here (kube-renderer parity); what
        # remains are the schema checks' warnings.
        return list(self._schema_warnings.get(root, []))

    def refusals(self, root: str) -> list[Problem]:
        return []


def _enabled(release: Release, state: State) -> bool:
    """helmfile's `condition: <key>.enabled`: the release renders when that value is true."""
    if not release.condition:
        return True
    parts = release.condition.split(".")
    if len(parts) != 2 or parts[1] != "enabled":
        raise FleetError(
            f"release {release.name!r}: condition {release.condition!r} must be "
            "'<key>.enabled' (helmfile reads <key>.enabled whatever the second part says)",
            path=release.state,
            line=release.line,
        )
    holder = state.values.get(parts[0])
    if not isinstance(holder, dict):
        raise FleetError(
            f"release {release.name!r}: condition {release.condition!r}: the environment values "
            f"have no map {parts[0]!r}",
            path=release.state,
            line=release.line,
        )
    return holder.get("enabled") is True


def _options(release: Release, state: State) -> Options:
    try:
        merged = deep_merge(state.values, release.values)
        return options.parse(options.section(merged))
    except OptionError as err:
        raise FleetError(
            f"release {release.name!r}: {err}", path=release.state, line=release.line
        ) from None


def _check_needs(plan: Plan) -> None:
    for planned in plan.releases.values():
        for need in planned.release.needs:
            name = need.rsplit("/", 1)[-1]
            if name not in plan.releases:
                raise FleetError(
                    f"release {planned.release.name!r} needs {need!r}, which is not a release "
                    "that renders",
                    path=planned.release.state,
                    line=planned.release.line,
                )


def _helmfile_dir(state: State) -> str:
    try:
        value = options.section(state.values).get("helmfile_dir")
    except OptionError as err:
        raise FleetError(str(err), path=state.path) from None
    if value is not None and not isinstance(value, str):
        raise FleetError(f"{options.KEY}.helmfile_dir must be text", path=state.path)
    return value or "."


def _place(plan: Plan) -> None:
    """Each release's root: its own directory, or that of its `target_release`."""
    for planned in plan.releases.values():
        if planned.options.target_release:
            continue
        target = planned.options.target_dir or planned.release.name
        planned.root = _root_id(f"{_helmfile_dir(planned.state)}/{target}", planned.release)
    for planned in plan.releases.values():
        wanted = planned.options.target_release
        if not wanted:
            continue
        owner = plan.releases.get(wanted)
        if owner is None or owner.options.target_release:
            why = "is not a release that renders" if owner is None else "is itself merged elsewhere"
            raise FleetError(
                f"release {planned.release.name!r}: target_release {wanted!r} {why} (kube-renderer "
                "aborts on it)",
                path=planned.release.state,
                line=planned.release.line,
            )
        planned.root = owner.root
    for planned in plan.releases.values():
        plan.roots.setdefault(planned.root, []).append(planned.release.name)


def _add_bootstrap(plan: Plan, states: list[State]) -> None:
    """The bootstrap files, when the top-level state sets a template: one more root."""
    found = bootstrap.render(states, _placements(plan))
    if found is None:
        return
    if found.root in plan.roots:
        names = ", ".join(plan.roots[found.root])
        raise FleetError(
            f"the bootstrap files and the releases {names} both write to {found.root!r}",
            path=states[-1].path,
        )
    plan.bootstrap = found
    plan.roots[found.root] = []


def _placements(plan: Plan) -> list[Placement]:
    """kube-renderer's ReleasesMap and DirsMap entries, in its order."""
    out = []
    for planned in plan.releases.values():
        name, opts = planned.release.name, planned.options
        if opts.target_release:
            out.append(Placement(name, opts.target_release, None))
        else:
            where = f"{_helmfile_dir(planned.state)}/{opts.target_dir or name}"
            out.append(Placement(name, name, where))
    return out


def _check_nesting(plan: Plan) -> None:
    def who(root: str) -> str:
        names = plan.roots[root]
        return f"releases {', '.join(names)}" if names else "the bootstrap files"

    for a, b in itertools.pairwise(sorted(plan.roots)):
        if b.startswith(a + "/"):
            raise FleetError(
                f"output directory {b!r} lies inside {a!r}: roots may not nest ({who(b)} and "
                f"{who(a)})"
            )


def _root_id(path: str, release: Release) -> str:
    clean = posixpath.normpath(path)
    if clean == "." or clean == ".." or clean.startswith(("../", "/")):
        raise FleetError(
            f"release {release.name!r}: output directory {path!r} is not a directory below the "
            "output (helmfile_dir and target_dir must name one)",
            path=release.state,
            line=release.line,
        )
    return clean
