"""What a review compares: the deployed commit (subject, author, link) and the base, the render
published last on the root ("compared with <revision> (deployment <id>, published <when>)"),
or none ("first deployment of this root: everything is new").

Built by the worker when it diffs (it knows the stored renders and the root's latest.json),
stored beside the diff as `jobs/<deployment-id>/review.json`, and shown on the check run above
the diff and on the job page.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict


def context_key(deployment_id: str) -> str:
    """Where a deployment's review context lives in the blob store."""
    return f"jobs/{deployment_id}/review.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Commit(_Model):
    sha: str
    subject: str = ""
    author: str = ""
    url: str = ""  # the commit's page on GitHub ("" when the repository's page is unknown)


class Base(_Model):
    """The render the diff starts from: the one published last on the root."""

    revision: str
    deployment_id: str | None = None  # None: latest.json from before it was recorded
    published_at: datetime | None = None
    commit_url: str = ""


class ReviewContext(_Model):
    root: str
    commit: Commit | None = None
    base: Base | None = None  # None: nothing of this root was published yet
    # When nothing was published: the root's last attempt, if any ("failed", "rejected", ...).
    last_attempt: str | None = None
    last_attempt_state: str | None = None

    def comparison(self) -> str:
        """One sentence, plain text."""
        base = self.base
        if base is None:
            if self.last_attempt:
                return (
                    "nothing of this root has been published yet (its last deployment "
                    f"{self.last_attempt} ended {self.last_attempt_state}): everything is new"
                )
            return "first deployment of this root: everything is new"
        details = []
        if base.deployment_id:
            details.append(f"deployment {base.deployment_id}")
        if base.published_at:
            details.append(f"published {_when(base.published_at)}")
        tail = f" ({', '.join(details)})" if details else ""
        return f"compared with {base.revision[:12]}{tail}"

    def markdown(self) -> str:
        """The check run's lines above the diff."""
        lines = []
        commit = self.commit
        if commit is not None:
            sha = f"[`{commit.sha[:12]}`]({commit.url})" if commit.url else f"`{commit.sha[:12]}`"
            subject = f" {_inline(commit.subject)}" if commit.subject else ""
            author = f" — {_inline(commit.author)}" if commit.author else ""
            lines.append(f"**Commit** {sha}{subject}{author}")
        base = self.base
        if base is None:
            sentence = self.comparison()
            lines.append(f"**{sentence[0].upper()}{sentence[1:]}.**")
        else:
            revision = (
                f"[`{base.revision[:12]}`]({base.commit_url})"
                if base.commit_url
                else f"`{base.revision[:12]}`"
            )
            details = []
            if base.deployment_id:
                details.append(f"deployment `{base.deployment_id}`")
            if base.published_at:
                details.append(f"published {_when(base.published_at)}")
            tail = f" ({', '.join(details)})" if details else ""
            lines.append(f"**Compared with** {revision}{tail}: the render published last.")
        return "\n\n".join(lines) + "\n\n"


def _when(value: datetime) -> str:
    utc = value.astimezone(UTC) if value.tzinfo else value
    return utc.strftime("%Y-%m-%d %H:%M UTC")


def _inline(text: str) -> str:
    """Text from a commit, safe on one Markdown line (no links, no HTML, no line breaks)."""
    out = " ".join(text.split())
    for char in "\\`*_[]<>|":
        out = out.replace(char, "\\" + char)
    return out
