"""A compare run's console names the system of every bias-corrected line, the reference's included."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from tests.support.clitools import invoke

pytestmark = pytest.mark.hash_embedder

BOOKS = ["failover.md", "backup.md"]
SEARCH = "import json, sys\nprint(json.dumps({'results': [{'source': s, 'snippet': s} for s in %r[:%d]]}))\n"


def test_every_bias_corrected_line_names_its_system(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    for book in BOOKS:
        (kb / book).write_text(f"# {book}\n\nThe runbook {book} for redis failover and database backup.\n", encoding="utf-8")
    queries = [
        {"id": f"q{i}", "query": q, "queryIntent": q, "queryType": "keyword"}
        for i, q in enumerate(["redis failover", "database backup"], 1)
    ]
    (tmp_path / "q.json").write_text(json.dumps({"queries": queries}), encoding="utf-8")
    (tmp_path / "people.qrels").write_text("".join(f"q{i} 0 {b} 3\n" for i in (1, 2) for b in BOOKS), encoding="utf-8")
    cache = str(tmp_path / "j.sqlite")
    assert invoke(["qrels", "import", str(tmp_path / "people.qrels"), "--name", "team", "--cache", cache]).exit_code == 0
    args = ["evaluate", "--queries", str(tmp_path / "q.json"), "--provider", "offline", "--corpus", str(kb), "--cache", cache]
    for name, n in (("short", 1), ("full", 2)):
        (tmp_path / f"{name}.py").write_text(SEARCH % (BOOKS, n), encoding="utf-8")
        args += ["--search-command", shlex.join([sys.executable, str(tmp_path / f"{name}.py"), "{query}"])]
    result = invoke([*args, "--human-qrels", "team", "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    corrected = [line.strip() for line in result.output.splitlines() if "bias-corrected nDCG@10" in line]
    assert len(corrected) == 2 and all(line.startswith(("command:short: ", "command:full: ")) for line in corrected), corrected
