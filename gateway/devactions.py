"""Dev mode only (`ROLLWRIGHT_DEV_MODE`, set by the embedded stack): the job page's Approve /
Reject / Unlock buttons, through the GitHub emulator.

A click here is a click on the emulator's check run (`POST /_emulator/check-runs/{id}/click`),
which sends the signed `check_run.requested_action` webhook to the gateway's `/events` like
GitHub does — the normal path, nothing is signalled from here. So the page offers exactly the
buttons the deployment's check runs offer: Approve / Reject while it awaits review, Unlock on a
merge that waits behind a locked queue. The emulator's control API has no authentication and
listens on loopback; in production none of this exists (the routes answer 404).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from shared.contracts.checkrun import check_run_name
from shared.settings import Settings

IDENTIFIERS = ("approve", "reject", "unlock")
TIMEOUT_SECONDS = 10.0


class EmulatorError(RuntimeError):
    """The emulator did not answer, or refused the click."""


@dataclass(frozen=True)
class Button:
    identifier: str
    label: str
    check_run_id: int


def buttons(settings: Settings, repo: str, root: str, deployment_id: str) -> list[Button]:
    """The buttons this deployment's check runs offer now: its own newest run's, plus
    Unlock from any run of the root when the root's queue is locked."""
    state = _get(settings, "/_emulator/state")
    runs = [run for run in state.get("check_runs", []) if run.get("repository") == repo]
    own = [run for run in runs if run["state"].get("external_id") == deployment_id]
    found: dict[str, Button] = {}
    if own:
        newest = max(own, key=lambda run: int(run["id"]))
        for action in newest["state"].get("actions") or []:
            if action["identifier"] in IDENTIFIERS:
                found[action["identifier"]] = Button(
                    action["identifier"], action["label"], int(newest["id"])
                )
    if "unlock" not in found:
        # Unlock acts on the root's queue, so any of its runs offering it is the same click.
        name = check_run_name(root)
        for run in sorted(runs, key=lambda run: -int(run["id"])):
            if run["state"].get("name") != name:
                continue
            if any(a["identifier"] == "unlock" for a in run["state"].get("actions") or []):
                found["unlock"] = Button("unlock", "Unlock", int(run["id"]))
                break
    return [found[i] for i in IDENTIFIERS if i in found]


def click(settings: Settings, check_run_id: int, identifier: str, sender: str) -> None:
    body = json.dumps({"identifier": identifier, "sender": sender}).encode()
    answer = _request(
        settings, f"/_emulator/check-runs/{check_run_id}/click", data=body, method="POST"
    )
    status = int(answer.get("status") or 0)
    if not 200 <= status < 300:
        raise EmulatorError(
            f"clicking {identifier} on check run {check_run_id}: the gateway answered the "
            f"webhook with {status}"
        )


def _get(settings: Settings, path: str) -> dict[str, Any]:
    return _request(settings, path, data=None, method="GET")


def _request(settings: Settings, path: str, *, data: bytes | None, method: str) -> dict[str, Any]:
    url = settings.github_api_url.rstrip("/") + path
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer
    except urllib.error.HTTPError as err:
        detail = err.read().decode("utf-8", "replace")[:300]
        raise EmulatorError(
            f"{method} {url}: the GitHub emulator answered {err.code}: {detail}"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise EmulatorError(f"{method} {url}: {err}") from None
