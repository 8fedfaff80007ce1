"""Publishing an approved render, behind a small `Publisher` interface.

This version ships the blob-store publisher: the redacted render is copied to
`published/<owner>/<repo>/<root>/` in the blob store (the place a Flux Bucket source or a
sync job would read). Publishers are idempotent by deployment id, because Temporal may run
`publish` again after a timeout whose first attempt did finish: a marker object
(`deployments/<owner>/<repo>/<root>/published.json`, outside the published prefix so nothing
syncing that prefix sees it) records the deployment last published there; publishing that
deployment again changes nothing and answers `already_published=True`.

Order of writes: the files, then the removal of files the previous deployment had and this one
does not, then the marker. An attempt that dies half-way leaves the old marker, so the retry
publishes everything again.

Redacted Secrets are published as they are (`REDACTED:sha256:…`): the blob publisher is the
embedded stack's target. Publishers that deliver plaintext (git with re-encryption, S3) come
with the publish issue and take the plaintext from the engine on the worker, never from here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Protocol

from temporalio import activity

from activities.heartbeat import blocking
from activities.joblog import JobLog
from activities.store import load_render
from shared.blobstore import BlobStore
from shared.payloads import ACT_PUBLISH, PublishRequest, PublishResult

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


class PublishActivities:
    def __init__(self, publisher: Publisher, jobs: JobLog | None = None) -> None:
        self.publisher = publisher
        self.jobs = jobs or JobLog(None)

    @activity.defn(name=ACT_PUBLISH)
    async def publish(self, request: PublishRequest) -> PublishResult:
        self.jobs.write(request.deployment_id, "publishing", publisher=self.publisher.name)
        result = await blocking(self.publisher.publish, request)
        activity.logger.info(
            "deployment published",
            extra={
                "repo": request.repo.full_name,
                "root": request.root,
                "revision": request.revision,
                "deployment": request.deployment_id,
                "publisher": self.publisher.name,
                "target": result.target,
                "already_published": result.already_published,
            },
        )
        self.jobs.write(
            request.deployment_id,
            "published",
            target=result.target,
            already_published=result.already_published,
        )
        return result
