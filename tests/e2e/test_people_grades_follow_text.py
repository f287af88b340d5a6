"""People's grades follow the query they were given to (its id AND text), never a later query that reuses the
id: every new ``generate`` numbers its queries q01, q02, ... again. Through the CLI with the offline judge: a set
imported with ``--queries``, a set imported alone (bound by the first run that applies it), ``qrels export``,
``calibrate --results --human-qrels`` and a label session's grades in the cache."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import human_labels
from tests.support.clitools import invoke, run_lines

pytestmark = pytest.mark.hash_embedder

BOOKS = ["failover.md", "backup.md", "restore.md"]
OLD = ["redis failover", "database backup"]
NEW = ["expr labels", "settings error auth"]
SEARCH = "import json, sys\nprint(json.dumps({'results': [{'source': s, 'snippet': s} for s in %r]}))\n"


def query_set(path: Path, texts: list[str]) -> Path:
    queries = [{"id": f"q{i}", "query": q, "queryIntent": q, "queryType": "keyword"} for i, q in enumerate(texts, 1)]
    path.write_text(json.dumps({"queries": queries}), encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    kb.mkdir()
    for book in BOOKS:
        (kb / book).write_text(f"# {book}\n\nThe runbook {book} for redis failover and database backup.\n", encoding="utf-8")
    (tmp_path / "search.py").write_text(SEARCH % (BOOKS,), encoding="utf-8")
    query_set(tmp_path / "old.json", OLD)
    query_set(tmp_path / "new.json", NEW)
    (tmp_path / "people.qrels").write_text("".join(f"q{i} 0 {b} 3\n" for i in (1, 2) for b in BOOKS), encoding="utf-8")
    return tmp_path


def evaluate(folder: Path, queries: str, out: str) -> tuple[list[dict], str]:
    search = shlex.join([sys.executable, str(folder / "search.py"), "{query}"])
    args = ["evaluate", "--queries", str(folder / queries), "--provider", "offline", "--corpus", str(folder / "kb")]
    args += ["--cache", str(folder / "j.sqlite"), "--search-command", search, "--out-dir", str(folder / out)]
    result = invoke(args)
    assert result.exit_code == 0, result.output
    return run_lines(folder / out), result.output


def people(lines: list[dict]) -> int:
    return sum(1 for e in lines if e["type"] == "evaluation" for r in e["results"] if r.get("labelOrigin") == "human")


def test_a_set_imported_for_one_query_set_never_grades_another_that_reuses_its_ids(folder: Path):
    cache = str(folder / "j.sqlite")
    args = ["qrels", "import", str(folder / "people.qrels"), "--name", "team", "--queries", str(folder / "old.json")]
    assert invoke([*args, "--cache", cache]).exit_code == 0
    lines, output = evaluate(folder, "new.json", "new")
    assert people(lines) == 0
    assert "'team'" in output and "left out" in output  # warned once, naming the set
    assert output.count("'team'") == 1
    exported = invoke(["qrels", "export", str(next((folder / "new").glob("*.jsonl"))), "--out", str(folder / "x.qrels"), "--cache", cache])
    assert exported.exit_code == 0 and "0 human" in exported.output, exported.output
    old_lines, _ = evaluate(folder, "old.json", "old")
    assert people(old_lines) == 6  # the query set it was given for keeps its grades
    calibrated = invoke(
        ["calibrate", "--results", str(next((folder / "new").glob("*.jsonl"))), "--human-qrels", "team", "--cache", cache]
        + ["--out", str(folder / "cal.json")]
    )
    assert calibrated.exit_code == 2 and "left out" in calibrated.output, calibrated.output  # none reaches the other set


def test_a_set_imported_alone_is_bound_to_the_first_query_set_that_uses_it(folder: Path):
    cache = str(folder / "j.sqlite")
    assert invoke(["qrels", "import", str(folder / "people.qrels"), "--name", "team", "--cache", cache]).exit_code == 0
    first, _ = evaluate(folder, "old.json", "old")
    assert people(first) == 6
    later, output = evaluate(folder, "new.json", "new")
    assert people(later) == 0 and "'team'" in output
    with JudgmentCache(Path(cache), readonly=True) as opened:
        assert len(human_labels(opened, None, dict(zip(["q1", "q2"], OLD)))) == 6
        assert human_labels(opened, None, dict(zip(["q1", "q2"], NEW))) == {}


def test_import_refuses_grades_of_a_query_the_queries_file_lacks(folder: Path):
    query_set(folder / "one.json", OLD[:1])
    args = ["qrels", "import", str(folder / "people.qrels"), "--name", "team", "--queries", str(folder / "one.json")]
    result = invoke([*args, "--cache", str(folder / "j.sqlite")])
    assert result.exit_code == 2 and "q2" in result.output
