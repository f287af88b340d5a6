"""judge_runner.human.known: the grades people gave before a budget is drawn count for the query they were given
to (id and text), from the cache and from the labels folder (texts from the session's journal)."""

from __future__ import annotations

import json

from judge_runner.human.known import known_grades
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import import_human_qrels


def test_known_grades_follow_the_query_text_in_the_cache_and_the_labels_folder(tmp_path):
    qrels = tmp_path / "p.qrels"
    qrels.write_text("q1 0 a.md 3\nq2 0 b.md 1\n", encoding="utf-8")
    with JudgmentCache(tmp_path / "j.sqlite") as cache:
        import_human_qrels(cache, qrels, "team", texts={"q1": "redis failover", "q2": "database backup"})
    folder = tmp_path / "labels"
    folder.mkdir()
    (folder / "s.qrels").write_text("q1 0 c.md 2\n", encoding="utf-8")
    plan = {"type": "plan", "items": [{"id": "i1", "qid": "q1", "query": "redis failover"}]}
    (folder / "s.journal.jsonl").write_text(json.dumps(plan) + "\n", encoding="utf-8")
    same = known_grades(folder, tmp_path / "j.sqlite", {"q1": "redis failover", "q2": "database backup"})
    assert same.grades == {("q1", "a.md"): 3, ("q2", "b.md"): 1, ("q1", "c.md"): 2} and not same.warnings
    reused = known_grades(folder, tmp_path / "j.sqlite", {"q1": "expr labels", "q2": "database backup"})
    assert reused.grades == {("q2", "b.md"): 1}
    assert len(reused.warnings) == 2 and "'team'" in reused.warnings[0] and "s.qrels" in reused.warnings[1]
