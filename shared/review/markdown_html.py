"""Markdown that rollwright wrote (check run text, PR reports), as safe HTML for a page.

CommonMark and tables (markdown-it-py). Raw HTML in the text is escaped except the few tags
the reports use for collapsible sections (`<details>`, `<summary>`, `<code>`, `<b>`, …,
without attributes other than `open`), so a resource name or value cannot inject markup.
Used by the gateway's pages (previews; the messages on job, root and revision pages) and the
GitHub emulator's check-run page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

# Tags the report uses; anything else in raw HTML is shown as text.
_ALLOWED_TAG = re.compile(
    r"</?(?:details|summary|code|b|strong|em|i|sub|sup|kbd)>|<details open>|<br ?/?>",
    re.IGNORECASE,
)
_TAG = re.compile(r"<[^<>]*>")
_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")


def _escape_text(text: str) -> str:
    """Escape text from a raw HTML block, keeping the character references it already has."""
    out, last = [], 0
    for match in _ENTITY.finditer(text):
        out.append(html.escape(text[last : match.start()], quote=False))
        out.append(match.group(0))
        last = match.end()
    out.append(html.escape(text[last:], quote=False))
    return "".join(out)


def _safe_html(raw: str) -> str:
    out, last = [], 0
    for match in _TAG.finditer(raw):
        out.append(_escape_text(raw[last : match.start()]))
        tag = match.group(0)
        out.append(tag if _ALLOWED_TAG.fullmatch(tag) else html.escape(tag, quote=False))
        last = match.end()
    out.append(_escape_text(raw[last:]))
    return "".join(out)


def _html_block(
    renderer: RendererHTML,
    tokens: Sequence[Token],
    idx: int,
    options: OptionsDict,
    env: EnvType,
) -> str:
    return _safe_html(tokens[idx].content)


def _align_classes(state: StateCore) -> None:
    """Aligned table columns as `class="align-right"`, not markdown-it's `style` attribute:
    the gateway's Content-Security-Policy allows no inline styles (its stylesheet has the
    classes)."""
    for token in state.tokens:
        style = token.attrs.get("style") if token.type in ("th_open", "td_open") else None
        if isinstance(style, str) and style.startswith("text-align:"):
            del token.attrs["style"]
            token.attrSet("class", f"align-{style.removeprefix('text-align:')}")


def markdown_renderer() -> MarkdownIt:
    """CommonMark + tables, raw HTML limited to the report's own tags, links validated."""
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.core.ruler.push("align_classes", _align_classes)
    md.add_render_rule("html_block", _html_block)
    md.add_render_rule("html_inline", _html_block)
    return md


_MD = markdown_renderer()


def render_markdown(text: str) -> str:
    return str(_MD.render(text))
