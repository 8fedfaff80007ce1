"""What workflow code may say of an activity's failure on a check run, a pull request comment,
a query or the log: the message of an error rollwright words itself, else only the error's
type. Any other message may quote a secret (a decrypted value in an exception's text)."""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

from shared.contracts.deploy import ERR_FLEET
from shared.contracts.preview import ERR_PREVIEW_REVISION

# Error types whose messages rollwright writes from safe text: fleet errors (redacted by
# `shared.engine.fleet`), a missing revision or base branch, GitHub's answers, no App
# configured (activities/errors.py, activities/github.py).
QUOTED_ERRORS = frozenset(
    {
        ERR_FLEET,
        ERR_PREVIEW_REVISION,
        "RevisionNotFound",
        "GitHubRequestError",
        "GitHubRetryableError",
        "NotConfigured",
    }
)


def quoted(err: ActivityError) -> str:
    """`err` in words that may be shown."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type in QUOTED_ERRORS:
        return cause.message
    if isinstance(cause, ApplicationError):
        kind = cause.type or "ApplicationError"
        return (
            f"an unexpected `{kind}` in `{err.activity_type or 'an activity'}` (its message is "
            "not shown here, as it may quote a secret); see the worker log"
        )
    if isinstance(cause, ActivityTimeout):
        kind = cause.type.name.lower() if cause.type else "unknown"
        return f"the worker did not finish in time ({kind} timeout)"
    return str(cause or err)
