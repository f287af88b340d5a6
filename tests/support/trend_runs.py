"""Run files written directly for the analysis tests (``trend``, ``report``, ``weekly``): :func:`write_run`
writes a whole run of known scores, :func:`noisy` draws a run's scores around a mean."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

N = 20


def write_run(
    folder: Path,
    name: str,
    overall: list[float],
    *,
    ndcg: list[float] | None = None,
    judge_model="claude-sonnet-4-6",
    query_set="a" * 64,
    summary=True,
    search=None,
    day=1,
    extra_lines: str = "",
    provenance: dict | None = None,
    config: dict | None = None,
    errors: int = 0,
    stopped: dict | None = None,
    error_ids: list[str] | None = None,
) -> Path:
    """A run file with one evaluation per value of ``overall`` (queries q00..), judged by ``judge_model``, then
    ``errors`` error lines (queries e00.., or ``error_ids``); ``stopped``: summary fields of a run cut short
    (``{"stopReason": "cache_damaged", "totalQueries": 15}``)."""
    ndcg = ndcg if ndcg is not None else overall
    lines = [
        {
            "type": "run_start",
            "runId": name,
            "timestamp": f"2026-11-{day:02d}T10:00:00.000Z",
            "config": config or {},
            "provenance": {
                "provider": "anthropic",
                "judgeModel": judge_model,
                "generatorModel": judge_model,
                "heuristicJudge": False,
                "promptSha256": {"judge_system.md": "1" * 64, "judge_user.md": "2" * 64},
                "querySetSha256": query_set,
                "corpusFingerprint": "c",
                "searchConfig": search or {"rrf_k": 60},
                "judgeRunnerVersion": "0.1.0",
                **(provenance or {}),
            },
            "queriesGenerated": None,
            "queriesDropped": 0,
        }
    ]
    for i, (o, n) in enumerate(zip(overall, ndcg)):
        lines.append(
            {
                "type": "evaluation",
                "runId": name,
                "queryId": f"q{i:02d}",
                "query": f"query {i}",
                "queryType": "keyword",
                "scores": {"relevance": o, "ranking": o, "coverage": o, "snippetQuality": o, "overall": o, "judgeOverall": o},
                "metrics": {"nDCG@10": n, "Recall@10": n, "RR": n},
                "results": [],
            }
        )
    for i in range(errors):
        lines.append(
            {
                "type": "error",
                "runId": name,
                "queryId": error_ids[i] if error_ids else f"e{i:02d}",
                "query": f"query e{i}",
                "stage": "search",
                "errorType": "search_failed",
                "message": "connection refused: http://127.0.0.1:9/search",
                "attempts": 4,
            }
        )
    if summary:
        lines.append(
            {
                "type": "summary",
                "runId": name,
                "timestamp": f"2026-11-{day:02d}T10:05:00.000Z",
                "evaluated": len(overall),
                "failed": errors,
                "costUsd": 0.12,
                **(stopped or {}),
            }
        )
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(l) + "\n" for l in lines) + extra_lines, encoding="utf-8")
    return path


def noisy(mean: float, seed: int, spread: float = 0.05) -> list[float]:
    """``N`` scores around ``mean`` (normal noise of ``spread``, seeded, clipped to [0, 1])."""
    rng = np.random.default_rng(seed)
    return list(np.clip(mean + rng.normal(0, spread, N), 0, 1))
