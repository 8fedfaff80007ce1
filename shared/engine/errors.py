"""Errors caused by the fleet repository, as users read them: `path:line: message`."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with a fleet repo. `path` is relative to the repo root.

    A *content* problem (the default) means a render would drop, ignore or change something
    the fleet asked for: renders of the roots it touches refuse. A *hygiene* problem
    (`hygiene=True`, e.g. a patch that should graduate) changes no render: a warning.
    The classification is docs/formats/problems.md.
    """

    path: str
    line: int | None
    message: str
    hygiene: bool = False

    def __str__(self) -> str:
        text = f"warning: {self.message}" if self.hygiene else self.message
        if self.line is not None:
            return f"{self.path}:{self.line}: {text}"
        if self.path:
            return f"{self.path}: {text}"
        return text

    def with_message(self, message: str) -> Problem:
        """The same problem (place and kind) with another message (e.g. redacted)."""
        return replace(self, message=message)


class FleetError(Exception):
    """A mistake in the fleet repo (never an infrastructure failure).

    Workers turn it into a non-retryable error and the check run shows `str(err)`.
    It never carries secret values: callers build messages from paths and keys only.
    """

    # True when the failure is not the repo's fault (a repository that did not answer, sops
    # timing out): the worker retries it. `within` keeps it.
    retryable: bool = False

    def __init__(self, message: str, *, path: str = "", line: int | None = None) -> None:
        self.problem = Problem(path, line, message)
        super().__init__(str(self.problem))

    @property
    def path(self) -> str:
        return self.problem.path

    @property
    def line(self) -> int | None:
        return self.problem.line

    def within(self, context: str) -> FleetError:
        """The same error, prefixed with what was being done (`rendering root "x"`)."""
        err = FleetError(f"{context}: {self.problem.message}", path=self.path, line=self.line)
        err.__cause__ = self
        err.retryable = self.retryable
        return err


class FleetErrors(FleetError):
    """Several problems found at once (validation)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.path, p.line or 0, p.message))
        first = self.problems[0] if self.problems else Problem("", None, "no problems")
        super().__init__(first.message, path=first.path, line=first.line)

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)
