"""The people's grades known before a budget is drawn: every (query, document) any person graded, in any human
qrels set of the judgment cache or any ``NAME.qrels`` of the labels folder. A budget treats them as known
(drawn with probability 1, costing nothing), so no label is bought twice.

Where two sets grade one pair differently, the cache's rule holds
(:func:`judge_runner.judging.qrels.human_labels`: the set first in alphabetical order wins), then the labels
folder's files in alphabetical order. Grades outside 0-3 (a file in the folder that is not a label session's)
are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import QrelsError, human_labels, read_trec_qrels

Pair = tuple[str, str]


@dataclass
class Known:
    """``grades`` ``{(qid, document): people's grade 0-3}``; ``sources`` ``{where: pairs}`` (a cache's set
    ``cache:NAME``, or a file of the labels folder)."""

    grades: dict[Pair, int] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)

    def add(self, where: str, rows: list[tuple[str, str, int]]) -> None:
        """Add ``rows`` ``(qid, document, grade)`` from ``where``; a pair already known keeps its grade."""
        new = 0
        for qid, doc, grade in rows:
            if 0 <= grade <= 3 and (qid, doc) not in self.grades:
                self.grades[(qid, doc)] = int(grade)
                new += 1
        if new:
            self.sources[where] = self.sources.get(where, 0) + new


def known_grades(folder: Path, cache: Path | None) -> Known:
    """The people's grades of the judgment cache at ``cache`` (None, or a file not there yet: none) and of the
    ``*.qrels`` files of the labels ``folder`` (module docstring). Raises
    :class:`judge_runner.judging.cache_failures.CacheError` for a cache that cannot be read."""
    known = Known()
    if cache is not None and cache.is_file():
        with JudgmentCache(cache, readonly=True) as opened:
            by_set: dict[str, list[tuple[str, str, int]]] = {}
            names = sorted({name for name, _, _, _ in opened.human_qrels()})
            chosen = human_labels(opened, names)
            for name, qid, doc, grade in opened.human_qrels(names):
                if chosen.get((qid, doc)) == grade:
                    by_set.setdefault(name, []).append((qid, doc, grade))
        for name in names:
            known.add(f"cache:{name}", by_set.get(name, []))
    for path in sorted(folder.glob("*.qrels")) if folder.is_dir() else []:
        try:
            rows = read_trec_qrels(path)
        except (QrelsError, OSError, UnicodeDecodeError):
            continue  # empty (a session with no label yet) or not a qrels file: nothing known from it
        known.add(str(path), rows)
    return known
