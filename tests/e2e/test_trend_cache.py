"""trend and report read the judgment cache a run used, from whatever folder they run in: the run file records
it (``config.judgmentCache``), and one line says which cache joined the qrels. People's grades given after the
run (``qrels import`` into that cache) change the figures the same from the project folder and from elsewhere."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.support.clitools import invoke

pytestmark = pytest.mark.hash_embedder

BOOKS = ["failover.md", "backup.md", "restore.md", "rotate.md"]
SEARCH = "import json, sys\nprint(json.dumps({'results': [{'source': s, 'snippet': s} for s in %r[:1]]}))\n"


def short_ndcg(results: Path, *extra: str) -> tuple[float, str]:
    """nDCG@10 in ``trend --format json`` and the table's line that names the cache."""
    shown = invoke(["trend", str(results), "--format", "json", *extra])
    assert shown.exit_code == 0, shown.output
    (row,) = [r for g in json.loads(shown.output)["groups"] for r in g["runs"]]
    table = invoke(["trend", str(results), *extra])
    return row["means"]["nDCG@10"], " ".join(table.stderr.split())


def test_trend_reads_the_cache_the_run_used_from_any_folder(tmp_path, monkeypatch):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "kb").mkdir(parents=True)
    elsewhere.mkdir()
    for book in BOOKS:
        (project / "kb" / book).write_text(f"# {book}\n\nThe runbook {book} for redis failover and backups.\n", encoding="utf-8")
    (project / "short.py").write_text(SEARCH % (BOOKS,), encoding="utf-8")
    queries = [
        {"id": f"q{i}", "query": q, "queryIntent": q, "queryType": "keyword"} for i, q in enumerate(["redis failover", "backups"], 1)
    ]
    (project / "q.json").write_text(json.dumps({"queries": queries}), encoding="utf-8")
    monkeypatch.chdir(project)
    command = shlex.join([sys.executable, str(project / "short.py"), "{query}"])
    assert (
        invoke(["evaluate", "--queries", "q.json", "--provider", "offline", "--corpus", "kb", "--search-command", command]).exit_code == 0
    )
    cache = project / ".judge-runner" / "judgments.sqlite"
    assert cache.is_file()
    (project / "people.qrels").write_text("".join(f"q{i} 0 {b} 3\n" for i in (1, 2) for b in BOOKS), encoding="utf-8")
    assert invoke(["qrels", "import", "people.qrels", "--name", "team", "--cache", str(cache)]).exit_code == 0
    here, said_here = short_ndcg(project / "quality-results")
    monkeypatch.chdir(elsewhere)
    there, said_there = short_ndcg(project / "quality-results")
    assert here == there == pytest.approx(0.390380, abs=1e-6)  # one of four runbooks graded 3, as trec_eval says
    assert f"judgment cache: {cache} (the one run " in said_there and said_here.startswith("judgment cache: ")
    given, said = short_ndcg(project / "quality-results", "--cache", str(cache))
    assert given == here and f"judgment cache: {cache} (--cache)" in said
    report = invoke(["report", str(project / "quality-results"), "--out", str(tmp_path / "reports")])
    assert report.exit_code == 0 and f"judgment cache: {cache} (the one run " in " ".join(report.stderr.split())


def test_the_cache_option_says_what_it_defaults_to():
    text = " ".join(invoke(["trend", "--help"]).output.split())
    assert "people's grades join the qrels [default: the one the newest run names, else beside the index]" in text
