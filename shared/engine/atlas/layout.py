"""The atlas layout (ATLAS compatible): clusters discovered from directories, deployments of
app templates in helmfile release syntax, and ten levels of values.

    layout = AtlasLayout(WorkTree(Path("examples/atlas-fleet")), FleetConfig())
    layout.roots()                                   # ['prod/eu-1', 'staging/cluster-a', ...]
    layout.values("staging/cluster-a", "web/api")    # merged values of one release
    layout.render_files("staging/cluster-a")         # {"web/api/web/Deployment.apps_api.yaml": ...}

The format is described in docs/formats/atlas.md; files and models are in `atlas_files`,
discovery in `atlas_discovery`, values layering in `atlas_values` and affected roots in
`atlas_affected`. This module plans each root's releases (instances × template releases) and
renders them with `shared.engine.render`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shared.engine import helm, render, template_memo, yamldoc
from shared.engine import postrender as patching
from shared.engine.atlas import secrets as atlas_secrets
from shared.engine.atlas.discovery import Cluster, DeploymentDef, clusters, deployment_defs, dpath
from shared.engine.atlas.files import (
    CLUSTER_STEM,
    DEPLOYMENT_FILE,
    DEPLOYMENT_STEM,
    DEPLOYMENTS,
    FILE_SCHEMAS,
    GLOBAL_STEM,
    GROUP_STEM,
    HELMFILES,
    TEMPLATES,
    AppInstance,
    DeploymentFile,
    HelmfileTemplate,
    join,
)
from shared.engine.atlas.planner import (
    Helmfile,
    InstancePlan,
    LoadedDeployment,
    ReleaseParts,
    ReleasePlan,
    chart_source,
    patch_shape_problem,
    release_name,
    resolve_path,
)
from shared.engine.atlas.values import (
    Decrypt,
    Layer,
    LevelSource,
    TemplateValue,
    ValueFiles,
    default_decrypt,
    environment,
    final_layers,
    jsonable,
    with_atlas,
)
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.fleet import ReleaseInfo
from shared.engine.fleetconfig import FleetConfig, parse_model
from shared.engine.manifests import Resource
from shared.engine.render import ChartSource, ReleaseSpec
from shared.engine.tree import GitError, Tree

__all__ = ["FILE_SCHEMAS", "AtlasLayout", "Layer"]


class _LocalCharts(render.ChartResolver):
    """Each local chart looked up once per layout (a layout reads one revision), not once
    per release; remote charts go through their own cache as before."""

    def __init__(self) -> None:
        self._found: dict[str, Path] = {}

    def resolve(self, source: ChartSource, tree: Tree, origin: str) -> Path:
        if source.kind == "remote-chart":
            return super().resolve(source, tree, origin)
        found = self._found.get(source.path)
        if found is None:
            found = self._found[source.path] = super().resolve(source, tree, origin)
        return found


class AtlasLayout:
    name = "atlas"

    def __init__(self, tree: Tree, config: FleetConfig) -> None:
        # Nothing is read here: `roots --changed` must stay cheap on a 10,000-root fleet.
        self.tree = tree
        self.config = config
        self.files = ValueFiles(tree)
        self.resolver = _LocalCharts()
        self._clusters: dict[str, Cluster] | None = None
        self._deployments: dict[str, LoadedDeployment] = {}
        self._helmfiles: dict[tuple[str, str], Helmfile] = {}
        self._parts: dict[tuple[str, str, int], ReleaseParts] = {}
        self._environments: dict[tuple[LevelSource, ...], tuple[dict[str, Any], list[Layer]]] = {}
        self._chart_defaults: dict[ChartSource, dict[str, Any]] = {}
        self._last_plans: tuple[str, list[ReleasePlan]] | None = None

    # --- discovery ---------------------------------------------------------------------------

    def clusters(self) -> dict[str, Cluster]:
        if self._clusters is None:
            self._clusters = {c.id: c for c in clusters(self.tree)}
        return self._clusters

    def roots(self) -> list[str]:
        return list(self.clusters())

    def cluster(self, root: str) -> Cluster:
        found = self.clusters().get(root)
        if found is None:
            raise FleetError(f"unknown root {root!r}; `rollwright roots` lists them")
        return found

    def deployment(self, defn: DeploymentDef) -> LoadedDeployment:
        """deployment.yaml of a deployment directory, parsed and checked."""
        loaded = self._deployments.get(defn.dir)
        if loaded is None:
            loaded = self._load_deployment(defn)
            problems = self._deployment_problems(loaded)
            if problems:
                raise FleetErrors(problems)
            self._deployments[defn.dir] = loaded
        return loaded

    def _load_deployment(self, defn: DeploymentDef) -> LoadedDeployment:
        path = join(defn.dir, DEPLOYMENT_FILE)
        if not self.tree.is_file(path):
            raise FleetError(
                f"deployment directory has no {DEPLOYMENT_FILE} (every directory under apps/ "
                "is a deployment)",
                path=defn.dir,
            )
        text = self.files.text(path)
        data = yamldoc.loads(text, path)
        if not isinstance(data, dict):
            raise FleetError(
                f"expected a mapping at the top level, found {yamldoc.type_name(data)}",
                path=path,
                line=1,
            )
        model = parse_model(DeploymentFile, jsonable(data), text=text, source=path)
        return LoadedDeployment(defn, path, text, model)

    def _deployment_problems(self, loaded: LoadedDeployment) -> list[Problem]:
        problems = []
        seen: dict[str, int] = {}
        for i, inst in enumerate(loaded.model.apps):
            where = f"apps[{i}]"
            name = inst.instance_name
            if name in seen:
                problems.append(
                    Problem(
                        loaded.path,
                        loaded.line("apps", i, "name" if inst.name else "template"),
                        f"{where}: duplicate instance name {name!r} (also apps[{seen[name]}]); "
                        "give one of them a distinct `name`",
                    )
                )
            seen.setdefault(name, i)
            if self._helmfile_path(inst.template) is None:
                problems.append(
                    Problem(
                        loaded.path,
                        loaded.line("apps", i, "template"),
                        f"{where}: template {inst.template!r} not found (no "
                        f"{TEMPLATES}/{inst.template}/{HELMFILES[0]} or {HELMFILES[1]})",
                    )
                )
            for j, secret in enumerate(inst.secrets):
                try:
                    rel = resolve_path(
                        loaded.defn.dir, secret, what="secrets file", inside=loaded.defn.dir
                    )
                except FleetError as err:
                    problems.append(
                        Problem(
                            loaded.path,
                            loaded.line("apps", i, "secrets", j),
                            f"{where}.secrets[{j}]: {err.problem.message}",
                        )
                    )
                    continue
                if not self.files.exists(rel):
                    problems.append(
                        Problem(
                            loaded.path,
                            loaded.line("apps", i, "secrets", j),
                            f"{where}.secrets[{j}]: secrets file {secret!r} not found ({rel})",
                        )
                    )
            for kind in ("jsonPatches", "strategicMergePatches"):
                for j, entry in enumerate(getattr(inst, kind)):
                    message = patch_shape_problem(entry, strategic=kind != "jsonPatches")
                    if message:
                        problems.append(
                            Problem(
                                loaded.path,
                                loaded.line("apps", i, kind, j),
                                f"{where}.{kind}[{j}]: {message}",
                            )
                        )
        return problems

    # --- planning ----------------------------------------------------------------------------

    def _helmfile_path(self, template: str) -> str | None:
        directory = join(TEMPLATES, template)
        for name in HELMFILES:
            if self.files.exists(join(directory, name)):
                return join(directory, name)
        return None

    def _instances(self, cluster: Cluster) -> Iterator[InstancePlan]:
        for defn in deployment_defs(self.tree, cluster).values():
            loaded = self.deployment(defn)
            for index, inst in enumerate(loaded.model.apps):
                if not inst.disabled:
                    yield self._instance(cluster, loaded, index, inst)

    def _levels(self, cluster: Cluster, defn: DeploymentDef) -> list[LevelSource]:
        files = self.files
        levels = [LevelSource("global", files.level_files(DEPLOYMENTS, GLOBAL_STEM))]
        for group in cluster.groups:
            levels.append(LevelSource("group", files.level_files(dpath(group), GROUP_STEM)))
        levels.append(LevelSource("cluster", files.level_files(cluster.dir, CLUSTER_STEM)))
        levels.append(LevelSource("deployment", files.level_files(defn.dir, DEPLOYMENT_STEM)))
        return [level for level in levels if level.files]

    def _instance(
        self, cluster: Cluster, loaded: LoadedDeployment, index: int, inst: AppInstance
    ) -> InstancePlan:
        model = loaded.model
        namespace = inst.namespace or model.namespace or loaded.defn.name
        labels = {"cluster": cluster.id, "clusterName": cluster.name}
        if cluster.group:
            labels["clusterGroup"] = cluster.group
        labels |= {
            "deploymentName": loaded.defn.name,
            "template": inst.template,
            "instance": inst.instance_name,
            "variant": inst.variant,
        }
        atlas = {
            "cluster": {"id": cluster.id, "name": cluster.name, "group": cluster.group},
            "deployment": {"name": loaded.defn.name, "path": loaded.defn.dir},
            "instance": {
                "name": inst.instance_name,
                "template": inst.template,
                "variant": inst.variant,
                "namespace": namespace,
            },
            "labels": labels,
        }
        levels = self._levels(cluster, loaded.defn)
        env, env_layers = self._environment(levels, atlas)
        helmfile = self._helmfile(inst.template, env, atlas, loaded, index)
        return InstancePlan(
            cluster, loaded, index, inst, namespace, atlas, levels, env, env_layers, helmfile
        )

    def _environment(
        self, levels: list[LevelSource], atlas: dict[str, Any]
    ) -> tuple[dict[str, Any], list[Layer]]:
        """Pass (a) of the values. Without Go templates among the files the environment
        does not depend on `atlas`, so the instances of a cluster share one."""
        if any(rel.endswith(".gotmpl") for level in levels for rel in level.files):
            return environment(self.files, levels, atlas, default_decrypt)
        key = tuple(levels)
        cached = self._environments.get(key)
        if cached is None:
            if len(self._environments) > 4096:
                self._environments.clear()
            cached = environment(self.files, levels, atlas, default_decrypt)
            self._environments[key] = cached
        return cached

    def _helmfile(
        self,
        template: str,
        env: dict[str, Any],
        atlas: dict[str, Any],
        loaded: LoadedDeployment,
        index: int,
    ) -> Helmfile:
        path = self._helmfile_path(template)
        if path is None:  # checked with the deployment; kept for a clear message anyway
            raise FleetError(
                f"apps[{index}]: template {template!r} not found",
                path=loaded.path,
                line=loaded.line("apps", index, "template"),
            )
        source = self.files.text(path)
        if not path.endswith(".gotmpl"):
            return self._parse_helmfile(template, path, source, source)
        # Cached by the values the template reads: instances often render it alike.
        text = template_memo.render(
            source, with_atlas(env, atlas, posixpath.dirname(path)), source=path
        )
        return self._parse_helmfile(template, path, source, text)

    def _parse_helmfile(self, template: str, path: str, source: str, text: str) -> Helmfile:
        # Instances often render a template to the same text: parse and validate it once.
        key = (path, text)
        cached = self._helmfiles.get(key)
        if cached is None:
            if len(self._helmfiles) > 4096:
                self._helmfiles.clear()
            cached = self._parse_helmfile_text(template, path, source, text)
            self._helmfiles[key] = cached
        return cached

    def _parse_helmfile_text(self, template: str, path: str, source: str, text: str) -> Helmfile:
        data = yamldoc.loads(text, path)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise FleetError(
                f"expected a mapping at the top level, found {yamldoc.type_name(data)}",
                path=path,
                line=1,
            )
        model = parse_model(HelmfileTemplate, jsonable(data), text=text, source=path)
        return Helmfile(template, path, source, text, model)

    def plans(self, root: str) -> list[ReleasePlan]:
        """Every release of `root`, sorted by id (the last root's plans are kept)."""
        if self._last_plans is not None and self._last_plans[0] == root:
            return self._last_plans[1]
        cluster = self.cluster(root)
        plans: dict[str, ReleasePlan] = {}
        for inst in self._instances(cluster):
            for plan in self._release_plans(inst):
                other = plans.get(plan.id)
                if other is not None:
                    raise FleetError(
                        f"release {plan.id!r} is defined twice: by {other.instance.where} and "
                        f"{inst.where} (rename an instance or set its nameStyle)",
                        path=inst.deployment.path,
                        line=inst.deployment.line("apps", inst.index),
                    )
                plans[plan.id] = plan
        result = [plans[k] for k in sorted(plans)]
        self._last_plans = (root, result)
        return result

    def _release_plans(self, inst: InstancePlan) -> Iterator[ReleasePlan]:
        hf = inst.helmfile
        style = inst.instance.nameStyle or inst.deployment.model.nameStyle
        for i, rel in enumerate(hf.model.releases):
            name = release_name(inst.instance, style, rel.name)
            labels = {**rel.labels, **inst.instance.labels, **inst.atlas["labels"]}
            parts = self._release_parts(hf, i)
            yield ReleasePlan(
                id=f"{inst.deployment.defn.name}/{name}",
                name=name,
                namespace=rel.namespace or inst.namespace,
                labels=labels,
                source=parts.source,
                index=i,
                release=rel,
                instance=inst,
                template_values=parts.template_values,
                template_secrets=parts.template_secrets,
                json_patches=parts.json_patches,
                strategic_merge_patches=parts.strategic_merge_patches,
            )

    def _release_parts(self, hf: Helmfile, i: int) -> ReleaseParts:
        """What release `i` of a rendered helmfile reads, whichever instance rendered it
        (kept per helmfile text: most instances render a template to the same text)."""
        key = (hf.path, hf.text, i)
        cached = self._parts.get(key)
        if cached is not None:
            return cached
        rel = hf.model.releases[i]
        parts = ReleaseParts(chart_source(self.tree, hf, i, rel))
        for j, entry in enumerate(rel.values):
            keys: tuple[str | int, ...] = ("releases", i, "values", j)
            if isinstance(entry, dict):
                source = f"{hf.path}#releases[{i}].values[{j}]"
                parts.template_values.append(TemplateValue(source, entry))
            else:
                where = f"releases[{i}].values[{j}]"
                path = self._template_file(hf, entry, keys, where, "values file")
                parts.template_values.append(TemplateValue(path))
        for j, entry in enumerate(rel.secrets):
            keys = ("releases", i, "secrets", j)
            where = f"releases[{i}].secrets[{j}]"
            parts.template_secrets.append(
                self._template_file(hf, entry, keys, where, "secrets file")
            )
        parts.json_patches.extend(self._patches(hf, i, "jsonPatches", rel.jsonPatches))
        parts.strategic_merge_patches.extend(
            self._patches(hf, i, "strategicMergePatches", rel.strategicMergePatches)
        )
        if len(self._parts) > 4096:
            self._parts.clear()
        self._parts[key] = parts
        return parts

    def _template_file(
        self, hf: Helmfile, entry: str, keys: tuple[str | int, ...], where: str, what: str
    ) -> str:
        line = hf.line(keys, entry)
        path = resolve_path(hf.dir, entry, what=f"{where}: {what}", origin=hf.path, line=line)
        if not self.files.exists(path):
            raise FleetError(
                f"{where}: {what} {entry!r} not found ({path})", path=hf.path, line=line
            )
        return path

    def _patches(
        self, hf: Helmfile, i: int, kind: str, entries: list[dict[str, Any] | str]
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for j, entry in enumerate(entries):
            if isinstance(entry, dict):
                out.append(entry)
                continue
            where = f"releases[{i}].{kind}[{j}]"
            path = self._template_file(hf, entry, ("releases", i, kind, j), where, "patch file")
            data = yamldoc.loads(self.files.text(path), path)
            items = data if isinstance(data, list) else [data]
            for item in items:
                if not isinstance(item, dict):
                    raise FleetError(
                        f"a patch file holds a mapping or a list of mappings, found "
                        f"{yamldoc.type_name(item)}",
                        path=path,
                        line=1,
                    )
                out.append(item)
        return out

    # --- values ------------------------------------------------------------------------------

    def _defaults(self, plan: ReleasePlan) -> dict[str, Any]:
        source = plan.source
        if source.kind not in ("chart", "remote-chart"):
            return {}
        cached = self._chart_defaults.get(source)
        if cached is None:
            origin = plan.instance.helmfile.path
            if source.kind == "remote-chart":
                path = self.resolver.resolve(source, self.tree, origin)
                cached = helm.chart_defaults(path, source.describe())
            else:
                try:
                    cached = helm.chart_defaults(self.tree.local_path(source.path), source.path)
                except GitError:
                    # A git revision without a checkout: read the chart's values.yaml in place.
                    values = join(source.path, "values.yaml")
                    cached = self.files.plain(values) if self.files.exists(values) else {}
            self._chart_defaults[source] = cached
        return cached

    def _layers(
        self, plan: ReleasePlan, decrypt: Decrypt | None = None
    ) -> tuple[list[Layer], dict[str, Any]]:
        inst = plan.instance
        env, env_layers = inst.env, inst.env_layers
        if decrypt is not None and decrypt is not default_decrypt:
            env, env_layers = environment(self.files, inst.levels, inst.atlas, decrypt)
        instance_values = inst.instance.values
        listed = instance_values if isinstance(instance_values, list) else [instance_values]
        source = f"{inst.deployment.path}#{inst.where}.values"
        directory = inst.deployment.defn.dir
        return final_layers(
            self.files,
            chart=self._defaults(plan),
            chart_source=plan.source.path or plan.source.describe(),
            template_values=plan.template_values,
            instance_values=[(source, data) for data in listed if data],
            template_secrets=plan.template_secrets,
            instance_secrets=[
                resolve_path(directory, s, what="secrets file", inside=directory)
                for s in inst.instance.secrets
            ],
            env=env,
            env_layers=env_layers,
            atlas=inst.atlas,
            cwd=inst.helmfile.dir,
            decrypt=decrypt or default_decrypt,
        )

    def _plan(self, root: str, release: str | None) -> ReleasePlan:
        plans = self.plans(root)
        ids = ", ".join(p.id for p in plans)
        if release is None:
            if len(plans) == 1:
                return plans[0]
            if not plans:
                raise FleetError(f"root {root!r} has no releases")
            raise FleetError(
                f"root {root!r} has {len(plans)} releases; choose one with --release: {ids}"
            )
        for plan in plans:
            if plan.id == release:
                return plan
        raise FleetError(f"root {root!r} has no release {release!r}; its releases: {ids or '-'}")

    def layers(
        self, root: str, release: str | None, *, decrypt: Decrypt | None = None
    ) -> list[Layer]:
        """The ordered value layers of one release (source, level, data, secret flag).

        `decrypt` replaces SOPS decryption (e.g. by a redacting one) for every secret file.
        """
        plan = self._plan(root, release)
        with self._naming(plan):
            return self._layers(plan, decrypt)[0]

    def values(self, root: str, release: str | None) -> dict[str, Any]:
        plan = self._plan(root, release)
        with self._naming(plan):
            return self._layers(plan)[1]

    @contextmanager
    def _naming(self, plan: ReleasePlan) -> Iterator[None]:
        """Fleet errors raised inside name the release."""
        try:
            yield
        except FleetErrors:
            raise
        except FleetError as err:
            raise err.within(f'release "{plan.id}"') from None

    def releases(self, root: str) -> list[ReleaseInfo]:
        return [
            ReleaseInfo(id=p.id, template=p.template, namespace=p.namespace, labels=p.labels)
            for p in self.plans(root)
        ]

    # --- rendering ---------------------------------------------------------------------------

    def spec(self, root: str, plan: ReleasePlan, values: dict[str, Any]) -> ReleaseSpec:
        rel = plan.release
        return ReleaseSpec(
            root=root,
            deployment=plan.deployment,
            name=plan.name,
            namespace=plan.namespace,
            source=plan.source,
            values=values,
            origin=plan.instance.helmfile.path,
            labels=plan.labels,
            json_patches=plan.json_patches,
            strategic_merge_patches=plan.strategic_merge_patches,
            remove_labels=list(rel.remove_labels),
            crds=rel.crds,
            hooks=rel.hooks,
            tests=rel.tests,
        )

    def render_files(self, root: str) -> dict[str, bytes]:
        """Every output file of `root`, in plaintext."""
        with helm.charts_unchanged():  # one root's releases share charts: fingerprint once
            return self._render(root, redact=False)[0]

    def render_redacted(self, root: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """(plaintext, redacted) output files of `root`; see shared.engine.atlas.secrets."""
        with helm.charts_unchanged():
            return self._render(root, redact=True)

    def _render(self, root: str, *, redact: bool) -> tuple[dict[str, bytes], dict[str, bytes]]:
        files: dict[str, bytes] = {}
        shown: dict[str, bytes] = {}
        owners: dict[str, str] = {}
        by_instance: dict[tuple[str, int], list[ReleasePlan]] = {}
        for plan in self.plans(root):
            key = (plan.instance.deployment.path, plan.instance.index)
            by_instance.setdefault(key, []).append(plan)
        for group in by_instance.values():
            rendered: list[tuple[ReleasePlan, ReleaseSpec, list[Resource]]] = []
            sources: list[atlas_secrets.Rendered] = []
            for plan in group:
                with self._naming(plan):
                    layers, values = self._layers(plan)
                    spec = self.spec(root, plan, values)
                    resources = render.render_release(spec, self.tree, self.config, self.resolver)
                rendered.append((plan, spec, resources))
                sources.append((plan, layers, values, resources))
            # Before the instance patches change the real objects: the perturbed twin.
            twins = atlas_secrets.taint_instance(self, root, sources) if redact else {}
            self._instance_patches(group[0].instance, [(p, r) for p, _, r in rendered])
            for plan, spec, resources in rendered:
                with self._naming(plan):
                    out = render.release_files(spec, resources, self.config)
                for path, data in out.items():
                    if path in files:
                        raise FleetError(
                            f"releases {owners[path]!r} and {plan.id!r} both write {path}",
                            path=plan.instance.helmfile.path,
                        )
                    files[path] = data
                    owners[path] = plan.id
                if redact:
                    for path, data in atlas_secrets.redacted_files(
                        out, twins.get(plan.id), plan.id
                    ).items():
                        shown[path if path not in shown else path + "~"] = data
        return dict(sorted(files.items())), dict(sorted(shown.items()))

    def secret_paths(self, root: str, release: str | None) -> set[tuple[str | int, ...]]:
        """Leaf paths of the release's values that hold or derive from a secret."""
        plan = self._plan(root, release)
        with self._naming(plan):
            layers, values = self._layers(plan)
            found = atlas_secrets.release_secrets(self, plan, layers, values)
        return found.paths if found is not None else set()

    def redacted_values(self, root: str, release: str | None) -> dict[str, Any]:
        """`values()` with secrets and secret-derived leaves redacted."""
        plan = self._plan(root, release)
        with self._naming(plan):
            layers, values = self._layers(plan)
            found = atlas_secrets.release_secrets(self, plan, layers, values)
        return atlas_secrets.redacted_values(found, values)

    def secret_values(self) -> list[Any]:
        """Every decrypted SOPS tree read so far (to keep plaintext out of error messages)."""
        return self.files.decrypted(default_decrypt)

    def _instance_patches(
        self, inst: InstancePlan, rendered: list[tuple[ReleasePlan, list[Resource]]]
    ) -> None:
        """`apps[].jsonPatches` / `strategicMergePatches`, after the template's own patches.

        They see the objects of all the instance's releases at once: a patch applies wherever
        it matches, and matching nothing in the whole instance is an error.
        """
        model = inst.instance
        if not model.jsonPatches and not model.strategicMergePatches:
            return
        objects = [res for _, resources in rendered for res in resources]
        for kind, entries in (
            ("jsonPatches", model.jsonPatches),
            ("strategicMergePatches", model.strategicMergePatches),
        ):
            strategic = kind == "strategicMergePatches"
            for j, entry in enumerate(entries):
                try:
                    patching.apply_release_patches(
                        objects,
                        [] if strategic else [entry],
                        [entry] if strategic else [],
                        origin=inst.deployment.path,
                    )
                except FleetError as err:
                    # "jsonPatches[0]: ..." from patching names the entry in a one-item list
                    message = err.problem.message.split(": ", 1)[-1]
                    raise FleetError(
                        f"{inst.where}.{kind}[{j}] (instance {model.instance_name!r}): {message}",
                        path=inst.deployment.path,
                        line=inst.deployment.line("apps", inst.index, kind, j),
                    ) from None
        kept = {id(res) for res in objects}  # `$patch: delete` removes objects
        for _, resources in rendered:
            resources[:] = [res for res in resources if id(res) in kept]

    # --- affected roots and validation -------------------------------------------------------

    def affected(self, changed: set[str]) -> set[str]:
        from shared.engine.atlas.affected import affected_roots

        return affected_roots(self, changed)

    def validate(self) -> list[Problem]:
        from shared.engine.atlas.validate import validate

        return validate(self)
