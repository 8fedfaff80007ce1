"""The blob store: redacted renders, latest deployments and job logs, by key.

Keys (docs/operations.md, "The blob store"): `deployments/<owner>/<repo>/<root>/latest.json`,
`renders/<owner>/<repo>/<root>/<sha>/…` (redacted files + digest), `jobs/<job-id>/log`. The
filesystem implementation is the embedded default; S3 (boto3, shared/stores/s3.py) serves compose
and production. `shared.stores.blob_url.open_blob_store` picks one from a URL. Nothing written here
may hold a plaintext secret: callers store redacted renders only.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Protocol


class BlobStore(Protocol):
    def put(self, key: str, data: bytes) -> None:
        """Write atomically: readers see the old object or the new one, never a mix."""
        ...

    def get(self, key: str) -> bytes | None: ...

    def exists(self, key: str) -> bool: ...

    def delete(self, key: str) -> None: ...

    def list(self, prefix: str) -> Iterator[str]:
        """Keys under `prefix` (a `/`-terminated folder or any key prefix), sorted."""
        ...

    def append(self, key: str, data: bytes) -> None:
        """Append to an object (job logs). Not atomic across writers; one writer per key."""
        ...


class BlobStoreError(OSError):
    """A blob store request failed; the message names the operation and the object."""


def check_key(key: str) -> str:
    parts = PurePosixPath(key).parts
    if not key or key.startswith("/") or ".." in parts or "" in key.split("/")[:-1]:
        raise ValueError(f"invalid blob key {key!r}")
    return key


class FileBlobStore:
    """Blobs as files under a directory (`.rollwright/blobs` in the embedded stack)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def list(self, prefix: str) -> Iterator[str]:
        # the folder the prefix is in; "" and "dir/" are folders themselves
        base = (
            self.root / prefix
            if prefix.endswith("/") or not prefix
            else (self.root / prefix).parent
        )
        if not base.is_dir():
            return iter(())
        keys = []
        for path in base.rglob("*"):
            if path.is_file() and not path.name.startswith(".tmp-"):
                key = path.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        return iter(sorted(keys))

    def append(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as fh:
            fh.write(data)


def render_prefix(repo: str, root: str, revision: str) -> str:
    return f"renders/{repo}/{root}/{revision}/"


def latest_key(repo: str, root: str) -> str:
    return f"deployments/{repo}/{root}/latest.json"


def fleet_roots_key(repo: str) -> str:
    """Every root of a repository at its newest dispatched revision (`FleetRoots`)."""
    return f"fleets/{repo}/roots.json"


def job_log_key(job_id: str) -> str:
    return f"jobs/{job_id}/log"
