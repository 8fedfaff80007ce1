"""GitHub's size limits, and the one place that cuts text to fit them.

Check run output `summary` / `text` take 65,535 characters and an issue comment 65,536;
rollwright counts UTF-8 *bytes*, the stricter reading, so whatever fits here fits GitHub.
Nothing is cut silently: `fit_sections` keeps whole sections in order, then (where a section
allows it) the start of one more, closes whatever Markdown the cut left open (a code fence,
`<details>` blocks) and ends with a marker that says how much is missing. `fit_text` is the
same with plain string chunks and a `{omitted}` / `{total}` marker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

OUTPUT_LIMIT = 65535  # check run output summary / text
COMMENT_LIMIT = 65536  # issue comment body ("maximum is 65536 characters")
MAX_ACTIONS = 3
TRUNCATION_MARKER = (
    "\n**Diff exceeds the limit:** {omitted} of {total} sections are cut short or left out here.\n"
)


def size(text: str) -> int:
    """Length in UTF-8 bytes, the unit of every limit here."""
    return len(text.encode("utf-8"))


def cut_bytes(text: str, limit: int) -> str:
    """The longest prefix of `text` within `limit` UTF-8 bytes (never half a character)."""
    return text.encode("utf-8")[: max(0, limit)].decode("utf-8", "ignore")


@dataclass(frozen=True)
class Section:
    """One piece of a text to fit, kept whole or not at all, unless it can be cut.

    `counted`: the marker counts it (a resource), or not (a heading, a block's opening).
    `cuttable`: when it is the first section that does not fit, its start may be shown.
    `start`: how to show its start within a byte budget (None when nothing useful fits);
    without it the section is cut on whole lines (inside a code block, inside a line).
    A custom start must close whatever it opens.
    """

    text: str
    counted: bool = True
    cuttable: bool = True
    start: Callable[[int], str | None] | None = None


Marker = Callable[[int, bool], str]  # (counted sections kept whole, start of one more shown)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_DETAILS_OPEN = re.compile(r"<details\b", re.IGNORECASE)
_DETAILS_CLOSE = re.compile(r"</details\s*>", re.IGNORECASE)
_CODE_SPAN = re.compile(r"(`+).*?(?<!`)\1(?!`)")  # `<details>` in a code span is text


@dataclass
class _MarkdownState:
    """Just enough CommonMark to know what a cut leaves open: a code fence, <details> blocks."""

    fence: str | None = None
    details: int = 0
    ends_with_newline: bool = True

    def copy(self) -> _MarkdownState:
        return _MarkdownState(self.fence, self.details, self.ends_with_newline)

    def feed(self, line: str) -> None:
        """Feed one line (with or without its newline)."""
        self.ends_with_newline = line.endswith("\n")
        content = line.rstrip("\r\n")
        found = _FENCE.match(content)
        if self.fence is not None:
            run = found.group(1) if found else ""
            if (
                found
                and run[0] == self.fence[0]
                and len(run) >= len(self.fence)
                and not found.group(2).strip()
            ):
                self.fence = None
            return
        if found and not (found.group(1)[0] == "`" and "`" in found.group(2)):
            self.fence = found.group(1)
            return
        content = _CODE_SPAN.sub("", content)
        self.details += len(_DETAILS_OPEN.findall(content))
        self.details = max(0, self.details - len(_DETAILS_CLOSE.findall(content)))

    def feed_text(self, text: str) -> None:
        for line in text.splitlines(keepends=True):
            self.feed(line)

    def closers(self) -> str:
        out = "" if self.ends_with_newline else "\n"
        if self.fence is not None:
            out += self.fence + "\n"
        return out + "</details>\n" * self.details


def fit_sections(sections: Sequence[Section], limit: int, marker: Marker) -> str:
    """Join `sections` within `limit` UTF-8 bytes: unchanged when everything fits; otherwise
    whole sections in order, the start of the next one when it is cuttable, the closers of
    what is still open, then `marker(kept, partial)`."""
    whole = "".join(s.text for s in sections)
    if size(whole) <= limit:
        return whole

    def reserve(kept: int, following: int) -> int:
        """Room for the marker should the cut come before `sections[following]`."""
        room = size(marker(kept, False))
        if following < len(sections) and sections[following].cuttable:
            room = max(room, size(marker(kept, True)))
        return room

    state = _MarkdownState()
    kept_text: list[str] = []
    used = kept = 0
    index = len(sections)  # the first section not kept whole
    for i, section in enumerate(sections):
        after = state.copy()
        after.feed_text(section.text)
        grown = used + size(section.text)
        if grown + size(after.closers()) + reserve(kept + section.counted, i + 1) > limit:
            index = i
            break
        kept_text.append(section.text)
        used, state, kept = grown, after, kept + section.counted
    if used + size(state.closers()) + size(marker(kept, False)) > limit:
        raise ValueError(f"fitting text: the marker alone does not fit in {limit} bytes")
    tail = state.closers()
    partial = False
    if index < len(sections) and sections[index].cuttable:
        section = sections[index]
        budget = limit - used - size(marker(kept, True))
        if section.start is not None:
            piece = section.start(budget - size(state.closers()))
            if piece:
                tail, partial = piece + state.closers(), True
        else:
            cut = _partial_section(section.text, state, budget)
            if cut != state.closers():
                tail, partial = cut, True
    return "".join(kept_text) + tail + marker(kept, partial)


def fit_text(
    chunks: Sequence[str], limit: int = OUTPUT_LIMIT, marker: str = TRUNCATION_MARKER
) -> str:
    """Join `chunks` (e.g. one Markdown section per resource) within `limit` UTF-8 bytes; see
    `fit_sections`. `{omitted}` and `{total}` in `marker` count the sections cut short or left
    out, and all of them."""
    total = len(chunks)

    def text(kept: int, partial: bool) -> str:
        omitted = str(total - kept)
        return marker.replace("{omitted}", omitted).replace("{total}", str(total))

    return fit_sections([Section(chunk) for chunk in chunks], limit, text)


def _partial_section(text: str, state: _MarkdownState, budget: int) -> str:
    """The longest prefix of `text` that, with its closers, fits in `budget` bytes."""
    best = state.closers()
    taken: list[str] = []
    used = 0
    current = state.copy()
    for line in text.splitlines(keepends=True):
        candidate = current.copy()
        candidate.feed(line)
        if used + size(line) + size(candidate.closers()) <= budget:
            taken.append(line)
            used += size(line)
            current = candidate
            best = "".join(taken) + current.closers()
            continue
        if current.fence is not None:
            # inside a code block any prefix of a line is still valid Markdown
            room = budget - used - size(current.closers()) - 1  # the newline we add
            piece = cut_bytes(line.rstrip("\r\n"), room)
            if piece:
                cut = current.copy()
                cut.feed(piece + "\n")
                best = "".join(taken) + piece + "\n" + cut.closers()
        break
    return best
