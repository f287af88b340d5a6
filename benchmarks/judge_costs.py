"""Cost per query of the judge protocol in both modes, measured on the fake LLM server's usage accounting.

Indexes ``fixtures/`` (hash embedder: the embedder changes which documents come back, not what a call
costs), writes a query set with the offline query writer (default 15 queries), then judges it twice
through the real anthropic SDK against the loopback fake server (tests/fakes/fake_llm.py, whose honest
judge answers every label-first tool): once ``--judge-mode pointwise``, once ``batched``, no cache. The
fake counts tokens as a quarter of each request's JSON length (system prompt caching included), so the
figures are estimates of the shape of the bill, not of one vendor's tokenizer. Prints calls, input and
output tokens and USD per query at Sonnet-class prices (claude-sonnet-4-6 in llm/pricing.json: USD 3 /
15 per million input / output tokens, cache writes 3.75, reads 0.30). Writes nothing into the repository.

    .venv/bin/python benchmarks/judge_costs.py [--count 15] [--limit 10] [--workdir /tmp/jr-judge-costs]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JUDGE_RUNNER_EMBEDDER", "hash")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from judge_runner.config import load_settings  # noqa: E402
from judge_runner.evaluate import EvaluateOptions, run_evaluation  # noqa: E402
from judge_runner.generate import generate_queries  # noqa: E402
from judge_runner.heuristic.writer import HeuristicQueryWriter  # noqa: E402
from judge_runner.indexing import index_fixtures, open_index  # noqa: E402
from judge_runner.judge import LLMJudge  # noqa: E402
from judge_runner.llm.anthropic_provider import AnthropicProvider  # noqa: E402
from judge_runner.llm.budget import Budget  # noqa: E402
from judge_runner.llm.retry import RetryPolicy  # noqa: E402
from judge_runner.printer import Printer  # noqa: E402
from judge_runner.results import RunWriter  # noqa: E402
from tests.fakes.fake_llm import FakeLLMServer  # noqa: E402

MODEL = "claude-sonnet-4-6"


def measure(mode: str, queries, index, workdir: Path, limit: int) -> dict:
    """Judge ``queries`` in ``mode`` against a fresh fake server; returns the run's totals."""
    with FakeLLMServer() as server:
        provider = AnthropicProvider(
            MODEL, RetryPolicy(max_retries=1), Budget(), timeout_s=30, api_key="fake", base_url=server.anthropic_base_url
        )
        writer = RunWriter(workdir / mode)
        outcome = run_evaluation(
            queries,
            index,
            LLMJudge(provider),
            writer,
            {"config": {}},
            EvaluateOptions(search_limit=limit, concurrency=4, judge_mode=mode),
            budget=provider.budget,
            echo=lambda m: None,
        )
        requests = server.count()
    s = outcome.summary
    u = s["usage"]
    return {
        "mode": mode,
        "queries": s["evaluated"],
        "calls": requests,
        "input": u["inputTokens"],
        "cacheRead": u["cacheReadTokens"],
        "cacheWrite": u["cacheWriteTokens"],
        "output": u["outputTokens"],
        "usd": s["costUsd"],
        "labels": s["labelsJudged"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=15)
    parser.add_argument("--limit", type=int, default=10, help="results per query shown to the judge")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="jr-judge-costs-"))
    settings = load_settings({"db": str(workdir / "index.sqlite"), "provider": "offline"})
    quiet = Printer(lambda m: None, lambda m: None, True)
    index_fixtures(settings, ROOT / "fixtures", prune=True, printer=quiet).index.close()
    queries = generate_queries(HeuristicQueryWriter(), ROOT / "fixtures", args.count).queries
    rows = []
    with open_index(settings, must_exist=True) as index:
        for mode in ("pointwise", "batched"):
            rows.append(measure(mode, queries, index, workdir, args.limit))
    print(
        f"{len(queries)} queries ({sum(q.queryType == 'off-topic' for q in queries)} off-topic), up to {args.limit} results each, "
        f"{MODEL} prices, fake-server token counts"
    )
    print(f"{'mode':<10} {'calls':>6} {'calls/q':>8} {'in tok/q':>9} {'(cache rd/wr)/q':>16} {'out tok/q':>10} {'USD/q':>9} {'USD/run':>9}")
    for r in rows:
        n = max(1, r["queries"])
        print(
            f"{r['mode']:<10} {r['calls']:>6} {r['calls'] / n:>8.1f} {r['input'] / n:>9.0f} "
            f"{r['cacheRead'] / n:>8.0f}/{r['cacheWrite'] / n:<7.0f} {r['output'] / n:>10.0f} {r['usd'] / n:>9.4f} {r['usd']:>9.4f}"
        )
    print(f"work files in {workdir}")


if __name__ == "__main__":
    main()
