"""md_text escapes only what could open a Markdown construct: figures, signs, amounts, parentheses and arrows
read as written in the .md file, and every value still renders as its literal text, in a table cell and at
the start of a line."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from judge_runner.core.mdtext import md_text

PLAIN = ["0.889", "-0.100", "+0.220", "$0.0000", "(n=3)", "a -> b", "overall !-0.127", "a & b", "a < b", "a~b", "x.md#anchor", "50%"]
CONSTRUCTS = ["- item", "-", "+ plus", "1. one", "2) two", "---", "==", "# heading", "> quote", "x ##", "&amp;", "<b>x</b>"]
CONSTRUCTS += ["$x$", "~~gone~~", "*em*", "_em_", "[a](b)", "![i](u)", "`code`", "a | b", "trailing \\"]


def rendered_text(markdown: str) -> tuple[str, set[str]]:
    out = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", out).strip()), set(re.findall(r"<(\w+)", out))


@pytest.mark.parametrize("value", PLAIN)
def test_plain_text_is_left_as_written(value):
    assert md_text(value) == value


@pytest.mark.parametrize("value", PLAIN + CONSTRUCTS)
def test_every_value_renders_as_its_text_in_a_paragraph_and_a_cell(value):
    text, tags = rendered_text(md_text(value) + "\n")
    assert (text, tags) == (value, {"p"})
    text, tags = rendered_text(f"| {md_text(value)} |\n|---|\n")
    assert (text.strip(), tags) == (value, {"table", "thead", "tr", "th"})
