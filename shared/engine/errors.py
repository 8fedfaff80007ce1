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


# How many roots a grouped problem names before "and N more": enough to recognise the
# pattern (a group, a region) without one mistake filling a terminal in a large fleet.
ROOTS_NAMED = 8


def by_root(failures: list[tuple[str, FleetError]], *, name_roots: bool = True) -> list[Problem]:
    """Failures of several roots as problems, each mistake once with the roots it affects:
    `path:line: message (in 3 roots: a, b, c)`. A mistake in a shared file (global values,
    a template, a chart) fails every root that reads it; the roots differ only in the
    `rendering root "<root>": ` prefix `Fleet.render` adds, which is taken out to group.
    `name_roots=False` (one root was asked for) leaves the roots out of the message."""
    roots_of: dict[Problem, list[str]] = {}
    for root, err in failures:
        problems = err.problems if isinstance(err, FleetErrors) else [err.problem]
        prefix = f'rendering root "{root}": '
        for problem in problems:
            message = problem.message.removeprefix(prefix)
            key = problem.with_message(message)
            if root not in roots_of.setdefault(key, []):
                roots_of[key].append(root)
    grouped = []
    for problem, roots in roots_of.items():
        if not name_roots:
            grouped.append(problem)
            continue
        named = ", ".join(roots[:ROOTS_NAMED])
        more = f" and {len(roots) - ROOTS_NAMED} more" if len(roots) > ROOTS_NAMED else ""
        where = f"root {named}" if len(roots) == 1 else f"{len(roots)} roots: {named}{more}"
        grouped.append(problem.with_message(f"{problem.message} (in {where})"))
    return sorted(grouped, key=lambda p: (p.path, p.line or 0, p.message))
