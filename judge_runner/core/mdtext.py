"""Text from run files as Markdown that renders as exactly that text (weekly report, ``trend --format
markdown``)."""

from __future__ import annotations

import re

# Characters that can open or close a CommonMark (or GFM table, strikethrough, GitHub math) construct
# anywhere in a line: backslash escapes, code spans, emphasis, links and images, autolinks and raw HTML,
# entity references, table cells, strikethrough, ATX closing sequences, math. CommonMark lets any ASCII
# punctuation be backslash-escaped (spec 0.31, "Backslash escapes"), so escaping them is always safe.
# An underscore between two letters or digits can neither open nor close emphasis (CommonMark's flanking
# rules), so identifiers such as invalid_output stay readable in the .md file.
_INLINE_SPECIAL = re.compile(r"([\\`*\[\]<>&|~#!$(){}]|(?<![^\W_])_|_(?![^\W_]))")
# Line endings as CommonMark knows them (LF, CR, CRLF) plus the other characters str.splitlines() breaks on.
_LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")
# What makes the start of a block: a list marker (-, +, 1. or 1)), which a value may land on (e.g. "- {issue}").
_BLOCK_START = re.compile(r"^([-+]|\d{1,9}(?=[.)]))")


def md_text(value: object) -> str:
    """``str(value)`` as Markdown that renders as exactly its text on one line, inline or in a table cell: line
    breaks become one space, outer blanks are dropped, and whatever could open a block or an inline construct is
    backslash-escaped."""
    text = _LINE_BREAKS.sub(" ", str(value)).strip()
    text = _INLINE_SPECIAL.sub(r"\\\1", text)
    start = _BLOCK_START.match(text)
    if start:
        end = start.end()
        text = text[: end - 1] + "\\" + text[end - 1 :] if start.group(1) in "-+" else text[:end] + "\\" + text[end:]
    return text
