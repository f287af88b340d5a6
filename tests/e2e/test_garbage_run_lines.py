"""A run file's evaluation line that names no query is dropped by the one reader, with a warning naming the file
and the line, in every command that reads judged runs (here ``calibrate --results`` and ``rejudge --dry-run``):
never a phantom query or system."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.support.clitools import invoke

pytestmark = pytest.mark.hash_embedder

SEARCH = "import json, sys\nprint(json.dumps({'results': [{'source': s, 'snippet': s} for s in ['a.md', 'b.md']]}))\n"


def test_a_garbage_evaluation_line_is_dropped_naming_file_and_line(tmp_path: Path):
    kb = tmp_path / "kb"
    kb.mkdir()
    for name in ("a.md", "b.md"):
        (kb / name).write_text(f"# {name}\n\nRedis failover runbook {name}.\n", encoding="utf-8")
    (tmp_path / "search.py").write_text(SEARCH, encoding="utf-8")
    queries = [{"id": "q1", "query": "redis failover", "queryIntent": "fail over", "queryType": "keyword"}]
    (tmp_path / "q.json").write_text(json.dumps({"queries": queries}), encoding="utf-8")
    search = shlex.join([sys.executable, str(tmp_path / "search.py"), "{query}"])
    args = ["evaluate", "--queries", str(tmp_path / "q.json"), "--provider", "offline", "--corpus", str(kb), "--no-cache"]
    assert invoke([*args, "--search-command", search, "--out-dir", str(tmp_path / "out")]).exit_code == 0
    [run] = (tmp_path / "out").glob("*.jsonl")
    lines = run.read_text(encoding="utf-8").splitlines()
    run.write_text("\n".join([*lines[:-1], '{"type":"evaluation","runId":"x"}', lines[-1]]) + "\n", encoding="utf-8")
    where = f"{run.name}:{len(lines)}: evaluation line without queryId and query dropped"
    (tmp_path / "p.qrels").write_text("q1 0 a.md 3\nq1 0 b.md 0\n", encoding="utf-8")
    calibrated = invoke(["calibrate", "--results", str(run), "--qrels", str(tmp_path / "p.qrels"), "--out", str(tmp_path / "c.json")])
    assert where in calibrated.output, calibrated.output
    assert "q99" not in calibrated.output and "''" not in calibrated.output
    rejudged = invoke(["rejudge", str(run), "--dry-run", "--provider", "offline", "--no-cache"])
    assert where in rejudged.output and "share one text" not in rejudged.output, rejudged.output
