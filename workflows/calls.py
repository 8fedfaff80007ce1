"""Every activity call's options, in one table, and the one function that makes the calls.

    ref = await calls.run(ACT_CHECK_RUN, request, options=calls.GITHUB)

The reference (shared.contracts.activityrefs) names the activity and carries its request and
result types, so mypy checks what each call passes and reads.

Long work heartbeats every 5 s and is declared dead after a minute without one; work pinned to
the worker that holds a checkout also has a schedule-to-start timeout, so a worker that
vanished is noticed instead of waited for. Changing a value here changes only new activity
schedules: options are not part of a history's determinism.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from shared.contracts.activityrefs import ActivityRef

RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class Options:
    """How long one kind of activity may run and how it is retried."""

    timeout: timedelta  # start to close
    retry: RetryPolicy | None = None  # None: Temporal's default (backoff, no attempt limit)
    heartbeat: timedelta | None = None
    schedule_to_start: timedelta | None = None


_BEAT = timedelta(minutes=1)
# A pinned task nobody takes within this time means its worker is gone or busy: the
# deployment asks Temporal whether the worker still polls, and asks it again or redoes its work
# on another worker. A worker admits only a few deployments at once (ADMISSION), so a live
# worker takes a task within seconds, even in a fleet-wide change.
_PINNED_START = timedelta(seconds=30)
_PINNED_RETRY = RetryPolicy(maximum_interval=timedelta(minutes=1), maximum_attempts=5)
# A row or a notification for people: a few quick attempts, then the workflow goes on.
_FEW_QUICK = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=3)

# GitHub and the stores: short, retried with backoff until they answer.
GITHUB = STORE = Options(timedelta(minutes=2), RetryPolicy(maximum_interval=timedelta(minutes=1)))
# Queued items' check runs, a batch per activity (each answer heartbeated, so a retry resumes).
GITHUB_BATCH = Options(
    timedelta(minutes=10), RetryPolicy(maximum_interval=timedelta(minutes=1)), _BEAT
)
# Recording a deployment's state or its queued row in SQL; notifying promotions.
RECORD = Options(timedelta(seconds=30), _FEW_QUICK)
NOTIFY = Options(timedelta(minutes=1), _FEW_QUICK)
# Runs on the shared queue and names the worker's own queue (pins what follows to it).
WORKER_QUEUE = Options(timedelta(seconds=30))
# The same for a deployment, on the admission queue: the answer comes once a worker has room
# for it (activities.admission), so a fleet-wide change waits there, with no start limit, not
# on the workers' own queues. It heartbeats while a worker holds it waiting: one lost
# meanwhile hands it to another within a minute.
ADMISSION = Options(timedelta(hours=6), heartbeat=_BEAT)
# Asks Temporal whether a worker still polls its queue; unanswered, the worker counts as lost.
WORKER_ALIVE = Options(timedelta(seconds=30), _FEW_QUICK)

# A deployment, pinned to the worker holding its checkout.
CHECKOUT = Options(timedelta(minutes=20), _PINNED_RETRY, _BEAT, _PINNED_START)
RENDER = Options(timedelta(minutes=30), _PINNED_RETRY, _BEAT, _PINNED_START)
DIFF = Options(timedelta(minutes=10), _PINNED_RETRY, _BEAT, _PINNED_START)
# A deployment's review policy, read from its checkout (a quick file read).
POLICY = Options(timedelta(minutes=5), _PINNED_RETRY, schedule_to_start=_PINNED_START)
# Does a review click count: GitHub's permission and team answers. A few attempts, then the
# click is refused with the reason, and the clicker may click again (the review goes on).
JUDGE = Options(
    timedelta(minutes=1), RetryPolicy(maximum_interval=timedelta(seconds=20), maximum_attempts=5)
)
# Does an Unlock or a rollout click count: the policy from the worker's mirror (a fetch, or a
# clone on a worker that has none yet), then GitHub's answers. As with JUDGE, a few attempts
# and the click is refused with the reason.
JUDGE_CLICK = Options(
    timedelta(minutes=10),
    RetryPolicy(maximum_interval=timedelta(seconds=20), maximum_attempts=5),
    _BEAT,
)
CLEANUP = Options(
    timedelta(minutes=2), RetryPolicy(maximum_attempts=3), schedule_to_start=timedelta(minutes=1)
)
# Publishing is idempotent by deployment id (publishers check for it), so retrying after a
# timeout cannot publish twice; still, a few attempts then a visible failure beat a loop.
# The attempts span about four minutes (5 s, 10 s, 20 s, 40 s, then 1 min apart): a git host
# or S3 endpoint that is away for a moment must not fail a reviewed deployment.
PUBLISH_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=8,
)
PUBLISH = Options(timedelta(minutes=30), PUBLISH_RETRY, _BEAT)

# Delivery verification: reading the rule is quick; the wait itself lasts as long as the
# fleet's `verify` timeout says (see `verify`), heartbeating every poll. A worker lost
# mid-way is noticed within a minute and the wait goes on on another worker.
VERIFY_PLAN = Options(timedelta(minutes=5), RetryPolicy(maximum_interval=timedelta(minutes=1)))
_VERIFY_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=10)


def verify(timeout_seconds: int) -> Options:
    """Options of `verify_delivery` for a plan with this timeout: the activity stops itself
    at its deadline; the margin covers the last poll and the HTTP check's own attempts."""
    return Options(timedelta(seconds=timeout_seconds) + timedelta(minutes=10), _VERIFY_RETRY, _BEAT)


# Dispatch: which roots a push affects, then signalling their deploy queues.
AFFECTED = Options(timedelta(minutes=15), RetryPolicy(maximum_interval=timedelta(minutes=1)), _BEAT)
# Waiting for the repository's previous dispatch (delivery order): the activity gives up after
# its own 15 minutes, so this timeout is only for a worker that died meanwhile.
AWAIT_DISPATCH = Options(
    timedelta(minutes=20), RetryPolicy(maximum_interval=timedelta(minutes=1)), _BEAT
)
SIGNAL_DEPLOYS = Options(
    timedelta(minutes=5), RetryPolicy(maximum_interval=timedelta(seconds=30)), _BEAT
)

# Promotion. Reading the fleet repo and latest.json is retried with backoff, never given up on
# (a broken fleet repo is not an error here: the evaluation says so and the rollout is blocked).
_PROMOTION_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=5)
PROMOTION_TOUCHED = Options(timedelta(minutes=10), _PROMOTION_RETRY, _BEAT)
PROMOTION_SIGNAL = Options(timedelta(minutes=5), _PROMOTION_RETRY, _BEAT)
PROMOTION_READ = Options(
    timedelta(minutes=10), RetryPolicy(maximum_interval=timedelta(minutes=5)), _BEAT
)

# Previews, pinned to one worker. The render heartbeats every 5 s; a cancellation reaches it
# with a heartbeat answer, which the SDK sends at most every 0.8 × heartbeat timeout: 30 s
# keeps that under half a minute.
_PREVIEW_RETRY = RetryPolicy(maximum_interval=timedelta(minutes=1), maximum_attempts=3)
PREVIEW_FETCH = Options(timedelta(minutes=20), _PREVIEW_RETRY, timedelta(seconds=30), _PINNED_START)
PREVIEW_BUILD = Options(timedelta(minutes=30), _PREVIEW_RETRY, timedelta(seconds=30), _PINNED_START)


def start(
    activity: ActivityRef[RequestT, Any],
    request: RequestT,
    *,
    options: Options,
    task_queue: str | None = None,
) -> workflow.ActivityHandle[Any]:
    """Start `activity` and do not wait for it (nor cancel it when the workflow ends): for
    work nobody should wait on, such as removing a checkout."""
    handle = workflow.start_activity(
        activity.name,
        args=_args(activity, request),
        task_queue=task_queue,
        start_to_close_timeout=options.timeout,
        schedule_to_start_timeout=options.schedule_to_start,
        heartbeat_timeout=options.heartbeat,
        retry_policy=options.retry,
        cancellation_type=ActivityCancellationType.ABANDON,
    )
    # Its failure is only logged by the worker that ran it; nobody reads the result.
    handle.add_done_callback(lambda done: done.cancelled() or done.exception())
    return handle


async def run(
    activity: ActivityRef[RequestT, ResultT],
    request: RequestT,
    *,
    options: Options,
    task_queue: str | None = None,
) -> ResultT:
    """Execute `activity` with `request` under `options` (on `task_queue` when pinned)."""
    result: ResultT = await workflow.execute_activity(
        activity.name,
        args=_args(activity, request),
        result_type=activity.result,
        task_queue=task_queue,
        start_to_close_timeout=options.timeout,
        schedule_to_start_timeout=options.schedule_to_start,
        heartbeat_timeout=options.heartbeat,
        retry_policy=options.retry,
    )
    return result


def _args(activity: ActivityRef[Any, Any], request: object) -> list[object]:
    # An activity that takes nothing is called with no argument, not with None.
    return [] if activity.request is None else [request]
