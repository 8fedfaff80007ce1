"""rollwright.yaml `review`: who reviews the deployments of which roots (docs/governance.md)."""

from __future__ import annotations

import fnmatch
import re
from typing import Literal

from pydantic import Field, field_validator

from shared.engine.config.parsing import StrictModel

# A GitHub login (bots included) or a team as `@org/team-slug`.
_APPROVER = re.compile(
    r"^(@[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9][A-Za-z0-9._-]*|[A-Za-z0-9][A-Za-z0-9-]*(\[bot\])?)$"
)
ReviewMode = Literal["always", "on-change", "never"]


def check_logins(value: list[str]) -> list[str]:
    for entry in value:
        if not _APPROVER.match(entry):
            raise ValueError(f"{entry!r} is neither a GitHub login nor a team (@org/team)")
    return value


class ReviewRule(StrictModel):
    """Who reviews the deployments of the roots a rule matches (docs/governance.md)."""

    roots: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs of root ids (`prod/*`; `*` matches across `/`). Default: every root.",
    )
    environments: list[str] | None = Field(
        default=None,
        description="dimensions layout only: globs of the root's first dimension (its "
        "environment, the second segment of the root id). A rule with `environments` never "
        "matches an atlas root.",
    )
    review: ReviewMode = Field(
        default="on-change",
        description="When a deployment waits for a review: `on-change` (a non-empty diff, a "
        "manual deployment or a diverged revision), `always` (also an empty diff), `never` "
        "(merge deployments publish without review; manual and diverged ones still ask).",
    )
    approvers: list[str] = Field(
        default_factory=list,
        description="Who may approve: GitHub logins and teams (`@org/team-slug`). Empty: "
        "anyone with write access. Only users with write access to the repository ever count.",
    )
    distinct_approver: bool = Field(
        default=False,
        alias="distinctApprover",
        description="The person who pushed or asked for the deployment cannot approve it.",
    )

    @field_validator("approvers")
    @classmethod
    def _check_approvers(cls, value: list[str]) -> list[str]:
        return check_logins(value)


class ReviewSettings(StrictModel):
    """Review policy (docs/governance.md): the last rule matching a root wins."""

    rules: list[ReviewRule] = Field(
        default_factory=list,
        description="Review rules by root pattern; roots no rule matches get the defaults "
        "(review on change, anyone with write access approves).",
    )
    admins: list[str] = Field(
        default_factory=list,
        description="Logins and teams (`@org/team`) whose approval satisfies every rule and "
        "every OWNERS file (they still need write access).",
    )

    @field_validator("admins")
    @classmethod
    def _check_admins(cls, value: list[str]) -> list[str]:
        return check_logins(value)

    def rule_for(self, root: str, layout: str) -> tuple[int, ReviewRule] | None:
        """The last rule matching `root` and its index, or None (the defaults apply)."""
        found: tuple[int, ReviewRule] | None = None
        parts = root.split("/")
        for index, rule in enumerate(self.rules):
            if not any(fnmatch.fnmatchcase(root, glob) for glob in rule.roots):
                continue
            if rule.environments is not None:
                if layout != "dimensions" or len(parts) < 2:
                    continue
                if not any(fnmatch.fnmatchcase(parts[1], g) for g in rule.environments):
                    continue
            found = (index, rule)
        return found
