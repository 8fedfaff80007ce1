"""What the sticky `rollwright:hotfix` comment says about a command (plain, no Temporal):
the roots queued and where they are reviewed, or why nothing was. Only rollwright's own words,
logins and root names: no render output, so nothing secret."""

from __future__ import annotations

from shared.contracts.checkrun import check_run_name, short
from shared.contracts.hotfix import HOTFIX_COMMENT_MARKER, HotfixCommand, HotfixVerdict


def refused_verdict(reason: str) -> HotfixVerdict:
    return HotfixVerdict(allowed=False, reasons=[reason])


def comment_body(pr: int, command: HotfixCommand, verdict: HotfixVerdict, queued: list[str]) -> str:
    lines = [f"<!-- {HOTFIX_COMMENT_MARKER} -->"]
    roots = ", ".join(f"`{root}`" for root in command.roots)
    if queued:
        lines += [
            f"### Hotfix of #{pr} queued by @{command.by}",
            "",
            f"The head `{short(verdict.head_sha)}` of this pull request is queued for {roots}, "
            "ahead of merged revisions. Each waits for review on its check run on that commit:",
            "",
            *(f"- `{check_run_name(root)}`" for root in queued),
            "",
            "Once published, each root stays **locked** for merged revisions until this pull "
            "request is merged (the lock then opens and the merge deploys) or someone clicks "
            "Unlock.",
        ]
    else:
        lines += [
            f"### Hotfix of #{pr} refused (asked by @{command.by} for {roots})",
            "",
            *(f"- {reason}" for reason in verdict.reasons or ["no reason was given"]),
        ]
    if verdict.met:
        lines += ["", "Requirements met:", "", *(f"- {met}" for met in verdict.met)]
    return "\n".join(lines) + "\n"
