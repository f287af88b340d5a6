"""Peak memory and time of ``trend`` and ``report`` over a large results folder, now and at an older commit.

Writes a folder of ``--runs`` run files (default 200) of ``--queries`` queries each (default 100; ten results
per query, each with the text the judge was shown, a reason and a snippet, as an LLM-judged run writes
them) into a temporary directory: one judge, one pinned query set (what ``weekly`` keeps), each run's
results drawn around a fixed ranking. Then runs ``judge-runner trend DIR --format json`` and ``judge-runner
report DIR`` each in a child process under ``/usr/bin/time -v`` and reports its peak resident set size
and wall-clock seconds, for the code in this checkout and, with ``--baseline REV``, for the package as it was
at REV (extracted with ``git archive`` into the temporary directory; the same interpreter and libraries).
Run by hand:

    python benchmarks/trend_memory.py [--runs 200] [--queries 100] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = "search index judge query label grade corpus result passage relevant document chunk vector lexical rank".split()
FINGERPRINT = {
    "provider": "anthropic",
    "requestedModel": "claude-sonnet-4-6",
    "mode": "pointwise",
    "trials": 1,
    "sampling": {},
    "promptSha256": {"label_system.md": "1" * 64},
    "schemaSha256": {"label.schema.json": "2" * 64},
    "renderVersion": "3",
    "heuristic": False,
    "returnedModels": [],
    "passageRule": "p1",
}


def text(rng: random.Random, chars: int) -> str:
    """About ``chars`` characters of words."""
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def run_lines(number: int, queries: int, rng: random.Random) -> list[dict]:
    """One run file's lines: run_start, one evaluation per query, the summary."""
    run_id = f"2026{1 + number // 28:02d}{1 + number % 28:02d}T090000.000Z-{number:06x}"
    stamp = f"2026-{1 + number // 28:02d}-{1 + number % 28:02d}T09:00:00.000Z"
    start = {
        "type": "run_start",
        "runId": run_id,
        "timestamp": stamp,
        "formatVersion": 2,
        "config": {"searchLimit": 10, "searchMode": "hybrid"},
        "provenance": {
            "provider": "anthropic",
            "judgeModel": "claude-sonnet-4-6",
            "querySetSha256": "a" * 64,
            "corpusFingerprint": "c" * 16,
            "searchConfig": {"rrf_k": 60 + number % 3},
            "judgeFingerprint": FINGERPRINT,
            "scoringVersion": 2,
        },
    }
    lines: list[dict] = [start]
    for q in range(queries):
        docs = [f"docs/q{q:03d}/doc{d:02d}.md" for d in range(30)]
        ranked = sorted(docs, key=lambda d: int(d[-5:-3]) + rng.gauss(0, 6))[:10]
        grades = [max(0, 3 - int(d[-5:-3]) // 4) for d in ranked]
        results = [
            {
                "rank": i + 1,
                "source": d,
                "anchor": "Section",
                "score": round(1 / (i + 1), 4),
                "relevance": g,
                "relevant": g >= 2,
                "reason": text(rng, 200),
                "labelOrigin": "judge",
                "trialLabels": [g],
                "shownFrom": "document",
                "shownChars": 1500,
                "snippet": text(rng, 200),
                "shownText": text(rng, 1500),
            }
            for i, (d, g) in enumerate(zip(ranked, grades))
        ]
        lines.append(
            {
                "type": "evaluation",
                "runId": run_id,
                "timestamp": stamp,
                "queryId": f"q{q:03d}",
                "query": f"how does {WORDS[q % len(WORDS)]} work {q}",
                "queryIntent": text(rng, 80),
                "queryType": "keyword",
                "expectedSources": [docs[0]],
                "searchMode": "hybrid",
                "resultCount": 10,
                "scores": {d: round(rng.random(), 3) for d in ("relevance", "ranking", "coverage", "snippetQuality", "overall")},
                "analysis": {d: text(rng, 150) for d in ("relevance", "ranking", "coverage", "snippetQuality")},
                "suggestions": [text(rng, 80)],
                "results": results,
                "metrics": {"nDCG@10": round(rng.random(), 3), "R@10": 1.0, "RR(rel=2)": 1.0},
                "usage": {"inputTokens": 9000, "outputTokens": 400, "costUsd": 0.03, "calls": 11},
                "labelsJudged": 10,
                "listCached": False,
            }
        )
    lines.append({"type": "summary", "runId": run_id, "timestamp": stamp, "totalQueries": queries, "evaluated": queries, "costUsd": 3.0})
    return lines


def write_folder(folder: Path, runs: int, queries: int) -> int:
    """Write the run files; returns their total size in bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    size = 0
    for number in range(runs):
        data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in run_lines(number, queries, rng))
        path = folder / f"run-{number:04d}.jsonl"
        path.write_text(data, encoding="utf-8")
        size += len(data.encode("utf-8"))
    return size


def checkout(rev: str, into: Path) -> Path:
    """The package as it was at ``rev`` (``git archive``), under ``into``; returns the folder to put on PYTHONPATH."""
    data = subprocess.run(["git", "archive", rev, "judge_runner", "prompts", "schemas"], cwd=ROOT, check=True, capture_output=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def measure(code: Path, args: list[str], cwd: Path) -> tuple[float, float]:
    """``(peak RSS in MB, wall-clock seconds)`` of ``judge-runner ARGS`` with the package in ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = ["/usr/bin/time", "-v", sys.executable, "-c", "from judge_runner.cli import entry; entry()", *args]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    if rss is None or wall is None:
        raise SystemExit(f"no figures from /usr/bin/time: {done.stderr[-500:]}")
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    return int(rss.group(1)) / 1024, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--baseline", default=None, help="git revision to measure too (e.g. main)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        size = write_folder(work / "results", args.runs, args.queries)
        print(f"{args.runs} run files x {args.queries} queries: {size / 1e6:.0f} MB")
        versions = {"now": ROOT}
        if args.baseline:
            versions[args.baseline] = checkout(args.baseline, work / "baseline")
        print(f"{'code':<12} {'command':<8} {'peak MB':>8} {'seconds':>8}")
        for name, code in versions.items():
            for command in (
                ["trend", str(work / "results"), "--format", "json"],
                ["report", str(work / "results"), "--out", str(work / "out")],
            ):
                rss, seconds = measure(code, command, work)
                print(f"{name:<12} {command[0]:<8} {rss:>8.0f} {seconds:>8.1f}")


if __name__ == "__main__":
    main()
