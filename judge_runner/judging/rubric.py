"""The rubric the judge labels by and people grade by: one file, ``prompts/judge_rubric.md``, so
``calibrate`` never measures a rubric difference as judge bias. Its shape: ``## `` sections of an
introduction and items (``- **Title.** text`` or ``1. **Title.** text``); ``The scale`` has one item per grade.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from judge_runner.core.resources import load_prompt

RUBRIC_FILE = "judge_rubric.md"
SCALE_SECTION = "The scale"
_ITEM = re.compile(r"^(?:-|\d+\.)\s+\*\*(?P<title>[^*]+)\*\*\s*(?P<text>.*)$")
_GRADE = re.compile(r"^(?P<grade>[0-3])\s*-\s*(?P<name>[^.]+)\.?$")


@dataclass(frozen=True)
class RubricItem:
    title: str
    text: str


@dataclass(frozen=True)
class RubricSection:
    heading: str
    intro: str
    items: tuple[RubricItem, ...]


@dataclass(frozen=True)
class Rubric:
    text: str
    sections: tuple[RubricSection, ...]

    def scale(self) -> dict[int, tuple[str, str]]:
        """``{grade: (name, meaning)}``. Raises ValueError when the file has no full 0-3 scale."""
        section = next((s for s in self.sections if s.heading == SCALE_SECTION), None)
        grades: dict[int, tuple[str, str]] = {}
        for item in section.items if section is not None else ():
            found = _GRADE.match(item.title.strip())
            if found:
                name = found.group("name").strip()
                grades[int(found.group("grade"))] = (name[:1].upper() + name[1:], item.text.split(" Example:")[0].strip())
        if sorted(grades) != [0, 1, 2, 3]:
            raise ValueError(f"{RUBRIC_FILE} must give grades 0-3 under '## {SCALE_SECTION}', found {sorted(grades)}")
        return dict(sorted(grades.items()))

    def as_dict(self) -> list[dict]:
        return [
            {"heading": s.heading, "intro": s.intro, "items": [{"title": i.title, "text": i.text} for i in s.items]} for s in self.sections
        ]


def parse_rubric(text: str) -> Rubric:
    """Lines before the first heading are ignored; other lines join the section's introduction."""
    sections: list[RubricSection] = []
    heading, intro, items = None, [], []  # type: ignore[var-annotated]
    for line in [*text.splitlines(), "## "]:
        if line.startswith("## "):
            if heading is not None:
                sections.append(RubricSection(heading, " ".join(intro), tuple(items)))
            heading, intro, items = line[3:].strip(), [], []
            continue
        item = _ITEM.match(line.strip())
        if item and heading is not None:
            items.append(RubricItem(item.group("title").strip(), item.group("text").strip()))
        elif line.strip() and heading is not None:
            intro.append(line.strip())
    return Rubric(text.strip(), tuple(sections))


@cache
def load_rubric() -> Rubric:
    """The shipped rubric. Raises ResourceNotFound."""
    return parse_rubric(load_prompt(RUBRIC_FILE))
