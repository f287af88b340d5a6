"""The people's grades known before a budget is drawn, from the judgment cache's human qrels sets and the labels
folder's ``*.qrels``: a budget takes them as known (probability 1, no cost), so no pair is graded twice. Where
sets disagree the cache's rule holds, then the folder's files in alphabetical order; grades outside 0-3 are left
out."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import QrelsError, human_labels, read_trec_qrels

Pair = tuple[str, str]


@dataclass
class Known:
    """``grades`` ``{(qid, document): grade 0-3}`` and ``sources`` ``{where: pairs}``."""

    grades: dict[Pair, int] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)

    def add(self, where: str, rows: list[tuple[str, str, int]]) -> None:
        """Add ``(qid, document, grade)`` rows from ``where``; a pair already known keeps its grade."""
        new = 0
        for qid, doc, grade in rows:
            if 0 <= grade <= 3 and (qid, doc) not in self.grades:
                self.grades[(qid, doc)] = int(grade)
                new += 1
        if new:
            self.sources[where] = self.sources.get(where, 0) + new


def known_grades(folder: Path, cache: Path | None) -> Known:
    """The grades of the cache at ``cache`` (None or missing: none) and of ``folder``'s qrels. Raises
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
