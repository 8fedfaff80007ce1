"""The dimensions layout (the fleet design document, gcp-hcp-apps style).

    config/config.yaml                               dimensions, sequence, cluster_types
    config/<type>/application-defaults.yaml          defaults: under every application
    config/<type>/<app>/metadata.yaml, OWNERS
    config/<type>/<app>/values.yaml                  applications: {<app>: {...}}
    config/<type>/<app>/<env>[/<sector>[/<region>]]/values.yaml
    config/<type>/<app>/patches/*.yaml               staged patches (not applied)
    config/<type>/<app>/<node>/patches/*.yaml        active for every root under <node>

A root is `<type>/<env>/<sector>/<region>`; it renders into a Helm chart of Argo CD
Applications (Chart.yaml, the merged values.yaml, templates/<app>.yaml). The contract is
docs/formats/dimensions.md; patch mechanics live in `shared.engine.dimensions.patches`.
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, partial
from importlib import resources
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.engine import helm, yamldoc
from shared.engine.dimensions import patches
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.fleetconfig import FleetConfig, parse_model
from shared.engine.layout import ReleaseInfo
from shared.engine.secrets import origin, sops
from shared.engine.secrets.redact import Redactor, redact_tree
from shared.engine.tree import Tree, join
from shared.engine.values import merge_all, parse_pointer

CONFIG_FILE = "config/config.yaml"
DIMENSIONS = ["environments", "sectors", "regions"]
DEFAULTS_FILE = "application-defaults.yaml"
METADATA_FILE = "metadata.yaml"
OWNERS_FILE = "OWNERS"
VALUES_FILE = "values.yaml"
SOPS_VALUES_FILE = "values.sops.yaml"
# Within one level the encrypted file comes first, so plain values win (as in atlas).
LEVEL_FILES = (SOPS_VALUES_FILE, VALUES_FILE)
PATCHES_DIR = "patches"
TEMPLATE = "argocd-application.yaml"
CHART_VERSION = "0.1.0"

_NAME = r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$"
Name = Annotated[
    str,
    Field(
        pattern=_NAME,
        description="Lowercase letters, digits, '-' and '.'; used in paths and object names.",
    ),
]
Promotion = Literal["automated", "manual"]
Soak = Annotated[
    str,
    Field(
        pattern=r"^([0-9]+[smhd])+$",
        description="How long a patch must stay healthy here before it moves on, e.g. 30m, 1h, "
        "2d, 1h30m.",
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- config/config.yaml --------------------------------------------------------------------


class _Stage(_Strict):
    name: Name
    promotion: Promotion | None = Field(
        default=None,
        description="How a patch enters this node: automated (the default) or manual "
        "(a Promote click).",
    )
    soak: Soak | None = None


class RegionSpec(_Stage):
    pass


class SectorSpec(_Stage):
    regions: list[RegionSpec] = Field(min_length=1)


class EnvironmentSpec(_Stage):
    sectors: list[SectorSpec] = Field(min_length=1)


class SequenceSpec(_Strict):
    environments: list[EnvironmentSpec] = Field(
        min_length=1, description="Environments in promotion order."
    )


class ClusterTypeSpec(_Strict):
    name: Name
    applications: list[Name] = Field(
        default_factory=list,
        description="Applications of this type: directories config/<type>/<app>/.",
    )


class DimensionsConfig(_Strict):
    """`config/config.yaml`."""

    dimensions: list[str] = Field(
        default_factory=lambda: list(DIMENSIONS),
        description="Must be [environments, sectors, regions].",
    )
    sequence: SequenceSpec
    cluster_types: list[ClusterTypeSpec] = Field(default_factory=list)

    @field_validator("dimensions")
    @classmethod
    def _check_dimensions(cls, value: list[str]) -> list[str]:
        if value != DIMENSIONS:
            raise ValueError(f"only {DIMENSIONS} is supported")
        return value


# --- application files ---------------------------------------------------------------------

_StrMap = dict[str, str]


class Application(_Strict):
    """Fields of one Argo CD Application, as written in defaults, values and patch bodies.

    Every field is optional in each file; `null` removes what a lower level set.
    """

    namespace: str | None = Field(
        default=None, description="Namespace of the Application object (default argocd)."
    )
    project: str | None = Field(default=None, description="Argo CD project (default default).")
    source: dict[str, Any] | None = None
    sources: list[Any] | None = None
    destination: dict[str, Any] | None = None
    syncPolicy: dict[str, Any] | None = None
    ignoreDifferences: list[Any] | None = None
    revisionHistoryLimit: Annotated[int, Field(strict=True)] | None = None
    info: list[Any] | None = None
    finalizers: list[str] | None = None
    additionalAnnotations: _StrMap | None = None
    additionalLabels: _StrMap | None = None


class ApplicationDefaults(_Strict):
    """`config/<type>/application-defaults.yaml`."""

    defaults: Application | None = Field(
        default=None, description="Laid under every application of the cluster type."
    )


class ValuesFile(_Strict):
    """`values.yaml` / `values.sops.yaml` at any level of an application."""

    applications: dict[str, Application | None] | None = Field(
        default=None,
        description="Exactly one key: the application whose directory holds the file.",
    )


class AppMetadata(_Strict):
    """`config/<type>/<app>/metadata.yaml`."""

    name: Name = Field(description="The application name; must match its directory.")
    description: str = ""
    owners: list[str] = Field(default_factory=list, description="Teams or people (e-mail).")
    documentation: str | None = Field(default=None, description="Link to runbooks or docs.")


class OwnersOptions(_Strict):
    no_parent_owners: bool = False


class Owners(_Strict):
    """`OWNERS` (Kubernetes style)."""

    approvers: list[str] = Field(default_factory=list)
    reviewers: list[str] = Field(default_factory=list)
    emeritus_approvers: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)
    options: OwnersOptions | None = None


class DimensionsPatchFile(patches.PatchFile):
    patch: dict[str, Application] = Field(  # type: ignore[assignment]
        description="Values laid over the merged applications: exactly one key, the "
        "application whose directory holds the patch."
    )


FILE_SCHEMAS: dict[str, type[BaseModel] | dict[str, Any]] = {
    "dimensions-config": DimensionsConfig,
    "dimensions-application-defaults": ApplicationDefaults,
    "dimensions-metadata": AppMetadata,
    "dimensions-owners": Owners,
    "dimensions-patch": DimensionsPatchFile,
    "dimensions-values": ValuesFile,
}


@dataclass(frozen=True)
class Node:
    """One node of the promotion sequence: (env,), (env, sector) or (env, sector, region)."""

    path: tuple[str, ...]
    promotion: Promotion
    soak: str | None

    @property
    def id(self) -> str:
        return "/".join(self.path)


@dataclass(frozen=True)
class RootState:
    """A root's merged values and what each active patch did there."""

    values: dict[str, Any]
    outcomes: tuple[patches.Outcome, ...]


@cache
def application_template() -> str:
    return (resources.files("shared.engine.dimensions") / "templates" / TEMPLATE).read_text(
        encoding="utf-8"
    )


Place = tuple[str, str, str]  # (environment, sector, region)


class DimensionsLayout:
    name = "dimensions"

    def __init__(self, tree: Tree, config: FleetConfig) -> None:
        self.tree = tree
        self.config = config
        self._cache: dict[tuple[str, str], Any] = {}
        self._states: dict[str, RootState] = {}
        self._fake_states: dict[str, object] = {}
        self._decrypted: dict[str, Any] = {}
        self._prefetched = False
        if not tree.is_file(CONFIG_FILE):
            raise FleetError("missing: the dimensions layout needs it", path=CONFIG_FILE)
        self.config_text, data = self._read(CONFIG_FILE)
        data = _mapping(data, CONFIG_FILE)
        self.spec = parse_model(DimensionsConfig, data, text=self.config_text, source=CONFIG_FILE)
        self._check_names()
        self.types = {t.name: t for t in self.spec.cluster_types}
        self.places: list[Place] = [
            (e.name, s.name, r.name)
            for e in self.spec.sequence.environments
            for s in e.sectors
            for r in s.regions
        ]
        self._roots = sorted(f"{t}/{e}/{s}/{r}" for t in self.types for e, s, r in self.places)
        self._root_set = set(self._roots)

    # --- the Layout protocol ---------------------------------------------------------------

    def roots(self) -> list[str]:
        return list(self._roots)

    def releases(self, root: str) -> list[ReleaseInfo]:
        ctype, _ = self._split(root)
        apps = self.state(root).values["applications"]
        out = []
        for app in self.types[ctype].applications:
            merged = apps[app]
            labels = merged.get("additionalLabels") or {}
            out.append(
                ReleaseInfo(
                    id=app,
                    template=self._app_dir(ctype, app),
                    namespace=str(merged.get("namespace") or "argocd"),
                    labels={str(k): str(v) for k, v in labels.items()},
                )
            )
        return out

    def values(self, root: str, release: str | None) -> dict[str, Any]:
        values = copy.deepcopy(self.state(root).values)  # callers may change their copy
        if release is None:
            return values
        if release not in values["applications"]:
            raise FleetError(
                f"root {root!r} has no application {release!r}; it has "
                + ", ".join(values["applications"])
            )
        return {
            "cluster": values["cluster"],
            "applications": {release: values["applications"][release]},
        }

    def render_files(self, root: str) -> dict[str, bytes]:
        return self._files(root, self.state(root).values)

    def render_redacted(self, root: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """(plaintext, redacted) chart files. A root with encrypted values is rendered a
        second time from perturbed secrets; what differs is secret-derived
        (shared.engine.secrets.origin)."""
        values = self.state(root).values
        plain = self._files(root, values)
        if not self.has_secrets(root):
            return plain, origin.hash_secret_objects(plain)
        paths = self.secret_paths(root, None)
        redactor = Redactor(origin.leaves_at(values, paths))
        fake_state = self._taint_state(root)
        fake: dict[str, bytes] | None = None
        if fake_state is not None:
            try:
                fake = self._files(root, fake_state.values)
            except FleetError:
                fake = None  # never shown: it would quote perturbed secrets
        return plain, origin.redact_release_files(plain, fake, redactor, label=root)

    def has_secrets(self, root: str) -> bool:
        """True when any values level of the root's applications is encrypted."""
        ctype, place = self._split(root)
        return any(
            self.tree.is_file(join(self._app_dir(ctype, app), *node, SOPS_VALUES_FILE))
            for app in self.types[ctype].applications
            for node in [(), *_nodes(place)]
        )

    def secret_paths(self, root: str, release: str | None) -> set[tuple[str | int, ...]]:
        """Leaf paths of the root's values that hold or derive from a secret: those that
        change when every decrypted leaf is perturbed (patches included)."""
        if not self.has_secrets(root):
            return set()
        values = self.state(root).values
        fake = self._taint_state(root)
        if fake is not None:
            paths = set(origin.changed_paths(values, fake.values))
        else:
            # The perturbed merge failed (a patch dependency on a secret, say): by value.
            redactor = Redactor(self.secret_values())
            paths = {
                path
                for path, leaf in yamldoc.walk_leaves(values)
                if isinstance(leaf, str) and redactor.redact_text(leaf) != leaf
            }
        if release is not None:
            paths = {
                p for p in paths if p[:2] == ("applications", release) or p[:1] != ("applications",)
            }
        return paths

    def encrypted_paths(self, root: str) -> set[tuple[str | int, ...]]:
        """Every leaf path ("applications", app, …) an encrypted values file of the root sets,
        whatever its type. `secret_paths` keeps booleans and short numbers (a perturbation
        cannot track them); a message quoting a value looked up by path hides these too."""
        ctype, place = self._split(root)
        paths: set[tuple[str | int, ...]] = set()
        for app in self.types[ctype].applications:
            for node in [(), *_nodes(place)]:
                rel = join(self._app_dir(ctype, app), *node, SOPS_VALUES_FILE)
                if self.tree.is_file(rel):
                    data = self._values_file(rel, ctype, app)
                    paths |= {p for p, _ in yamldoc.walk_leaves(data, ("applications", app))}
        return paths

    def redacted_values(self, root: str, release: str | None) -> dict[str, Any]:
        """`values()` with secrets and secret-derived leaves redacted."""
        values = self.values(root, release)
        if not self.has_secrets(root):
            return values
        fake = self._taint_state(root)
        paths = self.secret_paths(root, release)
        if fake is None:
            shown: dict[str, Any] = redact_tree(values, paths)
            return shown
        redactor = Redactor(origin.leaves_at(values, paths))
        fake_values = fake.values
        if release is not None:
            fake_values = {
                "cluster": fake_values["cluster"],
                "applications": {release: fake_values["applications"][release]},
            }
        shown = origin.redact_values(values, fake_values, set(), redactor)
        return shown

    def secret_values(self) -> list[Any]:
        """Every encrypted values file decrypted so far."""
        return list(self._decrypted.values())

    def _taint_state(self, root: str) -> RootState | None:
        state = self._fake_states.get(root, _MISS)
        if state is _MISS:
            try:
                state = self._compute_state(root, taint=True)
            except FleetError:
                state = None
            self._fake_states[root] = state
        return state  # type: ignore[return-value]

    def _files(self, root: str, values: dict[str, Any]) -> dict[str, bytes]:
        ctype, (env, sector, region) = self._split(root)
        chart = {
            "apiVersion": "v2",
            "name": f"{ctype}-{env}-{sector}-{region}",
            "description": f"Argo CD applications of {ctype} in {env}/{sector}/{region}",
            "type": "application",
            "version": CHART_VERSION,
        }
        files = {
            "Chart.yaml": yamldoc.dumps(chart).encode(),
            "values.yaml": yamldoc.dumps(values).encode(),
        }
        template = application_template()
        for app, fields in values["applications"].items():
            self._check_application(ctype, app, fields)
            try:
                text = helm.render_template(
                    template,
                    {**values, "rollwright": {"application": app}},
                    source=self._app_dir(ctype, app),
                )
            except FleetError as err:
                raise FleetError(
                    f"application {app!r}: templating in its values failed: "
                    + _template_reason(err.problem.message),
                    path=self._app_dir(ctype, app),
                ) from None
            files[f"templates/{app}.yaml"] = (text.strip("\n") + "\n").encode()
        return files

    def affected(self, changed: set[str]) -> set[str]:
        out: set[str] = set()
        for path in changed:
            if path == CONFIG_FILE:
                return set(self._roots)
            parts = path.split("/")
            if len(parts) < 3 or parts[0] != "config" or parts[1] not in self.types:
                continue
            ctype = self.types[parts[1]]
            if len(parts) == 3:
                if parts[2] == DEFAULTS_FILE:
                    out |= self._roots_under(ctype.name, ())
                continue
            if parts[2] not in ctype.applications:
                continue  # not read by any render
            rest = parts[3:]
            if len(rest) == 1:
                if rest[0] in (*LEVEL_FILES, METADATA_FILE):
                    out |= self._roots_under(ctype.name, ())
            elif rest[0] == PATCHES_DIR:
                out |= self._roots_under(ctype.name, ())
            else:
                out |= self._affected_node(ctype.name, rest)
        return out

    def validate(self) -> list[Problem]:
        problems: list[Problem] = []
        self._prefetch()
        self._validate_tree(problems)
        staged, copies = self._validate_patch_files(problems)
        self._validate_patch_ids(problems, staged, copies)
        self._validate_graduation(problems, staged, copies)
        self._validate_roots(problems)
        return sorted(set(problems))

    # --- public helpers for promotion ------------------------------------------------------

    def sequence_nodes(self) -> list[Node]:
        """Every node of the sequence in promotion order (env, its sectors, their regions)."""
        out = []
        for e in self.spec.sequence.environments:
            out.append(Node((e.name,), e.promotion or "automated", e.soak))
            for s in e.sectors:
                out.append(Node((e.name, s.name), s.promotion or "automated", s.soak))
                for r in s.regions:
                    out.append(Node((e.name, s.name, r.name), r.promotion or "automated", r.soak))
        return out

    def patch_paths(self, ctype: str, app: str, node: tuple[str, ...] = ()) -> list[str]:
        """Patch files in `<app>/<node>/patches/` (node (): the staged ones), by name."""
        return self._patch_files(join(self._app_dir(ctype, app), *node))

    def load_patch(self, rel: str) -> patches.Patch:
        """The patch file at `rel` (under config/<type>/<app>/), parsed and checked."""
        return self._patch(rel, rel.split("/")[1])

    def state(self, root: str) -> RootState:
        """Merged values of `root` and the outcome of each of its active patches."""
        state = self._states.get(root)
        if state is None:
            self._prefetch()
            state = self._compute_state(root)
            self._states[root] = state
        return state

    # --- merging ---------------------------------------------------------------------------

    def _compute_state(self, root: str, *, taint: bool = False) -> RootState:
        """`taint`: every decrypted leaf perturbed (shared.engine.secrets.origin), for origin
        tracking."""
        ctype, place = self._split(root)
        env, sector, region = place
        defaults = self._defaults(ctype)
        apps: dict[str, Any] = {}
        for app in self.types[ctype].applications:
            self._require_app_dir(ctype, app)
            layers = [defaults, self._level(ctype, app, (), taint)]
            layers += [self._level(ctype, app, node, taint) for node in _nodes(place)]
            apps[app] = merge_all(layers)
        active = patches.order(self._active_patches(ctype, place))
        apps, outcomes = patches.apply_all(apps, active)
        cluster = {"type": ctype, "environment": env, "sector": sector, "region": region}
        return RootState({"cluster": cluster, "applications": apps}, tuple(outcomes))

    def _defaults(self, ctype: str) -> dict[str, Any]:
        rel = join("config", ctype, DEFAULTS_FILE)

        def load() -> dict[str, Any]:
            if not self.tree.is_file(rel):
                return {}
            text, data = self._read(rel)
            data = _mapping(data, rel)
            parse_model(ApplicationDefaults, data, text=text, source=rel)
            return data.get("defaults") or {}

        result: dict[str, Any] = self._cached("defaults", rel, load)
        return result

    def _level(
        self, ctype: str, app: str, node: tuple[str, ...], taint: bool = False
    ) -> dict[str, Any]:
        """The application's values at one level (base or a node), encrypted file first.

        Shared by every root under the node, so it is computed once; callers merge it into
        new mappings and never change it.
        """
        base = join(self._app_dir(ctype, app), *node)

        def load() -> dict[str, Any]:
            layers = [
                self._values_file(join(base, name), ctype, app, taint)
                for name in LEVEL_FILES
                if self.tree.is_file(join(base, name))
            ]
            return merge_all(layers) if len(layers) > 1 else (layers[0] if layers else {})

        result: dict[str, Any] = self._cached("level~" if taint else "level", base, load)
        return result

    def _values_file(self, rel: str, ctype: str, app: str, taint: bool = False) -> dict[str, Any]:
        secret = rel.endswith(SOPS_VALUES_FILE)

        def load() -> dict[str, Any]:
            if secret:
                data = sops.decrypt_values(self.tree, rel)
                if taint:
                    data = origin.perturb(data)
                else:
                    self._decrypted[rel] = data
                text = self._text(rel)
            else:
                text, data = self._read(rel)
            data = _mapping(data, rel)
            parse_model(ValuesFile, data, text=text, source=rel)
            apps = data.get("applications") or {}
            for key in apps:
                if key != app:
                    raise FleetError(
                        f"unknown key 'applications/{key}': a values file under "
                        f"{self._app_dir(ctype, app)}/ may only define applications.{app}",
                        path=rel,
                        line=yamldoc.key_line(text, ("applications", key)),
                    )
            return apps.get(app) or {}

        kind = "values~" if taint and secret else "values"
        result: dict[str, Any] = self._cached(kind, rel, load)
        return result

    def _active_patches(self, ctype: str, place: Place) -> list[patches.Patch]:
        """Patches active at a root: file-name order; one copy per id (the deepest wins)."""
        entries = []
        for app_index, app in enumerate(self.types[ctype].applications):
            for depth, node in enumerate(_nodes(place)):
                for rel in self._patch_files(join(self._app_dir(ctype, app), *node)):
                    entries.append((rel.rsplit("/", 1)[-1], app_index, depth, rel))
        by_id: dict[str, tuple[int, patches.Patch]] = {}
        for _name, _app, depth, rel in sorted(entries):
            patch = self._patch(rel, ctype)
            seen = by_id.get(patch.id)
            if seen is None or depth >= seen[0]:
                by_id[patch.id] = (depth, patch)
        return [p for _, p in by_id.values()]

    def _patch_files(self, directory: str) -> list[str]:
        pdir = join(directory, PATCHES_DIR)
        return [
            join(pdir, name)
            for name in self.tree.listdir(pdir)
            if name.endswith((".yaml", ".yml")) and self.tree.is_file(join(pdir, name))
        ]

    def _patch(self, rel: str, ctype: str) -> patches.Patch:
        def load() -> patches.Patch:
            text = self._text(rel)
            patch = patches.load_patch(text, rel)
            parse_model(DimensionsPatchFile, patch.content, text=text, source=rel)
            app = rel.split("/")[2]
            problems = []
            for key in patch.body:
                if key != app:
                    problems.append(
                        Problem(
                            rel,
                            patch.line(("patch", key)),
                            f"unknown key 'patch/{key}': a patch under "
                            f"{self._app_dir(ctype, app)}/ may only change application {app!r}",
                        )
                    )
            for pointer in patch.merge_strategy:
                if parse_pointer(pointer)[0] != app:
                    problems.append(
                        Problem(
                            rel,
                            patch.line(("metadata", "merge_strategy", pointer)),
                            f"merge_strategy {pointer!r} must start with /{app}/ (a patch "
                            f"under {self._app_dir(ctype, app)}/ only changes {app!r})",
                        )
                    )
            if problems:
                raise FleetErrors(problems)
            return patch

        result: patches.Patch = self._cached("patch", rel, load)
        return result

    def _check_application(self, ctype: str, app: str, fields: dict[str, Any]) -> None:
        where = join(self._app_dir(ctype, app), VALUES_FILE)
        if not isinstance(fields.get("destination"), dict):
            raise FleetError(
                f"application {app!r} has no destination (set it in values.yaml or "
                f"config/{ctype}/{DEFAULTS_FILE})",
                path=where,
            )
        if not fields.get("source") and not fields.get("sources"):
            raise FleetError(f"application {app!r} has no source or sources", path=where)

    # --- affected --------------------------------------------------------------------------

    def _affected_node(self, ctype: str, rest: list[str]) -> set[str]:
        """Roots affected by `rest` (a path below an application directory, by node)."""
        node: tuple[str, ...] = ()
        children = {e.name: e for e in self.spec.sequence.environments}
        while rest:
            head, rest = rest[0], rest[1:]
            if not rest:
                return self._roots_under(ctype, node) if node and head in LEVEL_FILES else set()
            if head == PATCHES_DIR:
                return self._roots_under(ctype, node) if node and len(rest) == 1 else set()
            child = children.get(head)
            if child is None:
                return set()
            node = (*node, head)
            grand: Any = getattr(child, "sectors", None) or getattr(child, "regions", None) or []
            children = {c.name: c for c in grand}
        return set()

    def _roots_under(self, ctype: str, node: tuple[str, ...]) -> set[str]:
        return {f"{ctype}/{e}/{s}/{r}" for e, s, r in self.places if (e, s, r)[: len(node)] == node}

    # --- validation ------------------------------------------------------------------------

    def _validate_tree(self, problems: list[Problem]) -> None:
        listed = {t.name for t in self.spec.cluster_types}
        for entry in self.tree.listdir("config"):
            if self.tree.is_dir(join("config", entry)) and entry not in listed:
                problems.append(
                    Problem(
                        join("config", entry),
                        None,
                        f"directory {entry!r} is not a cluster type listed in {CONFIG_FILE} "
                        "cluster_types",
                    )
                )
        for ti, ctype in enumerate(self.spec.cluster_types):
            tdir = join("config", ctype.name)
            for entry in self.tree.listdir(tdir):
                rel = join(tdir, entry)
                if self.tree.is_dir(rel):
                    if entry not in ctype.applications:
                        problems.append(
                            Problem(
                                rel,
                                None,
                                f"application directory {entry!r} is not listed in "
                                f"{CONFIG_FILE} cluster_types[{ti}].applications",
                            )
                        )
                elif _is_yaml(entry) and entry != DEFAULTS_FILE:
                    problems.append(
                        Problem(rel, None, f"unexpected file (only {DEFAULTS_FILE} is read here)")
                    )
            _collect(problems, partial(self._defaults, ctype.name))
            for ai, app in enumerate(ctype.applications):
                if not self.tree.is_dir(self._app_dir(ctype.name, app)):
                    problems.append(self._missing_app(ti, ai, ctype.name, app))
                    continue
                self._validate_app(problems, ctype.name, app)

    def _validate_app(self, problems: list[Problem], ctype: str, app: str) -> None:
        adir = self._app_dir(ctype, app)
        meta_rel = join(adir, METADATA_FILE)
        if not self.tree.is_file(meta_rel):
            problems.append(
                Problem(meta_rel, None, "missing: every application needs metadata.yaml")
            )
        else:

            def check_metadata() -> None:
                text, data = self._read(meta_rel)
                meta = parse_model(
                    AppMetadata, _mapping(data, meta_rel), text=text, source=meta_rel
                )
                if meta.name != app:
                    raise FleetError(
                        f"name {meta.name!r} does not match the directory {app!r}",
                        path=meta_rel,
                        line=yamldoc.key_line(text, ("name",)),
                    )

            _collect(problems, check_metadata)
        owners_rel = join(adir, OWNERS_FILE)
        if self.tree.is_file(owners_rel):

            def check_owners() -> None:
                text, data = self._read(owners_rel)
                parse_model(Owners, _mapping(data, owners_rel), text=text, source=owners_rel)

            _collect(problems, check_owners)
        self._validate_node_dir(problems, ctype, app, ())

    def _validate_node_dir(
        self, problems: list[Problem], ctype: str, app: str, node: tuple[str, ...]
    ) -> None:
        directory = join(self._app_dir(ctype, app), *node)
        children = self._children(node)
        kind = ("an environment", "a sector", "a region", "")[len(node)]
        for entry in self.tree.listdir(directory):
            rel = join(directory, entry)
            if self.tree.is_dir(rel):
                if entry == PATCHES_DIR:
                    continue  # patch files are checked with the other patches
                if entry in children:
                    self._validate_node_dir(problems, ctype, app, (*node, entry))
                elif kind:
                    where = "/".join(node) or "the sequence"
                    problems.append(
                        Problem(
                            rel,
                            None,
                            f"directory {entry!r} is not {kind} of {where} in {CONFIG_FILE}",
                        )
                    )
                else:
                    problems.append(Problem(rel, None, "unexpected directory below a region"))
            elif entry in LEVEL_FILES:
                _collect(problems, partial(self._values_file, rel, ctype, app))
            elif _is_yaml(entry) and not (not node and entry == METADATA_FILE):
                problems.append(
                    Problem(
                        rel,
                        None,
                        f"unexpected file (expected {VALUES_FILE}, {SOPS_VALUES_FILE}, "
                        f"{PATCHES_DIR}/ or {kind or 'a region'} directory)",
                    )
                )

    def _validate_patch_files(
        self, problems: list[Problem]
    ) -> tuple[list[patches.Patch], dict[tuple[str, tuple[str, ...]], list[patches.Patch]]]:
        """Load every staged patch and every active copy (by type and node)."""
        staged: list[patches.Patch] = []
        copies: dict[tuple[str, tuple[str, ...]], list[patches.Patch]] = defaultdict(list)
        nodes = [n.path for n in self.sequence_nodes()]
        for ctype in self.spec.cluster_types:
            for app in ctype.applications:
                adir = self._app_dir(ctype.name, app)
                if not self.tree.is_dir(adir):
                    continue
                for node in [(), *nodes]:
                    for rel in self._patch_files(join(adir, *node)):
                        try:
                            patch = self._patch(rel, ctype.name)
                        except FleetErrors as err:
                            problems.extend(err.problems)
                            continue
                        except FleetError as err:
                            problems.append(err.problem)
                            continue
                        if node:
                            copies[(ctype.name, node)].append(patch)
                        else:
                            staged.append(patch)
        return staged, copies

    def _validate_patch_ids(
        self,
        problems: list[Problem],
        staged: list[patches.Patch],
        copies: dict[tuple[str, tuple[str, ...]], list[patches.Patch]],
    ) -> None:
        first: dict[str, patches.Patch] = {}
        for patch in staged:
            other = first.setdefault(patch.id, patch)
            if other is not patch:
                problems.append(
                    Problem(
                        patch.path,
                        patch.line(("metadata", "id")),
                        f"duplicate patch id {patch.id!r}: {other.path} has it too "
                        "(ids are unique in the fleet)",
                    )
                )
        for (_ctype, node), group in sorted(copies.items()):
            seen: dict[str, patches.Patch] = {}
            for patch in group:
                other = seen.setdefault(patch.id, patch)
                if other is not patch:
                    problems.append(
                        Problem(
                            patch.path,
                            patch.line(("metadata", "id")),
                            f"duplicate patch id {patch.id!r} at node {'/'.join(node)}: "
                            f"{other.path} has it too",
                        )
                    )
                original = first.get(patch.id)
                if original is not None and original.content != patch.content:
                    problems.append(
                        Problem(
                            patch.path,
                            patch.line(("metadata", "id")),
                            f"active copy of patch {patch.id!r} differs from the staged "
                            f"{original.path}; copies must be identical to it",
                        )
                    )

    def _validate_graduation(
        self,
        problems: list[Problem],
        staged: list[patches.Patch],
        copies: dict[tuple[str, tuple[str, ...]], list[patches.Patch]],
    ) -> None:
        covered: dict[tuple[str, str], set[str]] = defaultdict(set)
        where: dict[tuple[str, str], list[patches.Patch]] = defaultdict(list)
        for (ctype, node), group in copies.items():
            for patch in group:
                covered[(ctype, patch.id)] |= self._roots_under(ctype, node)
                where[(ctype, patch.id)].append(patch)
        staged_by_id = {p.id: p for p in staged}
        for (ctype, pid), roots in sorted(covered.items()):
            if roots != self._roots_under(ctype, ()):
                continue
            original = staged_by_id.get(pid)
            anchor = original or min(where[(ctype, pid)], key=lambda p: p.path)
            names = ", ".join(sorted(p.path for p in where[(ctype, pid)]))
            problems.append(
                Problem(
                    anchor.path,
                    anchor.line(("metadata", "id")),
                    f"patch {pid!r} is active on every root of cluster type {ctype!r} and "
                    f"must graduate: fold it into values.yaml and delete its copies ({names})",
                )
            )

    def _validate_roots(self, problems: list[Problem]) -> None:
        unmet: dict[tuple[str, int | None, str], list[str]] = defaultdict(list)
        overlaps: dict[tuple[str, int | None, str], list[str]] = defaultdict(list)
        for root in self._roots:
            try:
                state = self.state(root)
            except FleetError:
                continue  # its file problems are reported by the checks above
            secret: set[tuple[str | int, ...]] | None = None
            for outcome in state.outcomes:
                for dep, found in outcome.unmet:
                    p = outcome.patch
                    if secret is None:
                        secret = self.secret_paths(root, None) | self.encrypted_paths(root)
                    if _touches(secret, ("applications", *parse_pointer(dep.pointer))):
                        # The found value would be printed: it comes from a secret.
                        found = "found a value that comes from an encrypted file (not shown)"
                    message = (
                        f"dependency {dep.describe()} of patch {p.id!r} is not met ({found}), "
                        "so the patch is not applied at"
                    )
                    unmet[(p.path, p.line(dep.keys), message)].append(root)
            active = [o.patch for o in state.outcomes]
            for i, a in enumerate(active):
                for b in active[i + 1 :]:
                    for pointer in patches.overlap(a, b):
                        keys = ("patch", *parse_pointer(pointer))
                        message = (
                            f"patches {a.id!r} and {b.id!r} ({b.path}:{b.line(keys)}) both set "
                            f"{pointer}; overlapping patches are active at"
                        )
                        overlaps[(a.path, a.line(keys), message)].append(root)
        for table in (unmet, overlaps):
            for (path, line, message), roots in table.items():
                problems.append(Problem(path, line, f"{message} {_list_roots(roots)}"))

    def _missing_app(self, ti: int, ai: int, ctype: str, app: str) -> Problem:
        return Problem(
            CONFIG_FILE,
            yamldoc.key_line(self.config_text, ("cluster_types", ti, "applications", ai)),
            f"application {app!r} of cluster type {ctype!r} has no directory "
            f"{self._app_dir(ctype, app)}/",
        )

    def _require_app_dir(self, ctype: str, app: str) -> None:
        if not self.tree.is_dir(self._app_dir(ctype, app)):
            ti = [t.name for t in self.spec.cluster_types].index(ctype)
            ai = self.types[ctype].applications.index(app)
            problem = self._missing_app(ti, ai, ctype, app)
            raise FleetError(problem.message, path=problem.path, line=problem.line)

    # --- small helpers ---------------------------------------------------------------------

    def _check_names(self) -> None:
        problems = []

        def unique(names: list[str], keys: tuple[str | int, ...], what: str) -> None:
            seen: set[str] = set()
            for i, name in enumerate(names):
                line = yamldoc.key_line(self.config_text, (*keys, i, "name"))
                if name in seen:
                    problems.append(Problem(CONFIG_FILE, line, f"duplicate {what} {name!r}"))
                seen.add(name)
                if name == PATCHES_DIR and what != "cluster type":
                    problems.append(Problem(CONFIG_FILE, line, f"{what} name {name!r} is reserved"))

        envs = self.spec.sequence.environments
        unique([e.name for e in envs], ("sequence", "environments"), "environment")
        for ei, e in enumerate(envs):
            skeys = ("sequence", "environments", ei, "sectors")
            unique([s.name for s in e.sectors], skeys, "sector")
            for si, s in enumerate(e.sectors):
                unique([r.name for r in s.regions], (*skeys, si, "regions"), "region")
        types = self.spec.cluster_types
        unique([t.name for t in types], ("cluster_types",), "cluster type")
        for ti, t in enumerate(types):
            seen: set[str] = set()
            for ai, app in enumerate(t.applications):
                if app in seen:
                    line = yamldoc.key_line(
                        self.config_text, ("cluster_types", ti, "applications", ai)
                    )
                    problems.append(Problem(CONFIG_FILE, line, f"duplicate application {app!r}"))
                seen.add(app)
        if problems:
            raise FleetErrors(problems)

    def _prefetch(self) -> None:
        """On a git revision, list all of config/ in one git call instead of one per directory."""
        if not self._prefetched:
            self._prefetched = True
            prefetch = getattr(self.tree, "prefetch", None)
            if prefetch is not None:
                prefetch("config")

    def _children(self, node: tuple[str, ...]) -> set[str]:
        return {p[len(node)] for p in self.places if p[: len(node)] == node and len(node) < 3}

    def _split(self, root: str) -> tuple[str, Place]:
        if root not in self._root_set:
            raise FleetError(f"unknown root {root!r}; `rollwright roots` lists them")
        ctype, env, sector, region = root.split("/")
        return ctype, (env, sector, region)

    @staticmethod
    def _app_dir(ctype: str, app: str) -> str:
        return join("config", ctype, app)

    def _text(self, rel: str) -> str:
        try:
            return self.tree.read_text(rel)
        except UnicodeDecodeError:
            raise FleetError("not valid UTF-8 text", path=rel) from None
        except FileNotFoundError:
            raise FleetError("file not found", path=rel) from None

    def _read(self, rel: str) -> tuple[str, Any]:
        def load() -> tuple[str, Any]:
            text = self._text(rel)
            return text, yamldoc.loads(text, rel)

        result: tuple[str, Any] = self._cached("yaml", rel, load)
        return result

    def _cached(self, kind: str, key: str, load: Callable[[], Any]) -> Any:
        # Errors are not cached: they are cheap to reproduce and carry their own context.
        hit = self._cache.get((kind, key), _MISS)
        if hit is _MISS:
            hit = load()
            self._cache[(kind, key)] = hit
        return hit


_MISS = object()


def _nodes(place: Place) -> Iterator[tuple[str, ...]]:
    """The nodes above a root, outermost first: (env,), (env, sector), (env, sector, region)."""
    for depth in range(1, 4):
        yield place[:depth]


def _mapping(data: Any, rel: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FleetError(
            f"expected a mapping at the top level, found {yamldoc.type_name(data)}",
            path=rel,
            line=1,
        )
    return data


def _is_yaml(name: str) -> bool:
    return name.endswith((".yaml", ".yml"))


def _collect(problems: list[Problem], check: Callable[[], Any]) -> None:
    try:
        check()
    except FleetErrors as err:
        problems.extend(err.problems)
    except FleetError as err:
        problems.append(err.problem)


def _template_reason(message: str) -> str:
    """The useful tail of a `tpl` error: the failing expression, not the built-in template's
    internals, and not the whole value (which could be a secret)."""
    marker = "template: gotpl:"
    if marker in message:
        tail = message.split(marker, 1)[1]
        return re.sub(r"^\d+(:\d+)?: ", "", tail.strip())
    return message


def _touches(paths: set[tuple[str | int, ...]], keys: tuple[str | int, ...]) -> bool:
    """True when `keys` is, is inside, or holds one of `paths`."""
    return any(p[: len(keys)] == keys or keys[: len(p)] == p for p in paths)


def _list_roots(roots: list[str]) -> str:
    shown = ", ".join(sorted(roots)[:3])
    more = len(roots) - 3
    return shown + (f" and {more} more" if more > 0 else "")
