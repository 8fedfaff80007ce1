"""Finding an atlas fleet's clusters, groups and deployments from its directories.

A *leaf cluster* (a root) is a directory under `deployments/` that contains `apps/` and has no
descendant that does; every directory above it is a group. `apps/` directories themselves hold
deployments, never clusters, and `deployments/apps/` holds the global deployments.

Everything reads through `Tree`, and only the part of the tree asked for: affected-root
computation surveys one cluster's subtree, not the whole fleet.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from shared.engine.atlas.files import APPS, DEPLOYMENTS, TEMPLATES, join
from shared.engine.errors import FleetError, Problem
from shared.engine.tree import Tree


@dataclass(frozen=True)
class Cluster:
    """A leaf cluster: one render root."""

    id: str  # path under deployments/: "staging/cluster-a", "standalone"

    @property
    def name(self) -> str:
        return self.id.rsplit("/", 1)[-1]

    @property
    def group(self) -> str:
        """The group path ("staging", "eu/prod"), "" for a standalone cluster."""
        return self.id.rpartition("/")[0]

    @property
    def groups(self) -> tuple[str, ...]:
        """Group directories, outermost first: "eu/prod/c1" → ("eu", "eu/prod")."""
        parts = self.id.split("/")[:-1]
        return tuple("/".join(parts[: i + 1]) for i in range(len(parts)))

    @property
    def dir(self) -> str:
        return join(DEPLOYMENTS, self.id)


@dataclass(frozen=True)
class DeploymentDef:
    """A deployment directory `<scope>/apps/<name>/` at one level of the hierarchy."""

    name: str
    scope: str  # deployments-relative directory that owns the apps/ dir ("" = global)
    level: str  # "global", "group" or "cluster"

    @property
    def dir(self) -> str:
        return join(DEPLOYMENTS, self.scope, APPS, self.name)


def dpath(*parts: str) -> str:
    """Repo-relative path of a deployments-relative one."""
    return join(DEPLOYMENTS, *parts)


def subdirs(tree: Tree, rel: str) -> list[str]:
    """Deployments-relative child directories of `rel` that may hold clusters or groups."""
    base = dpath(rel)
    return [
        join(rel, name)
        for name in tree.listdir(base)
        if name != APPS and not name.startswith(".") and tree.is_dir(join(base, name))
    ]


def has_apps(tree: Tree, rel: str) -> bool:
    return tree.is_dir(dpath(rel, APPS))


@dataclass
class Survey:
    """What one walk of (part of) `deployments/` found."""

    dirs: list[str] = field(default_factory=list)  # every directory visited, parents first
    with_apps: list[str] = field(default_factory=list)  # directories containing apps/
    leaves: list[str] = field(default_factory=list)  # leaf clusters, sorted


def survey(tree: Tree, rel: str = "") -> Survey:
    """Walk `deployments/<rel>` (the whole of deployments/ for "")."""
    out = Survey()

    def visit(here: str) -> bool:
        out.dirs.append(here)
        below = False
        for child in subdirs(tree, here):
            below = visit(child) or below
        apps = has_apps(tree, here)
        if apps:
            out.with_apps.append(here)
        # deployments/apps is the global level, never a cluster
        if apps and here and not below:
            out.leaves.append(here)
        return (apps and bool(here)) or below

    if tree.is_dir(dpath(rel)):
        load = getattr(tree, "prefetch", None)  # GitTree: one git call for the subtree
        if load is not None:
            load(dpath(rel))
        visit(rel)
    out.leaves.sort()
    return out


def has_cluster_below(tree: Tree, rel: str, *, skip: str = "") -> bool:
    """Whether any directory strictly below `rel` (other than the subtree `skip`) has apps/.

    Stops at the first one found: a directory with apps/ always has a leaf at or below it.
    """
    for child in subdirs(tree, rel):
        if child == skip:
            continue
        if has_apps(tree, child) or has_cluster_below(tree, child):
            return True
    return False


def duplicate_names(leaves: list[str]) -> list[Problem]:
    """Leaf names must be unique: they name clusters in Argo CD and in the labels."""
    first: dict[str, str] = {}
    problems = []
    for leaf in sorted(leaves):
        name = leaf.rsplit("/", 1)[-1]
        if name in first:
            problems.append(
                Problem(
                    dpath(leaf),
                    None,
                    f"duplicate cluster name {name!r}: {dpath(first[name])} and {dpath(leaf)} "
                    "(leaf cluster names must be unique)",
                )
            )
        else:
            first[name] = leaf
    return problems


# ATLAS's entry point names the two directories (`atlas.appTemplates`,
# `atlas.deploymentDefinitions`); rollwright reads `templates/` and `deployments/`.
ENTRY_HELMFILES = ("helmfile.yaml.gotmpl", "helmfile.yaml")
_ENTRY_KEY = re.compile(r"^\s*(appTemplates|deploymentDefinitions):\s*['\"]?([^'\"\s#]+)", re.M)


def check_entry_helmfile(tree: Tree) -> None:
    """An ATLAS entry helmfile at the repository root that points ATLAS at other directories
    than the ones rollwright reads is refused: rendering would silently read others."""
    expected = {"appTemplates": TEMPLATES, "deploymentDefinitions": DEPLOYMENTS}
    for name in ENTRY_HELMFILES:
        if not tree.is_file(name):
            continue
        text = tree.read_text(name)
        for match in _ENTRY_KEY.finditer(text):
            key, value = match.group(1), match.group(2).strip("/")
            if value != expected[key]:
                raise FleetError(
                    f"atlas.{key} is {value!r}: rollwright reads {expected[key]}/ (move the "
                    "directory, or render with ATLAS itself)",
                    path=name,
                    line=text.count("\n", 0, match.start()) + 1,
                )


def clusters(tree: Tree, found: Survey | None = None) -> list[Cluster]:
    """Every leaf cluster, sorted by id; duplicate leaf names are an error. `found`: the
    survey of the whole of deployments/ when the caller has it."""
    leaves = (found or survey(tree)).leaves
    problems = duplicate_names(leaves)
    if problems:
        raise FleetError(problems[0].message, path=problems[0].path)
    return [Cluster(leaf) for leaf in leaves]


def deployment_defs(
    tree: Tree,
    cluster: Cluster,
    groups: tuple[str, ...] | None = None,
    dirs: Callable[[str], list[str]] | None = None,
) -> dict[str, DeploymentDef]:
    """The deployments of a cluster from the global level, `groups` (default: every group
    above it) and its own; the most specific definition of a name wins wholesale. `dirs`
    lists a scope's deployment directories (default: `deployment_dirs` of `tree`; a planner
    keeps them, the global and group scopes being shared by many clusters)."""
    found: dict[str, DeploymentDef] = {}
    inner = cluster.groups if groups is None else groups
    scopes = [("", "global")] + [(g, "group") for g in inner] + [(cluster.id, "cluster")]
    for scope, level in scopes:
        for name in dirs(scope) if dirs is not None else deployment_dirs(tree, scope):
            found[name] = DeploymentDef(name, scope, level)
    return dict(sorted(found.items()))


def deployment_dirs(tree: Tree, scope: str) -> list[str]:
    """The deployment directories in the apps/ of `scope` (a group or cluster id, "" for
    the global level), sorted."""
    apps = dpath(scope, APPS)
    return [
        name
        for name in tree.listdir(apps)
        if not name.startswith(".") and tree.is_dir(join(apps, name))
    ]
