"""What a person grades with ``judge-runner label``: (query, document) items drawn, seeded, from run files.
``queries`` (default) draws whole queries, every document any run returned, so a query's nDCG@10 comes from the
person's grades alone; ``pairs`` draws the same number per judge label 0-3. Queries and documents come in random
order, and an item carries nothing of the judge's: :meth:`Item.shown` is all a page may send."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from judge_runner.judging.scores import median_label
from judge_runner.measures.ir import NDCG10_NAME
from judge_runner.measures.ppi import queries_for_width
from judge_runner.runs.read import RunFile

SAMPLINGS = ("queries", "pairs")
DEFAULT_WIDTH = 0.1  # a 95% interval of mean nDCG@10 about +/- 0.05 wide


@dataclass(frozen=True)
class Item:
    """One (query, document) to grade: ``text`` is what the judge was shown, ``textFrom`` ``shown`` or
    ``snippet`` (files written before the shown text was kept)."""

    id: str
    qid: str
    query: str
    intent: str
    source: str
    anchor: str | None
    text: str
    textFrom: str

    def shown(self) -> dict:
        return asdict(self)


def scored(run: RunFile) -> list:
    """Evaluation lines with metrics (on-topic queries)."""
    return [ev for ev in run.evaluations if ev.metrics is not None]


def documents(runs: Sequence[RunFile]) -> dict[str, dict]:
    """``{qid: {"query", "intent", "docs": {source: (anchor, text, textFrom, [judge labels])}}}`` over the runs'
    scored queries; the first run to return a document gives its text."""
    out: dict[str, dict] = {}
    for run in runs:
        for ev in scored(run):
            entry = out.setdefault(ev.queryId, {"query": ev.query, "intent": ev.queryIntent, "docs": {}})
            for r in ev.results:
                shown = r.shownText if r.shownText else None
                doc = entry["docs"].setdefault(
                    r.source, (r.anchor, shown if shown is not None else r.snippet, "shown" if shown else "snippet", [])
                )
                own = r.judgeLabel if r.labelOrigin == "human" else r.relevance
                if own is not None:
                    doc[3].append(int(own))
    return out


def items_of(docs: dict[str, dict], pairs: Sequence[tuple[str, str]]) -> list[Item]:
    """One item per ``(query id, source)`` of ``pairs`` in order, ids ``i1``, ``i2``, ...; ``docs``: :func:`documents`."""
    items: list[Item] = []
    for n, (qid, source) in enumerate(pairs, start=1):
        entry = docs[qid]
        anchor, text, origin, _ = entry["docs"][source]
        items.append(Item(f"i{n}", qid, entry["query"], entry["intent"], source, anchor, text, origin))
    return items


def plan_queries(runs: Sequence[RunFile], count: int, seed: int) -> list[Item]:
    """Items of ``count`` whole queries drawn at random (all when fewer), in random order."""
    docs = documents(runs)
    rng = random.Random(seed)
    chosen = rng.sample(sorted(docs), min(count, len(docs)))
    pairs: list[tuple[str, str]] = []
    for qid in chosen:
        sources = sorted(docs[qid]["docs"])
        rng.shuffle(sources)
        pairs += [(qid, source) for source in sources]
    return items_of(docs, pairs)


def plan_pairs(runs: Sequence[RunFile], per_label: int, seed: int) -> list[Item]:
    """Items of ``per_label`` pairs per judge label 0-3 (the median of the runs' labels of the pair), in one
    random order."""
    docs = documents(runs)
    strata: dict[int, list[tuple[str, str]]] = {g: [] for g in range(4)}
    for qid in sorted(docs):
        for source, (_, _, _, labels) in sorted(docs[qid]["docs"].items()):
            if labels:
                strata[median_label(labels)].append((qid, source))
    rng = random.Random(seed)
    picked = [pair for grade in range(4) for pair in rng.sample(strata[grade], min(per_label, len(strata[grade])))]
    rng.shuffle(picked)
    return items_of(docs, picked)


def recommended_queries(runs: Sequence[RunFile], width: float = DEFAULT_WIDTH) -> tuple[int, float, int]:
    """``(queries to grade, sd of per-query nDCG@10, scored queries)`` for a 95% interval of mean nDCG@10 at
    most ``width`` wide (:func:`judge_runner.measures.ppi.queries_for_width`). Raises ValueError when the runs
    hold no scored query."""
    values: dict[str, float] = {}
    for run in runs:
        for ev in scored(run):
            value = (ev.metrics or {}).get(NDCG10_NAME)
            if isinstance(value, (int, float)):
                values.setdefault(ev.queryId, float(value))
    if not values:
        raise ValueError("the runs hold no scored query (on-topic, with nDCG@10) to label")
    sd = statistics.stdev(values.values()) if len(values) > 1 else 0.0
    return queries_for_width(sd, width, len(values)), sd, len(values)
