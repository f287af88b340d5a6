"""A compare run for the budgeted labelling tests, written with the run file's own models: two systems
(``hybrid`` and ``fts``) on the same queries, four results each from a query's six documents, the judge's
grades, and the people's grades the simulated labeller gives (:func:`truth`), which differ from the judge's."""

from __future__ import annotations

import json
from pathlib import Path

from judge_runner.measures.ipw import SCALED_DCG_IDEAL, discount
from judge_runner.measures.ir import NDCG10_NAME, qrels_metrics, query_metrics
from judge_runner.runs.lines import EvaluationLine, ResultLabel, RunStartLine, Scores, SummaryLine

SYSTEMS = ("hybrid", "fts")


def judge_grade(q: int, d: int) -> int:
    return (q * 7 + d * 3) % 4


def truth(q: int, d: int) -> int:
    """The people's grade: the judge's, moved down by one on some documents and up on others."""
    g = judge_grade(q, d)
    shift = -1 if (q + d) % 3 == 0 else (1 if (q * d) % 5 == 1 else 0)
    return min(3, max(0, g + shift))


def ranking(q: int, system: str) -> list[int]:
    """Documents 0-5 of query q, four of them, best first; every fifth query hybrid and fts rank alike; a third
    system (``vector``) ranks others, the fourth (``bm25``) returns hybrid's first two only."""
    base = [(q + i) % 6 for i in range(6)]
    if system == "vector":
        return [base[3], base[2], base[5], base[0]] if q % 3 else [base[2], base[0], base[1], base[4]]
    if system == "bm25":
        return base[:2]
    if system == "hybrid" or q % 5 == 0:
        return base[:4]
    return [base[1], base[0], base[4], base[2]] if q % 2 else [base[5], base[1], base[0], base[3]]


def doc(q: int, d: int) -> str:
    return f"docs/q{q}-d{d}.md"


def truth_grades(queries: int) -> dict[tuple[str, str], int]:
    """Every (qid, document) the run returned with the people's grade."""
    return {(f"q{q}", doc(q, d)): truth(q, d) for q in range(queries) for d in range(6)}


def true_value(queries: int, kind: str = "difference") -> float:
    """The people's mean nDCG@10 difference fts - hybrid over the run's queries (or hybrid's mean), against the
    pooled qrels: the people's grades of the documents the question labels (both systems' for a difference,
    hybrid's for its mean), the judge's of the others either system returned."""
    total = 0.0
    for q in range(queries):
        returned = {d for s in SYSTEMS for d in ranking(q, s)}
        labelled = returned if kind == "difference" else set(ranking(q, "hybrid"))
        qrels = {doc(q, d): truth(q, d) if d in labelled else judge_grade(q, d) for d in returned}
        values = {s: qrels_metrics({"q": qrels}, {"q": [doc(q, d) for d in ranking(q, s)]})["q"][NDCG10_NAME] for s in SYSTEMS}
        total += values["fts"] - values["hybrid"] if kind == "difference" else values["hybrid"]
    return total / queries


def write_compare_run(folder: Path, queries: int = 40, name: str = "20261201T100000Z", systems=SYSTEMS, human_queries: int = 0) -> Path:
    """The run file; the first ``human_queries`` queries carry people's grades (labelled before)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [RunStartLine(runId=name, timestamp="2026-12-01T10:00:00.000Z", formatVersion=2, config={}).line()]
    for q in range(queries):
        for s in systems:
            docs = ranking(q, s)
            human = q < human_queries
            results = [
                ResultLabel(
                    rank=r + 1,
                    source=doc(q, d),
                    anchor=f"Q{q} > D{d}",
                    score=1.0 - r / 10,
                    relevance=truth(q, d) if human else judge_grade(q, d),
                    relevant=(truth(q, d) if human else judge_grade(q, d)) >= 2,
                    labelOrigin="human" if human else "judge",
                    judgeLabel=judge_grade(q, d) if human else None,
                    shownText=f"Document {d} for query {q}.",
                    snippet=f"Document {d} for query {q}.",
                )
                for r, d in enumerate(docs)
            ]
            sources = [doc(q, d) for d in docs]
            judge = query_metrics(sources, [judge_grade(q, d) for d in docs], [])[NDCG10_NAME]
            own = query_metrics(sources, [truth(q, d) for d in docs], [])[NDCG10_NAME] if human else judge
            lines.append(
                EvaluationLine(
                    runId=name,
                    timestamp="2026-12-01T10:00:01.000Z",
                    queryId=f"q{q}",
                    query=f"query number {q}",
                    queryIntent=f"Find the answer to question {q}.",
                    queryType="natural-language",
                    searchMode="hybrid",
                    resultCount=len(results),
                    scores=Scores(relevance=0.5, ranking=0.5, coverage=0.5, snippetQuality=0.5, overall=0.5),
                    results=results,
                    metrics={NDCG10_NAME: own, "R@10": None, "RR(rel=2)": 0.5},
                    humanLabels=len(results) if human else 0,
                    judgeOnly={NDCG10_NAME: judge, "relevance": 0.5} if human else None,
                    system=s,
                ).line()
            )
    lines.append(SummaryLine(runId=name, timestamp="2026-12-01T10:00:02.000Z", totalQueries=queries, evaluated=queries).line())
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def true_scaled_dcg(queries: int, kind: str = "difference") -> float:
    """The people's mean scaled DCG@10 (DCG@10 over that of ten grade-3 results) difference fts - hybrid (or hybrid's)."""
    total = 0.0
    for q in range(queries):
        values = {s: sum(truth(q, d) * discount(r) for r, d in enumerate(ranking(q, s), start=1)) / SCALED_DCG_IDEAL for s in SYSTEMS}
        total += values["fts"] - values["hybrid"] if kind == "difference" else values["hybrid"]
    return total / queries
