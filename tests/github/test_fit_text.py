"""fit_text: whole chunks first, then one cut chunk, always valid Markdown within the byte limit.

Validity is checked with a CommonMark parser (markdown-it-py): an unclosed fence would swallow
the truncation marker into a code block, and an unclosed <details> would hide it.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from shared.github.limits import OUTPUT_LIMIT, TRUNCATION_MARKER, fit_text

MARKER = "\n\nTRUNCATED-MARKER {omitted}/{total}\n"
CLOSERS = re.compile(r"\n?(?:[`~]{3,}\n)?(?:</details>\n)*\Z")


def size(text: str) -> int:
    return len(text.encode())


def section(name: str, lines: int, width: int = 40) -> str:
    body = "".join(f"+  line {n:05d} {'x' * width}\n" for n in range(lines))
    return f"<details><summary>{name}</summary>\n\n```diff\n{body}```\n\n</details>\n"


def check_markdown(text: str, marker_text: str) -> None:
    """The marker is rendered as text (not inside a code block or an open <details>)."""
    tokens = MarkdownIt("commonmark").parse(text)
    for token in tokens:
        if token.type in ("fence", "code_block"):
            assert marker_text not in token.content, "marker swallowed by an unclosed fence"
    inline = [t.content for t in tokens if t.type == "inline"]
    assert any(marker_text in c for c in inline), "marker is not rendered as text"
    html = "".join(t.content for t in tokens if t.type == "html_block")
    html += "".join(
        child.content
        for t in tokens
        if t.type == "inline" and t.children
        for child in t.children
        if child.type == "html_inline"
    )
    opened = len(re.findall(r"<details\b", html))
    closed = len(re.findall(r"</details\s*>", html))
    assert opened == closed, f"{opened} <details> opened, {closed} closed"


def test_everything_fits_unchanged() -> None:
    chunks = [section("a", 3), section("b", 3)]
    assert fit_text(chunks) == "".join(chunks)
    assert fit_text(chunks, limit=size("".join(chunks))) == "".join(chunks)
    assert fit_text([]) == ""


def test_whole_chunks_kept_then_one_cut_chunk() -> None:
    chunks = [section(f"res-{n}", 20) for n in range(10)]
    each = size(chunks[0])
    limit = 3 * each + 600
    out = fit_text(chunks, limit=limit, marker=MARKER)
    assert size(out) <= limit
    assert out.startswith("".join(chunks[:3]))
    rest = out[len("".join(chunks[:3])) :]
    assert rest.startswith("<details><summary>res-3</summary>")  # part of the 4th section
    assert chunks[3] not in out
    assert out.endswith("TRUNCATED-MARKER 7/10\n")
    check_markdown(out, "TRUNCATED-MARKER")


def test_open_fence_is_closed() -> None:
    chunk = "## web\n\n```diff\n" + "".join(f"-old {n}\n+new {n}\n" for n in range(3000)) + "```\n"
    out = fit_text([chunk], limit=4000, marker=MARKER)
    assert size(out) <= 4000
    assert out.endswith("```\n" + MARKER.replace("{omitted}", "1").replace("{total}", "1"))
    check_markdown(out, "TRUNCATED-MARKER")
    # the cut is on a whole line
    body = out[: out.index("```\n\n\nTRUNCATED")]
    assert body.endswith("\n") and re.search(r"[-+](old|new) \d+\n\Z", body)


def test_open_details_is_closed() -> None:
    chunks = [section("small", 2), section("big", 2000)]
    out = fit_text(chunks, limit=5000, marker=MARKER)
    assert size(out) <= 5000
    assert out.startswith(chunks[0])
    tail = out[len(chunks[0]) :]
    assert tail.startswith("<details><summary>big</summary>")
    assert re.search(r"```\n</details>\n\n\nTRUNCATED-MARKER 1/2\n\Z", out)
    check_markdown(out, "TRUNCATED-MARKER")


def test_default_marker_says_the_diff_exceeds_the_limit() -> None:
    chunks = [section(f"r{n}", 500) for n in range(4)]
    out = fit_text(chunks)
    assert size(out) <= OUTPUT_LIMIT
    assert "Diff exceeds the limit" in TRUNCATION_MARKER
    assert "Diff exceeds the limit:** 2 of 4 sections" in out
    check_markdown(out, "Diff exceeds the limit")


def test_a_huge_line_inside_a_fence_is_cut_inside_the_line() -> None:
    chunk = "```json\n" + '{"dashboard": "' + "é" * 20000 + '"}\n```\n'
    out = fit_text([chunk], limit=2000, marker=MARKER)
    assert size(out) <= 2000
    assert size(out) > 1900  # the budget is used, not thrown away with the whole line
    assert out.encode().decode() == out  # no half characters
    check_markdown(out, "TRUNCATED-MARKER")


def test_a_huge_line_outside_a_fence_is_left_out() -> None:
    chunks = ["intro\n", "<b>" + "y" * 5000 + "</b>\n"]
    out = fit_text(chunks, limit=1000, marker=MARKER)
    assert out == "intro\n" + MARKER.replace("{omitted}", "1").replace("{total}", "2")


def test_tilde_and_long_fences() -> None:
    inner = "````markdown\n```yaml\nkey: value\n```\n" + "text\n" * 500 + "````\n"
    out = fit_text([inner], limit=600, marker=MARKER)
    assert out.rstrip().endswith("TRUNCATED-MARKER 1/1")
    assert "\n````\n" in out  # the four-backtick fence is what gets closed
    check_markdown(out, "TRUNCATED-MARKER")
    tilde = "~~~\n" + "a\n" * 500 + "~~~\n"
    out = fit_text([tilde], limit=300, marker=MARKER)
    assert "\n~~~\n" in out
    check_markdown(out, "TRUNCATED-MARKER")


def test_multibyte_text_is_measured_in_bytes() -> None:
    chunks = [f"- 🚀 release {n} ünïcödé\n" for n in range(2000)]
    out = fit_text(chunks, limit=1000, marker=MARKER)
    assert size(out) <= 1000
    assert len(out) < 1000  # characters < bytes here
    assert out.startswith(chunks[0])


def test_marker_that_cannot_fit_is_an_error() -> None:
    with pytest.raises(ValueError, match="marker alone does not fit"):
        fit_text(["x" * 100], limit=10, marker=MARKER)


TEXT_LINES = st.sampled_from(
    ["plain text\n", "+ added ✓\n", "- removed\n", "long " * 80 + "\n", "🚀" * 30 + "\n"]
)
CODE_LINES = st.sampled_from(
    [
        "+  replicas: 3\n",
        "-  image: web:1\n",
        "<details>\n",
        "```\n",
        "~~~ not a fence\n",
        "é" * 300 + "\n",
    ]
)
FENCES = st.sampled_from(["```", "````", "~~~", "```diff"])


@st.composite
def fenced(draw: st.DrawFn) -> str:
    opener = draw(FENCES)
    closer = opener.removesuffix("diff")
    lines = draw(st.lists(CODE_LINES, max_size=12))
    if closer == "```":  # a ``` line inside a ``` block would end it early
        lines = [line for line in lines if line != "```\n"]
    return f"{opener}\n{''.join(lines)}{closer}\n\n"


@st.composite
def paragraph(draw: st.DrawFn) -> str:
    return "".join(draw(st.lists(TEXT_LINES, min_size=1, max_size=6))) + "\n"


BLOCKS = st.recursive(
    st.one_of(paragraph(), fenced()),
    lambda inner: st.lists(inner, min_size=1, max_size=4).map(
        lambda parts: "<details><summary>r</summary>\n\n" + "".join(parts) + "</details>\n\n"
    ),
    max_leaves=8,
)
# each chunk is valid Markdown on its own, as the diff module's sections are
CHUNKS = st.lists(st.lists(BLOCKS, max_size=4).map("".join), max_size=10)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(chunks=CHUNKS, limit=st.integers(min_value=60, max_value=3000))
def test_fit_text_properties(chunks: list[str], limit: int) -> None:
    whole = "".join(chunks)
    out = fit_text(chunks, limit=limit, marker=MARKER)
    assert size(out) <= max(limit, 0)
    event("fits" if size(whole) <= limit else "truncated")
    if size(whole) <= limit:
        assert out == whole
        return
    head, _, counts = out.rpartition("\n\nTRUNCATED-MARKER ")
    assert counts.endswith(f"/{len(chunks)}\n")
    omitted = int(counts.split("/")[0])
    assert 1 <= omitted <= len(chunks)
    kept_whole = "".join(chunks[: len(chunks) - omitted])
    assert head.startswith(kept_whole)
    # what is left is a prefix of the input plus what closes a fence and <details>
    closers = CLOSERS.search(head)
    assert closers is not None
    body = head[: closers.start()]
    assert whole.startswith(body) or whole.startswith(body.rstrip("\n")), (body, whole)
    check_markdown(out, "TRUNCATED-MARKER")
