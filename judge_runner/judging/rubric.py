"""The rubric the judge and people grade by: one file, ``prompts/judge_rubric.md``, read by both.

The judge's label prompt holds it word for word (:func:`judge_runner.judging.requests.label_system_prompt`);
the labelling page of ``judge-runner label`` shows people the same scale and the same rules, in the same
words, from :func:`load_rubric` (``human/journal.py`` hands it to the page). So ``calibrate`` measures the
judge against people who graded by its rubric, not a rubric difference as judge bias.

The file's shape, which :func:`load_rubric` reads: sections under ``## `` headings, each a paragraph of
introduction and items (``- **Title.** text`` or ``1. **Title.** text``). The section ``The scale`` has one
item per grade, ``- **3 - perfectly relevant.** meaning. Example: ...``.
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
    """One rule or grade: its bold ``title`` and the ``text`` after it."""

    title: str
    text: str


@dataclass(frozen=True)
class RubricSection:
    """A ``## `` section: its ``heading``, its introduction and its items."""

    heading: str
    intro: str
    items: tuple[RubricItem, ...]


@dataclass(frozen=True)
class Rubric:
    """The rubric: its ``text`` as the judge reads it and its ``sections`` as people are shown them."""

    text: str
    sections: tuple[RubricSection, ...]

    def scale(self) -> dict[int, tuple[str, str]]:
        """``{grade: (name, meaning)}``: each grade's name (capitalised) and its meaning, the words before
        its example. Raises ValueError when the file has no full 0-3 scale."""
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
        """The sections, JSON-ready, as the labelling page renders them."""
        return [
            {"heading": s.heading, "intro": s.intro, "items": [{"title": i.title, "text": i.text} for i in s.items]} for s in self.sections
        ]


def parse_rubric(text: str) -> Rubric:
    """The rubric of ``text`` (the shape of the module docstring): lines before the first heading are
    ignored, a line that is neither a heading nor an item joins the section's introduction."""
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
    """The shipped rubric (``prompts/judge_rubric.md``). Raises ResourceNotFound."""
    return parse_rubric(load_prompt(RUBRIC_FILE))
