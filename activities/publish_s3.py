"""Publishing a root's render to an S3 prefix that a Flux `Bucket` source reads.

Layout under the root's prefix `P` (`publish.s3.prefix`, default `{root}/`):

    P<deployment-id>/<path>     the files of one deployment (a generation), never rewritten
                                once the pointer names them
    Pkustomization.yaml         the pointer: a kustomize Kustomization whose `resources` are
                                the live generation's files, with a `# rollwright-manifest:`
                                JSON comment (deployment, revision, digest, files → sha256)

Publish order: (1) every file of the new generation, (2) the pointer, in one PUT — S3
replaces an object atomically, so a reader sees the old pointer or the new one, and each
names a complete generation; (3) every other object under `P` is deleted (older
generations, leftovers of an attempt that died before its swap).

A reader that builds `P` with kustomize (Flux's kustomize-controller with
`path: ./P`, `kubectl kustomize`) applies exactly the files the pointer lists. Flux's
Bucket source downloads every object under its prefix; one listing taken while step 3 runs
may miss an object of the old generation and fail that reconciliation, which Flux retries
at its next interval — it never applies a mix of two deployments.

Idempotent by deployment id: when the pointer already names this deployment, only the prune
runs again and the result says `already_published`.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shared.errors import FleetError
from shared.payloads import PublishRequest

POINTER = "kustomization.yaml"
MANIFEST_MARK = "# rollwright-manifest: "
MANIFEST_SCHEMA = 1
UPLOAD_JOBS = 16  # S3 PUTs at once (each is a short HTTP request)


class S3PublishError(RuntimeError):
    """S3 failed while publishing (network, credentials, a missing bucket). Retried."""


@dataclass(frozen=True)
class S3Outcome:
    target: str  # s3://bucket/P
    generation: str  # key prefix of the live generation
    already_published: bool
    uploaded: int
    pruned: int


def pointer_text(manifest: dict[str, Any], files: list[str], generation: str) -> bytes:
    """The pointer object: a Kustomization listing the generation's files, its manifest as
    a one-line JSON comment (kustomize ignores comments, `read_manifest` finds it)."""
    lines = [
        "# Published by rollwright; replaced on every deployment (docs/publishing.md).",
        MANIFEST_MARK + json.dumps(manifest, sort_keys=True, separators=(",", ":")),
        "apiVersion: kustomize.config.k8s.io/v1beta1",
        "kind: Kustomization",
    ]
    yaml_files = [p for p in files if p.endswith((".yaml", ".yml", ".json"))]
    if yaml_files:
        lines.append("resources:")
        lines.extend(f"  - {json.dumps(generation + p)}" for p in yaml_files)
    else:
        lines.append("resources: []")
    return ("\n".join(lines) + "\n").encode()


def read_manifest(pointer: bytes) -> dict[str, Any] | None:
    for line in pointer.decode("utf-8", "replace").splitlines():
        if line.startswith(MANIFEST_MARK):
            try:
                data = json.loads(line[len(MANIFEST_MARK) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


class S3Publisher:
    """Writes generations and swaps pointers in buckets reached with one S3 client."""

    name = "s3"

    def __init__(self, client: Any, *, reserved: tuple[str, str] | None = None) -> None:
        self.client = client
        # (bucket, key prefix) of the service's own blob store: never a publish target.
        self.reserved = reserved

    def check_target(self, bucket: str, prefix: str, root: str) -> None:
        if self.reserved is None:
            return
        blob_bucket, blob_prefix = self.reserved
        if bucket == blob_bucket and (
            prefix.startswith(blob_prefix) or blob_prefix.startswith(prefix)
        ):
            raise FleetError(
                f'publishing root "{root}" to s3://{bucket}/{prefix}: that is rollwright\'s own '
                "blob store; publish.s3 must name another bucket or prefix",
                path="rollwright.yaml",
            )

    def publish_tree(
        self,
        bucket: str,
        prefix: str,
        files: dict[str, bytes],
        request: PublishRequest,
        *,
        digest: str,
    ) -> S3Outcome:
        target = f"s3://{bucket}/{prefix}"
        generation = f"{prefix}{request.deployment_id}/"
        pointer_key = prefix + POINTER
        done = self.find_published(bucket, prefix, request)
        if done is not None:
            return done

        def upload(path: str) -> None:
            self._put(bucket, generation + path, files[path], target, request.root)

        with ThreadPoolExecutor(max_workers=UPLOAD_JOBS) as pool:
            list(pool.map(upload, sorted(files)))
        manifest = {
            "schema": MANIFEST_SCHEMA,
            "root": request.root,
            "repository": request.repo.full_name,
            "revision": request.revision,
            "deployment_id": request.deployment_id,
            "trigger": request.trigger,
            "approved_by": request.approved_by,
            "digest": digest,
            "generation": request.deployment_id,
            "published_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "files": {p: hashlib.sha256(files[p]).hexdigest() for p in sorted(files)},
        }
        self._put(
            bucket,
            pointer_key,
            pointer_text(manifest, sorted(files), f"{request.deployment_id}/"),
            target,
            request.root,
        )
        pruned = self._prune(bucket, prefix, generation, pointer_key, target, request.root)
        return S3Outcome(target, generation, False, len(files), pruned)

    def find_published(self, bucket: str, prefix: str, request: PublishRequest) -> S3Outcome | None:
        """When the pointer already names this deployment (an earlier attempt swapped it):
        the prune runs again and the outcome says `already_published`; else None. A retry
        looks before it renders again."""
        target = f"s3://{bucket}/{prefix}"
        self.check_target(bucket, prefix, request.root)
        generation = f"{prefix}{request.deployment_id}/"
        pointer_key = prefix + POINTER
        current = self._get(bucket, pointer_key, target, request.root)
        manifest = read_manifest(current) if current is not None else None
        if manifest is None or manifest.get("deployment_id") != request.deployment_id:
            return None
        pruned = self._prune(bucket, prefix, generation, pointer_key, target, request.root)
        return S3Outcome(target, generation, True, 0, pruned)

    # --- S3 calls ----------------------------------------------------------------------------

    def _prune(
        self, bucket: str, prefix: str, generation: str, pointer: str, target: str, root: str
    ) -> int:
        stale = [
            key
            for key in self._list(bucket, prefix, target, root)
            if key != pointer and not key.startswith(generation)
        ]
        for start in range(0, len(stale), 1000):  # DeleteObjects takes up to 1000 keys
            batch = [{"Key": key} for key in stale[start : start + 1000]]
            try:
                answer = self.client.delete_objects(
                    Bucket=bucket, Delete={"Objects": batch, "Quiet": True}
                )
            except (ClientError, BotoCoreError) as err:
                raise self._error(root, target, "pruning old objects", err) from err
            failed = answer.get("Errors") or []
            if failed:
                raise S3PublishError(
                    f'publishing root "{root}" to {target}: pruning old objects: '
                    f"{len(failed)} could not be deleted ({failed[0].get('Code', '?')})"
                )
        return len(stale)

    def _list(self, bucket: str, prefix: str, target: str, root: str) -> list[str]:
        keys: list[str] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix
            ):
                keys.extend(str(item["Key"]) for item in page.get("Contents", ()))
        except (ClientError, BotoCoreError) as err:
            raise self._error(root, target, "listing objects", err) from err
        return keys

    def _get(self, bucket: str, key: str, target: str, root: str) -> bytes | None:
        try:
            answer = self.client.get_object(Bucket=bucket, Key=key)
            return bytes(answer["Body"].read())
        except ClientError as err:
            code = str(err.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "NotFound"):
                return None
            raise self._error(root, target, f"reading {key}", err) from err
        except BotoCoreError as err:
            raise self._error(root, target, f"reading {key}", err) from err

    def _put(self, bucket: str, key: str, data: bytes, target: str, root: str) -> None:
        try:
            self.client.put_object(Bucket=bucket, Key=key, Body=data)
        except (ClientError, BotoCoreError) as err:
            raise self._error(root, target, f"writing {key}", err) from err

    @staticmethod
    def _error(root: str, target: str, doing: str, err: Exception) -> S3PublishError:
        return S3PublishError(f'publishing root "{root}" to {target}: {doing}: {err}')
