"""Publishing commodore catalogs in tests: the fixture tenant (tests/support/commodore_tenant.py)
as a fleet whose rollwright.yaml reads its clusters from the dev stack's fake Lieutenant and
publishes with `publish.target: catalog`, the publish activity wired to a worker's mirror, and
the clusters' catalog repositories reached at https URLs that git rewrites to local bare
repositories (`url.<path>.insteadOf`, through GIT_CONFIG_GLOBAL), as a real host would be."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.testing import ActivityEnvironment

from activities.joblog import JobLog
from activities.publish import BUILD_INFO, BlobPublisher, PublishActivities, PublishTargets
from activities.publish_catalog import CatalogPublisher, PullOpener
from activities.publish_git import GitPublisher
from activities.render import render_checkout
from shared.contracts.deploy import PublishRequest, PublishResult, RepoRef
from shared.devstack.gitremotes import write_gitconfig
from shared.devstack.lieutenant import FakeLieutenant
from shared.stores.blob import FileBlobStore
from shared.stores.gitmirror import GitMirror
from tests.support.commodore import publish
from tests.support.commodore_tenant import Tenant, build_tenant
from tests.support.gitrepo import commit_all, git

TOKEN = "test-token"  # the one compile_with_commodore sends
CATALOG_HOST = "https://git.example.test/syn"
GITHUB = "https://github.example"
CLUSTERS = ("c-one", "c-two", "c-three")  # c-three: a configuration package


def catalog_url(cluster: str) -> str:
    return f"{CATALOG_HOST}/catalog-{cluster}.git"


@dataclasses.dataclass
class CatalogWorld:
    tenant: Tenant
    lieutenant: FakeLieutenant
    ref: RepoRef
    mirror: GitMirror
    blobs: FileBlobStore
    activities: PublishActivities
    gitconfig: Path
    rewrites: dict[str, Path]  # URL → local bare repository
    env: ActivityEnvironment = dataclasses.field(default_factory=ActivityEnvironment)

    def catalog(self, cluster: str) -> Path:
        return self.rewrites[catalog_url(cluster)]

    def rewrite(self, url: str, bare: Path) -> None:
        self.rewrites[url] = bare
        write_gitconfig(self.gitconfig, self.rewrites)

    def commit(self, files: dict[str, str], message: str = "change") -> str:
        for rel, text in files.items():
            (self.tenant.checkout / rel).write_text(text)
        sha = commit_all(self.tenant.checkout, message)
        publish(self.tenant.checkout, self.tenant.remotes)  # Lieutenant's tenant URL
        return sha

    def request(self, cluster: str, deployment: str) -> PublishRequest:
        revision = git(self.tenant.checkout, "rev-parse", "HEAD")
        return PublishRequest(
            repo=self.ref,
            root=cluster,
            revision=revision,
            deployment_id=deployment,
            trigger="merge",
            approved_by="@ana",
            blob_prefix=f"renders/acme/fleet/{cluster}/{revision}/",
            render_digest=render_checkout(self.tenant.checkout, cluster).digest,
        )

    def publish(self, request: PublishRequest) -> PublishResult:
        result: PublishResult = asyncio.run(self.env.run(self.activities.publish, request))
        return result


def fleet_config(lieutenant_url: str, publish_settings: dict[str, Any]) -> str:
    config = {
        "layout": "commodore",
        "commodore": {
            "lieutenant": {"url": lieutenant_url},
            "tenant": {"id": "t-acme"},
            "clusters": list(CLUSTERS),
        },
        "publish": {"target": "catalog", **publish_settings},
    }
    return yaml.safe_dump(config, sort_keys=False)


def catalog_world(
    base: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    publish_settings: dict[str, Any] | None = None,
    open_pull: PullOpener | None = None,
    github_catalogs: bool = False,
) -> CatalogWorld:
    """The tenant with its Lieutenant (started; the caller stops it), its catalog repositories
    at CATALOG_HOST (or, `github_catalogs`, as repositories of the fleet's owner on the
    worker's GitHub) and a worker that publishes from it."""
    tenant = build_tenant(base / "tenant")
    gitconfig = base / "gitconfig"
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("COMMODORE_API_TOKEN", TOKEN)
    rewrites: dict[str, Path] = {}
    clusters = {}
    for cluster in CLUSTERS:
        url = f"{GITHUB}/acme/catalog-{cluster}.git" if github_catalogs else catalog_url(cluster)
        bare = Path(tenant.urls[f"catalog-{cluster}"].removeprefix("file://"))
        rewrites[url] = bare
        rewrites.setdefault(catalog_url(cluster), bare)
        clusters[cluster] = {**tenant.clusters[cluster], "gitRepo": {"url": url}}
    write_gitconfig(gitconfig, rewrites)
    lieutenant = FakeLieutenant(token=TOKEN, clusters=clusters, tenants=tenant.tenants).start()
    # the operator's Lieutenant: the only URL the token goes to (rollwright.yaml repeats it)
    monkeypatch.setenv("COMMODORE_API_URL", lieutenant.url)
    settings = publish_settings or {}
    (tenant.checkout / "rollwright.yaml").write_text(fleet_config(lieutenant.url, settings))
    commit_all(tenant.checkout, "publish catalogs")
    publish(tenant.checkout, tenant.remotes)

    def remote_for(ref: RepoRef) -> str:
        if ref.full_name == "acme/fleet":
            return str(tenant.checkout)
        return f"{GITHUB}/{ref.owner}/{ref.name}.git"

    state = base / "worker"
    mirror = GitMirror(state / "git", remote_for=remote_for)
    blobs = FileBlobStore(state / "blobs")
    publisher = GitPublisher(state / "git" / "publish")
    catalog = CatalogPublisher(
        publisher, blobs, remote_for=remote_for, open_pull=open_pull, build_info=BUILD_INFO
    )
    targets = PublishTargets(mirror=mirror, blobs=blobs, git=publisher, catalog=catalog)
    activities = PublishActivities(BlobPublisher(blobs), JobLog(blobs), targets=targets)
    ref = RepoRef(
        owner="acme",
        name="fleet",
        installation_id=7,
        clone_url=str(tenant.checkout),
        default_branch="main",
    )
    return CatalogWorld(tenant, lieutenant, ref, mirror, blobs, activities, gitconfig, rewrites)


def catalog_files(bare: Path, ref: str = "main") -> dict[str, bytes]:
    """Every file of `ref` in a catalog repository: path → bytes."""
    names = [n for n in git(bare, "ls-tree", "-r", "--name-only", ref).splitlines() if n]
    return {name: git_bytes(bare, f"{ref}:{name}") for name in names}


def git_bytes(repo: Path, spec: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), "show", spec], check=True, capture_output=True
    ).stdout


def commit_message(repo: Path, ref: str = "main") -> str:
    """The exact message of the commit `ref` names (`git cat-file`, nothing added)."""
    raw = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "commit", ref], check=True, capture_output=True
    ).stdout.decode()
    return raw.partition("\n\n")[2]
