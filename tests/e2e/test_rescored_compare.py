"""A compare run graded by people after it ended: every difference trend and report show for it comes from
the same re-scoring as its rows, never the summary's figures of the qrels known when it ran. Two
--search-command systems on three queries: ``short`` returns the first of four runbooks, ``full`` all four;
a person grades all four 3 after the run (``qrels import``)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.support.clitools import invoke, run_lines

pytestmark = pytest.mark.hash_embedder

BOOKS = ["failover.md", "backup.md", "restore.md", "rotate.md"]
SEARCH = "import json, sys\nprint(json.dumps({'results': [{'source': s, 'snippet': s} for s in %r[:%d]]}))\n"


def command(folder: Path, name: str, n: int) -> str:
    script = folder / f"{name}.py"
    script.write_text(SEARCH % (BOOKS, n), encoding="utf-8")
    return shlex.join([sys.executable, str(script), "{query}"])


@pytest.fixture
def graded_later(tmp_path: Path) -> tuple[Path, dict]:
    kb = tmp_path / "kb"
    kb.mkdir()
    for book in BOOKS:
        (kb / book).write_text(f"# {book}\n\nThe runbook {book} for redis failover, database backup and key rotation.\n", encoding="utf-8")
    queries = [
        {"id": f"q{i}", "query": q, "queryIntent": q, "queryType": "keyword"}
        for i, q in enumerate(["redis failover", "database backup", "key rotation"], 1)
    ]
    (tmp_path / "q.json").write_text(json.dumps({"queries": queries}), encoding="utf-8")
    cache = str(tmp_path / "j.sqlite")
    args = ["evaluate", "--queries", str(tmp_path / "q.json"), "--provider", "offline", "--corpus", str(kb), "--cache", cache]
    args += ["--search-command", command(tmp_path, "short", 1), "--search-command", command(tmp_path, "full", 4)]
    assert invoke([*args, "--out-dir", str(tmp_path / "out")]).exit_code == 0
    summary = run_lines(tmp_path / "out")[-1]
    (tmp_path / "people.qrels").write_text("".join(f"q{i} 0 {b} 3\n" for i in (1, 2, 3) for b in BOOKS), encoding="utf-8")
    assert invoke(["qrels", "import", str(tmp_path / "people.qrels"), "--name", "team", "--cache", cache]).exit_code == 0
    return tmp_path, summary


def stored_delta(summary: dict, column: str) -> float:
    return next(d["delta"] for d in summary["comparison"]["differences"] if d["column"] == column)


def test_trend_shows_the_difference_of_its_own_rows(graded_later):
    tmp_path, summary = graded_later
    cache = str(tmp_path / "j.sqlite")
    shown = invoke(["trend", str(tmp_path / "out"), "--format", "json", "--cache", cache])
    rows = {str(r.get("system")).removeprefix("command:"): r for g in json.loads(shown.stdout)["groups"] for r in g["runs"]}
    short, full = rows["short"]["means"], rows["full"]["means"]
    assert short["nDCG@10"] == pytest.approx(0.390380, abs=1e-6) and full["nDCG@10"] == 1.0  # the people's grades
    assert stored_delta(summary, "nDCG@10") != pytest.approx(1.0 - 0.390380, abs=1e-3)  # the run's own figure differs
    versus = rows["full"]["vsReference"]["comparisons"]
    for column in ("overall", "nDCG@10"):
        assert versus[column]["delta"] == pytest.approx(full[column] - short[column], abs=1e-6), column
    note = f"compare run: vs command:short ?{full['overall'] - short['overall']:+.3f} ?{1.0 - 0.390380:+.3f}"
    for fmt in ("table", "markdown"):
        text = " ".join(invoke(["trend", str(tmp_path / "out"), "--format", fmt, "--cache", cache], {"COLUMNS": "250"}).output.split())
        assert note in text, fmt


def test_report_and_its_github_summary_show_the_rescored_difference(graded_later):
    tmp_path, _ = graded_later
    cache = str(tmp_path / "j.sqlite")
    assert invoke(["report", str(tmp_path / "out"), "--out", str(tmp_path / "rep"), "--cache", cache]).exit_code == 0
    md = next((tmp_path / "rep").glob("report-*.md")).read_text(encoding="utf-8")
    assert "| command:short | 3 | 0 | 0.390 |" in md
    assert "| command:full | nDCG@10 | 1.000 | 0.390 | +0.610 |" in md
    github = invoke(["report", str(tmp_path / "out"), "--format", "github", "--cache", cache]).output
    assert "nDCG@10 ?+0.610" in github
