"""Text from run files as Markdown that renders as exactly that text (weekly report, ``trend --format
markdown``, ``report --format github``), escaping only what could open a construct, so 0.889, -0.100, $0.12,
(n=3) and a -> b read as written in the .md file too."""

from __future__ import annotations

import re

# What can open or close a CommonMark (or GFM table, strikethrough, GitHub math) construct inside a line
# (CommonMark 0.31 and GFM 0.29; a backslash escape is safe before any ASCII punctuation): backslash escapes,
# code spans, emphasis, links and images ("!" and "(" mean nothing once "[" is escaped), table cells; "_" only
# where it can flank emphasis (not between two letters or digits, so invalid_output stays readable); "<" only
# before what starts raw HTML or an autolink; "&" only where it starts an entity reference; a heading's
# closing "#" sequence.
_INLINE_SPECIAL = re.compile(r"([\\`*\[\]|]|(?<![^\W_])_|_(?![^\W_])|<(?=[A-Za-z/!?])|&(?=#?\w+;)|(?<!\S)#(?=#*$))")
# Line endings as CommonMark knows them (LF, CR, CRLF) plus the other characters str.splitlines() breaks on.
_LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")
# What makes a value that lands at the start of a line a block: a list marker (-, +, 1. or 1)) followed by a
# blank or the end, an ATX heading, a block quote, a setext underline or thematic break of - or =.
_BLOCK_START = re.compile(r"^(?:(?P<digits>\d{1,9})[.)](?=[ \t]|$)|[-+](?=[ \t]|$)|[#>]|[-=]+$)")


def md_text(value: object) -> str:
    """``str(value)`` as Markdown that renders as exactly its text on one line, inline or in a table cell: line
    breaks become one space, outer blanks are dropped, and whatever could open a block or an inline construct is
    backslash-escaped; nothing else is. Strikethrough (``~``) and GitHub math (``$``) open only with a closer:
    escaped when the text holds two or more."""
    text = _LINE_BREAKS.sub(" ", str(value)).strip()
    text = _INLINE_SPECIAL.sub(r"\\\1", text)
    for char in "~$":
        if text.count(char) > 1:
            text = text.replace(char, "\\" + char)
    start = _BLOCK_START.match(text)
    if start:
        at = start.end("digits") if start.group("digits") else 0
        text = text[:at] + "\\" + text[at:]
    return text
