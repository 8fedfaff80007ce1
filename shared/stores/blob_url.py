"""The blob store a URL names: `file:///path` or `s3://bucket/prefix` (docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from shared.settings import Settings
from shared.stores.blob import BlobStore, FileBlobStore
from shared.stores.s3 import S3BlobStore, s3_client, s3_client_from_settings


def open_blob_store(url: str, settings: Settings | None = None) -> BlobStore:
    """The blob store a URL names: `file:///path` (or a bare path) or
    `s3://bucket/optional/prefix`, reached with the S3 settings (endpoint, region, keys)
    or, where those are unset, boto3's own credential chain."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        return FileBlobStore(Path(unquote(parts.path)))
    if not parts.scheme:
        return FileBlobStore(Path(url))
    if parts.scheme == "s3":
        if not parts.netloc:
            raise ValueError(f"blob store {url!r}: an s3:// URL names a bucket: s3://bucket/prefix")
        client = s3_client_from_settings(settings) if settings is not None else s3_client()
        return S3BlobStore(client, parts.netloc, unquote(parts.path).strip("/"))
    raise ValueError(f"blob store {url!r}: use a file:///path or an s3://bucket/prefix URL")
