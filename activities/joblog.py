"""A deployment's job log: what its activities did, for the job page (`jobs/<id>/log`).

JSON lines (`{"time", "message", ...fields}`) appended to the blob store, one writer at a time
(a deployment's activities run one after another). Lines hold ids, paths, counts and
redacted messages only, like every other log.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from shared.blobstore import BlobStore, job_log_key


class JobLog:
    def __init__(self, blobs: BlobStore | None) -> None:
        self.blobs = blobs

    def write(self, deployment_id: str, message: str, **fields: Any) -> None:
        if self.blobs is None or not deployment_id:
            return
        line = {"time": datetime.now(UTC).isoformat(timespec="seconds"), "message": message}
        line.update(fields)
        self.blobs.append(job_log_key(deployment_id), (json.dumps(line) + "\n").encode())

    def read(self, deployment_id: str) -> list[dict[str, Any]]:
        raw = self.blobs.get(job_log_key(deployment_id)) if self.blobs is not None else None
        return [json.loads(line) for line in (raw or b"").decode().splitlines() if line]
