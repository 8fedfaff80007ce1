"""A deployment's job log: what its activities did, for the job page (`jobs/<id>/log`).

Lines (shared/stores/joblog.py) carry the activity that wrote them and hold ids, paths, counts,
durations and redacted messages only, like every other log: error texts come from fleet
errors, which the engine has already redacted. A deployment's activities run one after
another, so a log has one writer at a time; on S3 an append is a read-modify-write of the
whole object, which is why lines stay short.

Writing never fails the activity: the log is for people, and a blob store that cannot take a
line is reported in the worker's own log instead. The SQL index of the job (`jobs` table, job
id = deployment id) is kept by the record activity (activities/store.py), which sees every
state change of the deployment, including the last.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio import activity

from shared.stores.blob import BlobStore, job_log_key
from shared.stores.joblog import log_line, parse_log

log = logging.getLogger("rollwright.joblog")


class JobLog:
    def __init__(self, blobs: BlobStore | None) -> None:
        self.blobs = blobs

    def write(self, deployment_id: str, message: str, **fields: Any) -> None:
        if self.blobs is None or not deployment_id:
            return
        if activity.in_activity():
            fields = {"activity": activity.info().activity_type, **fields}
        try:
            self.blobs.append(job_log_key(deployment_id), log_line(message, **fields))
        except Exception as err:  # the log is for people; the deployment goes on
            log.warning(
                "job log line not written",
                extra={"deployment": deployment_id, "line": message, "error": str(err)},
            )

    def read(self, deployment_id: str) -> list[dict[str, Any]]:
        raw = self.blobs.get(job_log_key(deployment_id)) if self.blobs is not None else None
        return parse_log(raw)
