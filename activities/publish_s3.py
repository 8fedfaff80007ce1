"""Publishing a root's render to an S3 prefix that a Flux `Bucket` source reads.

Layout under the root's prefix `P` (`publish.s3.prefix`, default `{root}/`):

    P<deployment-id>/<path>     the files of one deployment (a generation), never rewritten
                                once the pointer names them
    Pkustomization.yaml         the pointer: a kustomize Kustomization whose `resources` are
                                the live generation's files, with a `# rollwright-manifest:`
                                JSON comment (deployment, revision, digest, files → sha256)

Publish order: (0) read the pointer and its ETag, (1) every file of the new generation,
(2) the pointer, in one conditional PUT (`If-Match: <that ETag>`, or `If-None-Match: *` when
there was none) — S3 replaces an object atomically, so a reader sees the old pointer or the
new one, each naming a complete generation, and the write fails (412) when anyone swapped the
pointer since step 0; (3) every other object under `P` is deleted (older generations,
leftovers of an attempt that died before its swap), and only while the pointer still names
this deployment.

The fence is for abandoned attempts: an attempt of an older deployment that timed out, woke up
after a newer deployment published, and would otherwise swap the pointer back to its own
generation and prune the live one. A 412 ends the publish without writing or pruning
(non-retryable `PointerMoved`), unless the pointer now names this very deployment (another
attempt of it finished first: `already_published`).

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
from temporalio import activity
from temporalio.exceptions import ApplicationError

from shared.contracts.deploy import PublishRequest
from shared.engine.errors import FleetError

POINTER = "kustomization.yaml"
MANIFEST_MARK = "# rollwright-manifest: "
MANIFEST_SCHEMA = 1
UPLOAD_JOBS = 16  # S3 PUTs at once (each is a short HTTP request)
# The pointer was swapped by someone else between this attempt's read and its write: a newer
# deployment (this attempt was abandoned) or a concurrent first publish. A retry cannot help.
ERR_POINTER_MOVED = "PointerMoved"
# What a missing object answers: GetObject says NoSuchKey, HeadObject only a bare 404.
_MISSING = {"NoSuchKey", "404", "NotFound"}

logger = activity.logger  # names the activity when there is one (publishing runs in one)


class S3PublishError(RuntimeError):
    """S3 failed while publishing (network, credentials, a missing bucket). Retried."""


@dataclass(frozen=True)
class S3Outcome:
    target: str  # s3://bucket/P
    generation: str  # key prefix of the live generation
    already_published: bool
    uploaded: int
    pruned: int
    fenced: bool = True  # False: the store refused conditional writes, the swap was blind


@dataclass(frozen=True)
class Pointer:
    """The pointer as one read found it. `etag` None: there was no pointer yet."""

    etag: str | None
    manifest: dict[str, Any] | None
    exists: bool = False

    @property
    def deployment_id(self) -> str | None:
        found = (self.manifest or {}).get("deployment_id")
        return found if isinstance(found, str) else None


def pointer_moved(root: str, target: str, now: Pointer) -> ApplicationError:
    if not now.exists:
        found = "it is gone"
    elif now.deployment_id is None:
        found = "it now holds no rollwright manifest"
    else:
        revision = (now.manifest or {}).get("revision")
        found = f'it now names deployment "{now.deployment_id}", revision "{revision}"'
    return ApplicationError(
        f'publishing root "{root}" to {target}: the pointer changed while this deployment '
        f"published ({found}); not overwriting it",
        type=ERR_POINTER_MOVED,
        non_retryable=True,
    )


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
    """Writes generations and swaps pointers in buckets reached with one S3 client.

    `publish_tree` runs the steps in order; they are public so that a caller (and the tests)
    can interleave two deployments step by step: `read_pointer`, `write_generation`, `swap`.
    """

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
        seen: Pointer | None = None,
    ) -> S3Outcome:
        """Every step in order. `seen`: the pointer as read before the caller rendered, so
        the swap is fenced against the earliest read (default: read now)."""
        if seen is None:
            seen = self.read_pointer(bucket, prefix, request.root)
        if seen.deployment_id == request.deployment_id:
            return self._already(bucket, prefix, request)
        self.write_generation(bucket, prefix, files, request)
        return self.swap(bucket, prefix, files, request, digest=digest, seen=seen)

    def find_published(
        self, bucket: str, prefix: str, request: PublishRequest, *, seen: Pointer | None = None
    ) -> S3Outcome | None:
        """When the pointer (`seen`, or read now) already names this deployment (an earlier
        attempt swapped it): the prune runs again and the outcome says `already_published`;
        else None. A retry looks before it renders again."""
        if seen is None:
            seen = self.read_pointer(bucket, prefix, request.root)
        if seen.deployment_id != request.deployment_id:
            return None
        return self._already(bucket, prefix, request)

    def read_pointer(self, bucket: str, prefix: str, root: str) -> Pointer:
        """Step 0: the pointer as it is now; its ETag fences the swap."""
        self.check_target(bucket, prefix, root)
        target = f"s3://{bucket}/{prefix}"
        key = prefix + POINTER
        try:
            answer = self.client.get_object(Bucket=bucket, Key=key)
            data = bytes(answer["Body"].read())
        except ClientError as err:
            if _code(err) in _MISSING:
                return Pointer(None, None)
            raise self._error(root, target, f"reading {key}", err) from err
        except BotoCoreError as err:
            raise self._error(root, target, f"reading {key}", err) from err
        return Pointer(str(answer.get("ETag") or "") or None, read_manifest(data), exists=True)

    def write_generation(
        self, bucket: str, prefix: str, files: dict[str, bytes], request: PublishRequest
    ) -> None:
        """Step 1: every file under `P<deployment-id>/` (nothing reads them yet)."""
        target = f"s3://{bucket}/{prefix}"
        generation = f"{prefix}{request.deployment_id}/"

        def upload(path: str) -> None:
            self._put(bucket, generation + path, files[path], target, request.root)

        with ThreadPoolExecutor(max_workers=UPLOAD_JOBS) as pool:
            list(pool.map(upload, sorted(files)))

    def swap(
        self,
        bucket: str,
        prefix: str,
        files: dict[str, bytes],
        request: PublishRequest,
        *,
        digest: str,
        seen: Pointer,
    ) -> S3Outcome:
        """Steps 2 and 3: the pointer, written only if it is still the one `seen` before the
        generation was written, then the prune."""
        target = f"s3://{bucket}/{prefix}"
        generation = f"{prefix}{request.deployment_id}/"
        pointer_key = prefix + POINTER
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
        body = pointer_text(manifest, sorted(files), f"{request.deployment_id}/")
        if seen.etag:
            condition = {"IfMatch": seen.etag}
        elif not seen.exists:
            condition = {"IfNoneMatch": "*"}
        else:  # a store that answers without ETags cannot be fenced
            condition = {}
        fenced = bool(condition)
        try:
            self.client.put_object(Bucket=bucket, Key=pointer_key, Body=body, **condition)
        except ClientError as err:
            if _status(err) == 412 or _code(err) == "PreconditionFailed":
                now = self.read_pointer(bucket, prefix, request.root)
                if now.deployment_id == request.deployment_id:  # another attempt of it won
                    return self._already(bucket, prefix, request)
                raise pointer_moved(request.root, target, now) from None
            if not _unsupported(err):
                raise self._error(request.root, target, f"writing {pointer_key}", err) from err
            # A store without conditional writes (older MinIO, some providers): publishing
            # unfenced beats not publishing at all; the outcome and the log say so.
            logger.warning(
                "s3 store refused a conditional write; swapping the pointer unfenced",
                extra={"root": request.root, "target": target, "error_code": _code(err)},
            )
            fenced = False
            self._put(bucket, pointer_key, body, target, request.root)
        except BotoCoreError as err:
            raise self._error(request.root, target, f"writing {pointer_key}", err) from err
        pruned = self.prune(bucket, prefix, request)
        return S3Outcome(target, generation, False, len(files), pruned, fenced=fenced)

    def _already(self, bucket: str, prefix: str, request: PublishRequest) -> S3Outcome:
        pruned = self.prune(bucket, prefix, request)
        return S3Outcome(
            f"s3://{bucket}/{prefix}", f"{prefix}{request.deployment_id}/", True, 0, pruned
        )

    # --- S3 calls ----------------------------------------------------------------------------

    def prune(self, bucket: str, prefix: str, request: PublishRequest) -> int:
        """Step 3: delete what the pointer naming this deployment does not reference. Each
        batch first checks that the pointer still names it: an attempt whose deployment was
        superseded meanwhile leaves the prune to the newer one, never deleting its objects."""
        target = f"s3://{bucket}/{prefix}"
        generation = f"{prefix}{request.deployment_id}/"
        pointer = prefix + POINTER
        stale = [
            key
            for key in self._list(bucket, prefix, target, request.root)
            if key != pointer and not key.startswith(generation)
        ]
        pruned = 0
        for start in range(0, len(stale), 1000):  # DeleteObjects takes up to 1000 keys
            now = self.read_pointer(bucket, prefix, request.root)
            if now.deployment_id != request.deployment_id:
                logger.warning(
                    "s3 pointer moved on before the prune; leaving the prune to its deployment",
                    extra={
                        "root": request.root,
                        "target": target,
                        "deployment": request.deployment_id,
                        "pointer_deployment": now.deployment_id,
                    },
                )
                break
            batch = [{"Key": key} for key in stale[start : start + 1000]]
            try:
                answer = self.client.delete_objects(
                    Bucket=bucket, Delete={"Objects": batch, "Quiet": True}
                )
            except (ClientError, BotoCoreError) as err:
                raise self._error(request.root, target, "pruning old objects", err) from err
            failed = answer.get("Errors") or []
            if failed:
                raise S3PublishError(
                    f'publishing root "{request.root}" to {target}: pruning old objects: '
                    f"{len(failed)} could not be deleted ({failed[0].get('Code', '?')})"
                )
            pruned += len(batch)
        return pruned

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

    def _put(self, bucket: str, key: str, data: bytes, target: str, root: str) -> None:
        try:
            self.client.put_object(Bucket=bucket, Key=key, Body=data)
        except (ClientError, BotoCoreError) as err:
            raise self._error(root, target, f"writing {key}", err) from err

    @staticmethod
    def _error(root: str, target: str, doing: str, err: Exception) -> S3PublishError:
        return S3PublishError(f'publishing root "{root}" to {target}: {doing}: {err}')


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _status(err: ClientError) -> int | None:
    status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None


def _unsupported(err: ClientError) -> bool:
    """The store does not implement conditional writes: AWS's word for an unknown header is
    501 NotImplemented."""
    return _status(err) == 501 or _code(err) == "NotImplemented"
