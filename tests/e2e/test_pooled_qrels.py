"""Every system of a compare run is scored against the same qrels, as TREC pools them: two --search-command
systems on three queries whose four runbooks a person graded 3 (``qrels import``, ``--human-qrels``): ``short``
returns the first runbook, ``full`` all four. trec_eval (ir_measures) on the people's qrels gives 0.390 and 1.000,
and so must the console, the summary, ``trend`` and ``report``, each naming the qrels it used."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import ir_measures
import pytest
from ir_measures import RR, R, nDCG

from tests.support.clitools import invoke, run_lines

pytestmark = pytest.mark.hash_embedder

BOOKS = ["failover.md", "backup.md", "restore.md", "rotate.md"]
QUERIES = ["redis failover", "database backup", "key rotation"]
SEARCH = "import json, sys\nprint(json.dumps({'results': [{'source': s, 'snippet': s} for s in %r[:%d]]}))\n"


def command(folder: Path, name: str, n: int) -> str:
    """A search command named ``name`` (its script's name) that returns the first ``n`` runbooks."""
    script = folder / f"{name}.py"
    script.write_text(SEARCH % (BOOKS, n), encoding="utf-8")
    return shlex.join([sys.executable, str(script), "{query}"])


@pytest.fixture
def compared(tmp_path: Path) -> tuple[Path, list[dict], str]:
    kb = tmp_path / "kb"
    kb.mkdir()
    for book in BOOKS:
        (kb / book).write_text(f"# {book}\n\nThe runbook {book} for redis failover, database backup and key rotation.\n", encoding="utf-8")
    queries = [{"id": f"q{i}", "query": q, "queryIntent": q, "queryType": "keyword"} for i, q in enumerate(QUERIES, 1)]
    (tmp_path / "q.json").write_text(json.dumps({"queries": queries}), encoding="utf-8")
    (tmp_path / "people.qrels").write_text("".join(f"q{i} 0 {b} 3\n" for i in (1, 2, 3) for b in BOOKS), encoding="utf-8")
    cache = str(tmp_path / "j.sqlite")
    assert invoke(["qrels", "import", str(tmp_path / "people.qrels"), "--name", "team", "--cache", cache]).exit_code == 0
    args = ["evaluate", "--queries", str(tmp_path / "q.json"), "--provider", "offline", "--corpus", str(kb), "--cache", cache]
    args += ["--human-qrels", "team", "--search-command", command(tmp_path, "short", 1), "--search-command", command(tmp_path, "full", 4)]
    result = invoke([*args, "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    return tmp_path, run_lines(tmp_path / "out"), result.output


def trec_eval(lines: list[dict], system: str) -> dict:
    qrels = [ir_measures.Qrel(f"q{i}", b, 3) for i in (1, 2, 3) for b in BOOKS]
    run = [
        ir_measures.ScoredDoc(e["queryId"], r["source"], 100.0 - r["rank"])
        for e in lines
        if e["type"] == "evaluation" and e["system"] == f"command:{system}"
        for r in e["results"]
    ]
    return {str(m): v for m, v in ir_measures.calc_aggregate([nDCG @ 10, R @ 10, RR(rel=2)], qrels, run).items()}


def test_a_system_that_returns_less_scores_less_as_trec_eval_says(compared):
    _, lines, output = compared
    summary = lines[-1]
    systems = {s["name"].removeprefix("command:"): s["averageMetrics"] for s in summary["comparison"]["systems"]}
    for name in ("short", "full"):
        for measure, value in trec_eval(lines, name).items():
            assert systems[name][measure] == pytest.approx(value, abs=1e-6), (name, measure)
    assert systems["short"]["nDCG@10"] == pytest.approx(0.390380, abs=1e-6) and systems["full"]["nDCG@10"] == 1.0
    diff = next(d for d in summary["comparison"]["differences"] if d["column"] == "nDCG@10")
    assert diff["delta"] == pytest.approx(1.0 - 0.390380, abs=1e-6)
    assert summary["qrels"] == {
        "source": "people",
        "queries": 3,
        "judge": 0,
        "people": 12,
        "expected": 0,
        "fromCache": 0,
        "runs": 1,
        "cache": True,
    }
    # the lines written as each query was judged already knew the people's grades of the documents not returned
    short = [e for e in lines if e["type"] == "evaluation" and e["system"] == "command:short"]
    assert [e["metrics"]["nDCG@10"] for e in short] == [pytest.approx(0.390380, abs=1e-6)] * 3
    assert "command:short: 3 evaluated, 0 failed, overall" in output and "nDCG@10 0.390" in output
    assert "qrels: people (0 judge's grades, 12 people's, 0 expected sources; pooled over 1 run and the judgment cache)" in output
    assert "command:full - command:short nDCG@10: +0.610" in output


def test_trend_and_report_say_the_same_figure_and_name_their_qrels(compared):
    tmp_path, lines, _ = compared
    cache = str(tmp_path / "j.sqlite")
    shown = invoke(["trend", str(tmp_path / "out"), "--format", "json", "--cache", cache])
    assert shown.exit_code == 0, shown.output
    rows = {str(row.get("system")).removeprefix("command:"): row for group in json.loads(shown.stdout)["groups"] for row in group["runs"]}
    assert rows["short"]["means"]["nDCG@10"] == pytest.approx(0.390380, abs=1e-6) and rows["full"]["means"]["nDCG@10"] == 1.0
    assert rows["short"]["qrels"]["source"] == "people" and rows["short"]["qrels"]["people"] == 12
    table = invoke(["trend", str(tmp_path / "out"), "--cache", cache])
    assert "qrels: people (0 judge's grades, 12 people's" in table.output
    written = invoke(["report", str(tmp_path / "out"), "--out", str(tmp_path / "rep"), "--cache", cache])
    assert written.exit_code == 0, written.output
    md = next((tmp_path / "rep").glob("report-*.md")).read_text(encoding="utf-8")
    assert "| nDCG@10 | 0.390 |" in md and "qrels: people (0 judge's grades, 12 people's" in md


def test_calibrates_human_column_gives_the_same_figure_and_names_its_qrels(compared):
    tmp_path, _, _ = compared
    run = next((tmp_path / "out").glob("*.jsonl"))
    cache = str(tmp_path / "j.sqlite")
    out = tmp_path / "cal.json"
    args = ["calibrate", "--results", str(run), "--human-qrels", "team", "--cache", cache, "--bootstrap", "200", "--out", str(out)]
    result = invoke(args, {"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text(encoding="utf-8"))
    (figures,) = document["modes"].values()
    human = {name.rsplit("/", 1)[-1]: row["human"] for name, row in figures["systems"]["nDCG@10"]["systems"].items()}
    assert human == {"command:short": pytest.approx(0.390380, abs=1e-6), "command:full": 1.0}  # the console's figures
    assert figures["qrels"]["human"].startswith("people's qrels: 12 grades on 3 queries")
    assert "human: people's qrels: 12 grades on 3 queries" in " ".join(result.output.split())
