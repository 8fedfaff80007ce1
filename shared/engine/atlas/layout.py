"""The atlas layout (ATLAS compatible): clusters discovered from directories, deployments of
app templates in helmfile release syntax, and ten levels of values.

    layout = AtlasLayout(WorkTree(Path("examples/atlas-fleet")), FleetConfig())
    layout.roots()                                   # ['prod/eu-1', 'staging/cluster-a', ...]
    layout.values("staging/cluster-a", "web/api")    # merged values of one release
    layout.render_files("staging/cluster-a")         # {"web/api/web/Deployment.apps_api.yaml": ...}

The format is described in docs/formats/atlas.md. The modules of this package, in import
order: `files` (names and models), `discovery` (clusters and deployments), `values` (the
layering), `planner` (each root's releases and their values), `instance_patches`, `secrets`
(origin tracking), `affected` and `validate`. This module is the `Layout` the engine sees: it
plans through one `Planner` and renders each release with `shared.engine.render`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.engine.atlas import affected
from shared.engine.atlas.discovery import Cluster
from shared.engine.atlas.instance_patches import apply_instance_patches
from shared.engine.atlas.planner import Planner
from shared.engine.atlas.plans import ReleasePlan
from shared.engine.atlas.values import Decrypt, Layer, ValueFiles, default_decrypt
from shared.engine.config.fleet import FleetConfig
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.helm.engine import charts_unchanged
from shared.engine.layout import ReleaseInfo
from shared.engine.manifests.documents import Resource
from shared.engine.release import ReleaseSpec
from shared.engine.tree import Tree

if TYPE_CHECKING:
    from shared.engine import conformance
    from shared.engine.atlas import secrets, unread

__all__ = ["AtlasLayout", "Layer"]


class AtlasLayout:
    name = "atlas"

    def __init__(self, tree: Tree, config: FleetConfig) -> None:
        self.planner = Planner(tree, config)
        self._structure: list[Problem] | None = None
        self._unread: list[unread.Unread] | None = None
        self._empty: dict[str, list[Problem]] = {}  # root → its releases that render nothing
        self._schema_warnings: dict[str, list[Problem]] = {}  # root → conformance warnings
        # values file → its traced form, None when not traced; the layout reads one revision,
        # and most files are layers of many releases (global, group, template values)
        self._traced: dict[str, conformance.ValuesFile | None] = {}

    @property
    def tree(self) -> Tree:
        return self.planner.tree

    @property
    def config(self) -> FleetConfig:
        return self.planner.config

    @property
    def files(self) -> ValueFiles:
        return self.planner.files

    # --- discovery and planning --------------------------------------------------------------

    def clusters(self) -> dict[str, Cluster]:
        return self.planner.clusters()

    def roots(self) -> list[str]:
        return self.planner.roots()

    def plans(self, root: str) -> list[ReleasePlan]:
        return self.planner.plans(root)

    def releases(self, root: str) -> list[ReleaseInfo]:
        return [
            ReleaseInfo(id=p.id, template=p.template, namespace=p.namespace, labels=p.labels)
            for p in self.planner.plans(root)
        ]

    # --- values ------------------------------------------------------------------------------

    def layers(
        self, root: str, release: str | None, *, decrypt: Decrypt | None = None
    ) -> list[Layer]:
        """The ordered value layers of one release (source, level, data, secret flag).

        `decrypt` replaces SOPS decryption (e.g. by a redacting one) for every secret file.
        """
        plan = self.planner.plan(root, release)
        with self.planner.naming(plan):
            return self.planner.resolve_values(plan, decrypt)[0]

    def values(self, root: str, release: str | None) -> dict[str, Any]:
        plan = self.planner.plan(root, release)
        with self.planner.naming(plan):
            return self.planner.resolve_values(plan)[1]

    def secret_paths(self, root: str, release: str | None) -> set[tuple[str | int, ...]]:
        """Leaf paths of the release's values that hold or derive from a secret."""
        from shared.engine.atlas import secrets  # noqa: PLC0415 (start-up time, `_render`)

        plan = self.planner.plan(root, release)
        with self.planner.naming(plan):
            layers, values = self.planner.resolve_values(plan)
            found = secrets.release_secrets(self.planner, plan, layers, values)
        return found.paths if found is not None else set()

    def redacted_values(self, root: str, release: str | None) -> dict[str, Any]:
        """`values()` with secrets and secret-derived leaves redacted."""
        from shared.engine.atlas import secrets  # noqa: PLC0415 (start-up time, `_render`)

        plan = self.planner.plan(root, release)
        with self.planner.naming(plan):
            layers, values = self.planner.resolve_values(plan)
            found = secrets.release_secrets(self.planner, plan, layers, values)
        return secrets.redacted_values(found, values)

    def secret_values(self) -> list[Any]:
        """Every decrypted SOPS tree read so far (to keep plaintext out of error messages)."""
        return self.files.decrypted(default_decrypt)

    # --- rendering ---------------------------------------------------------------------------

    def render_files(self, root: str) -> dict[str, bytes]:
        """Every output file of `root`, in plaintext."""
        with charts_unchanged():  # one root's releases share charts: fingerprint once
            return self._render(root, redact=False)[0]

    def render_redacted(self, root: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """(plaintext, redacted) output files of `root`; see shared.engine.atlas.secrets."""
        with charts_unchanged():
            return self._render(root, redact=True)

    def _render(self, root: str, *, redact: bool) -> tuple[dict[str, bytes], dict[str, bytes]]:
        # The renderer, the schema checks (jsonschema, the OpenAPI schemas) and the secrets'
        # origin tracking load with the first render, not for `roots --changed`, which only
        # plans: start-up time (validation and the unread keys load when asked for, too).
        from shared.engine import conformance, render  # noqa: PLC0415
        from shared.engine.atlas import secrets  # noqa: PLC0415

        planner = self.planner
        files: dict[str, bytes] = {}
        shown: dict[str, bytes] = {}
        owners: dict[str, str] = {}
        empty: list[Problem] = []
        checked: list[conformance.Rendered] = []
        by_instance: dict[tuple[str, int], list[ReleasePlan]] = {}
        for plan in planner.plans(root):
            key = (plan.instance.deployment.path, plan.instance.index)
            by_instance.setdefault(key, []).append(plan)
        for group in by_instance.values():
            rendered: list[tuple[ReleasePlan, ReleaseSpec, list[Resource]]] = []
            sources: list[secrets.Rendered] = []
            for plan in group:
                with planner.naming(plan):
                    layers, values = planner.resolve_values(plan)
                    spec = planner.spec(root, plan, values)
                    resources = render.render_release(
                        spec, planner.tree, planner.config, planner.resolver
                    )
                rendered.append((plan, spec, resources))
                sources.append((plan, layers, values, resources))
            # Before the instance patches change the real objects: the perturbed twin.
            twins = secrets.taint_instance(planner, root, sources) if redact else {}
            apply_instance_patches(group[0].instance, [(p, r) for p, _, r in rendered])
            empty += [_renders_nothing(spec) for _, spec, resources in rendered if not resources]
            for plan, spec, resources in rendered:
                values_files = self._values_files(sources, plan)
                checked += [
                    conformance.Rendered(
                        res.doc,
                        spec.id,
                        spec.origin,
                        spec.origin_line,
                        spec.kube_version,
                        values_files,
                        res.source,
                    )
                    for res in resources
                ]
            for plan, spec, resources in rendered:
                with planner.naming(plan):
                    out = render.release_files(spec, resources, planner.config)
                for path, data in out.items():
                    if path in files:
                        raise FleetError(
                            f"releases {owners[path]!r} and {plan.id!r} both write {path}",
                            path=plan.instance.helmfile.path,
                        )
                    files[path] = data
                    owners[path] = plan.id
                if redact:
                    for path, data in secrets.redacted_files(
                        out, twins.get(plan.id), plan.id
                    ).items():
                        shown[path if path not in shown else path + "~"] = data
        self._empty[root] = empty
        outcome = conformance.check_root(root, checked, planner.config)
        self._schema_warnings[root] = outcome.warnings
        if outcome.refusals:
            raise FleetErrors(outcome.refusals)
        return dict(sorted(files.items())), dict(sorted(shown.items()))

    # --- affected roots and validation -------------------------------------------------------

    def affected(self, changed: set[str]) -> set[str]:
        return affected.affected_roots(self.tree, self.files, changed)

    def validate(self) -> list[Problem]:
        from shared.engine.atlas import validate  # noqa: PLC0415 (start-up time, `_render`)

        problems = validate.validate(self.planner)
        if any(not p.hygiene for p in problems):
            return problems  # keys cannot be judged while releases fail to plan
        return sorted(set(problems) | set(self.unread_values(None)))

    def unread_values(self, root: str | None) -> list[Problem]:
        """Keys no template reads (`shared.engine.atlas.unread`), analysed once per layout."""
        from shared.engine.atlas import unread  # noqa: PLC0415 (start-up time, `_render`)

        if self._unread is None:
            self._unread = unread.unread_keys(self.planner, strict=self.config.strict)
        return unread.roots_of(self._unread, root)

    def render_warnings(self, root: str) -> list[Problem]:
        return list(self._empty.get(root, [])) + self._schema_warnings.get(root, [])

    def _values_files(
        self, sources: list[secrets.Rendered], plan: ReleasePlan
    ) -> tuple[conformance.ValuesFile, ...]:
        """The plain values files of a release's layers, lowest precedence first (inline
        values and encrypted files are not traced)."""
        from shared.engine.conformance import ValuesFile  # noqa: PLC0415 (start-up time, `_render`)

        layers = next(layers for p, layers, _, _ in sources if p is plan)
        tree = self.tree
        traced = self._traced
        out = []
        for layer in layers:
            if layer.secret:
                continue
            source = layer.source
            if source in traced:
                found = traced[source]
            else:
                plain = "#" not in source and tree.is_file(source)
                found = traced[source] = ValuesFile.at(tree, source) if plain else None
            if found is not None:
                out.append(found)
        return tuple(out)

    def refusals(self, root: str) -> list[Problem]:
        """The structure problems that touch `root`; all are content (a file never read, a
        definition that cannot be read), docs/formats/problems.md. Planning and values errors
        fail the render by themselves. Under rollwright.yaml `strict`, keys no template reads
        that reach `root` too."""
        from shared.engine.atlas import validate  # noqa: PLC0415 (start-up time, `_render`)

        if self._structure is None:
            self._structure = validate.structure(self.planner)
        found = [p for p in self._structure if validate.touches(self.tree, p, root)]
        if not found and self.config.strict:
            found = self.unread_values(root)
        return found


def _renders_nothing(spec: ReleaseSpec) -> Problem:
    return Problem(
        spec.origin,
        spec.origin_line,
        f"release {spec.id!r} renders no object (its chart, values or flags leave every "
        "template empty)",
        hygiene=True,
    )
