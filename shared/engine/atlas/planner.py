"""Planning an atlas root: the parsed files and resolved releases it is rendered from.

`Planner` builds these per root (the plans are `shared.engine.atlas.plans`): a
`LoadedDeployment` per deployment.yaml, an `InstancePlan` per enabled `apps:` entry (its
environment and rendered helmfile) and a `ReleasePlan` per template release (name, namespace,
labels, and what the release reads through `shared.engine.atlas.releases`: chart source, values
sources, patches), then the release's value layers (`resolve_values`, through
`shared.engine.atlas.values`) and its `ReleaseSpec` for `shared.engine.render`. Everything read
is cached for one revision: the layout, secrets, validation and affected-roots modules all plan
through one `Planner`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shared.engine import render, suggest, yamldoc
from shared.engine.atlas.discovery import (
    Cluster,
    DeploymentDef,
    Survey,
    check_entry_helmfile,
    clusters,
    deployment_defs,
    deployment_dirs,
    dpath,
    survey,
)
from shared.engine.atlas.files import (
    CLUSTER_STEM,
    DEPLOYMENT_FILE,
    DEPLOYMENT_STEM,
    DEPLOYMENTS,
    GLOBAL_STEM,
    GROUP_STEM,
    HELMFILES,
    TEMPLATES,
    AppInstance,
    DeploymentFile,
    HelmfileTemplate,
    HelmRelease,
    join,
    resolve_path,
)
from shared.engine.atlas.plans import (
    Helmfile,
    InstancePlan,
    LoadedDeployment,
    ReleaseParts,
    ReleasePlan,
)
from shared.engine.atlas.releases import ReleaseReader, oci_url
from shared.engine.atlas.values import (
    Decrypt,
    Layer,
    LevelSource,
    ValueFiles,
    default_decrypt,
    environment,
    final_layers,
    jsonable,
    merge_into,
    with_atlas,
)
from shared.engine.config.atlas import Capabilities
from shared.engine.config.fleet import FleetConfig
from shared.engine.config.parsing import parse_model
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.helm import engine, memo
from shared.engine.release import ChartSource, ReleaseSpec, Repository
from shared.engine.tree import GitError, Tree
from shared.engine.values import deep_merge


class _LocalCharts(render.ChartResolver):
    """Each local chart looked up once per layout (a layout reads one revision), not once
    per release; remote charts go through their own cache as before."""

    def __init__(self) -> None:
        self._found: dict[str, Path] = {}
        self._dirs: dict[Path, bool] = {}

    def resolve(
        self, source: ChartSource, tree: Tree, origin: str, line: int | None = None
    ) -> Path:
        if source.kind == "remote-chart":
            return super().resolve(source, tree, origin, line)
        found = self._found.get(source.path)
        if found is None:
            found = self._found[source.path] = super().resolve(source, tree, origin, line)
        return found

    def is_directory(self, path: Path) -> bool:
        found = self._dirs.get(path)
        if found is None:
            found = self._dirs[path] = path.is_dir()
        return found


class Planner:
    """Plans the releases of an atlas fleet at one revision, caching what it reads."""

    def __init__(self, tree: Tree, config: FleetConfig) -> None:
        # Nothing is read here: `roots --changed` must stay cheap on a 10,000-root fleet.
        self.tree = tree
        self.config = config
        self.files = ValueFiles(tree, config.atlas.env)
        self.resolver = _LocalCharts()
        self._clusters: dict[str, Cluster] | None = None
        self._survey: Survey | None = None
        self._deployments: dict[str, LoadedDeployment] = {}
        self._helmfiles: dict[tuple[str, str], Helmfile] = {}
        self.releases = ReleaseReader(tree, self.files)
        self._environments: dict[tuple[LevelSource, ...], tuple[dict[str, Any], list[Layer]]] = {}
        self._chart_defaults: dict[ChartSource, dict[str, Any]] = {}
        self._last_plans: tuple[str, list[ReleasePlan]] | None = None
        self._deployment_dirs: dict[str, list[str]] = {}  # scope → `deployment_dirs`

    def clusters(self) -> dict[str, Cluster]:
        if self._clusters is None:
            check_entry_helmfile(self.tree)
            self._clusters = {c.id: c for c in clusters(self.tree, self.survey())}
        return self._clusters

    def survey(self) -> Survey:
        """The walk of the whole of deployments/ (discovery and validation share it)."""
        if self._survey is None:
            self._survey = survey(self.tree)
        return self._survey

    def roots(self) -> list[str]:
        return list(self.clusters())

    def cluster(self, root: str) -> Cluster:
        found = self.clusters().get(root)
        if found is None:
            hint = suggest.hint(root, self.clusters())
            raise FleetError(f"unknown root {root!r}{hint}; `rollwright roots` lists them")
        return found

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
        if "{{" in text and any(
            isinstance(leaf, str) and "{{" in leaf for _, leaf in yamldoc.walk_leaves(data)
        ):
            # ATLAS renders deployment.yaml as a Go template; rollwright reads it as data, so
            # `"{{ ... }}"` would silently stay literal text.
            raise FleetError(
                "deployment.yaml is read as plain YAML: Go templates in it are not supported "
                "(put computed values in values.yaml.gotmpl)",
                path=path,
                line=next(
                    (
                        i
                        for i, ln in enumerate(text.splitlines(), 1)
                        if "{{" in ln and not ln.lstrip().startswith("#")
                    ),
                    None,
                ),
            )
        if not isinstance(data, dict):
            raise FleetError(
                f"expected a mapping at the top level, found {yamldoc.type_name(data)}",
                path=path,
                line=1,
            )
        model = parse_model(DeploymentFile, jsonable(data), text=text, source=path)
        given = model.settings.get("namespace")
        if model.namespace and given not in (None, "") and str(given) != model.namespace:
            raise FleetError(
                f"namespace {model.namespace!r} and settings.namespace {given!r} differ: they "
                "are the same setting (ATLAS spells it settings.namespace)",
                path=path,
                line=yamldoc.key_line(text, ("namespace",)),
            )
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
            if self.helmfile_path(inst.template) is None:
                problems.append(
                    Problem(
                        loaded.path,
                        loaded.line("apps", i, "template"),
                        f"{where}: template {inst.template!r} not found (no "
                        f"{TEMPLATES}/{inst.template}/{HELMFILES[0]} or {HELMFILES[1]})"
                        + suggest.hint(inst.template, self.template_names()),
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

    def template_names(self) -> list[str]:
        """The app templates the fleet has (directories of templates/ with a helmfile)."""
        if not self.tree.is_dir(TEMPLATES):
            return []
        return [t for t in self.tree.listdir(TEMPLATES) if self.helmfile_path(t) is not None]

    def helmfile_path(self, template: str) -> str | None:
        directory = join(TEMPLATES, template)
        for name in HELMFILES:
            if self.files.exists(join(directory, name)):
                return join(directory, name)
        return None

    def groups(self, cluster: Cluster) -> tuple[str, ...]:
        """The group directories whose group.values.* and apps/ a cluster reads: its parent
        directory (ATLAS), or every directory above it (`atlas.groupValues: all`)."""
        if self.config.atlas.group_values == "all" or not cluster.group:
            return cluster.groups
        return (cluster.group,)

    def _instances(self, cluster: Cluster) -> Iterator[InstancePlan]:
        defs = deployment_defs(self.tree, cluster, self.groups(cluster), self._scope_dirs)
        for defn in defs.values():
            loaded = self.deployment(defn)
            for index, inst in enumerate(loaded.model.apps):
                if not inst.disabled:
                    yield self._instance(cluster, loaded, index, inst)

    def _scope_dirs(self, scope: str) -> list[str]:
        found = self._deployment_dirs.get(scope)
        if found is None:
            found = self._deployment_dirs[scope] = deployment_dirs(self.tree, scope)
        return found

    def _levels(self, cluster: Cluster, defn: DeploymentDef) -> list[LevelSource]:
        files = self.files
        levels = [LevelSource("global", files.level_files(DEPLOYMENTS, GLOBAL_STEM))]
        for group in self.groups(cluster):
            levels.append(LevelSource("group", files.level_files(dpath(group), GROUP_STEM)))
        levels.append(LevelSource("cluster", files.level_files(cluster.dir, CLUSTER_STEM)))
        levels.append(LevelSource("deployment", files.level_files(defn.dir, DEPLOYMENT_STEM)))
        return [level for level in levels if level.files]

    def _instance(
        self, cluster: Cluster, loaded: LoadedDeployment, index: int, inst: AppInstance
    ) -> InstancePlan:
        namespace = inst.namespace or loaded.model.settings_namespace
        atlas = atlas_metadata(cluster, loaded, inst, namespace)
        levels = self._levels(cluster, loaded.defn)
        env, env_layers = self._environment(levels, atlas)
        context = helmfile_context(inst, env)
        helmfile = self._helmfile(inst.template, context, atlas, loaded, index)
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
        path = self.helmfile_path(template)
        if path is None:  # checked with the deployment; kept for a clear message anyway
            raise FleetError(
                f"apps[{index}]: template {template!r} not found"
                + suggest.hint(template, self.template_names()),
                path=loaded.path,
                line=loaded.line("apps", index, "template"),
            )
        source = self.files.text(path)
        if not path.endswith(".gotmpl"):
            return self.parse_helmfile(template, path, source, source)
        # Cached by the values the template reads: instances often render it alike.
        host = self.files.host(default_decrypt)
        text = memo.render(source, with_atlas(env, atlas), source=path, host=host)
        if host.secret_reads:
            # As in ATLAS, whose app templates are rendered without secrets: what a helmfile
            # derives from one would leave the values that redaction follows.
            raise FleetError(
                "fetchSecretValue in an app template is not supported: read secrets in a "
                "values file (secrets:, or a values template), whose values are redacted",
                path=path,
            )
        return self.parse_helmfile(template, path, source, text)

    def parse_helmfile(self, template: str, path: str, source: str, text: str) -> Helmfile:
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
            labels = {
                **hf.model.commonLabels,
                **rel.labels,
                **inst.instance.labels,
                **inst.atlas["labels"],
            }
            parts = self.release_parts(hf, i)
            yield ReleasePlan(
                id=f"{inst.deployment.defn.name}/{name}",
                name=name,
                namespace=self.namespace(inst, rel),
                labels=labels,
                source=parts.source,
                index=i,
                release=rel,
                instance=inst,
                template_values=parts.template_values,
                template_secrets=parts.template_secrets,
                json_patches=parts.json_patches,
                strategic_merge_patches=parts.strategic_merge_patches,
                json_patch_origins=parts.json_patch_origins,
                strategic_patch_origins=parts.strategic_patch_origins,
                overrides=parts.overrides,
            )

    def namespace(self, inst: InstancePlan, rel: HelmRelease) -> str:
        """`apps[].namespace`, else `settings.namespace`, else the template release's, else
        the deployment name (where ATLAS's ApplicationSet sends objects without one); with
        `atlas.namespaces: template-first` the template release's comes first."""
        if self.config.atlas.namespaces == "template-first":
            found = rel.namespace or inst.namespace
        else:
            found = inst.namespace or rel.namespace
        return found or inst.deployment.defn.name

    def release_parts(self, hf: Helmfile, i: int) -> ReleaseParts:
        """What release `i` of a rendered helmfile reads, whichever instance rendered it."""
        return self.releases.parts(hf, i)

    def chart_defaults(self, plan: ReleasePlan) -> dict[str, Any]:
        source = plan.source
        if source.kind not in ("chart", "remote-chart"):
            return {}
        cached = self._chart_defaults.get(source)
        if cached is None:
            origin = plan.instance.helmfile.path
            if source.kind == "remote-chart":
                path = self.resolver.resolve(source, self.tree, origin)
                cached = engine.chart_defaults(path, source.describe())
            else:
                try:
                    cached = engine.chart_defaults(self.tree.local_path(source.path), source.path)
                except GitError:
                    # A git revision without a checkout: read the chart's values.yaml in place.
                    values = join(source.path, "values.yaml")
                    cached = self.files.plain(values) if self.files.exists(values) else {}
            self._chart_defaults[source] = cached
        return cached

    def resolve_values(
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
            chart=self.chart_defaults(plan),
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
            overrides=plan.overrides,
            atlas=inst.atlas,
            decrypt=decrypt or default_decrypt,
        )

    def plan(self, root: str, release: str | None) -> ReleasePlan:
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
        hint = suggest.hint(release, [p.id for p in plans])
        raise FleetError(
            f"root {root!r} has no release {release!r}{hint}; its releases: {ids or '-'}"
        )

    @contextmanager
    def naming(self, plan: ReleasePlan) -> Iterator[None]:
        """Fleet errors raised inside name the release."""
        try:
            yield
        except FleetErrors:
            raise
        except FleetError as err:
            if err.problem.message.startswith(f"release {plan.id!r}"):
                raise  # it names the release already (shared.engine.render)
            raise err.within(f'release "{plan.id}"') from None

    def capabilities(self, plan: ReleasePlan) -> tuple[str | None, tuple[str, ...]]:
        """`.Capabilities` of a release, most specific first: the release's `kubeVersion` /
        `apiVersions`, its template's (helmfile's top level), the last `atlas.clusters` entry
        matching the root, then rollwright.yaml's `atlas.capabilities`. Each key is taken
        whole from the first level that sets it (a list is replaced, not merged)."""
        root = plan.instance.cluster.id
        atlas = self.config.atlas
        clusters = [c for c in atlas.clusters if any(fnmatch.fnmatchcase(root, g) for g in c.roots)]
        levels: list[Capabilities] = [plan.release, plan.instance.helmfile.model]
        levels += clusters[-1:]
        levels.append(atlas.capabilities)
        kube = next((c.kube_version for c in levels if c.kube_version is not None), None)
        apis = next((c.api_versions for c in levels if c.api_versions is not None), None)
        return kube, tuple(apis or ())

    def spec(self, root: str, plan: ReleasePlan, values: dict[str, Any]) -> ReleaseSpec:
        rel = plan.release
        model = plan.instance.helmfile.model
        defaults = model.helmDefaults
        kube_version, api_versions = self.capabilities(plan)
        skip_schema = rel.skipSchemaValidation
        if skip_schema is None:
            skip_schema = defaults.skipSchemaValidation
        return ReleaseSpec(
            root=root,
            deployment=plan.deployment,
            name=plan.name,
            namespace=plan.namespace,
            source=plan.source,
            values=values,
            origin=plan.instance.helmfile.path,
            origin_line=plan.instance.helmfile.line(("releases", plan.index)),
            labels=plan.labels,
            json_patches=plan.json_patches,
            strategic_merge_patches=plan.strategic_merge_patches,
            json_patch_origins=plan.json_patch_origins,
            strategic_patch_origins=plan.strategic_patch_origins,
            remove_labels=list(rel.remove_labels),
            crds=rel.crds,
            hooks=rel.hooks,
            tests=rel.tests,
            kube_version=kube_version,
            api_versions=api_versions,
            # ATLAS defaults it to true: it injects `atlas` and the hierarchy into every
            # release, which strict chart schemas reject. An explicit false validates.
            skip_schema_validation=True if skip_schema is None else skip_schema,
            skip_deps=bool(rel.skipDeps if rel.skipDeps is not None else defaults.skipDeps),
            repositories=tuple(
                Repository(r.name, oci_url(r.url) if r.oci else r.url, r.plainHttp)
                for r in model.repositories
            ),
        )


def release_name(instance: AppInstance, style: str, release: str) -> str:
    """The release name on the cluster: the template's name, munged with the instance name
    unless the instance is unnamed (named after its template) or named like the release."""
    name = instance.instance_name
    if instance.name is None or name in (instance.template, release):
        return release
    return f"{name}-{release}" if style == "prefix" else f"{release}-{name}"


def patch_shape_problem(entry: dict[str, Any], *, strategic: bool) -> str | None:
    if strategic:
        meta = entry.get("metadata")
        if not entry.get("kind") or not isinstance(meta, dict) or not meta.get("name"):
            return "a strategic merge patch needs kind and metadata.name"
        return None
    if not isinstance(entry.get("target"), dict) or not isinstance(entry.get("patch"), list):
        return "a JSON patch needs a 'target' mapping and a 'patch' list"
    return None


def atlas_metadata(
    cluster: Cluster, loaded: LoadedDeployment, inst: AppInstance, namespace: str | None
) -> dict[str, Any]:
    """The `atlas` keys rollwright sets: ATLAS's own, exactly as ATLAS documents them
    (`cwd`, `appTemplates`, `deploymentDefinitions`, `deployment.*`, `instance.{template,
    name}`), and rollwright's beside them (`cluster`, `labels`, `instance.variant`,
    `instance.namespace`). Paths are repository-relative, `cwd` is `.` (docs/decisions.md)."""
    deployment = {"cluster": cluster.id, "clusterName": cluster.name}
    if cluster.group:  # ATLAS leaves the key out for standalone clusters
        deployment["clusterGroup"] = cluster.group
    deployment["deploymentName"] = loaded.defn.name
    deployment["deploymentPath"] = loaded.path
    labels: dict[str, str] = {
        key: deployment[key]
        for key in ("cluster", "clusterName", "clusterGroup")
        if key in deployment
    }
    labels |= {
        "deploymentName": loaded.defn.name,
        "template": inst.template,
        "instance": inst.instance_name,
        "variant": inst.variant,
    }
    instance = {"template": inst.template, "name": inst.instance_name, "variant": inst.variant}
    if namespace:
        instance["namespace"] = namespace
    return {
        "cwd": ".",
        "appTemplates": TEMPLATES,
        "deploymentDefinitions": DEPLOYMENTS,
        "deployment": deployment,
        "instance": instance,
        "cluster": {"id": cluster.id, "name": cluster.name, "group": cluster.group},
        "labels": labels,
    }


def helmfile_context(inst: AppInstance, env: dict[str, Any]) -> dict[str, Any]:
    """What an app template is rendered with (besides `atlas`): as in ATLAS, the hierarchy
    with the instance's inline values under it (the hierarchy wins)."""
    listed = inst.values if isinstance(inst.values, list) else [inst.values]
    inline = [data for data in listed if data]
    if not inline:
        return env
    context = deep_merge(env, {})
    for data in inline:
        merge_into(context, jsonable(data))
    merge_into(context, env)
    return context
