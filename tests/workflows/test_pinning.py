"""Worker pinning: what a failed pinned activity says about its worker, and what follows."""

from __future__ import annotations

import pytest

from shared.contracts.deploy import ERR_CHECKOUT_GONE, ERR_FLEET
from workflows.deployment.pinning import (
    MAX_WORKER_LOSSES,
    Failure,
    Step,
    classify,
    next_step,
    repin_message,
)


@pytest.mark.parametrize(
    ("timeout", "error_type", "failure"),
    [
        ("schedule_to_start", None, "unstarted"),
        ("heartbeat", None, "lost"),
        ("start_to_close", None, "lost"),
        ("unknown", None, "lost"),
        (None, ERR_CHECKOUT_GONE, "lost"),
        (None, ERR_FLEET, "failed"),
        (None, None, "failed"),
    ],
)
def test_a_failure_is_classified_by_its_timeout_or_error_type(
    timeout: str | None, error_type: str | None, failure: Failure
) -> None:
    assert classify(timeout=timeout, error_type=error_type) == failure


@pytest.mark.parametrize(
    ("failure", "losses", "busy", "step"),
    [
        ("failed", 0, False, "fail"),
        ("lost", 0, False, "repin"),
        ("lost", MAX_WORKER_LOSSES - 1, False, "repin"),
        ("lost", MAX_WORKER_LOSSES, False, "fail"),
        ("unstarted", 0, False, "repin"),
        # A busy worker is asked again however many workers were lost before.
        ("unstarted", MAX_WORKER_LOSSES, True, "again"),
        ("unstarted", MAX_WORKER_LOSSES, False, "fail"),
        # Only an unstarted task asks whether its worker is busy.
        ("lost", 0, True, "repin"),
        ("failed", 0, True, "fail"),
    ],
)
def test_the_next_step_counts_losses_against_the_limit(
    failure: Failure, losses: int, busy: bool, step: Step
) -> None:
    assert next_step(failure, losses=losses, busy=busy) == step


def test_the_repin_message_names_both_workers_and_the_attempt() -> None:
    message = repin_message(doing="rendering", lost="gone-1", now="worker-2", losses=1)
    assert message == (
        "The worker rendering this deployment (`gone-1`) was lost; rendering again on "
        f"`worker-2` (attempt 2 of {MAX_WORKER_LOSSES + 1})."
    )
