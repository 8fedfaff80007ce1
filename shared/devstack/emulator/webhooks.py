"""Webhook delivery in the GitHub emulator: GitHub-shaped, signed deliveries of any payload
(signed over the exact bytes sent, with GitHub's headers), redelivery, and the payloads it
computes: a `push` from the seeded git repository and the `check_run.requested_action` a
button click produces."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.devstack.emulator.git import ZERO_SHA, git, git_output
from shared.devstack.emulator.model import App, Repo, WebhookDelivery
from shared.devstack.emulator.shapes import Shapes, stable_id, user_json
from shared.devstack.emulator.state import Store
from shared.github.app import webhook_signature

HOOKSHOT_AGENT = "GitHub-Hookshot/rollwright-emulator"


class Webhooks:
    """The emulator's webhook sender: to `url`, signed with `secret`, unless told otherwise."""

    def __init__(
        self,
        app: App,
        store: Store,
        shapes: Shapes,
        base_url: Callable[[], str],
        *,
        url: str | None,
        secret: str | None,
    ) -> None:
        self._app = app
        self._store = store
        self._shapes = shapes
        self._base_url = base_url  # the emulator's URL, for payloads built outside a request
        self.url = url  # where deliveries go unless told otherwise (None: nowhere)
        self._secret = secret

    def deliveries(self) -> list[WebhookDelivery]:
        with self._store.lock:
            return list(self._store.deliveries)

    def send_webhook(
        self,
        event: str,
        payload: dict[str, Any] | bytes,
        url: str | None = None,
        secret: str | None = None,
        *,
        delivery_id: str | None = None,
    ) -> WebhookDelivery:
        """POST a webhook like GitHub does: signed over the exact bytes sent."""
        target = url or self.url
        if not target:
            raise ValueError("no webhook URL: pass url= or configure webhook_url")
        key = secret if secret is not None else self._secret
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        delivery = delivery_id or str(uuid.uuid4())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": HOOKSHOT_AGENT,
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery,
            "X-GitHub-Hook-ID": "1",
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-GitHub-Hook-Installation-Target-ID": str(self._app.id),
        }
        if key:
            headers["X-Hub-Signature-256"] = webhook_signature(key, body)
            # GitHub still sends the legacy SHA-1 header alongside
            legacy = hmac.new(key.encode(), body, hashlib.sha1).hexdigest()
            headers["X-Hub-Signature"] = f"sha1={legacy}"
        request = urllib.request.Request(target, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as err:
            status, text = err.code, err.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError) as err:
            raise ConnectionError(f"delivering webhook {event} to {target}: {err}") from err
        result = WebhookDelivery(event, delivery, target, body, headers, status, text)
        with self._store.lock:
            self._store.deliveries.append(result)
        return result

    def redeliver(self, delivery_id: str) -> WebhookDelivery:
        """Send a past delivery again, same GUID and bytes (GitHub's "Redeliver")."""
        with self._store.lock:
            past = next((d for d in self._store.deliveries if d.delivery_id == delivery_id), None)
        if past is None:
            raise KeyError(f"no webhook delivery {delivery_id}")
        return self.send_webhook(past.event, past.body, past.url, delivery_id=delivery_id)

    def requested_action_payload(
        self, check_run_id: int, identifier: str, sender_login: str
    ) -> dict[str, Any]:
        """The `check_run.requested_action` payload GitHub sends when a button is clicked."""
        with self._store.lock:
            run = self._store.check_runs.get(check_run_id)
            if run is None:
                raise KeyError(f"no check run {check_run_id}")
            offered = [a["identifier"] for a in run.state["actions"]]
            if identifier not in offered:
                raise ValueError(
                    f"check run {check_run_id} ({run.name}) has no button {identifier!r}; "
                    f"it offers {offered or 'none'}"
                )
            repo = self._store.repo(run.owner, run.repo)
            base = self._base_url()
            payload: dict[str, Any] = {
                "action": "requested_action",
                "check_run": self._shapes.check_run(run, base, webhook=True),
                "requested_action": {"identifier": identifier},
                "repository": self._shapes.repository(repo, base),
            }
            if repo.owner_type == "Organization":
                payload["organization"] = self._shapes.organization(repo, base)
            payload["sender"] = user_json(sender_login, stable_id(sender_login), "User", base)
            payload["installation"] = self._shapes.installation_ref(repo)
            return payload

    def click_action(
        self, check_run_id: int, identifier: str, sender_login: str
    ) -> WebhookDelivery:
        """Someone clicks a check-run button: send `check_run.requested_action`."""
        payload = self.requested_action_payload(check_run_id, identifier, sender_login)
        return self.send_webhook("check_run", payload)

    def push_payload(
        self,
        owner: str,
        repo: str,
        before: str,
        after: str,
        *,
        ref: str | None = None,
        pusher: str = "octocat",
        forced: bool | None = None,
    ) -> dict[str, Any]:
        """A `push` payload computed from the seeded git repository (commits, files, forced)."""
        with self._store.lock:
            record = self._store.repo(owner, repo)
        if record.git_dir is None:
            raise ValueError(f"{owner}/{repo} was seeded without git_dir; push needs git")
        base = self._base_url()
        git_dir = record.git_dir
        deleted = after == ZERO_SHA
        created = before == ZERO_SHA
        commits: list[dict[str, Any]] = []
        if not deleted:
            span = [after] if created else [f"{before}..{after}"]
            shas = git(git_dir, "rev-list", "--reverse", "--max-count=20", *span).split()
            commits = [_push_commit(git_dir, sha, record, base) for sha in shas]
        if forced is None:
            forced = (
                not created
                and not deleted
                and git_output(git_dir, "merge-base", "--is-ancestor", before, after) is None
            )
        head = (
            None
            if deleted
            else (commits[-1] if commits else _push_commit(git_dir, after, record, base))
        )
        payload: dict[str, Any] = {
            "ref": ref or f"refs/heads/{record.default_branch}",
            "before": before,
            "after": after,
            "repository": self._shapes.repository(record, base, push=True),
            "pusher": {"name": pusher, "email": f"{pusher}@users.noreply.github.com"},
            "sender": user_json(pusher, stable_id(pusher), "User", base),
            "installation": self._shapes.installation_ref(record),
            "created": created,
            "deleted": deleted,
            "forced": forced,
            "base_ref": None,
            "compare": f"{base}/{owner}/{repo}/compare/{before[:12]}...{after[:12]}",
            "commits": commits,
            "head_commit": head,
        }
        if record.owner_type == "Organization":
            payload["organization"] = self._shapes.organization(record, base)
        return payload

    def send_push(
        self, owner: str, repo: str, before: str, after: str, *, ref: str | None = None
    ) -> WebhookDelivery:
        return self.send_webhook("push", self.push_payload(owner, repo, before, after, ref=ref))


def _push_commit(git_dir: Path, sha: str, repo: Repo, base: str) -> dict[str, Any]:
    fmt = "%H%x00%T%x00%an%x00%ae%x00%cn%x00%ce%x00%cI%x00%B"
    fields = git(git_dir, "show", "-s", f"--format={fmt}", sha).split("\x00")
    commit_sha, tree, an, ae, cn, ce, cd, message = fields[:8]
    changes: dict[str, list[str]] = {"added": [], "removed": [], "modified": []}
    listing = git(git_dir, "diff-tree", "--no-commit-id", "-r", "--name-status", "--root", sha)
    for line in listing.splitlines():
        code, _, name = line.partition("\t")
        bucket = {"A": "added", "D": "removed"}.get(code[:1], "modified")
        changes[bucket].append(name)
    return {
        "id": commit_sha,
        "tree_id": tree,
        "distinct": True,
        "message": message.rstrip("\n"),
        "timestamp": cd,
        "url": f"{base}/{repo.full_name}/commit/{commit_sha}",
        "author": {"name": an, "email": ae, "username": an},
        "committer": {"name": cn, "email": ce, "username": cn},
        **changes,
    }
