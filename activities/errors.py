"""Which failures Temporal retries: mistakes in the fleet repo never, infrastructure always.

Activities raise `ApplicationError(non_retryable=True)` for anything a retry cannot fix (a
fleet error, a revision that does not exist, GitHub refusing a request) and let other
exceptions through, so the workflow's retry policy handles network, disk and 5xx trouble.
Messages reach check runs: they are built from redacted text only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from temporalio.exceptions import ApplicationError

from shared.errors import FleetError
from shared.gitmirror import RevisionNotFound
from shared.payloads import ERR_FLEET

ERR_REVISION_NOT_FOUND = "RevisionNotFound"
ERR_GITHUB_REQUEST = "GitHubRequestError"
ERR_NOT_CONFIGURED = "NotConfigured"
ERR_MISSING_RENDER = "MissingRender"


def fleet_error(err: FleetError) -> ApplicationError:
    # str(FleetErrors) lists every problem; the engine's messages never carry secret values.
    # A SOPS run that timed out or could not start is not the repo's fault: retried.
    return ApplicationError(str(err), type=ERR_FLEET, non_retryable=not _retryable(err))


def _retryable(err: BaseException | None) -> bool:
    """A `retryable` flag anywhere down the chain (`FleetError.within` wraps the original)."""
    seen = 0
    while err is not None and seen < 20:
        if getattr(err, "retryable", False) is True:
            return True
        err, seen = err.__cause__, seen + 1
    return False


@contextmanager
def fleet_mistakes() -> Iterator[None]:
    """Turn fleet-repo mistakes raised inside into non-retryable ApplicationErrors."""
    try:
        yield
    except FleetError as err:
        raise fleet_error(err) from None
    except RevisionNotFound as err:
        raise ApplicationError(str(err), type=ERR_REVISION_NOT_FOUND, non_retryable=True) from None
