"""Publishing a commodore cluster's catalog to its catalog repository, as Commodore pushes it,
then reporting the compile to Lieutenant (`publish.target: catalog`, docs/formats/commodore.md).

The catalog repository is the cluster's (`gitRepo.url` from Lieutenant, or `catalogUrl` in
rollwright.yaml). Per publish:

1. the target branch: the repository's default branch (`git ls-remote --symref`), or with
   `publish.catalog.mode: pull-request` the branch `publish.catalog.branch`, started from the
   default branch's tip;
2. done when that branch already holds this deployment's commit (its trailer
   `Rollwright-Deployment: <id>`): compileMeta is reported again (the attempt that pushed may
   have died before reporting) with the body stored before the push, and nothing is committed;
3. the cluster is compiled again on this worker (the reviewed render's digest is checked, as
   for every plaintext target), `manifests/` and `refs/` of the branch tip are replaced by the
   catalog, every other file of the repository (a README) kept, as Commodore keeps them;
4. nothing changed: no commit, no report (as Commodore: it pushes and reports only changes);
5. one commit with Commodore's message (instance, package, global and tenant commits and the
   compilation timestamp) and the deployment's trailer, pushed without force (a branch that
   moved meanwhile is fetched and the catalog re-applied: activities.publish_git);
6. mode `commit`: `POST /clusters/<id>/compileMeta` with the same timestamp as `lastCompile`
   (only with Lieutenant: without it there is nobody to tell). Mode `pull-request`: a pull
   request into the default branch is opened (or the open one found); Lieutenant is not told,
   because the catalog reaches the cluster only when someone merges it.

Credentials: a catalog repository of the fleet's owner on the configured GitHub is pushed at
the URL the worker builds for it, with the installation token; any other URL with the worker's
own git credentials, so the token never goes to a host a Lieutenant answer or a fleet names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from activities.publish_git import TRAILER, GitOutcome, GitPublisher, GitTarget
from activities.publish_plaintext import PublishTree
from shared.contracts.deploy import PublishRequest, RepoRef
from shared.engine.config.fleet import FleetConfig
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.process import run
from shared.stores.blob import BlobStore
from shared.stores.gitmirror import GitMirror, RemoteFor

# The catalog's own directories: a publish replaces these and keeps every other file.
CATALOG_DIRECTORIES = ("manifests", "refs")
# Schemes a catalog repository may be pushed at: never a path on the worker.
_CATALOG_URL = re.compile(r"^(https?|ssh)://[^\s]+$|^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+$")

# (repository, head branch, base branch, title, body) → the pull request's URL
PullOpener = Callable[[RepoRef, str, str, str, str], str]
# Render the cluster again and read its compile record: (fleet → inspected) → the tree
TreeBuilder = Callable[[Callable[[Fleet], object]], PublishTree]


@dataclass(frozen=True)
class CatalogOutcome:
    target: str  # for PublishResult: `<url>@<branch> (<commit>)`
    commit: str
    already_published: bool
    reported: bool  # compileMeta was POSTed to Lieutenant
    pull_request: str = ""  # mode pull-request: its URL
    files: int = 0


def compile_meta_key(repo: str, root: str, deployment_id: str) -> str:
    """Where the compileMeta body of a deployment is kept from before its push, so a retry
    that finds the commit reports exactly what the commit says."""
    return f"deployments/{repo}/{root}/compilemeta/{deployment_id}.json"


def catalog_target(url: str, fleet: RepoRef, *, remote_for: RemoteFor, root: str) -> GitTarget:
    """The catalog repository `url` as a push target (branch filled in later). A repository of
    the fleet's owner on the configured GitHub is pushed at the worker's URL for it, with the
    installation token; anything else with the worker's own credentials."""
    if not _CATALOG_URL.match(url):
        raise FleetError(
            f"cluster {root!r}: catalog repository {url!r} is not an https://, http://, "
            "ssh:// or git@host:path URL (paths on the worker are no publish targets)"
        )
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.username is None:
        path = parts.path.strip("/").removesuffix(".git")
        owner, _, name = path.partition("/")
        if owner and name and "/" not in name and owner.lower() == fleet.owner.lower():
            ref = RepoRef(owner=owner, name=name, installation_id=fleet.installation_id)
            ours = remote_for(ref)
            if _same_repository(ours, url):
                return GitTarget(ours, f"{owner}/{name}", "", ref)
    return GitTarget(url, _shown(url), "", None)


def _same_repository(a: str, b: str) -> bool:
    def norm(url: str) -> str:
        parts = urlsplit(url)
        return f"{parts.scheme}://{(parts.hostname or '').lower()}:{parts.port}" + (
            parts.path.rstrip("/").removesuffix(".git").lower()
        )

    return norm(a) == norm(b)


def _shown(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", "@")


class CatalogPublisher:
    """Commits catalogs to catalog repositories and reports them to Lieutenant."""

    name = "catalog"

    def __init__(
        self,
        git: GitPublisher,
        blobs: BlobStore,
        *,
        remote_for: RemoteFor,
        open_pull: PullOpener | None = None,
        build_info: dict[str, str],
    ) -> None:
        self.git = git
        self.blobs = blobs
        self.remote_for = remote_for
        self.open_pull = open_pull
        self.build_info = build_info

    def publish(
        self,
        request: PublishRequest,
        config: FleetConfig,
        mirror: GitMirror,
        build_tree: TreeBuilder,
    ) -> CatalogOutcome:
        # Imported on first use, as the layout registry loads the layout (a worker serving no
        # commodore fleet may lack the rollwright[commodore] extra): Kapitan's start-up time.
        from shared.engine.commodore import compilemeta  # noqa: PLC0415
        from shared.engine.commodore.clusters import Clusters  # noqa: PLC0415
        from shared.engine.commodore.lieutenant import Lieutenant  # noqa: PLC0415

        root = request.root
        settings = config.publish.catalog
        clusters = Clusters(config.commodore)
        spec = clusters.spec(root)
        target = catalog_target(
            spec.catalog_url, request.repo, remote_for=self.remote_for, root=root
        )
        default = self.git.default_branch(target, root=root)
        if default is None:
            raise FleetError(
                f"cluster {root!r}: catalog repository {target.label} has no default branch "
                "(an empty repository): give it a first commit"
            )
        pull = settings.mode == "pull-request"
        if pull and (target.auth is None or self.open_pull is None):
            raise FleetError(
                f"cluster {root!r}: publish.catalog.mode pull-request needs the catalog "
                f"repository on the configured GitHub, of the fleet's owner ({target.label} "
                "is not)"
            )
        branch = settings.branch if pull else default
        target = GitTarget(target.url, target.label, branch, target.auth, base=default)
        where = f"{target.label}@{branch}"
        lieutenant = (
            Lieutenant.from_settings(config.commodore.lieutenant)
            if config.commodore.lieutenant is not None and not pull
            else None
        )
        key = compile_meta_key(request.repo.full_name, root, request.deployment_id)

        found = self.git.find_published(target, request.deployment_id, root=root)
        if found:
            reported = False
            stored = self.blobs.get(key)
            if lieutenant is not None and stored is not None:
                lieutenant.post_compile_meta(root, json.loads(stored))
                reported = True
            link = self._pull(request, target, default) if pull else ""
            return CatalogOutcome(f"{where} ({found[:12]})", found, True, reported, link)

        tree = build_tree(lambda fleet: _compiled_from(fleet, root))
        if not tree.files:
            raise FleetError(
                f"cluster {root!r} is no longer in the tenant: rollwright does not empty "
                f"its catalog repository ({target.label}); archive it on purpose"
            )
        inspected = tree.inspected
        assert isinstance(inspected, compilemeta.CompileRecord)
        tenant = compilemeta.VersionInfo(
            spec.tenant_url or request.repo.clone_url or request.repo.html_url,
            request.repo.default_branch,
            request.revision,
            _short(mirror.ensure(request.repo, request.revision), request.revision),
        )
        meta = inspected.meta(tenant=tenant, timestamp=datetime.now().astimezone())
        body = meta.as_dict(self.build_info)
        self.blobs.put(key, (json.dumps(body, indent=2) + "\n").encode())
        message = f"{meta.commit_message()}\n{TRAILER}: {request.deployment_id}\n"
        outcome: GitOutcome = self.git.publish_tree(
            target,
            "",
            tree.files,
            deployment_id=request.deployment_id,
            message=message,
            root=root,
            replaced=CATALOG_DIRECTORIES,
        )
        landed = self.git.message_of(target, outcome.commit)
        ours = not outcome.already_published or _carries(landed, request.deployment_id)
        reported = False
        if ours and lieutenant is not None:
            if outcome.already_published:
                # Another attempt of this deployment committed meanwhile: report its commit's
                # timestamp, the one Lieutenant must agree with.
                stamp = compilemeta.timestamp_of(landed)
                if stamp is not None:
                    body["lastCompile"] = stamp.isoformat(timespec="milliseconds")
            lieutenant.post_compile_meta(root, body)
            reported = True
        link = self._pull(request, target, default) if pull and ours else ""
        return CatalogOutcome(
            f"{where} ({outcome.commit[:12]})",
            outcome.commit,
            outcome.already_published,
            reported,
            link,
            len(tree.files),
        )

    def _pull(self, request: PublishRequest, target: GitTarget, base: str) -> str:
        assert self.open_pull is not None and target.auth is not None
        title = f"Catalog of cluster {request.root} at {request.revision[:12]}"
        body = (
            f"The catalog rollwright compiled for cluster `{request.root}` from "
            f"{request.repo.full_name} at {request.revision}, approved by "
            f"{request.approved_by or 'nobody (auto-approved)'}."
        )
        return self.open_pull(target.auth, target.branch, base, title, body)


def _compiled_from(fleet: Fleet, root: str) -> object:
    """The commits the cluster's catalog was compiled from (the render just made)."""
    # On first use, for the start-up time and the optional extra (see `publish`).
    from shared.engine.commodore.layout import CommodoreLayout  # noqa: PLC0415

    if not isinstance(fleet.layout, CommodoreLayout):
        raise FleetError("publish.target catalog needs layout: commodore")
    return fleet.layout.compiled_from(root)[1]


def _carries(message: str, deployment_id: str) -> bool:
    return f"{TRAILER}: {deployment_id}" in message.splitlines()


def _short(git_dir: Path, sha: str) -> str:
    """`git rev-parse --short=6`, as Commodore names the tenant commit."""
    proc = run(
        ["git", "--git-dir", str(git_dir), "rev-parse", "--short=6", sha],
        timeout=60,
        what="git rev-parse",
    )
    return proc.out.strip() if proc.ok and proc.out.strip() else sha[:6]
