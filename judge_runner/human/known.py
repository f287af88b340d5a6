"""The people's grades known before a budget is drawn, from the judgment cache's human qrels sets and the labels
folder's ``*.qrels``: a budget takes them as known (probability 1, no cost), so no pair is graded twice. Where
sets disagree the cache's rule holds, then the folder's files in alphabetical order; grades outside 0-3 are left
out. A grade counts for a query of the same id and text (:class:`~judge_runner.judging.qrels.PeopleGrades`); a
folder file's texts are those of its session's journal beside it (none: by id)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import PeopleGrades, QrelsError, left_out_warning, read_trec_qrels

Pair = tuple[str, str]


@dataclass
class Known:
    """``grades`` ``{(qid, document): grade 0-3}`` and ``sources`` ``{where: pairs}``."""

    grades: dict[Pair, int] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """Sets with grades left out: given to another query text under the same id."""

    def add(self, where: str, rows: list[tuple[str, str, int]]) -> None:
        """Add ``(qid, document, grade)`` rows from ``where``; a pair already known keeps its grade."""
        new = 0
        for qid, doc, grade in rows:
            if 0 <= grade <= 3 and (qid, doc) not in self.grades:
                self.grades[(qid, doc)] = int(grade)
                new += 1
        if new:
            self.sources[where] = self.sources.get(where, 0) + new


def journal_texts(journal: Path) -> dict[str, str]:
    """``{qid: query text}`` of a label session's ``journal`` (its plan line); empty when it cannot be read."""
    try:
        with open(journal, encoding="utf-8") as handle:
            plan = json.loads(handle.readline())
        return {str(item["qid"]): str(item["query"]) for item in plan.get("items") or []}
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def known_grades(folder: Path, cache: Path | None, queries: Mapping[str, str]) -> Known:
    """The grades of the cache at ``cache`` (None or missing: none) and of ``folder``'s qrels that apply to
    ``queries`` (``{qid: text}``). Raises :class:`judge_runner.judging.cache_failures.CacheError` for a cache
    that cannot be read."""
    known = Known()
    warned: set[str] = set()
    if cache is not None and cache.is_file():
        with JudgmentCache(cache, readonly=True) as opened:
            rows = opened.human_rows()
        names = sorted({row[0] for row in rows})
        people = PeopleGrades(rows, names)
        chosen = people.matching(queries)
        for name in names:
            known.add(
                f"cache:{name}",
                [(q, d, g) for n, q, d, g, t in rows if n == name and chosen.get((q, d)) == g and t in (None, queries.get(q))],
            )
        known.warnings += people.warnings()
        warned = set(people.skipped)
    for path in sorted(folder.glob("*.qrels")) if folder.is_dir() else []:
        try:
            rows_read = read_trec_qrels(path)
        except (QrelsError, OSError, UnicodeDecodeError):
            continue  # empty (a session with no label yet) or not a qrels file: nothing known from it
        texts = journal_texts(path.with_name(path.name.removesuffix(".qrels") + ".journal.jsonl"))
        taken = [(q, d, g) for q, d, g in rows_read if q not in texts or q not in queries or texts[q] == queries[q]]
        if len(taken) < len(rows_read) and path.name.removesuffix(".qrels") not in warned:  # a session's file: its set's copy
            left = {q for q, _, _ in rows_read} - {q for q, _, _ in taken}
            known.warnings.append(left_out_warning(str(path), len(rows_read) - len(taken), left))
        known.add(str(path), taken)
    return known
