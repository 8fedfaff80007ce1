"""GitHub's own `pull_request` webhook payloads, pointed at another repository and head.

The payloads are GitHub's own examples, vendored in `tests/fixtures/github/webhooks/`; only
the repository, installation, number, refs and shas change, every other field stays as GitHub
sent it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.support.vendored import GITHUB_WEBHOOKS as WEBHOOKS

OPENED = "pull_request.opened.12.json"
SYNCHRONIZE = "pull_request.synchronize.22.json"


def pr_payload(
    fixture: str,
    *,
    repo: str,
    clone_url: str,
    installation: int,
    number: int,
    head: str,
    branch: str,
    base: str,
    base_ref: str = "main",
    before: str | None = None,
) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((WEBHOOKS / fixture).read_text())
    owner, name = repo.split("/")
    repository = payload["repository"]
    repository.update(
        {
            "name": name,
            "full_name": repo,
            "clone_url": clone_url,
            "html_url": f"https://github.com/{repo}",
            "default_branch": base_ref,
        }
    )
    repository["owner"]["login"] = owner
    payload["installation"]["id"] = installation
    payload["number"] = number
    pull = payload["pull_request"]
    pull["number"] = number
    for side, ref, sha in (("head", branch, head), ("base", base_ref, base)):
        pull[side].update({"ref": ref, "sha": sha, "label": f"{owner}:{ref}"})
        pull[side]["repo"] = copy.deepcopy(repository)
    if before is not None:
        payload["before"], payload["after"] = before, head
    return payload
