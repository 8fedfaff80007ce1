"""The names the gateway's routes take from a path or a query: deployment ids, GitHub owners
and repositories, commit ids, root ids and patch ids.

A name is checked before anything is looked up with it. A path naming something that cannot
exist answers 404, like a name that does not exist (gateway/app.py turns a failed path check
into that 404), so nothing reaches the stores or GitHub with `..`, an empty segment, a control
character or a name longer than a store key may be. `?repo=` is a filter, not a resource: a
malformed one is the JSON API's 422 and a page's HTML 400.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from fastapi import Path, Query
from pydantic import AfterValidator

# Deployment ids are uuids; anything that is not a plain token cannot name a job.
DEPLOYMENT_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# GitHub's owner and repository names (an owner has no dots; a repository is never . or ..)
# (no look-ahead: FastAPI's validator is Rust's regex).
OWNER = r"[A-Za-z0-9-]{1,39}"
REPO_NAME = (
    r"(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9_.-]{0,98}"
    r"|\.\.[A-Za-z0-9_.-]{1,98})"
)
REPO_PATTERN = rf"^{OWNER}/{REPO_NAME}$"
REPO = re.compile(REPO_PATTERN)
# A commit id: SHA-1 or SHA-256, lowercase hex as GitHub writes it
REVISION = r"^[0-9a-f]{40}([0-9a-f]{24})?$"
# A root id is a path of the fleet's directories: the longest a store key may hold of it.
ROOT_MAX_CHARS = 400
SEGMENT_MAX_BYTES = 255  # a file name's limit on every filesystem the blob store runs on
PATCH_ID_MAX_CHARS = 200  # a patch id is free text in its file; Temporal ids stay well short


def _printable(text: str) -> bool:
    """No control, format or unassigned characters (NUL, newlines, bidi overrides)."""
    return all(unicodedata.category(c)[0] != "C" for c in text)


def check_root(root: str) -> str:
    """A root id: `/`-separated segments, none empty, `.` or `..`, no backslash, printable,
    at most ROOT_MAX_CHARS (each segment at most a file name's length)."""
    segments = root.split("/")
    if (
        not root
        or len(root) > ROOT_MAX_CHARS
        or "\\" in root
        or not _printable(root)
        or any(s in ("", ".", "..") or len(s.encode()) > SEGMENT_MAX_BYTES for s in segments)
    ):
        raise ValueError("not a root id")
    return root


def check_patch_id(patch_id: str) -> str:
    """A patch id: one printable path segment of at most PATCH_ID_MAX_CHARS."""
    if (
        not patch_id.strip()
        or len(patch_id) > PATCH_ID_MAX_CHARS
        or "/" in patch_id
        or not _printable(patch_id)
    ):
        raise ValueError("not a patch id")
    return patch_id


DeploymentId = Annotated[str, Path(pattern=DEPLOYMENT_ID)]
Owner = Annotated[str, Path(pattern=f"^{OWNER}$", description="A GitHub owner.")]
RepoName = Annotated[str, Path(pattern=f"^{REPO_NAME}$", description="A repository's name.")]
Revision = Annotated[str, Path(pattern=REVISION, description="A commit id (40 or 64 hex).")]
RootId = Annotated[
    str,
    AfterValidator(check_root),
    Path(description="A root id, e.g. `staging/cluster-a`.", examples=["prod/eu-1"]),
]
PatchId = Annotated[str, AfterValidator(check_patch_id), Path(description="A patch id.")]
# `?repo=OWNER/NAME` of the pages and their JSON: a name GitHub could have, or 422
RepoQuery = Annotated[
    str | None, Query(pattern=REPO_PATTERN, description="owner/name", examples=["acme/fleet"])
]
