"""The recommended focus: the dimension with the largest headroom the search could recover,
the queries behind it, and a suggestion made on those queries for that dimension
(judge_runner.judging.advice)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from judge_runner.core.models import DIMENSIONS
from judge_runner.judging.advice import (
    WEAK_GAIN,
    recommended_focus,
    recoverable_gains,
    suggestion_dimensions,
)
from judge_runner.judging.scores import query_scores
from tests.support.clitools import invoke

FIXTURES_KB = Path(__file__).resolve().parents[3] / "shared" / "data" / "fixtures-kb"


def line(qid, labels, sources, expected, list_scores, suggestions=(), query_type="keyword"):
    """An evaluation line as the run loop writes it (scores computed by the scoring rules)."""
    return {
        "queryId": qid,
        "queryType": query_type,
        "expectedSources": list(expected),
        "results": [{"source": s, "relevance": g} for s, g in zip(sources, labels)],
        "scores": query_scores(labels, list_scores, sources=sources, expected_sources=expected, depth=10),
        "suggestions": list(suggestions),
    }


GOOD_SNIPPETS = {"coverage": 1.0, "snippetQuality": 1.0}
DOCS = [f"d{i}.md" for i in range(10)]


def buried(qid, suggestions=()):
    """The answer found but at rank 8: a ranking problem."""
    labels = [0] * 10
    labels[7] = 3
    return line(qid, labels, DOCS, ["d7.md"], GOOD_SNIPPETS, suggestions)


def missing(qid, suggestions=()):
    """The answer not found at all, nothing above 1: a relevance (retrieval) problem."""
    return line(qid, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0], DOCS, ["answer.md"], GOOD_SNIPPETS, suggestions)


def test_the_recoverable_gains_add_up_to_the_headroom_of_overall():
    for ev in (buried("a"), missing("b"), line("c", [2, 3, 0], DOCS[:3], ["d1.md"], {"coverage": 0.4, "snippetQuality": 0.7})):
        gains = recoverable_gains(ev)
        assert gains is not None and all(v >= 0 for v in gains.values())
        assert sum(gains.values()) == pytest.approx(1 - ev["scores"]["overall"], abs=1e-5)
    assert recoverable_gains({"scores": {"relevance": 1.0}}) is None  # not every dimension scored


def test_a_buried_answer_is_a_ranking_problem_and_a_missing_one_a_relevance_problem():
    ranking = recoverable_gains(buried("a"))
    assert ranking is not None and ranking["ranking"] > 0.2 and ranking["relevance"] == pytest.approx(0.0)
    relevance = recoverable_gains(missing("b"))
    assert relevance is not None and relevance["relevance"] > 0.15 and relevance["ranking"] == pytest.approx(0.0)


def test_the_focus_follows_the_numbers_and_names_its_queries():
    suggestion = ["Rank the best-matching document first", "Centre snippets on the matching lines"]
    focus = recommended_focus(
        [buried("q1", suggestion), buried("q2", suggestion[1:]), missing("q3"), line("q4", [3], DOCS[:1], ["d0.md"], GOOD_SNIPPETS)]
    )
    assert focus is not None and focus.dimension == "ranking"
    assert focus.query_ids == ["q1", "q2"] and focus.on_topic == 4
    # the suggestion comes from those queries and addresses that dimension (the snippet one does not)
    assert focus.suggestion == "Rank the best-matching document first" and focus.suggestion_query_ids == ["q1"]
    text = focus.text()
    assert text.startswith("ranking: on 2 of 4 on-topic queries") and "q1, q2" in text and "Rank the best-matching document first" in text
    assert focus.block()["queryIds"] == ["q1", "q2"] and set(focus.block()["headroom"]) == set(DIMENSIONS)

    retrieval = recommended_focus([missing("q1", ["Centre snippets on the matching lines"]), missing("q2"), buried("q3")])
    assert retrieval is not None and retrieval.dimension == "relevance" and retrieval.query_ids == ["q1", "q2"]
    assert retrieval.suggestion is None and "no judge suggestion on them addresses relevance" in retrieval.text()


def test_a_weak_dimension_beats_a_larger_but_spread_headroom_only_when_someone_is_weak_on_it():
    # snippets a little short everywhere (0.9: under WEAK_GAIN per query) and one query with its answer buried
    slightly = {"coverage": 1.0, "snippetQuality": 0.9}
    evs = [line(f"q{i}", [3], DOCS[:1], ["d0.md"], slightly) for i in range(8)] + [buried("q9")]
    focus = recommended_focus(evs)
    assert focus is not None and focus.dimension == "ranking" and focus.query_ids == ["q9"]


def test_nothing_weak_says_so():
    evs = [line(f"q{i}", [3, 2, 0], DOCS[:3], ["d0.md"], {"coverage": 0.95, "snippetQuality": 0.9}) for i in range(5)]
    focus = recommended_focus(evs)
    assert focus is not None and focus.dimension is None and focus.query_ids == []
    assert focus.text().startswith("nothing is weak:") and f"{WEAK_GAIN:.2f}" in focus.text()
    assert recommended_focus([]) is None
    assert recommended_focus([{**buried("x"), "queryType": "off-topic"}]) is None  # off-topic queries are scored on abstention


def test_weights_move_the_focus():
    evs = [line(f"q{i}", [3], DOCS[:1], ["d0.md"], {"coverage": 0.5, "snippetQuality": 0.6}) for i in range(3)]
    assert recommended_focus(evs).dimension == "coverage"  # type: ignore[union-attr]
    focus = recommended_focus(evs, weights={"relevance": 1, "ranking": 1, "coverage": 0.1, "snippetQuality": 3})
    assert focus is not None and focus.dimension == "snippetQuality"


@pytest.mark.parametrize(
    ("text", "dimensions"),
    [
        ("Rank the best-matching document first", ("ranking",)),
        ("Centre snippets on the matching lines.", ("snippetQuality",)),
        ("improve recall for this kind of query", ("relevance", "coverage")),
        ("Boost matches in titles and headings", ("ranking", "relevance")),
        ("Return no results or confident: false when no result clears a relevance threshold", ()),
        ("Show the paragraph that answers in the snippet", ("snippetQuality",)),  # another wording: by its words
        ("Rerank with a cross-encoder", ("ranking",)),
        ("Drop duplicate results", ("coverage",)),
        ("Use BM25 with synonyms", ("relevance",)),
        ("Be nicer", ()),
    ],
)
def test_suggestions_are_tied_to_the_dimensions_they_address(text, dimensions):
    assert suggestion_dimensions(text) == dimensions


# -- Done when: on fixtures-kb with the offline judge, the built-in search and its TREC run reversed per
# query get different advice, each naming the queries behind it (awesome-compose, hashing embedder: seconds)


def _reverse(run: Path, out: Path) -> None:
    per_query: dict[str, list[str]] = defaultdict(list)
    for row in run.read_text(encoding="utf-8").splitlines():
        qid, _, docid, *_ = row.split()
        per_query[qid].append(docid)
    with out.open("w", encoding="utf-8") as handle:
        for qid, docids in per_query.items():
            for rank, docid in enumerate(reversed(docids), start=1):
                handle.write(f"{qid} Q0 {docid} {rank} {len(docids) - rank + 1} reversed\n")


def _summary(folder: Path) -> dict:
    (path,) = folder.glob("*.jsonl")
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()][-1]


@pytest.mark.hash_embedder
@pytest.mark.skipif(not FIXTURES_KB.is_dir(), reason="the shared fixtures-kb is not here (../shared/data/fixtures-kb)")
def test_the_advice_differs_between_a_search_and_its_run_reversed_on_fixtures_kb(tmp_path):
    corpus = FIXTURES_KB / "awesome-compose"
    db = str(tmp_path / "index.sqlite")
    first = invoke(
        [
            "generate-and-evaluate",
            "--fixtures",
            str(corpus),
            "--count",
            "15",
            "--provider",
            "offline",
            "--db",
            db,
            "--out-dir",
            str(tmp_path / "built-in"),
        ]
    )
    assert first.exit_code == 0, first.output
    (query_set,) = (tmp_path / "built-in").glob("*.queries.json")
    queries = json.loads(query_set.read_text(encoding="utf-8"))["queries"]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps({"_id": q["id"], "text": q["query"]}) + "\n" for q in queries), encoding="utf-8")
    searched = invoke(
        ["search", "--db", db, "--queries", str(tmp_path / "q.jsonl"), "--trec-run", str(tmp_path / "run.trec"), "--limit", "10"]
    )
    assert searched.exit_code == 0, searched.output
    _reverse(tmp_path / "run.trec", tmp_path / "reversed.trec")
    second = invoke(
        [
            "evaluate",
            "--queries",
            str(query_set),
            "--provider",
            "offline",
            "--run",
            str(tmp_path / "reversed.trec"),
            "--corpus",
            str(corpus),
        ]
        + ["--db", db, "--out-dir", str(tmp_path / "reversed")]
    )
    assert second.exit_code == 0, second.output

    built_in, reversed_run = _summary(tmp_path / "built-in"), _summary(tmp_path / "reversed")
    a, b = built_in["focusEvidence"], reversed_run["focusEvidence"]
    assert a["dimension"] != b["dimension"], (built_in["recommendedFocus"], reversed_run["recommendedFocus"])
    assert b["dimension"] == "ranking"  # the same documents, the answers pushed down
    for summary, evidence in ((built_in, a), (reversed_run, b)):
        assert evidence["queryIds"], summary["recommendedFocus"]
        assert all(qid in summary["recommendedFocus"] for qid in evidence["queryIds"][:5])
        assert f"on {len(evidence['queryIds'])} of {evidence['onTopicQueries']} on-topic queries" in summary["recommendedFocus"]
    assert "Rank the best-matching document first" in reversed_run["recommendedFocus"]
    assert "recommended focus: ranking" in second.output  # the console says it too
