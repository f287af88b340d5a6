"""Pooled qrels: one set of grades per query that every system and every run of one judge is scored against,
as TREC pools them, and the re-scoring of evaluation lines against it.

The qrels of a query (:func:`build_pool`) are every grade known for it, by :func:`judge_runner.judging.qrels.pool_qrels`:

1. people's grades (origin ``human``): the judgment cache's human qrels (matched by query id, as ``evaluate
   --human-qrels`` matches them), else the grades people gave in the lines (``labelOrigin`` human); they win;
2. the judge's labels (``judge``) of every line pooled (every system of a compare run, every run of the same
   judge that ``trend`` reads), per document the median; a document no line labelled takes the median of the
   same judge's labels in the judgment cache (its ``judge_key`` column; ``fromCache``);
3. each expected source nobody graded, at grade 3 (``expected``).

A document nobody graded is not relevant (trec_eval). Queries are pooled by id and text together
(:func:`topic_of`), so two query sets that number different queries alike never share grades. A second pool
without people's grades gives the judge's own figures (``judgeOnly``), which the bias correction compares
with the people's (:mod:`judge_runner.runs.corrected`).

:func:`rescore` gives each evaluation line its figures against the pool: the metrics
(:func:`judge_runner.measures.ir.qrels_metrics`); ``relevance``, ``ranking`` and ``gradedPrecision`` from the
pool's grades of the returned documents, ``relevance`` with the pool's other grades in its attainable ideal
(:func:`judge_runner.judging.scores.label_dimensions`); ``overall`` recomputed from them with the run's dimension
weights (``coverage`` and ``snippetQuality``, the list-level call's, are kept); ``judgeOnly``; and people's
grades on the results they cover. A line without results (an empty answer, or a file that kept no labels) keeps what it
says, as does an off-topic line (no metrics: scored on abstention).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_runner.core.models import DIMENSIONS
from judge_runner.judging.cache import JudgmentCache, topic_key
from judge_runner.judging.cache_failures import CacheError
from judge_runner.judging.qrels import PooledQrels, RunLabels, people_grades, pool_qrels
from judge_runner.judging.scores import label_dimensions, overall_score, relevance_score
from judge_runner.measures.ir import NDCG10_NAME, qrels_metrics
from judge_runner.runs.records import Record

ORIGINS = {"human": "people", "judge": "judge", "expected": "expected"}
"""The origins of a pooled grade (:attr:`PooledQrels.origin`) as the qrels block names them."""


def topic_of(line: Mapping[str, Any]) -> str:
    """The pool's key of an evaluation line's query: its id and its text."""
    return f"{line.get('queryId')}\x1f{line.get('query')}"


def judge_grade(result: Mapping[str, Any]) -> int | None:
    """The judge's own label of a result: ``relevance``, or ``judgeLabel`` when a person's grade won (None
    when the line kept none)."""
    if result.get("labelOrigin") == "human":
        label = result.get("judgeLabel")
        return int(label) if isinstance(label, int) else None
    return int(result.get("relevance") or 0)


@dataclass(frozen=True)
class Sources:
    """Where grades come from beyond the lines pooled: the judgment ``cache`` (the judge's labels by their
    ``judge_key``, people's human qrels sets ``names``, None: every set) and the judge's fingerprint key."""

    cache: JudgmentCache | None = None
    names: tuple[str, ...] | None = None
    judge_key: str | None = None


@dataclass
class Pool:
    """``qrels``: people's grades first (:func:`build_pool`); ``judge``: the same without people's grades;
    ``cache``: whether a judgment cache was read; ``people_topics``: the queries people graded something of."""

    qrels: PooledQrels
    judge: PooledQrels
    cache: bool = False
    people_topics: set[str] = field(default_factory=set)
    topic_runs: dict[str, set[str]] = field(default_factory=dict)
    """Per query, the runs whose lines were pooled for it."""
    warnings: list[str] = field(default_factory=list)
    """People's sets with grades left out for another query text (:meth:`~judge_runner.judging.qrels.PeopleGrades.warnings`)."""

    def block(self, topics: Iterable[str]) -> dict[str, Any]:
        """The ``qrels`` block (docs/run-file.md) of the queries ``topics``: ``queries``, grades by origin
        (``people``, ``judge``, ``expected``; ``fromCache`` of the judge's), ``runs`` whose lines were pooled for
        them, whether the ``cache`` was read, and ``source``: ``judge``, ``people`` or ``judge and people``."""
        wanted = set(topics)
        counts = dict.fromkeys(ORIGINS.values(), 0)
        for (topic, _), origin in self.qrels.origin.items():
            if topic in wanted:
                counts[ORIGINS[origin]] += 1
        from_cache = sum(1 for topic, _ in self.qrels.from_cache if topic in wanted)
        source = "judge and people" if counts["people"] and counts["judge"] else "people" if counts["people"] else "judge"
        runs: set[str] = set().union(*(self.topic_runs.get(t, set()) for t in wanted))
        return {
            "queries": len(wanted & set(self.qrels.qrels)),
            **counts,
            "fromCache": from_cache,
            "runs": len(runs),
            "cache": self.cache,
            "source": source,
        }


def qrels_text(block: Mapping[str, Any] | None) -> str:
    """A ``qrels`` block in words: ``"qrels: judge and people (40 judge's grades, 12 people's, 3 expected
    sources; pooled over 2 runs and the judgment cache)"``; "" without a block."""
    if not block:
        return ""
    parts = [f"{block.get('judge', 0)} judge's grades" + (f" ({block['fromCache']} from the cache)" if block.get("fromCache") else "")]
    parts += [f"{block.get('people', 0)} people's", f"{block.get('expected', 0)} expected sources"]
    where = f"{block.get('runs', 1)} run{'s' if block.get('runs', 1) != 1 else ''}" + (
        " and the judgment cache" if block.get("cache") else ""
    )
    return f"qrels: {block.get('source', 'judge')} ({', '.join(parts)}; pooled over {where})"


def build_pool(groups: Iterable[tuple[str, Iterable[Mapping[str, Any]]]], sources: Sources = Sources(), models: Iterable[str] = ()) -> Pool:
    """The pooled qrels (module docstring) of the evaluation lines in ``groups`` (``(run name, lines)``, lines
    as written, dicts by alias or mappings like them), with ``sources``; ``models``: the judge's returned model
    ids (cache labels of another model are left out; none given: any). A cache that fails adds nothing."""
    items: list[RunLabels] = []
    asked: dict[str, list[str]] = defaultdict(list)  # the cache's topic key -> pool topics
    by_qid: dict[str, list[str]] = defaultdict(list)
    stated: dict[tuple[str, str], int] = {}
    runs: dict[str, set[str]] = defaultdict(set)
    for name, lines in groups:
        for line in lines:
            if line.get("metrics") is None:  # off-topic: scored on abstention, no qrels
                continue
            topic = topic_of(line)
            runs[topic].add(name)
            results = line.get("results") or []
            labels = [(str(r.get("source")), g) for r in results if (g := judge_grade(r)) is not None]
            items.append(RunLabels(name, topic, str(line.get("query")), labels, tuple(line.get("expectedSources") or ())))
            for r in results:
                if r.get("labelOrigin") == "human":
                    stated[(topic, str(r.get("source")))] = int(r.get("relevance") or 0)
            if topic not in by_qid[str(line.get("queryId"))]:
                by_qid[str(line.get("queryId"))].append(topic)
                asked[topic_key(str(line.get("query")), str(line.get("queryIntent") or ""))].append(topic)
    people, cached, warnings = dict(stated), {}, []
    cache = sources.cache
    if cache is not None:
        try:
            grades = people_grades(cache, sources.names)
            for qid, topics in by_qid.items():
                for topic in topics:
                    for docid, grade in grades.for_query(qid, topic.split("\x1f", 1)[1]).items():
                        people[(topic, docid)] = grade
            warnings.extend(grades.warnings())
            if sources.judge_key:
                found = cache.judge_labels(sources.judge_key, asked, set(models) or None)
                cached = {(topic, docid): labels for (key, docid), labels in found.items() for topic in asked[key]}
        except CacheError:
            pass
    return Pool(
        pool_qrels(items, people, cached), pool_qrels(items, None, cached), cache is not None, {t for t, _ in people}, dict(runs), warnings
    )


def rescore(
    lines: Sequence[Mapping[str, Any]],
    pool: Pool,
    *,
    depth: int | None = None,
    weights: Mapping[str, float] | None = None,
    scores: bool = True,
) -> list[dict[str, Any] | None]:
    """Per line (in order) its figures against ``pool`` (module docstring), or None for a line that keeps what
    it says: ``{"metrics", "judgeOnly", "people": {result index: people's grade}}`` and, with ``scores`` (a run
    scored under scoring version 2 or later), ``"scores"``. ``depth``: the search limit ``relevance`` is cut
    at; ``weights``: the run's dimension weights (None: equal)."""
    ranked: dict[str, list[str]] = {}
    topics: dict[str, str] = {}
    for i, line in enumerate(lines):
        if line.get("metrics") is not None and line.get("results"):
            ranked[str(i)] = [str(r.get("source")) for r in line.get("results") or []]
            topics[str(i)] = topic_of(line)
    people = qrels_metrics({i: pool.qrels.qrels.get(t, {}) for i, t in topics.items()}, ranked)
    mixed = [i for i, t in topics.items() if t in pool.people_topics]
    judge = qrels_metrics({i: pool.judge.qrels.get(t, {}) for i in mixed for t in [topics[i]]}, {i: ranked[i] for i in mixed})
    how = _Rescoring(depth, weights if scores else None, scores)
    out: list[dict[str, Any] | None] = []
    for i, line in enumerate(lines):
        key = str(i)
        if key not in ranked:
            out.append(None)
            continue
        new = _one(line, pool, topics[key], ranked[key], (people[key], judge.get(key)), how)
        out.append(new)
    return out


@dataclass(frozen=True)
class _Rescoring:
    """How :func:`rescore` scores every line: its arguments ``depth``, ``weights`` and ``scores``."""

    depth: int | None
    weights: Mapping[str, float] | None
    scores: bool


def _one(
    line: Mapping[str, Any],
    pool: Pool,
    topic: str,
    sources: list[str],
    found: tuple[dict[str, float], dict[str, float] | None],
    how: _Rescoring,
) -> dict[str, Any]:
    """One line's new figures (:func:`rescore`): ``found`` its metrics against the pooled qrels and, when people
    graded some of its results, against the judge's labels alone."""
    metrics, judge_metrics = found
    depth, weights, scores = how.depth, how.weights, how.scores
    grades, judged = pool.qrels.qrels.get(topic, {}), pool.judge.qrels.get(topic, {})
    results = line.get("results") or []
    people = {
        i: grades[s]
        for i, (r, s) in enumerate(zip(results, sources))
        if pool.qrels.origin.get((topic, s)) == "human" and (r.get("labelOrigin") != "human" or r.get("relevance") != grades[s])
    }
    expected = list(line.get("expectedSources") or [])
    new: dict[str, Any] = {"metrics": {**(line.get("metrics") or {}), **metrics}, "people": people, "judgeOnly": None}
    own = [int(r.get("relevance") or 0) for r in results]
    if judge_metrics is not None:  # people graded something of the query: the judge's own figures beside
        written_own = (line.get("judgeOnly") or {}).get("relevance", _number(line, "relevance"))
        judge_labels = [judged.get(s, g) for s, g in zip(sources, own)]
        relevance = relevance_score(judge_labels, sources, expected, judged, depth) if scores else written_own
        new["judgeOnly"] = {NDCG10_NAME: judge_metrics[NDCG10_NAME], "relevance": relevance}
    if scores:
        written = dict(line.get("scores") or {})
        pooled = [grades.get(s, g) for s, g in zip(sources, own)]
        written.update(label_dimensions(pooled, sources, expected, grades, depth))
        if all(isinstance(written.get(d), (int, float)) for d in DIMENSIONS):
            try:
                written["overall"] = overall_score({d: float(written[d]) for d in DIMENSIONS}, dict(weights) if weights else None)
            except ValueError:
                pass
        new["scores"] = written
    return new


def _number(line: Mapping[str, Any], name: str) -> float | None:
    value = (line.get("scores") or {}).get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def rescored_line(line: Mapping[str, Any], new: Mapping[str, Any] | None) -> dict[str, Any]:
    """A line (a dict by alias) with its :func:`rescore` figures: a new dict; ``line`` itself is not changed."""
    out = dict(line)
    if new is None:
        return out
    out["metrics"], out["judgeOnly"] = new["metrics"], new["judgeOnly"]
    if "scores" in new:
        out["scores"] = new["scores"]
    if new["people"]:
        results = [dict(r) for r in line.get("results") or []]
        for i, grade in new["people"].items():
            was = results[i]
            judge = was.get("judgeLabel") if was.get("labelOrigin") == "human" else was.get("relevance")
            results[i] = {**was, "relevance": grade, "relevant": grade >= 2, "labelOrigin": "human", "judgeLabel": judge}
        out["results"] = results
        out["humanLabels"] = sum(1 for r in results if r.get("labelOrigin") == "human")
    return out


def rescore_records(records: Sequence[Record], pool: Pool, config: Mapping[str, Any], scores: bool = True) -> dict[str, Any] | None:
    """Re-score a run's ``records`` in place against ``pool`` (:func:`rescore`, with the search limit and the
    dimension weights of the run's ``config``; ``scores`` as there) and return the ``qrels`` block of its queries
    (None without a scored query)."""
    weights, depth = config.get("weights"), config.get("searchLimit")
    new = rescore(
        records,
        pool,
        depth=depth if isinstance(depth, int) and not isinstance(depth, bool) else None,
        weights=weights if isinstance(weights, dict) else None,
        scores=scores,
    )
    for record, figures in zip(records, new):
        record.rescored(figures)
    topics = [topic_of(r) for r in records if r.metrics is not None]
    return pool.block(topics) if topics else None
