"""rollwright.yaml `hotfix`: deploying an unmerged pull request's head to chosen roots
(`/rollwright hotfix <root>…` on the pull request; docs/governance.md, "Hotfixes").

Read from the default branch only, never from the pull request asking: a pull request cannot
loosen the rules it is judged by. Without the section nobody may hotfix."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from shared.engine.config.parsing import StrictModel

_TEAM = re.compile(r"^@?[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class HotfixSettings(StrictModel):
    """What a pull request must meet before its head is deployed ahead of its merge."""

    roots: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs of the root ids a hotfix may deploy to (`prod/*`; `*` matches "
        "across `/`). Default: every root.",
    )
    approvals: int = Field(
        default=1,
        ge=0,
        le=20,
        description="Approving reviews of the pull request's head commit, by people other than "
        "its author, with no change requested after them. Default 1.",
    )
    author_team: str | None = Field(
        default=None,
        alias="authorTeam",
        description="The pull request's author must be a member of this team (`@org/team`).",
    )
    checks: bool = Field(
        default=True,
        description="Every check run and commit status on the head (other than rollwright's "
        "own) has finished green: success, neutral or skipped.",
    )

    @field_validator("author_team")
    @classmethod
    def _team(cls, value: str | None) -> str | None:
        if value is not None and not _TEAM.match(value):
            raise ValueError(f"{value!r} is not a team (@org/team-slug)")
        return value if value is None else "@" + value.lstrip("@")
