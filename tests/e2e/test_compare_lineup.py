"""A compare run after a run of one system: its reference is another system than the one the previous run
judged, and ``report --format github`` says so, as trend does, instead of calling the difference between two
searches a regression. Two --search-command systems on twelve queries: ``full`` returns four runbooks a
person graded 3, ``short`` the first."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.support.clitools import invoke

pytestmark = pytest.mark.hash_embedder

BOOKS = ["failover.md", "backup.md", "restore.md", "rotate.md"]
SEARCH = "import json, sys\nprint(json.dumps({'results': [{'source': s, 'snippet': s} for s in %r[:%d]]}))\n"
TOPICS = ["redis failover", "database backup", "key rotation", "restore drill", "replica lag", "backup window"]


def command(folder: Path, name: str, n: int) -> str:
    script = folder / f"{name}.py"
    script.write_text(SEARCH % (BOOKS, n), encoding="utf-8")
    return shlex.join([sys.executable, str(script), "{query}"])


def test_a_compare_runs_other_reference_is_named_not_called_a_regression(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    for book in BOOKS:
        (kb / book).write_text(f"# {book}\n\nThe runbook {book}: {', '.join(TOPICS)}.\n", encoding="utf-8")
    queries = [
        {"id": f"q{i:02d}", "query": f"{t} {k}", "queryIntent": t, "queryType": "keyword"}
        for i, (t, k) in enumerate((t, k) for t in TOPICS for k in ("steps", "runbook"))
    ]
    (tmp_path / "q.json").write_text(json.dumps({"queries": queries}), encoding="utf-8")
    cache = str(tmp_path / "j.sqlite")
    (tmp_path / "people.qrels").write_text("".join(f"{q['id']} 0 {b} 3\n" for q in queries for b in BOOKS), encoding="utf-8")
    assert invoke(["qrels", "import", str(tmp_path / "people.qrels"), "--name", "team", "--cache", cache]).exit_code == 0
    base = ["evaluate", "--queries", str(tmp_path / "q.json"), "--provider", "offline", "--corpus", str(kb), "--cache", cache]
    base += ["--human-qrels", "team", "--out-dir", str(tmp_path / "out")]
    full, short = command(tmp_path, "full", 4), command(tmp_path, "short", 1)
    assert invoke([*base, "--search-command", full]).exit_code == 0
    assert invoke([*base, "--search-command", short, "--search-command", full]).exit_code == 0
    trend = invoke(["trend", str(tmp_path / "out"), "--cache", cache], {"COLUMNS": "250"}).output
    assert "system under test: command" in trend and "full.py" in trend
    text = invoke(["report", str(tmp_path / "out"), "--format", "github", "--cache", cache]).output
    assert "**Regression**" not in text and "(regression)" not in text
    assert "**Another system under test** (command " in text and "two searches compared, not a change of one: overall -" in text
    assert "(worse beyond noise)" in text and "| command:full (vs command:short) | 12 |" in text and "Gated" not in text
    assert invoke(["trend", str(tmp_path / "out"), "--cache", cache, "--fail-on-regression"]).exit_code == 0
