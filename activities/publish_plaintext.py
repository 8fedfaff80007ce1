"""The plaintext of a reviewed render, rebuilt on the publishing worker and made deliverable.

The blob store holds only the redacted render, so publishers that deliver real manifests (git,
S3) render the root again here: a temporary worktree of the revision from the worker's mirror
(removed afterwards), the same engine call as the render activity, then a digest check — a
render that differs from the one reviewed (a remote chart re-published under the same version,
a rotated key) is refused, because publishing it would deliver something nobody approved.
Finally the secrets policy (shared.engine.publish_secrets) turns the plaintext into files that
may be written to the target.

The plaintext lives in this process's memory only: never logged, stored or put in an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from temporalio.exceptions import ApplicationError

from activities.render import shared_fleet
from shared.contracts.deploy import PublishRequest
from shared.engine.config.fleet import FleetConfig
from shared.engine.fleet import Fleet
from shared.engine.publish_secrets import publishable_files, secret_files
from shared.engine.render import Render
from shared.engine.tree import GitTree
from shared.stores.gitmirror import GitMirror

ERR_RENDER_MISMATCH = "RenderMismatch"


@dataclass(frozen=True)
class PublishTree:
    """What a publisher writes for one root: root-relative path → bytes, secrets encrypted."""

    files: dict[str, bytes] = field(repr=False)
    digest: str  # the plaintext digest, equal to the reviewed render's
    encrypted: list[str] = field(default_factory=list)  # files sops re-encrypted
    inspected: object = None  # what `publish_tree`'s `inspect` read from the fleet


def fleet_config(mirror: GitMirror, request: PublishRequest) -> FleetConfig:
    """`rollwright.yaml` at the deployment's revision (read from the mirror, no checkout)."""
    path = mirror.ensure(request.repo, request.revision)
    return FleetConfig.load(GitTree(path, request.revision))


def publish_tree(
    mirror: GitMirror,
    request: PublishRequest,
    config: FleetConfig,
    *,
    expected_digest: str,
    target: str,
    published_path: Callable[[str], str],
    inspect: Callable[[Fleet], object] | None = None,
) -> PublishTree:
    """Render `request.root` at `request.revision` again and apply the secrets policy.

    `target` describes the destination for messages (`git branch "rendered" of acme/fleet`);
    `published_path(path)` is where a root-relative file lands there (sops picks its creation
    rule by that path). `inspect` reads more from the fleet that rendered (a commodore
    cluster's compile record), into `PublishTree.inspected`. Raises a non-retryable
    `ApplicationError` when the render differs from the reviewed one, `FleetError`s for the
    fleet's mistakes.
    """
    name = "publish-" + re.sub(r"[^A-Za-z0-9._-]", "-", request.deployment_id)
    checkout, _ = mirror.checkout(request.repo, request.revision, name)
    try:
        fleet, _ = shared_fleet(checkout, share=False)
        present = request.root in set(fleet.roots())
        render = fleet.render(request.root) if present else Render.of(request.root, {})
        inspected = inspect(fleet) if inspect is not None and present else None
        if render.digest != expected_digest:
            raise ApplicationError(
                f'publishing root "{request.root}" at {request.revision[:12]} to {target}: '
                f"the render on this worker ({render.digest}) is not the reviewed render "
                f"({expected_digest}); nothing was published. A remote chart or a key may "
                "have changed since the review: deploy again to review the current render.",
                type=ERR_RENDER_MISMATCH,
                non_retryable=True,
            )
        policy = config.publish.secrets
        files = publishable_files(
            render, policy, target=target, published_path=published_path, checkout=checkout
        )
        encrypted = sorted(secret_files(render)) if policy == "sops" else []
        return PublishTree(
            files=files, digest=render.digest, encrypted=encrypted, inspected=inspected
        )
    finally:
        mirror.remove_checkout(checkout)
