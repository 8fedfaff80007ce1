"""The blob store on S3 or any S3-compatible server (SeaweedFS in compose and in the tests).

Objects sit under `s3://<bucket>/<prefix>` with the blob keys of shared.stores.blob appended
as they are: `renders/<owner>/<repo>/<root>/<sha>/…`, `deployments/…/latest.json`,
`jobs/<job-id>/log`. A PUT replaces an object atomically, so readers see the old object or
the new one. `append` reads, appends and writes back: one writer per key (a job log has one).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from shared.stores.blob import BlobStoreError, check_key

if TYPE_CHECKING:
    from shared.settings import Settings

# What a missing object answers: GetObject says NoSuchKey, HeadObject only a bare 404.
_MISSING = {"NoSuchKey", "404", "NotFound"}


def s3_client(
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
) -> Any:
    """A boto3 S3 client. Unset values fall back to boto3's own chain (AWS_* variables,
    ~/.aws, instance roles), so the same code runs against AWS and SeaweedFS."""
    custom = (
        endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    )
    config = Config(
        signature_version="s3v4",
        # S3-compatible servers on a host:port serve buckets as paths, not subdomains.
        s3={"addressing_style": "path" if custom else "auto"},
        retries={"mode": "standard", "max_attempts": 5},
        connect_timeout=5,
        read_timeout=60,
        # Checksums only where S3 requires them: not every S3-compatible server knows the
        # newer CRC headers boto3 would otherwise send on every request.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    session = boto3.session.Session()
    return session.client(
        "s3",
        endpoint_url=endpoint_url or None,
        region_name=region or None,
        aws_access_key_id=access_key or None,
        aws_secret_access_key=secret_key or None,
        config=config,
    )


def s3_client_from_settings(settings: Settings) -> Any:
    secret = settings.s3_secret_access_key
    return s3_client(
        settings.s3_endpoint_url,
        settings.s3_region,
        settings.s3_access_key_id,
        secret.get_secret_value() if secret is not None else None,
    )


class S3BlobStore:
    """The BlobStore protocol over one bucket, under an optional key prefix."""

    def __init__(self, client: Any, bucket: str, prefix: str = "") -> None:
        prefix = prefix.strip("/")
        if prefix:
            check_key(prefix)
        self.client = client
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""

    def __repr__(self) -> str:
        return f"S3BlobStore(s3://{self.bucket}/{self.prefix})"

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _error(self, doing: str, key: str, error: Exception) -> BlobStoreError:
        return BlobStoreError(f"{doing} s3://{self.bucket}/{self.prefix}{key}: {error}")

    def put(self, key: str, data: bytes) -> None:
        full = self._key(key)
        try:
            self.client.put_object(Bucket=self.bucket, Key=full, Body=data)
        except (ClientError, BotoCoreError) as error:
            raise self._error("writing blob", key, error) from error

    def get(self, key: str) -> bytes | None:
        full = self._key(key)
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=full)
            return bytes(response["Body"].read())
        except ClientError as error:
            if _code(error) in _MISSING:
                return None
            raise self._error("reading blob", key, error) from error
        except BotoCoreError as error:
            raise self._error("reading blob", key, error) from error

    def exists(self, key: str) -> bool:
        full = self._key(key)
        try:
            self.client.head_object(Bucket=self.bucket, Key=full)
            return True
        except ClientError as error:
            if _code(error) in _MISSING:
                return False
            raise self._error("looking up blob", key, error) from error
        except BotoCoreError as error:
            raise self._error("looking up blob", key, error) from error

    def delete(self, key: str) -> None:
        full = self._key(key)
        try:
            # S3 answers 204 for a key that is not there: deleting is idempotent.
            self.client.delete_object(Bucket=self.bucket, Key=full)
        except (ClientError, BotoCoreError) as error:
            raise self._error("deleting blob", key, error) from error

    def list(self, prefix: str) -> Iterator[str]:
        """Keys under `prefix`, sorted. Sorted here, not by the server: AWS lists in UTF-8
        byte order, but SeaweedFS walks its directory tree (`a/…` before `a-b`)."""
        paginator = self.client.get_paginator("list_objects_v2")
        strip = len(self.prefix)
        keys: list[str] = []
        try:
            # pages of up to 1000 keys, followed by continuation token
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
                keys.extend(str(item["Key"])[strip:] for item in page.get("Contents", ()))
        except (ClientError, BotoCoreError) as error:
            raise self._error("listing blobs under", prefix, error) from error
        return iter(sorted(keys))

    def append(self, key: str, data: bytes) -> None:
        """Read-modify-write: S3 has no append. One writer per key (job logs have one)."""
        self.put(key, (self.get(key) or b"") + data)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
