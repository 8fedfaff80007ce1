"""rollwright.yaml `rollout`: patch promotion's step, soak, rollback and promotion windows
(docs/promotion.md); `shared.engine.config.windows` gives the windows their meaning."""

from __future__ import annotations

import zoneinfo
from typing import Literal

from pydantic import Field, field_validator, model_validator

from shared.engine.config.durations import DURATION_PATTERN, duration_seconds
from shared.engine.config.parsing import StrictModel


def _check_timezone(value: str) -> str:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {value!r} (an IANA name such as Europe/Berlin or UTC)"
        ) from None
    return value


class PromotionWindow(StrictModel):
    """One promotion window rule: exactly one of `allow` and `deny` (docs/promotion.md)."""

    allow: str | None = Field(
        default=None,
        description="Occurrences that open an allow window: a cron expression (5 fields: "
        "minute hour day-of-month month day-of-week) or an RFC 5545 rule "
        "`RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH;BYHOUR=9` (FREQ DAILY, WEEKLY, MONTHLY or "
        "YEARLY), read in `timezone`.",
    )
    deny: str | None = Field(
        default=None, description="Like `allow`, for a window that closes promotions."
    )
    duration: str = Field(
        pattern=DURATION_PATTERN,
        description="How long each window lasts from its start (elapsed time): 30m, 8h, 2d.",
    )
    timezone: str | None = Field(
        default=None,
        description="IANA time zone of the expression (default: rollout.timezone).",
    )
    nodes: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs of sequence nodes the rule gates (`prod*`, `stage/*`); `*` "
        "matches across `/`. Default: every node.",
    )

    @field_validator("timezone")
    @classmethod
    def _check_zone(cls, value: str | None) -> str | None:
        return None if value is None else _check_timezone(value)

    @model_validator(mode="after")
    def _check_rule(self) -> PromotionWindow:
        # Start-up time: croniter and dateutil load only for fleets that have windows.
        from shared.engine.config.schedule import parse_schedule  # noqa: PLC0415

        if (self.allow is None) == (self.deny is None):
            raise ValueError("a window needs exactly one of allow and deny")
        parse_schedule(self.expression)
        if duration_seconds(self.duration) <= 0:
            raise ValueError("duration must be longer than 0")
        return self

    @property
    def kind(self) -> Literal["allow", "deny"]:
        return "allow" if self.allow is not None else "deny"

    @property
    def expression(self) -> str:
        return self.allow if self.allow is not None else (self.deny or "")


class RolloutSettings(StrictModel):
    """Patch promotion (docs/promotion.md): step size, default soak, promotion windows."""

    step: str | None = Field(
        default=None,
        pattern=r"^[a-z][a-z0-9_]*$",
        description="How far one promotion moves a patch by default: a dimension of "
        "config/config.yaml, singular or as written (environment, sector, region, or any "
        "other). Default: the last dimension, one place at a time (the finest). `rollwright "
        "promote --to` may name any node.",
    )
    soak: str = Field(
        default="0",
        pattern=DURATION_PATTERN,
        description="Soak time of nodes without their own `soak` in config/config.yaml: how "
        "long a patch stays healthy on a node before it moves on (0, 30m, 2h, 1d).",
    )
    timezone: str = Field(default="UTC", description="Default time zone of the windows.")
    rollback: Literal["manual", "auto"] = Field(
        default="manual",
        description="When a deployment under the node a patch was promoted to fails or is "
        "unhealthy: `manual` halts the rollout (people decide; Resume tries again); `auto` "
        "also commits the revert of that promotion, so the previous render is deployed and "
        "verified again (docs/verification.md).",
    )
    windows: list[PromotionWindow] = Field(
        default_factory=list,
        description="Promotion windows. Deny beats allow; without allow rules for a node, "
        "promotions to it are allowed whenever no deny window is in force.",
    )

    @field_validator("timezone")
    @classmethod
    def _check_zone(cls, value: str) -> str:
        return _check_timezone(value)

    @property
    def soak_seconds(self) -> int:
        return duration_seconds(self.soak)
