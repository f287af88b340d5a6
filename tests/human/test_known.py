"""judge_runner.human.known: the grades people gave before a budget is drawn count for the query they were given
to (id and text), from the cache and from the labels folder (texts from the session's journal)."""

from __future__ import annotations

import json

from judge_runner.human.known import known_grades
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import import_human_qrels
from tests.support.budget_runs import write_compare_run
from tests.support.clitools import invoke


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


def test_a_set_whose_grades_follow_another_text_is_warned_of_once_naming_every_query_or_how_many_more(tmp_path):
    # a new user's trial: "6 people's grades of set 'team' left out ... (q01, q02, q03)" with no word of the other
    # three, said again for labels/team.qrels, the same set's file
    qids = [f"q{i:02d}" for i in range(1, 7)]
    qrels = tmp_path / "p.qrels"
    qrels.write_text("".join(f"{q} 0 a.md 2\n" for q in qids), encoding="utf-8")
    old = {q: f"old {q}" for q in qids}
    with JudgmentCache(tmp_path / "j.sqlite") as cache:
        import_human_qrels(cache, qrels, "team", texts=old)
    folder = tmp_path / "labels"
    folder.mkdir()
    plan = {"type": "plan", "items": [{"id": f"i{i}", "qid": q, "query": old[q]} for i, q in enumerate(qids)]}
    for name in ("team", "solo"):
        (folder / f"{name}.qrels").write_text(qrels.read_text(), encoding="utf-8")
        (folder / f"{name}.journal.jsonl").write_text(json.dumps(plan) + "\n", encoding="utf-8")
    found = known_grades(folder, tmp_path / "j.sqlite", {q: f"new {q}" for q in qids})
    assert found.grades == {}
    assert found.warnings == [
        "warning: 6 people's grades of set 'team' left out: given to another query under the same id (q01, q02, q03 and 3 "
        "more); grades follow the query text",
        f"warning: 6 people's grades of {folder / 'solo.qrels'} left out: given to another query under the same id (q01, q02, "
        "q03 and 3 more); grades follow the query text",
    ], found.warnings


def test_label_says_once_per_set_which_grades_it_left_out(tmp_path):
    run_file = write_compare_run(tmp_path / "runs", 40, human_queries=0)
    qids = [f"q{i}" for i in range(6)]
    qrels = tmp_path / "p.qrels"
    qrels.write_text("".join(f"{q} 0 a.md 2\n" for q in qids), encoding="utf-8")
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        import_human_qrels(cache, qrels, "team", texts={q: f"another text {q}" for q in qids})
    folder = tmp_path / "labels"
    folder.mkdir()
    (folder / "team.qrels").write_text(qrels.read_text(), encoding="utf-8")
    plan = {"type": "plan", "items": [{"id": f"i{i}", "qid": q, "query": f"another text {q}"} for i, q in enumerate(qids)]}
    (folder / "team.journal.jsonl").write_text(json.dumps(plan) + "\n", encoding="utf-8")
    args = ["label", str(run_file), "--name", "w", "--folder", str(folder), "--cache", str(tmp_path / "c.sqlite")]
    result = invoke([*args, "--budget", "3", "--for", "difference"])
    said = [" ".join(line.split()) for line in result.output.splitlines() if "people's grades of" in line]
    assert result.exit_code == 2 and said == [
        "warning: 6 people's grades of set 'team' left out: given to another query under the same id (q0, q1, q2 and 3 more); "
        "grades follow the query text"
    ], result.output
