"""`rollwright validate` for the atlas layout: every problem, one `path:line: message` each.

First the structure (names, misplaced values files, deployment.yaml schemas, instances,
templates), then, when that is sound, every root's releases are planned and their values
computed, which surfaces template, chart and values-file errors. Rendering the charts is left
to `shared.engine.validate`.
"""

from __future__ import annotations

from shared.engine import yamldoc
from shared.engine.atlas.discovery import DeploymentDef, dpath, duplicate_names
from shared.engine.atlas.files import (
    APPS,
    CLUSTER_FILES,
    DEPLOYMENT_STEM,
    DEPLOYMENTS,
    GLOBAL_FILES,
    GROUP_FILES,
    HELMFILES,
    TEMPLATES,
    join,
    level_names,
)
from shared.engine.atlas.planner import Planner
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.tree import Tree


def _problems_of(err: FleetError) -> list[Problem]:
    return list(err.problems) if isinstance(err, FleetErrors) else [err.problem]


def validate(planner: Planner) -> list[Problem]:
    problems = structure(planner)
    if problems:
        # Planning a broken structure would repeat the same problems once per root.
        return sorted(set(problems))
    for root in planner.roots():
        try:
            for plan in planner.plans(root):
                try:
                    planner.resolve_values(plan)
                except FleetError as err:
                    problems.extend(_problems_of(err))
        except FleetError as err:
            problems.extend(_problems_of(err))
    return sorted(set(problems))


def structure(planner: Planner) -> list[Problem]:
    tree, files = planner.tree, planner.files
    found = planner.survey()
    problems = duplicate_names(found.leaves)
    leaves = set(found.leaves)
    # every directory above a leaf is a group
    groups = {
        "/".join(leaf.split("/")[:i])
        for leaf in found.leaves
        for i in range(1, leaf.count("/") + 1)
    }

    for here in found.dirs:
        directory = dpath(here)
        for name in sorted(files.listing(directory)):
            rel = join(directory, name)
            message = _misplaced(here, name, leaves, groups)
            if message:
                problems.append(Problem(rel, None, message))
            elif name.endswith(".yaml") and (name in GLOBAL_FILES | GROUP_FILES | CLUSTER_FILES):
                problems.extend(_yaml_problems(planner, rel))

    for scope in found.with_apps:
        level = "global" if not scope else "cluster" if scope in leaves else "group"
        apps = dpath(scope, APPS)
        for name in tree.listdir(apps):
            if name.startswith(".") or not tree.is_dir(join(apps, name)):
                continue
            defn = DeploymentDef(name, scope, level)
            try:
                planner.deployment(defn)
            except FleetError as err:
                problems.extend(_problems_of(err))
            for values in level_names(DEPLOYMENT_STEM):
                if values.endswith(".yaml") and files.exists(join(defn.dir, values)):
                    problems.extend(_yaml_problems(planner, join(defn.dir, values)))

    for template in tree.listdir(TEMPLATES):
        directory = join(TEMPLATES, template)
        if template.startswith(".") or not tree.is_dir(directory):
            continue
        path = planner.helmfile_path(template)
        if path is None:
            problems.append(
                Problem(directory, None, f"template without {HELMFILES[0]} or {HELMFILES[1]}")
            )
        elif not path.endswith(".gotmpl"):
            try:
                text = files.text(path)
                planner.parse_helmfile(template, path, text, text)
            except FleetError as err:
                problems.extend(_problems_of(err))
    return problems


def touches(tree: Tree, problem: Problem, root: str) -> bool:
    """Whether a `structure` problem concerns `root`: it lies in the root's directory or a
    directory above it, or outside deployments/ (a template: any root may use it)."""
    if not problem.path.startswith(DEPLOYMENTS + "/"):
        return True
    parts = problem.path.split("/")[1:]
    if APPS in parts:
        parts = parts[: parts.index(APPS)]
    elif tree.is_file(problem.path):
        parts = parts[:-1]
    where = "/".join(parts)
    return (
        not where
        or root == where
        or f"{root}/".startswith(f"{where}/")
        or where.startswith(f"{root}/")
    )


def _yaml_problems(planner: Planner, rel: str) -> list[Problem]:
    """Syntax (and, for plain files, top-level mapping) of a values file."""
    try:
        if rel.endswith(".sops.yaml"):
            yamldoc.loads(planner.files.text(rel), rel)  # decrypting is the render's job
        else:
            planner.files.plain(rel)
    except FleetError as err:
        return _problems_of(err)
    return []


def _misplaced(here: str, name: str, leaves: set[str], groups: set[str]) -> str | None:
    """Why a level values file in deployments/<here> is never read, or None when it is."""
    where = dpath(here)
    if name in GLOBAL_FILES:
        return None if not here else f"{name} is only read at {DEPLOYMENTS}/{name}"
    if name in GROUP_FILES:
        if here in groups:
            return None
        if here in leaves:
            return f"{name} is never read: {where} is a leaf cluster (use cluster.values.*)"
        if not here:
            return f"{name} is never read at the top of {DEPLOYMENTS}/ (use global.values.*)"
        return f"{name} is never read: {where} has no clusters below it"
    if name in CLUSTER_FILES:
        if here in leaves:
            return None
        if here in groups:
            return (
                f"{name} is never read: {where} is a group (it has clusters below it); "
                "use group.values.*"
            )
        if not here:
            return f"{name} is never read at the top of {DEPLOYMENTS}/ (use global.values.*)"
        return (
            f"{where} has {name} but no {APPS}/ directory, so it is not a cluster and the "
            "file is never read"
        )
    return None
