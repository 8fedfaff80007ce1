"""Clicks that did not count, as check runs list them (docs/governance.md): one line per
refused click, the newest few under one heading. Plain text, no Temporal: the review gate,
the root's queue and the rollout all show their refusals this way."""

from __future__ import annotations

from collections.abc import Sequence

# Refused clicks a check run lists (the newest; the audit trail keeps them all).
SHOWN_REFUSALS = 5
# The button as its check run labels it.
LABELS = {
    "approve": "Approve",
    "reject": "Reject",
    "unlock": "Unlock",
    "promote": "Promote",
    "halt": "Halt",
    "resume": "Resume",
    "rollback": "Roll back",
}


def refusal(action: str, by: str | None, reason: str) -> str:
    """One refused click: who clicked what, and why it did not count."""
    who = f"@{by}" if by else "someone"
    return f"{who} clicked {LABELS.get(action, action)}: {reason}"


def refusals_block(refusals: Sequence[str]) -> str | None:
    """The check run's paragraph of refused clicks (None: there are none)."""
    if not refusals:
        return None
    return "**Clicks that did not count** (nothing changed):\n" + "\n".join(
        f"- {r}" for r in refusals[-SHOWN_REFUSALS:]
    )


def keep(refusals: list[str], line: str) -> list[str]:
    """`refusals` with `line` added, only the shown ones kept (they are carried across
    continue-as-new)."""
    return [*refusals, line][-SHOWN_REFUSALS:]
