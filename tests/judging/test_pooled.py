"""judge_runner.judging.pooled: the qrels every system and run of one judge is scored against (every system's
labels, the judgment cache's labels of the same judge, people's grades, expected sources at 3), and the judgment
cache's columns that let a later run find a query's labels."""

from __future__ import annotations

import sqlite3

import pytest

from judge_runner.embed.hashing import HashEmbedder
from judge_runner.judging.cache import CachedJudgment, JudgmentCache, topic_key
from judge_runner.judging.fingerprint import build_fingerprint, fingerprint_key
from judge_runner.judging.heuristic import HeuristicJudge
from judge_runner.judging.labelling import Channel, LabelTask, judge_key, label_documents
from judge_runner.judging.pooled import Sources, build_pool, qrels_text, rescore, rescored_line, topic_of
from judge_runner.judging.qrels import import_human_qrels
from judge_runner.measures.ir import query_metrics

KEY = "k" * 64


def line(qid: str, ranked: list[tuple[str, int]], system: str | None = None, expected=(), query="redis failover", human=None) -> dict:
    human = human or {}
    results = [
        {"rank": i, "source": s, "score": 1.0, "relevance": human.get(s, g), "relevant": human.get(s, g) >= 2}
        | ({"labelOrigin": "human", "judgeLabel": g} if s in human else {"labelOrigin": "judge"})
        for i, (s, g) in enumerate(ranked, 1)
    ]
    return {
        "queryId": qid,
        "query": query,
        "queryIntent": "fail over",
        "queryType": "keyword",
        "system": system,
        "expectedSources": list(expected),
        "scores": {"relevance": 0.5, "ranking": 0.5, "coverage": 0.5, "snippetQuality": 0.5, "overall": 0.5},
        "metrics": {"nDCG@10": 0.0, "R@10": None, "RR(rel=2)": 0.0},
        "results": results,
    }


def store(cache: JudgmentCache, key: str, docid: str, label: int, n: int, query="redis failover", model: str | None = None) -> None:
    judgment = CachedJudgment(label, model_returned=model, topic=topic_key(query, "fail over"), docid=docid, judge_key=key)
    assert cache.put(f"{key}-{docid}-{n}", judgment, "pointwise")


def test_every_system_is_scored_against_the_same_qrels_as_trec_pools_them():
    a = line("q1", [("x.md", 3)], "short")
    b = line("q1", [("x.md", 3), ("y.md", 3), ("z.md", 0)], "full")
    pool = build_pool([("run", [a, b])])
    assert pool.qrels.qrels[topic_of(a)] == {"x.md": 3, "y.md": 3, "z.md": 0}
    new = rescore([a, b], pool)
    short, full = (rescored_line(x, n) for x, n in zip([a, b], new))
    assert short["metrics"]["nDCG@10"] == pytest.approx(query_metrics(["x.md"], [3], [], {"y.md": 3, "z.md": 0})["nDCG@10"])
    assert short["metrics"]["nDCG@10"] < 1.0 == full["metrics"]["nDCG@10"]
    assert short["judgeOnly"] is None  # nobody graded anything of q1: the figures are the judge's
    assert pool.block([topic_of(a)]) == {
        "queries": 1,
        "people": 0,
        "judge": 3,
        "expected": 0,
        "fromCache": 0,
        "runs": 1,
        "cache": False,
        "source": "judge",
    }


def test_people_win_and_the_judges_own_figures_are_kept_beside(tmp_path):
    qrels = tmp_path / "p.qrels"
    qrels.write_text("q1 0 y.md 0\nq1 0 w.md 3\n", encoding="utf-8")
    with JudgmentCache(tmp_path / "j.sqlite") as cache:
        import_human_qrels(cache, qrels, "team")
        a = line("q1", [("x.md", 2), ("y.md", 3)], expected=["e.md"])
        pool = build_pool([("run", [a])], Sources(cache))
    grades = pool.qrels.qrels[topic_of(a)]
    assert grades == {"x.md": 2, "y.md": 0, "w.md": 3, "e.md": 3}  # a person's grade wins; nobody graded e.md: 3
    assert pool.judge.qrels[topic_of(a)] == {"x.md": 2, "y.md": 3, "e.md": 3}
    (new,) = rescore([a], pool)
    scored = rescored_line(a, new)
    assert scored["metrics"] == query_metrics(["x.md", "y.md"], [2, 0], [], {"w.md": 3, "e.md": 3})
    assert scored["judgeOnly"]["nDCG@10"] == query_metrics(["x.md", "y.md"], [2, 3], ["e.md"])["nDCG@10"]
    assert [r["labelOrigin"] for r in scored["results"]] == ["judge", "human"] and scored["results"][1]["judgeLabel"] == 3
    assert scored["humanLabels"] == 1 and a["results"][1]["labelOrigin"] == "judge"  # the line read is not changed
    assert pool.block([topic_of(a)])["source"] == "judge and people"


def test_the_caches_labels_of_the_same_judge_join_the_pool_and_no_others(tmp_path):
    with JudgmentCache(tmp_path / "j.sqlite") as cache:
        for n, label in enumerate((3, 2, 3)):  # a run since deleted labelled w.md three times
            store(cache, KEY, "w.md", label, n)
        store(cache, "other" * 8, "v.md", 3, 0)  # another judge
        store(cache, KEY, "u.md", 3, 0, model="another-snapshot")  # the same judge, another model returned
        store(cache, KEY, "t.md", 3, 0, query="another query")
        a = line("q1", [("x.md", 1)])
        pool = build_pool([("run", [a])], Sources(cache, judge_key=KEY), models=["m-1"])
    assert pool.qrels.qrels[topic_of(a)] == {"x.md": 1, "w.md": 3}
    assert pool.block([topic_of(a)])["fromCache"] == 1 and qrels_text(pool.block([topic_of(a)])).endswith(
        "(2 judge's grades (1 from the cache), 0 people's, 0 expected sources; pooled over 1 run and the judgment cache)"
    )


def test_a_label_stored_by_a_run_is_found_by_the_runs_fingerprint_key(tmp_path):
    judge = HeuristicJudge(HashEmbedder())
    with JudgmentCache(tmp_path / "j.sqlite") as cache:
        label_documents(judge, LabelTask("redis failover", "fail over", [("x.md", None, "Promote the replica.")]), via=Channel(cache))
        provenance_key = fingerprint_key(build_fingerprint(judge.name, judge.model, "pointwise", 3, heuristic=True).as_dict())
        assert judge_key(judge) == provenance_key
        found = cache.judge_labels(provenance_key, [topic_key("redis failover", "fail over")])
    assert list(found) == [(topic_key("redis failover", "fail over"), "x.md")]


def test_a_cache_written_before_the_columns_is_completed_and_its_labels_join_no_pool(tmp_path):
    path = tmp_path / "old.sqlite"
    with JudgmentCache(path) as cache:
        store(cache, KEY, "w.md", 3, 0)
    conn = sqlite3.connect(path)  # back to the columns of an older judge-runner
    for column in ("topic", "docid", "judge_key"):
        conn.execute("DROP INDEX IF EXISTS judgments_topic")
        conn.execute(f"ALTER TABLE judgments DROP COLUMN {column}")
    conn.commit()
    conn.close()
    with JudgmentCache(path, readonly=True) as cache:
        assert cache.judge_labels(KEY, [topic_key("redis failover", "fail over")]) == {}
    with JudgmentCache(path) as cache:  # a writing open adds the columns; the old row has none of them
        assert cache.judge_labels(KEY, [topic_key("redis failover", "fail over")]) == {}
        store(cache, KEY, "v.md", 2, 1)
        assert cache.judge_labels(KEY, [topic_key("redis failover", "fail over")]) == {
            (topic_key("redis failover", "fail over"), "v.md"): [2]
        }


def test_peoples_grades_join_the_pool_of_the_query_they_were_given_to_not_one_reusing_its_id(tmp_path):
    qrels = tmp_path / "p.qrels"
    qrels.write_text("q1 0 w.md 3\n", encoding="utf-8")
    with JudgmentCache(tmp_path / "j.sqlite") as cache:
        import_human_qrels(cache, qrels, "team", texts={"q1": "redis failover"})
        given = line("q1", [("x.md", 2)])
        reused = line("q1", [("x.md", 2)], query="expr labels")
        pool = build_pool([("old", [given]), ("new", [reused])], Sources(cache))
    assert pool.qrels.qrels[topic_of(given)] == {"x.md": 2, "w.md": 3}
    assert pool.qrels.qrels[topic_of(reused)] == {"x.md": 2}
    assert len(pool.warnings) == 1 and "'team'" in pool.warnings[0]
