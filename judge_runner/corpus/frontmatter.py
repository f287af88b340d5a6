"""Markdown front matter: the metadata block at the top of a file, read as metadata, never as content.

Two conventions are recognised (Jekyll, Hugo, Obsidian, MkDocs, Docusaurus...):

- YAML between a first line ``---`` and a closing line ``---`` or ``...``, loaded with ``yaml.safe_load``;
- TOML between a first line ``+++`` and a closing line ``+++`` (Hugo), loaded with the stdlib ``tomllib``.

A block counts as front matter only when it is closed and its body is empty or a mapping; anything else
(an unclosed ``---``, a thematic break followed by a setext heading, YAML that does not parse) stays part
of the document, with a note saying why when it looked like front matter.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field

import yaml

MAX_FRONT_MATTER_LINES = 200  # a closing delimiter further down is not front matter


@dataclass(frozen=True)
class FrontMatter:
    """A parsed front-matter block: its metadata and the 1-based number of its closing line
    (``end_line``; lines 1..end_line belong to it). ``title`` is the metadata's title when it is text."""

    meta: dict = field(default_factory=dict)
    end_line: int = 0

    @property
    def title(self) -> str | None:
        value = self.meta.get("title")
        return (" ".join(value.split()) or None) if isinstance(value, str) else None


def parse_front_matter(lines: list[str]) -> tuple[FrontMatter | None, str | None]:
    """``(front matter or None, note or None)`` for a document's lines (newline-free).

    The note explains a block that opened like front matter but was left as content (unclosed,
    unparsable, not a mapping). Never raises.
    """
    if not lines or lines[0].strip() not in ("---", "+++"):
        return None, None
    opener = lines[0].strip()
    closers = ("---", "...") if opener == "---" else ("+++",)
    end = next((i for i, line in enumerate(lines[1 : MAX_FRONT_MATTER_LINES + 1], start=1) if line.strip() in closers), None)
    if end is None:
        return None, "front matter not closed; read as content"
    body = "\n".join(lines[1:end])
    try:
        meta = yaml.safe_load(body) if opener == "---" else tomllib.loads(body)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, ValueError, RecursionError):
        return None, "front matter did not parse; read as content"
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        # "---\nSome text\n---": a thematic break and a setext heading, not metadata
        return None, None
    return FrontMatter(meta={str(k): v for k, v in meta.items()}, end_line=end + 1), None
