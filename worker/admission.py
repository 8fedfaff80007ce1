"""Ends a deployment's hold on this worker (activities.admission) when its pinned work ends
here: the review policy read (its last pinned step before review), the checkout's clean-up,
or any pinned activity of it failing (the deployment then fails, is asked again, or moves to
another worker; a retry here runs without a hold, which only lets one more in)."""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from activities.admission import Admission
from shared.contracts.activityrefs import ACT_CLEANUP_CHECKOUT, ACT_REVIEW_POLICY

ENDS_HOLD = frozenset({ACT_REVIEW_POLICY.name, ACT_CLEANUP_CHECKOUT.name})


class AdmissionRelease(Interceptor):
    """For the worker of this process's own queue: releases the holds of `admission`."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Releasing(next, self.admission)


class _Releasing(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, admission: Admission) -> None:
        super().__init__(next)
        self.admission = admission

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        holder = info.workflow_id
        try:
            result = await super().execute_activity(input)
        except BaseException:
            if holder:
                self.admission.release(holder)
            raise
        if holder and info.activity_type in ENDS_HOLD:
            self.admission.release(holder)
        return result
