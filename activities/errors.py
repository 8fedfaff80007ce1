"""Which failures Temporal retries: mistakes in the fleet repo never, infrastructure always.

Activities raise `ApplicationError(non_retryable=True)` for anything a retry cannot fix (a
fleet error, a revision that does not exist, GitHub refusing a request) and let other
exceptions through, so the workflow's retry policy handles network, disk and 5xx trouble.
Messages reach check runs: they are built from redacted text only.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError

from shared.contracts.deploy import ERR_FLEET
from shared.engine.errors import FleetError
from shared.github.app import GitHubError, GitHubRetryableError
from shared.stores.gitmirror import RevisionNotFound

ERR_REVISION_NOT_FOUND = "RevisionNotFound"
ERR_GITHUB_REQUEST = "GitHubRequestError"
ERR_GITHUB_RETRYABLE = "GitHubRetryableError"
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


@contextmanager
def github_errors() -> Iterator[None]:
    """GitHub's answers as Temporal sees them: 5xx, rate limits and the network are retried
    (after GitHub's `Retry-After` when it gives one); GitHub refusing a request, or rollwright
    refusing to send one GitHub would refuse (its limits, raised as ValueError), is final."""
    try:
        yield
    except GitHubRetryableError as err:
        delay = timedelta(seconds=err.retry_after) if err.retry_after else None
        raise ApplicationError(
            str(err), type=ERR_GITHUB_RETRYABLE, next_retry_delay=delay
        ) from None
    except (GitHubError, ValueError) as err:
        raise ApplicationError(str(err), type=ERR_GITHUB_REQUEST, non_retryable=True) from None


@contextmanager
def withhold_unexpected(
    operation: str, *, quotable: tuple[type[Exception], ...] = ()
) -> Iterator[None]:
    """Around work that holds plaintext (render, publish, preview): an exception rollwright did
    not word itself may quote a secret value, and Temporal would store its message (check runs
    show it) and the SDK would log it.

    ApplicationErrors and the `quotable` types (errors built to name paths and targets only)
    pass; a fleet error becomes `fleet_error` (redacted by `shared.engine.fleet`); anything else is
    logged as its type and a traceback without messages, and re-raised as an ApplicationError
    of the same type (retryable, as the SDK's own conversion) with a generic message, not
    chained."""
    try:
        yield
    except ApplicationError:
        raise
    except FleetError as err:
        raise fleet_error(err) from None
    except Exception as err:
        if quotable and isinstance(err, quotable):
            raise
        kind = type(err).__name__
        activity.logger.error(
            "activity raised an unexpected error",
            extra={"operation": operation, "error_type": kind, "traceback": _traceback(err)},
        )
        raise ApplicationError(
            f"{operation}: an unexpected {kind} (message withheld: it may quote a secret; "
            "the worker log has its traceback)",
            type=kind,
        ) from None


def _traceback(err: BaseException) -> str:
    """The traceback of `err` and the exceptions it chains, with each message left out."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen and len(seen) < 10:
        seen.add(id(current))
        frames = "".join(traceback.format_tb(current.__traceback__))
        parts.append(f"{frames}{type(current).__qualname__}: (message withheld)\n")
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return "\nwhich led to:\n".join(reversed(parts))
