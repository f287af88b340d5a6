"""Runs of one judge are scored against the labels pooled over them: trend's nDCG@10 of a run whose own judge
call disagreed with the others moves to the pooled labels; a run alone with its query keeps its own metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge_runner.analysis.trend import read_runs


def write(
    folder: Path, name: str, ranked: list[tuple[str, int]], query_set: str, ndcg: float, day: int, query: str = "redis failover"
) -> None:
    start = {
        "type": "run_start",
        "runId": name,
        "timestamp": f"2026-11-{day:02d}T10:00:00.000Z",
        "formatVersion": 2,
        "config": {},
        "provenance": {
            "provider": "openai",
            "judgeModel": "m",
            "querySetSha256": query_set,
            "judgeFingerprint": {"provider": "openai", "requestedModel": "m", "mode": "pointwise"},
        },
    }
    ev = {
        "type": "evaluation",
        "runId": name,
        "queryId": "q1",
        "query": query,
        "queryType": "keyword",
        "expectedSources": [],
        "scores": {"relevance": 0.5, "ranking": 0.5, "coverage": 0.5, "snippetQuality": 0.5, "overall": 0.5},
        "metrics": {"nDCG@10": ndcg, "R@10": None, "RR(rel=2)": 1.0},
        "results": [{"rank": i, "source": s, "score": 1.0, "relevance": g, "relevant": g >= 2} for i, (s, g) in enumerate(ranked, 1)],
    }
    summary = {"type": "summary", "runId": name, "timestamp": f"2026-11-{day:02d}T10:05:00.000Z", "evaluated": 1}
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in (start, ev, summary)), encoding="utf-8")


def test_runs_sharing_a_query_set_are_scored_on_pooled_labels(tmp_path):
    # r1's judge labelled x 0 and y 3 (own nDCG@10 = 0.6309); r2 and r3 say x 3, y 2: pooled x 3, y 2
    write(tmp_path, "r1", [("x.md", 0), ("y.md", 3)], "a" * 64, 0.630930, 1)
    write(tmp_path, "r2", [("y.md", 2), ("x.md", 3)], "a" * 64, 0.913, 2)
    write(tmp_path, "r3", [("x.md", 3), ("y.md", 2)], "a" * 64, 1.0, 3)
    write(tmp_path, "lone", [("x.md", 0), ("y.md", 3)], "b" * 64, 0.630930, 4, query="redis backups")  # another query: not pooled
    runs = {r.run_id: r for r in read_runs(tmp_path)[0]}
    assert runs["r1"].values("nDCG@10") == {"q1": pytest.approx(1.0)}  # x 3 then y 2: the ideal order of the pooled labels
    assert runs["r2"].values("nDCG@10")["q1"] == pytest.approx((2 + 3 / 1.5849625) / (3 + 2 / 1.5849625), abs=1e-5)
    assert runs["lone"].values("nDCG@10") == {"q1": 0.630930}
    assert runs["r1"].values("overall") == {"q1": 0.5}  # a file of scoring version 1: its scores are not re-scored
    assert runs["r1"].qrels == {
        "source": "judge",
        "queries": 1,
        "judge": 2,
        "people": 0,
        "expected": 0,
        "fromCache": 0,
        "runs": 3,
        "cache": False,
    }
