"""A preview report as GitHub Markdown, cut to a byte budget without breaking the Markdown.

Layout (what reviewers see; docs/previews.md):

    ### rollwright preview
    Base `abc` → head `def`: counts          roots and resources added / removed / changed
    **Failed on the PR side** …              each head-side error, with a reproduction command
    > **Warning:** …                         caller's and the engine's warnings
    **Base side failed to render** …         each base-side error (a warning)
    | root | status | added | removed | changed | hidden |
    <details> per root                       (open when at most OPEN_ROOTS roots have one)
      <details> per resource                 its unified diff in a ```diff fence
      Hidden as noise: the resources whose only changes are noise, with what changed
    </details>

Cutting (`limit`, UTF-8 bytes), only when the whole report does not fit: the summary gets
what the roots leave and at least half the budget (items that do not fit are counted in a
note); then roots and resources are added in order while they fit
whole, then the start of one more resource (whole lines, its fence and `<details>` closed),
then the "Diff exceeds the limit" marker with a link to the full diff. Every fence is longer
than any backtick run inside it, and text outside fences is HTML-escaped, so neither a
manifest holding ``` nor one holding `</details>` can break out of its block.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from functools import partial

from shared.github.limits import OUTPUT_LIMIT, Section, cut_bytes, fit_sections, size
from shared.review.diff import FileDiff
from shared.review.report import (
    PreviewReport,
    RootPreview,
    repro_command,
    root_status,
    short_revision,
)

OPEN_ROOTS = 3  # root sections start expanded when there are this few
ERROR_BYTES = 4_000  # one error message in the summary, at most
MAX_POLICY_LINES = 20  # policy findings listed per root (the full report has them all)
MIN_LIMIT = 1_024
_MARKER_RESERVE = 300  # the marker without its link, rounded up
_SYMBOL = {"added": "+", "removed": "-", "changed": "~"}
_BACKTICK_RUN = re.compile(r"`+")


def report_markdown(
    report: PreviewReport,
    *,
    limit: int | None = OUTPUT_LIMIT,
    full_url: str | None = None,
    repro: str | None = None,
    title: str = "rollwright preview",
) -> str:
    """The report as GitHub Markdown within `limit` UTF-8 bytes (None: uncut).

    Summary (warnings, PR-side failures with their error and `repro` — default: a
    `rollwright diff` per failed root —, a table of roots), then a `<details>` per root
    and per resource with its ```diff block, and the hidden noise listed per root. When it
    does not fit, whole resources are kept in order, then the start of one more, then a
    "Diff exceeds the limit" marker linking `full_url`; fences and `<details>` are always
    closed. `title` "" leaves the heading out (a check run has its own title).
    """
    if limit is not None and limit < MIN_LIMIT:
        raise ValueError(f"a preview needs at least {MIN_LIMIT} bytes, got a limit of {limit}")
    chunks = _header_chunks(report, repro, title)
    blocks = _root_blocks(report)
    body = "".join(b.whole() for b in blocks)
    whole = _fit_header(chunks, None) + body
    if limit is None or size(whole) <= limit:
        return whole
    # The summary gets what the roots leave, and at least half the budget.
    budget = max(limit // 2, limit - size(body) - _MARKER_RESERVE - size(full_url or ""))
    return _fit_body(_fit_header(chunks, budget), blocks, report, limit, full_url, repro)


# --------------------------------------------------------------------------- inline text


def _code(text: str, *, table: bool = False) -> str:
    """`text` as a code span: one line, delimited by more backticks than it holds."""
    text = " ".join(text.splitlines())
    longest = max((len(m.group(0)) for m in _BACKTICK_RUN.finditer(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    span = f"{ticks}{pad}{text}{pad}{ticks}"
    return span.replace("|", "\\|") if table else span


def _inline(text: str) -> str:
    """Free text on one line, HTML-escaped (it can neither open HTML nor a block)."""
    return html.escape(" ".join(text.split()), quote=False)


def _fence_for(text: str, info: str = "") -> tuple[str, str]:
    longest = max((len(m.group(0)) for m in _BACKTICK_RUN.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n", f"{fence}\n"


def _clip(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore").rstrip() + "\n… (cut: too long)"


def _fenced(text: str, info: str = "text") -> str:
    body = text if text.endswith("\n") else text + "\n"
    opening, closing = _fence_for(body, info)
    return f"{opening}{body}{closing}\n"


# --------------------------------------------------------------------------- summary


def _status_cell(item: RootPreview) -> str:
    text: str = "**failed**" if item.head_error is not None else item.status
    if item.base_error is not None:
        text += " (base side failed to render)"
    return text


def _header_chunks(report: PreviewReport, repro: str | None, title: str) -> list[_Chunk]:
    chunks: list[_Chunk] = []
    first = f"### {_inline(title)}\n\n" if title.strip() else ""
    c = report.counts
    scope = (
        " (a global input changed: every root)"
        if report.all_roots
        else (" (the roots this change affects)" if report.roots else "")
    )
    first += (
        f"Base {_code(report.base[:12])} → head {_code(short_revision(report.head))}: "
        f"**{c.roots} root(s)** rendered{scope}; {c.roots_changed} changed"
        f" ({c.roots_added} added, {c.roots_removed} removed), {c.roots_failed} failed.\n\n"
        f"**Resources:** {c.added} added, {c.removed} removed, {c.changed} changed"
        f"; {c.hidden} hidden as noise.\n\n"
    )
    if not report.roots and report.error is None:
        first += "**No changes**: no root renders differently.\n\n"
    chunks.append(_Chunk(first, essential=True))
    if report.error is not None:
        chunks.append(
            _Chunk(
                "**Failed on the PR side**: the fleet cannot be read at the head revision.\n\n"
                + _fenced(_clip(report.error, ERROR_BYTES))
                + f"Reproduce locally: {_code(repro or repro_command(report.base, report.head))}"
                "\n\n"
            )
        )
    for item in report.head_errors:
        command = repro or repro_command(report.base, report.head, item.root)
        chunks.append(
            _Chunk(
                f"**Failed on the PR side**: root {_code(item.root)} does not render.\n\n"
                + _fenced(_clip(item.head_error or "", ERROR_BYTES))
                + f"Reproduce locally: {_code(command)}\n\n"
            )
        )
    for item in report.roots:
        if item.policy_error is not None:
            chunks.append(
                _Chunk(
                    f"**Failed on the PR side**: the policy sets of root {_code(item.root)} "
                    "cannot run.\n\n" + _fenced(_clip(item.policy_error, ERROR_BYTES))
                )
            )
    chunks += _policy_chunks(report)
    # After the failures: when the budget is tight, what fails the check matters most.
    for warning in report.warnings:
        chunks.append(_Chunk(f"> **Warning:** {_inline(warning)}\n\n"))
    for item in report.base_errors:
        chunks.append(
            _Chunk(
                f"**Base side failed to render** root {_code(item.root)} (a warning: the PR "
                "side is shown in full, as added).\n\n"
                + _fenced(_clip(item.base_error or "", ERROR_BYTES // 2))
            )
        )
    rows = [r for r in report.roots if _has_block(r)]
    if rows:
        chunks.append(
            _Chunk(
                "| root | status | added | removed | changed | hidden |\n"
                "|:--|:--|--:|--:|--:|--:|\n",
                table="head",
            )
        )
        for item in rows:
            d = item.diff
            numbers = [str(d.added), str(d.removed), str(d.changed)] if d else ["", "", ""]
            cells = [
                _code(item.root, table=True),
                _status_cell(item),
                *numbers,
                str(len(item.hidden)),
            ]
            chunks.append(_Chunk("| " + " | ".join(cells) + " |\n", table="row"))
    quiet = sum(1 for r in report.roots if not _has_block(r))
    if quiet:
        other = " other" if rows else ""
        chunks.append(_Chunk(f"{quiet}{other} affected root(s) render identically.\n\n"))
    return chunks


def _policy_chunks(report: PreviewReport) -> list[_Chunk]:
    """Each root's policy findings (docs/governance.md): denies wait for an owner of their
    set when the change deploys; warnings are shown only."""
    chunks = []
    for item in report.roots:
        if not item.policies:
            continue
        denies = sum(1 for f in item.policies if f.level == "deny")
        warnings = len(item.policies) - denies
        lines = [
            f"**Policy checks** on {_code(item.root)}: {denies} denied"
            + (" (the deployment will wait for an owner of each set)" if denies else "")
            + f", {warnings} warning(s).\n\n"
        ]
        for finding in item.policies[:MAX_POLICY_LINES]:
            mark = "❌ deny" if finding.level == "deny" else "⚠️ warn"
            lines.append(
                f"- {mark} {_code(finding.policy_set)} {_inline(finding.subject())}: "
                f"{_inline(finding.message)}\n"
            )
        if len(item.policies) > MAX_POLICY_LINES:
            lines.append(f"- … {len(item.policies) - MAX_POLICY_LINES} more in the full report\n")
        chunks.append(_Chunk("".join(lines) + "\n"))
    return chunks


@dataclass(frozen=True)
class _Chunk:
    text: str
    essential: bool = False
    table: str = ""  # "head" / "row" of the summary table ("" otherwise)


def _skipped_note(skipped: int) -> str:
    return (
        f"_{skipped} more summary item(s) (warnings, errors, table rows) left out to stay "
        "within GitHub's size limit; see the full diff._\n\n"
    )


def _fit_header(chunks: list[_Chunk], limit: int | None) -> str:
    """The summary within `limit` bytes (None: all of it); what is left out is counted in a
    note. The first chunk (title and counts) is always kept."""
    budget = None if limit is None else limit - size(_skipped_note(len(chunks)))
    out: list[str] = []
    used = 0
    skipped = 0
    in_table = False
    rows_cut = False
    for chunk in chunks:
        if in_table and chunk.table != "row":
            out.append("\n")  # a blank line ends the table
            used += 1
            in_table = False
        fits = budget is None or used + size(chunk.text) + 1 <= budget
        if chunk.table == "row":
            fits = fits and in_table and not rows_cut
            rows_cut = rows_cut or not fits
        if chunk.essential or fits:
            out.append(chunk.text)
            used += size(chunk.text)
            in_table = in_table or chunk.table == "head"
        else:
            skipped += 1
    if in_table:
        out.append("\n")
    if skipped:
        out.append(_skipped_note(skipped))
    return "".join(out)


# --------------------------------------------------------------------------- per root


def _has_block(item: RootPreview) -> bool:
    return (
        item.head_error is not None
        or item.base_error is not None
        or bool(item.hidden)
        or (item.diff is not None and not item.diff.empty)
        or item.status in ("added", "removed")
    )


@dataclass
class _Unit:
    text: str
    resource: FileDiff | None = None  # a resource's section (counted, may be cut)


@dataclass
class _Block:
    opening: str
    units: list[_Unit] = field(default_factory=list)
    closing: str = "</details>\n\n"

    def whole(self) -> str:
        return self.opening + "".join(u.text for u in self.units) + self.closing


def _root_blocks(report: PreviewReport) -> list[_Block]:
    items = [r for r in report.roots if _has_block(r)]
    expanded = " open" if len(items) <= OPEN_ROOTS else ""
    blocks = []
    for item in items:
        summary = f"<code>{html.escape(item.root)}</code> — {html.escape(root_status(item))}"
        block = _Block(f"<details{expanded}>\n<summary>{summary}</summary>\n\n")
        if item.head_error is not None:
            block.units.append(
                _Unit("The PR side does not render: its error is in the summary.\n\n")
            )
        if item.base_error is not None and item.head_error is None:
            block.units.append(
                _Unit("The base side does not render: the whole PR-side render is shown.\n\n")
            )
        for f in item.diff.files if item.diff else []:
            block.units.append(_Unit(_resource(f), resource=f))
        if item.hidden:
            block.units.append(
                _Unit(
                    f"**Hidden as noise** ({len(item.hidden)}): changed resources whose only "
                    "differences are noise fields.\n\n"
                )
            )
            for hidden in item.hidden:
                where = ", ".join(_code(p) for p in hidden.pointers)
                block.units.append(_Unit(f"- {_code(hidden.path)}: {where}\n"))
            block.closing = "\n</details>\n\n"
        blocks.append(block)
    return blocks


def _resource_opening(f: FileDiff, *, cut: bool = False) -> str:
    label = f"{f.change}, cut: the diff exceeds the limit" if cut else f.change
    out = (
        f"<details>\n<summary>{_SYMBOL[f.change]} <code>{html.escape(f.path)}</code> "
        f"({label})</summary>\n\n"
    )
    if f.hidden:
        where = ", ".join(_code(p) if p else "the file" for p in f.hidden)
        out += f"Redacted values changed (not shown): {where}\n\n"
    return out


_RESOURCE_CLOSING = "</details>\n\n"


def _resource(f: FileDiff) -> str:
    out = _resource_opening(f)
    if f.unified:
        opening, closing = _fence_for(f.unified, "diff")
        out += f"{opening}{f.unified}{closing}\n"
    return out + _RESOURCE_CLOSING


def _partial_resource(f: FileDiff, budget: int) -> str | None:
    """The start of `f`'s section within `budget` bytes (whole lines, then part of the next
    line; fence and `<details>` closed), or None when not even one line fits."""
    if not f.unified:
        return None
    opening_text = _resource_opening(f, cut=True)
    opening, closing = _fence_for(f.unified, "diff")
    frame = size(opening_text) + size(opening) + size(closing) + 1 + size(_RESOURCE_CLOSING)
    room = budget - frame
    if room <= 0:
        return None
    taken: list[str] = []
    used = 0
    for line in f.unified.splitlines(keepends=True):
        if used + size(line) <= room:
            taken.append(line)
            used += size(line)
            continue
        # Inside a fence any prefix of a line is still code (the fence is longer than any
        # backtick run in the whole diff, so no prefix can close it).
        left = room - used - 1  # the newline the piece ends with
        piece = cut_bytes(line, left)
        if piece.strip():
            taken.append(piece + "\n")
        break
    if not taken:
        return None
    return f"{opening_text}{opening}{''.join(taken)}{closing}\n{_RESOURCE_CLOSING}"


# --------------------------------------------------------------------------- cutting


def _marker(
    kept: int, total: int, partial: bool, full_url: str | None, repro: str | None, base: str
) -> str:
    shown = f"{kept} of {total} resource(s)" + (" and the start of one more" if partial else "")
    where = (
        f"[Full diff]({full_url})" if full_url else f"Run {_code(repro or base)} for the full diff."
    )
    # The blank line ends the `</details>` HTML block the cut closed.
    return f"\n**Diff exceeds the limit:** showing {shown}. {where}\n"


def _fit_body(
    header: str,
    blocks: list[_Block],
    report: PreviewReport,
    limit: int,
    full_url: str | None,
    repro: str | None,
) -> str:
    """The summary, then roots and their resources in order while they fit, then the start
    of one more resource, then the marker (`shared.github.limits.fit_sections`)."""
    total = sum(1 for b in blocks for u in b.units if u.resource is not None)
    fallback = repro_command(report.base, report.head)
    sections = [Section(header, counted=False, cuttable=False)]
    for block in blocks:
        sections.append(Section(block.opening, counted=False, cuttable=False))
        for unit in block.units:
            f = unit.resource
            if f is None:
                sections.append(Section(unit.text, counted=False, cuttable=False))
            else:
                sections.append(Section(unit.text, start=partial(_partial_resource, f)))
        sections.append(Section(block.closing, counted=False, cuttable=False))
    return fit_sections(
        sections,
        limit,
        lambda kept, cut: _marker(kept, total, cut, full_url, repro, fallback),
    )
