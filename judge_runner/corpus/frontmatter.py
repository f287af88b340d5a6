"""Markdown front matter, read as metadata: YAML between ``---`` and ``---`` or ``...``, TOML between ``+++``
lines. Only a closed block whose body is empty or a mapping counts; anything else stays content.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field

import yaml

MAX_FRONT_MATTER_LINES = 200  # a closing delimiter further down is not front matter


@dataclass(frozen=True)
class FrontMatter:
    """A front-matter block: lines 1..``end_line`` belong to it."""

    meta: dict = field(default_factory=dict)
    end_line: int = 0

    @property
    def title(self) -> str | None:
        value = self.meta.get("title")
        return (" ".join(value.split()) or None) if isinstance(value, str) else None


def parse_front_matter(lines: list[str]) -> tuple[FrontMatter | None, str | None]:
    """``(front matter or None, note or None)``: the note says why a block that looked like front matter
    was left as content. Never raises."""
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
