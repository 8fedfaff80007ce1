"""Markdown as GitHub reads it: parsed as CommonMark (with tables), and checked to be valid
within a byte limit (every fence and `<details>` closed)."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

_DETAILS = re.compile(r"<(/?)details\b", re.IGNORECASE)


def parse(text: str) -> list[Token]:
    return MarkdownIt("commonmark").enable("table").parse(text)


def assert_valid(text: str, limit: int | None = None) -> list[Token]:
    """Within `limit` bytes; every `<details>` closed in order; every fence closed (its
    last line is the closing fence, not the end of the document)."""
    if limit is not None:
        assert len(text.encode("utf-8")) <= limit
    tokens = parse(text)
    lines = text.splitlines()
    depth = 0
    for token in tokens:
        if token.type == "fence":
            assert token.map is not None
            closing = lines[token.map[1] - 1].strip() if token.map[1] <= len(lines) else ""
            assert closing == token.markup, f"unclosed fence at line {token.map[0] + 1}"
            continue
        sources = [token.content] if token.type == "html_block" else []
        sources += [c.content for c in token.children or [] if c.type == "html_inline"]
        for source in sources:
            for match in _DETAILS.finditer(source):
                depth += -1 if match.group(1) else 1
                assert depth >= 0, "</details> without an open <details>"
    assert depth == 0, f"{depth} <details> left open"
    return tokens


def fences(tokens: list[Token]) -> list[str]:
    return [t.content for t in tokens if t.type == "fence"]


def paragraphs(tokens: list[Token]) -> list[str]:
    return [t.content for t in tokens if t.type == "inline"]
