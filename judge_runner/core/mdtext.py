"""Text from run files (queries, intents, the judge's words, model names, file names) as Markdown that
renders as exactly that text: used by the weekly report (``analysis/report.py``) and ``trend --format markdown``."""

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
    """``value`` as Markdown that renders as exactly its text on one line, inline or as a table cell.

    Line breaks (and runs of them) become one space, so a value never starts a block (heading, list,
    quote, code, table row); leading and trailing blanks are dropped (they could indent a code block);
    every character that could open an inline construct (image, link, autolink, raw HTML, entity,
    code span, emphasis, strikethrough, a table's ``|``) is backslash-escaped, and so is a list
    marker at the start. Shapes: any object (``str()`` of it) -> one line of text."""
    text = _LINE_BREAKS.sub(" ", str(value)).strip()
    text = _INLINE_SPECIAL.sub(r"\\\1", text)
    start = _BLOCK_START.match(text)
    if start:
        end = start.end()
        text = text[: end - 1] + "\\" + text[end - 1 :] if start.group(1) in "-+" else text[:end] + "\\" + text[end:]
    return text
