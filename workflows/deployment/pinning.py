"""Worker pinning: a deployment's checkout, render, diff and policy read run on the one worker
that holds its checkout. These rules say what a failed pinned activity means for that worker
(lost, maybe only busy, or the work itself failed), when the work is redone on another worker
(at most MAX_WORKER_LOSSES times), and what the check run says when it is.

Plain values in, no Temporal: the workflow reads the facts off the activity's error.
"""

from __future__ import annotations

from typing import Literal

from shared.contracts.deploy import ERR_CHECKOUT_GONE

# The SDK counter of pinned work failing on its worker, by the step taken next (the workflow
# emits it; deploy/monitoring/dashboard.json charts it).
FAILURES_METRIC = "rollwright_pinned_worker_failures"
# Workers lost before the deployment gives up and fails visibly.
MAX_WORKER_LOSSES = 3
# Temporal's TimeoutType name (lower case) of a task nobody took within its start limit.
SCHEDULE_TO_START = "schedule_to_start"

# lost: the worker stopped heartbeating or finishing in time, or the checkout it left is gone.
# unstarted: nobody took the task within the start limit: the worker is lost or only busy (a
#   fleet-wide change queues hundreds of renders on each worker); only asking it tells.
# failed: the activity itself failed: another worker would do no better.
Failure = Literal["lost", "unstarted", "failed"]
# again: ask the same worker again (it is busy); repin: redo the work on a live worker; fail.
Step = Literal["again", "repin", "fail"]


def classify(*, timeout: str | None, error_type: str | None) -> Failure:
    """What a failed pinned activity says about its worker. `timeout`: the kind of timeout it
    failed with (`schedule_to_start`, `heartbeat`, …, `unknown`), None when it did not time
    out; `error_type`: the type of its application error, if it raised one."""
    if timeout == SCHEDULE_TO_START:
        return "unstarted"
    if timeout is not None or error_type == ERR_CHECKOUT_GONE:
        return "lost"
    return "failed"


def next_step(failure: Failure, *, losses: int, busy: bool = False) -> Step:
    """What the deployment does after `failure`, having lost `losses` workers so far. `busy`:
    the worker of an unstarted task still polls its queue."""
    if failure == "failed":
        return "fail"
    if failure == "unstarted" and busy:
        return "again"
    return "repin" if losses < MAX_WORKER_LOSSES else "fail"


def repin_message(*, doing: str, lost: str, now: str, losses: int) -> str:
    """The check run's word on starting over: `losses` counts the worker just lost."""
    return (
        f"The worker {doing} this deployment (`{lost}`) was lost; rendering again on `{now}` "
        f"(attempt {losses + 1} of {MAX_WORKER_LOSSES + 1})."
    )
