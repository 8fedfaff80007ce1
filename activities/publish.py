"""Publishing an approved render: the `publish` activity and the publishers behind it.

The fleet chooses the target in `rollwright.yaml` at the deployment's revision
(`publish.target`, docs/publishing.md):

- `blob` (default; the embedded stack's target): `BlobPublisher` below copies the stored
  *redacted* render to `published/<owner>/<repo>/<root>/` in the blob store.
- `catalog` (activities.publish_catalog): a commodore cluster's catalog, committed to its
  catalog repository as Commodore pushes it, then reported to Lieutenant.
- `git` (activities.publish_git) and `s3` (activities.publish_s3) deliver real manifests: the
  plaintext is rebuilt on this worker (activities.publish_plaintext: a temporary worktree from
  the mirror, the same engine, a digest check against the reviewed render) and goes through
  the secrets policy (shared.engine.publish_secrets: refuse, or re-encrypt with sops) first.

Every publisher is idempotent by deployment id, because Temporal may run `publish` again
after a timeout whose first attempt did finish. The blob publisher keeps a marker object
(`deployments/<owner>/<repo>/<root>/published.json`, outside the published prefix so nothing
syncing that prefix sees it) naming the deployment last published there; the git publisher
looks for the deployment's commit trailer; the S3 publisher reads its pointer's manifest.
The git and S3 targets look before rendering again, so a retry of a delivered deployment
never fails on a render that changed since the attempt that delivered it.

Blob order of writes: the files, then the removal of files the previous deployment had and
this one does not, then the marker. An attempt that dies half-way leaves the old marker, so
the retry publishes everything again. Redacted Secrets are published as they are
(`REDACTED:sha256:…`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Protocol
from urllib.parse import urlsplit

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import ERR_NOT_CONFIGURED, fleet_mistakes, withhold_unexpected
from activities.heartbeat import blocking
from activities.joblog import JobLog
from activities.publish_catalog import CatalogPublisher, PullOpener
from activities.publish_git import (
    GitPublisher,
    GitPublishError,
    commit_message,
    git_target,
)
from activities.publish_plaintext import fleet_config, publish_tree
from activities.publish_s3 import S3Publisher, S3PublishError
from activities.store import load_render, load_render_meta
from shared.contracts.activityrefs import ACT_PUBLISH
from shared.contracts.deploy import PublishRequest, PublishResult
from shared.engine.config.fleet import CONFIG_FILE, FleetConfig
from shared.engine.config.publish import target_path
from shared.engine.errors import FleetError
from shared.engine.manifests.kustomization import KUSTOMIZATION, kustomization
from shared.settings import Settings
from shared.stores.blob import BlobStore, BlobStoreError
from shared.stores.gitmirror import GitMirror, TokenProvider
from shared.stores.s3 import s3_client_from_settings

MARKER_SCHEMA = 1


class Publisher(Protocol):
    """Delivers one approved deployment. Must be idempotent by `request.deployment_id`."""

    name: str

    def publish(self, request: PublishRequest) -> PublishResult: ...


def published_prefix(repo: str, root: str) -> str:
    return f"published/{repo}/{root}/"


def marker_key(repo: str, root: str) -> str:
    return f"deployments/{repo}/{root}/published.json"


class BlobPublisher:
    """Copies the stored redacted render to `published/<owner>/<repo>/<root>/`."""

    name = "blob"

    def __init__(self, blobs: BlobStore, location: str = "") -> None:
        self.blobs = blobs
        self.location = location.rstrip("/")  # for messages: the store's URL

    def publish(self, request: PublishRequest) -> PublishResult:
        repo = request.repo.full_name
        prefix = published_prefix(repo, request.root)
        target = f"{self.location}/{prefix}" if self.location else prefix
        previous = self._marker(repo, request.root)
        if previous and previous.get("deployment_id") == request.deployment_id:
            return PublishResult(target=target, already_published=True)
        render = load_render(self.blobs, request.blob_prefix)
        for path, data in render.files.items():
            self.blobs.put(prefix + path, data)
        stale = set(previous.get("files", [])) if previous else set(self.blobs_under(prefix))
        for path in sorted(stale - set(render.files)):
            self.blobs.delete(prefix + path)
        marker = {
            "schema": MARKER_SCHEMA,
            "deployment_id": request.deployment_id,
            "revision": request.revision,
            "digest": render.digest,
            "trigger": request.trigger,
            "approved_by": request.approved_by,
            "published_at": datetime.now(UTC).isoformat(),
            "files": sorted(render.files),
        }
        self.blobs.put(
            marker_key(repo, request.root), (json.dumps(marker, indent=2) + "\n").encode()
        )
        return PublishResult(target=target)

    def blobs_under(self, prefix: str) -> list[str]:
        return [key[len(prefix) :] for key in self.blobs.list(prefix)]

    def _marker(self, repo: str, root: str) -> dict[str, Any] | None:
        raw = self.blobs.get(marker_key(repo, root))
        if raw is None:
            return None
        data: dict[str, Any] = json.loads(raw)
        return data


@dataclass
class PublishTargets:
    """What the git and S3 targets need on this worker (absent: every fleet gets `fallback`)."""

    mirror: GitMirror
    blobs: BlobStore
    git: GitPublisher
    s3: S3Publisher | None = None  # None: S3 publishing not configured on this worker
    catalog: CatalogPublisher | None = None  # None: no catalog publishing on this worker


@dataclass(frozen=True)
class _Published:
    publisher: str
    result: PublishResult
    details: dict[str, Any]


class PublishActivities:
    """The `publish` activity. `publisher` serves fleets whose target is `blob` (and every
    fleet when `targets` is None); `targets` serves `git` and `s3`."""

    def __init__(
        self,
        publisher: Publisher,
        jobs: JobLog | None = None,
        *,
        targets: PublishTargets | None = None,
    ) -> None:
        self.publisher = publisher
        self.jobs = jobs or JobLog(None)
        self.targets = targets

    @activity.defn(name=ACT_PUBLISH.name)
    async def publish(self, request: PublishRequest) -> PublishResult:
        self.jobs.write(request.deployment_id, "publishing", revision=request.revision)
        try:
            with (
                withhold_unexpected(f"publishing root {request.root!r}", quotable=QUOTABLE),
                fleet_mistakes(),
            ):
                done = await blocking(self._publish, request)
        except ApplicationError as err:
            if err.non_retryable:
                self.jobs.write(request.deployment_id, "publish failed", error=err.message)
            else:  # an unexpected error, its message withheld: Temporal retries the activity
                self.jobs.write(
                    request.deployment_id,
                    "publish attempt failed",
                    error=err.message,
                    attempt=activity.info().attempt if activity.in_activity() else None,
                )
            raise
        except Exception as err:  # infrastructure: Temporal retries the activity
            self.jobs.write(
                request.deployment_id,
                "publish attempt failed",
                error=_infrastructure_message(err),
                attempt=activity.info().attempt if activity.in_activity() else None,
            )
            raise
        result = done.result
        activity.logger.info(
            "deployment published",
            extra={
                "repo": request.repo.full_name,
                "root": request.root,
                "revision": request.revision,
                "deployment": request.deployment_id,
                "publisher": done.publisher,
                "target": result.target,
                "already_published": result.already_published,
                **done.details,
            },
        )
        self.jobs.write(
            request.deployment_id,
            "published",
            publisher=done.publisher,
            target=result.target,
            already_published=result.already_published,
            **done.details,
        )
        return result

    def _publish(self, request: PublishRequest) -> _Published:
        if self.targets is None:
            return _Published(self.publisher.name, self.publisher.publish(request), {})
        config = fleet_config(self.targets.mirror, request)
        if config.publish.target == "git":
            return self._to_git(request, config)
        if config.publish.target == "s3":
            return self._to_s3(request, config)
        if config.publish.target == "catalog":
            return self._to_catalog(request, config)
        return _Published(self.publisher.name, self.publisher.publish(request), {})

    def _expected_digest(self, request: PublishRequest) -> str:
        assert self.targets is not None
        if request.render_digest:
            return request.render_digest
        return str(load_render_meta(self.targets.blobs, request.blob_prefix)["digest"])

    def _to_git(self, request: PublishRequest, config: FleetConfig) -> _Published:
        assert self.targets is not None
        settings = config.publish.git
        try:
            target = git_target(request.repo, settings, remote_for=self.targets.mirror.remote_for)
        except ValueError as err:
            raise FleetError(str(err), path=CONFIG_FILE) from None
        prefix = target_path(settings.path, request.root)
        found = self.targets.git.find_published(target, request.deployment_id, root=request.root)
        if found:
            result = PublishResult(
                target=f"{target.label}@{target.branch}:{prefix} ({found[:12]})",
                already_published=True,
                commit=found,
            )
            return _Published("git", result, {"commit": found})
        tree = publish_tree(
            self.targets.mirror,
            request,
            config,
            expected_digest=self._expected_digest(request),
            target=target.describe(),
            published_path=lambda path: prefix + path,
        )
        # Not part of the render (nor its digest): how Argo CD and Flux find every file of
        # the root's nested tree without settings of their own (S3 has its pointer for that).
        generated = kustomization(tree.files)
        files = tree.files if generated is None else {**tree.files, KUSTOMIZATION: generated}
        outcome = self.targets.git.publish_tree(
            target,
            prefix,
            files,
            deployment_id=request.deployment_id,
            message=commit_message(request, VERSION),
            root=request.root,
        )
        result = PublishResult(
            target=f"{target.label}@{target.branch}:{prefix} ({outcome.commit[:12]})",
            already_published=outcome.already_published,
            commit=outcome.commit,
        )
        details = {
            "commit": outcome.commit,
            "attempts": outcome.attempts,
            "files": len(files),
            "encrypted": len(tree.encrypted),
        }
        return _Published("git", result, details)

    def _to_catalog(self, request: PublishRequest, config: FleetConfig) -> _Published:
        assert self.targets is not None
        targets = self.targets
        if targets.catalog is None:
            raise ApplicationError(
                f'publishing cluster "{request.root}" to its catalog repository: this worker '
                "has no catalog publishing configured",
                type=ERR_NOT_CONFIGURED,
                non_retryable=True,
            )
        outcome = targets.catalog.publish(
            request,
            config,
            targets.mirror,
            lambda inspect: publish_tree(
                targets.mirror,
                request,
                config,
                expected_digest=self._expected_digest(request),
                target=f'the catalog repository of cluster "{request.root}"',
                published_path=lambda path: path,
                inspect=inspect,
            ),
        )
        result = PublishResult(
            target=outcome.target,
            already_published=outcome.already_published,
            commit=outcome.commit,
        )
        details: dict[str, Any] = {
            "commit": outcome.commit,
            "reported": outcome.reported,
            "files": outcome.files,
        }
        if outcome.pull_request:
            details["pull_request"] = outcome.pull_request
        return _Published("catalog", result, details)

    def _to_s3(self, request: PublishRequest, config: FleetConfig) -> _Published:
        assert self.targets is not None
        settings = config.publish.s3
        prefix = target_path(settings.prefix, request.root)
        where = f"s3://{settings.bucket}/{prefix}"
        if self.targets.s3 is None:
            raise ApplicationError(
                f'publishing root "{request.root}" to {where}: this worker has no S3 '
                "configured (ROLLWRIGHT_S3_* settings)",
                type=ERR_NOT_CONFIGURED,
                non_retryable=True,
            )
        s3 = self.targets.s3
        # Read once, before rendering: the swap is fenced against this pointer, so an attempt
        # that stalls while rendering cannot swap over a deployment published meanwhile.
        seen = s3.read_pointer(settings.bucket, prefix, request.root)
        done = s3.find_published(settings.bucket, prefix, request, seen=seen)
        if done is not None:
            result = PublishResult(target=where, already_published=True)
            return _Published("s3", result, {"generation": done.generation, "pruned": done.pruned})
        tree = publish_tree(
            self.targets.mirror,
            request,
            config,
            expected_digest=self._expected_digest(request),
            target=where,
            published_path=lambda path: prefix + path,
        )
        outcome = s3.publish_tree(
            settings.bucket, prefix, tree.files, request, digest=tree.digest, seen=seen
        )
        result = PublishResult(target=where, already_published=outcome.already_published)
        details = {
            "generation": outcome.generation,
            "uploaded": outcome.uploaded,
            "pruned": outcome.pruned,
            "fenced": outcome.fenced,  # False: the store refused conditional writes
            "files": len(tree.files),
            "encrypted": len(tree.encrypted),
        }
        return _Published("s3", result, details)


# The publishers' own errors are built to name root, target and what failed, never values:
# their messages may reach the job log and the check run. Anything else shows its type only.
QUOTABLE: tuple[type[Exception], ...] = (GitPublishError, S3PublishError, BlobStoreError)


def _infrastructure_message(err: Exception) -> str:
    """What the job log says about a failed attempt that is not an ApplicationError."""
    if isinstance(err, QUOTABLE):
        return str(err)
    return f"{type(err).__name__} (see the worker's log)"


def rollwright_version() -> str:
    try:
        return version("rollwright")
    except PackageNotFoundError:
        return "unknown"


VERSION = rollwright_version()
# Where Commodore reports its own version in compileMeta (`commodoreBuildInfo`).
BUILD_INFO = {"version": f"rollwright {VERSION}", "gitVersion": VERSION}


def publish_targets(
    settings: Settings,
    mirror: GitMirror,
    blobs: BlobStore,
    token_for: TokenProvider | None,
    open_pull: PullOpener | None = None,
) -> PublishTargets:
    """The git and S3 publishers of a worker, from its settings."""
    reserved = None
    parts = urlsplit(settings.blobs)
    if parts.scheme == "s3":  # the service's own state is never a publish target
        prefix = parts.path.strip("/")
        reserved = (parts.netloc, f"{prefix}/" if prefix else "")
    git = GitPublisher(settings.git_dir / "publish", token_for=token_for)
    return PublishTargets(
        mirror=mirror,
        blobs=blobs,
        git=git,
        s3=S3Publisher(s3_client_from_settings(settings), reserved=reserved),
        catalog=CatalogPublisher(
            git, blobs, remote_for=mirror.remote_for, open_pull=open_pull, build_info=BUILD_INFO
        ),
    )
