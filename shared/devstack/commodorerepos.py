"""The repositories a commodore tenant needs besides itself, for the demo and its test: made from
the example folders beside the tenant (`examples/commodore-tenant-repos/` for
`examples/commodore-tenant/`), as fleetrepo makes the fleet repository:

- `global/` → the global defaults repository `commodore-global` (branch main);
- `component-<name>/` → the component's repository, tagged `v1.0.0`;
- `lieutenant.yaml` → what Lieutenant answers for the tenant and its clusters, and for each
  cluster a bare catalog repository `catalog-<id>.git` holding a README (a catalog repository
  Lieutenant made, which a publish keeps).

`@REPOS@` in any of these files stands for where the repositories are served (the emulator's
`<url>/<owner>`), filled in as they are made."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shared.devstack import fleetrepo

PLACEHOLDER = "@REPOS@"
REPOS_SUFFIX = "-repos"
COMPONENT_TAG = "v1.0.0"
GLOBAL_NAME = "commodore-global"
LIEUTENANT_FILE = "lieutenant.yaml"


def repos_dir(tenant: Path) -> Path:
    """Where the example folders of a tenant's other repositories are."""
    return tenant.with_name(tenant.name + REPOS_SUFFIX)


@dataclass
class CommodoreRepos:
    """Repository name → its local git directory (work trees; catalogs are bare)."""

    repositories: dict[str, Path] = field(default_factory=dict)
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)  # Lieutenant's Cluster
    tenants: dict[str, dict[str, Any]] = field(default_factory=dict)  # Lieutenant's Tenant


def create_commodore_repos(source: Path, dest: Path, served_at: str) -> CommodoreRepos:
    """Make every repository of `source` (an examples `*-repos` folder) under `dest`;
    `served_at` replaces `@REPOS@`."""
    if not (source / LIEUTENANT_FILE).is_file():
        raise FileNotFoundError(f"{source / LIEUTENANT_FILE} is missing")
    made = CommodoreRepos()
    for folder in sorted(p for p in source.iterdir() if p.is_dir()):
        if folder.name == "global":
            name = GLOBAL_NAME
        elif folder.name.startswith("component-"):
            name = folder.name
        else:
            continue
        repo = dest / name
        shutil.copytree(folder, repo)
        _fill_in(repo, served_at)
        fleetrepo.git(repo, "init", "-q", "-b", "main")
        fleetrepo.commit_all(repo, f"{name} from example")
        if name != GLOBAL_NAME:
            fleetrepo.git(repo, "tag", COMPONENT_TAG)
        made.repositories[name] = repo
    answers = yaml.safe_load((source / LIEUTENANT_FILE).read_text().replace(PLACEHOLDER, served_at))
    made.tenants = dict(answers.get("tenants") or {})
    made.clusters = dict(answers.get("clusters") or {})
    for cluster in sorted(made.clusters):
        name = f"catalog-{cluster}"
        made.repositories[name] = _catalog_repo(dest, name, cluster)
    return made


def _fill_in(repo: Path, served_at: str) -> None:
    for path in repo.rglob("*"):
        if path.is_file():
            text = path.read_text()
            if PLACEHOLDER in text:
                path.write_text(text.replace(PLACEHOLDER, served_at))


def _catalog_repo(dest: Path, name: str, cluster: str) -> Path:
    """A bare catalog repository (pushed to) with one commit: its README."""
    work = dest / f"{name}.init"
    work.mkdir(parents=True)
    (work / "README.md").write_text(f"# Catalog of cluster {cluster}\n")
    fleetrepo.git(work, "init", "-q", "-b", "main")
    fleetrepo.commit_all(work, "Initial commit")
    bare = dest / f"{name}.git"
    fleetrepo.git(dest, "clone", "-q", "--bare", str(work), str(bare))
    shutil.rmtree(work)
    return bare
