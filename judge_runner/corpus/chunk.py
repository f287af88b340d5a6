"""Chunks of at most ``MAX_CHUNK_CHARS`` characters, split between lines, then sentences, then words; only
a single word longer than the cap is cut inside. :func:`chunk_text` is the plain-text chunker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHUNK_CHARS = 1200

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")


@dataclass(frozen=True)
class Chunk:
    """A piece of one document; ``anchor``: heading path, key or name (None: unknown); lines 1-based,
    inclusive."""

    text: str
    anchor: str | None
    line_start: int
    line_end: int


def _split_words(text: str, cap: int) -> list[str]:
    pieces: list[str] = []
    current = ""
    for word in re.split(r"(\s+)", text):
        if not word:
            continue
        while len(word) > cap:  # one token longer than the cap: the only mid-word cut allowed
            if current.strip():
                pieces.append(current.strip())
                current = ""
            pieces.append(word[:cap])
            word = word[cap:]
        if len(current) + len(word) > cap:
            if current.strip():
                pieces.append(current.strip())
            current = word.lstrip()
        else:
            current += word
    if current.strip():
        pieces.append(current.strip())
    return pieces


def _split_line(line: str, cap: int) -> list[str]:
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(line):
        if not sentence:
            continue
        if len(sentence) > cap:
            if current:
                pieces.append(current)
                current = ""
            pieces.extend(_split_words(sentence, cap))
            continue
        joined = f"{current} {sentence}" if current else sentence
        if len(joined) > cap:
            pieces.append(current)
            current = sentence
        else:
            current = joined
    if current:
        pieces.append(current)
    return pieces


def pack_lines(lines: list[tuple[int, str]], anchor: str | None, cap: int = MAX_CHUNK_CHARS) -> list[Chunk]:
    """Numbered lines in chunks of at most ``cap`` characters, split between lines where possible."""
    chunks: list[Chunk] = []
    buf: list[tuple[int, str]] = []

    def flush() -> None:
        # blank lines at either edge (a paragraph break where the chunk was cut) are not part of the
        # chunk, so its line range must not start or end on them
        lo, hi = 0, len(buf)
        while lo < hi and not buf[lo][1].strip():
            lo += 1
        while hi > lo and not buf[hi - 1][1].strip():
            hi -= 1
        if lo < hi:
            text = "\n".join(t for _, t in buf[lo:hi]).strip()
            chunks.append(Chunk(text, anchor, buf[lo][0], buf[hi - 1][0]))
        buf.clear()

    for number, line in lines:
        if len(line) > cap:
            flush()
            for piece in _split_line(line, cap):
                chunks.append(Chunk(piece, anchor, number, number))
            continue
        size = sum(len(t) + 1 for _, t in buf) + len(line)
        if buf and size > cap:
            flush()
        buf.append((number, line))
    flush()
    return chunks


_LINE_END = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """Lines split at LF, CRLF and a bare CR only, as markdown-it and YAML number them."""
    return _LINE_END.split(text)


def markdown_headings(text: str) -> dict[int, tuple[int, str]]:
    """``{first line (1-based): (level, plain heading text)}`` of the CommonMark headings."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    headings: dict[int, tuple[int, str]] = {}
    for opening, inline in zip(tokens, tokens[1:]):
        if opening.type == "heading_open" and opening.map:
            plain = "".join(c.content for c in (inline.children or []) if c.type in ("text", "code_inline")) or inline.content
            headings[opening.map[0] + 1] = (int(opening.tag[1]), " ".join(plain.split()))
    return headings


def _sections(lines: list[str], headings: dict[int, tuple[int, str]]) -> list[tuple[str | None, list[list[tuple[int, str]]]]]:
    """Sections (anchor: the heading path) of paragraphs of numbered lines."""
    sections: list[tuple[str | None, list[list[tuple[int, str]]]]] = [(None, [])]
    path: list[tuple[int, str]] = []
    paragraph: list[tuple[int, str]] = []

    def end_paragraph() -> None:
        if paragraph:
            sections[-1][1].append(list(paragraph))
            paragraph.clear()

    for number, line in enumerate(lines, start=1):
        if number in headings:
            end_paragraph()
            level, title = headings[number]
            path = [p for p in path if p[0] < level] + [(level, title)]
            sections.append((" > ".join(t for _, t in path), []))
        if line.strip():
            paragraph.append((number, line))
        else:
            end_paragraph()
    end_paragraph()
    return sections


def chunk_text(text: str, fmt: str, cap: int = MAX_CHUNK_CHARS) -> list[Chunk]:
    """Chunks of plain text by paragraph, of markdown also by heading, in document order; none for a blank
    document."""
    if cap < 20:
        raise ValueError("chunk cap must be at least 20 characters")
    headings = markdown_headings(text) if fmt in ("md", "markdown") else {}
    chunks: list[Chunk] = []
    for anchor, paragraphs in _sections(split_lines(text), headings):
        lines: list[tuple[int, str]] = []
        for para in paragraphs:
            if lines:
                lines.append((para[0][0] - 1, ""))  # keep the paragraph break
            lines.extend(para)
        chunks.extend(pack_lines(lines, anchor, cap))
    return chunks
