"""What judging costs: prompt caching's saving, and calls, tokens and USD per judged query and per run,
measured on the fake LLM server's usage accounting.

Copies ``fixtures/`` into a work folder and indexes it (hash embedder: the embedder changes which
documents come back, not what a call costs), writes a query set with the offline query writer
(default 15 queries), then judges it through the real anthropic SDK against the loopback fake server
(tests/support/fakes/fake_llm.py: its honest judge answers every label-first tool, and it models Anthropic's
prompt cache from the requests it sees: the tool and system prompt are the marked prefix, written on
first sight, read after, and only when the prefix reaches the model's minimum length). Tokens are the
fake's count, a quarter of each request's JSON length: the shape of the bill, not one tokenizer's.

For a Sonnet-class (claude-sonnet-4-6) and a Haiku-class (claude-haiku-4-5) judge, in pointwise and
batched judge modes:

- **caching ratio**: the first run's input cost with the rubric marked cacheable over the same run sent
  without any cache marker (target for the issue: at most 0.60);
- **first run**: an empty judgment cache;
- **weekly re-run, unchanged corpus**: the same query set on a warm judgment cache (a week later, so the
  provider's 5-minute prompt cache is cold again: a fresh fake server);
- **weekly re-run after edits**: ``--edited`` documents of the corpus changed (a line added under their
  title), re-indexed, judged on the warm judgment cache: only the labels and list verdicts whose shown
  text changed are paid for.

Each at sync prices and at batch prices: ``Price.for_batch()`` (every token class at half the standard
rate) applied to the same usage. That assumes a batch gets the same cache hits as synchronous calls;
Anthropic serves cache hits in a batch on a best-effort basis, so the batch figures are a lower bound
(at worst the cached share is paid at the batch input rate). The table's runs judge one query at a time
(``--concurrency 1``: the figures do not depend on thread timing); the caching ratio is also measured at
the run's default concurrency (``--parallel 5``) against a fake answering in ``--latency`` seconds, where
requests that start while the first one with a prefix is still in flight miss the cache and write it
too, as on the real API (a handful of extra writes at the start of a run; the figure varies a little
from run to run).
Prices from judge_runner/llm/pricing.json. Writes nothing into the repository.

    .venv/bin/python benchmarks/judge_costs.py [--count 15] [--limit 10] [--edited 3] [--concurrency 1]
                                               [--parallel 5] [--latency 0.05] [--workdir /tmp/jr-judge-costs]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JUDGE_RUNNER_EMBEDDER", "hash")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from judge_runner.app.indexing import index_fixtures, open_index  # noqa: E402
from judge_runner.config import load_settings  # noqa: E402
from judge_runner.core.printer import Printer  # noqa: E402
from judge_runner.evaluation.context import RunContext, RunOutput  # noqa: E402
from judge_runner.evaluation.loop import run_evaluation  # noqa: E402
from judge_runner.evaluation.options import EvaluateOptions  # noqa: E402
from judge_runner.judging.cache import JudgmentCache  # noqa: E402
from judge_runner.judging.llm_judge import LLMJudge  # noqa: E402
from judge_runner.llm.anthropic_provider import AnthropicProvider  # noqa: E402
from judge_runner.llm.batch_provider import batching_provider  # noqa: E402
from judge_runner.llm.budget import Budget  # noqa: E402
from judge_runner.llm.pricing import Price, Usage, cost_usd, price_for  # noqa: E402
from judge_runner.llm.registry import get_spec  # noqa: E402
from judge_runner.llm.retry import RetryPolicy  # noqa: E402
from judge_runner.querygen.heuristic import HeuristicQueryWriter  # noqa: E402
from judge_runner.querygen.protocol import generate_queries  # noqa: E402
from judge_runner.runs.write import RunWriter  # noqa: E402
from tests.support.fakes.fake_llm import FakeLLMServer, anthropic_cache_minimum  # noqa: E402

MODELS = {"Sonnet-class": "claude-sonnet-4-6", "Haiku-class": "claude-haiku-4-5"}
MODES = ("pointwise", "batched")
GOAL_USD = 0.01  # issue 15: at most $0.01 per judged query on a weekly re-run


class UncachedProvider(AnthropicProvider):
    """The Anthropic provider with every cache marker left out: the caching ratio's denominator."""

    def _send(self, system, turns, tools, force_tool, max_tokens, cache_system, timeout, sampling=None):
        return super()._send(system, turns, tools, force_tool, max_tokens, False, timeout, sampling)


@dataclasses.dataclass
class Measured:
    """One judged run: HTTP requests the fake saw, the run's usage, its summary, and distinct result counts."""

    calls: int
    usage: Usage
    summary: dict
    result_counts: set[int]


@dataclasses.dataclass(frozen=True)
class Setup:
    """What every run shares: results per query, judge concurrency, the fake's latency (seconds)."""

    limit: int
    concurrency: int
    latency_s: float


def judge_run(
    model: str,
    mode: str,
    queries,
    index,
    workdir: Path,
    setup: Setup,
    cache: JudgmentCache | None,
    marked: bool = True,
    batch: bool = False,
) -> Measured:
    """Judge ``queries`` with ``model`` in ``mode`` against a fresh fake server (a cold provider cache);
    ``batch``: through the fake's Message Batches API (``--batch``), priced at batch prices."""
    with FakeLLMServer(latency_s=setup.latency_s) as server:
        kind = AnthropicProvider if marked else UncachedProvider
        provider = kind(model, RetryPolicy(max_retries=1), Budget(), timeout_s=30, api_key="fake", base_url=server.anthropic_base_url)
        chat = batching_provider(provider, get_spec("anthropic").load_batches(), max_poll_s=0.2) if batch else provider
        options = EvaluateOptions(search_limit=setup.limit, concurrency=setup.concurrency, judge_mode=mode)
        ctx = RunContext(LLMJudge(chat), options, budget=chat.budget, cache=cache, output=RunOutput(echo=lambda m: None))
        outcome = run_evaluation(queries, index, RunWriter(workdir / "runs"), {"config": {}}, ctx)
        labels_tools = [t for r in server.requests for t in r.body.get("tools") or [] if t.get("name") == "record_labels"]
        counts = {t["input_schema"]["properties"]["labels"]["minItems"] for t in labels_tools}
        return Measured(server.count(), chat.budget.usage, outcome.summary, counts)


def input_cost(usage: Usage, price: Price) -> float:
    """USD of the input side of ``usage`` (uncached input, cache writes, cache reads)."""
    return cost_usd(dataclasses.replace(usage, output_tokens=0), price) or 0.0


def row(model_class: str, mode: str, prices: str, run: str, m: Measured, price: Price) -> dict:
    """One table row: ``m`` priced at ``price`` (sync or batch)."""
    usd = cost_usd(m.usage, price) or 0.0
    judged = m.summary["judgedQueries"]
    u = m.usage
    return {
        "judge": model_class,
        "mode": mode,
        "prices": prices,
        "run": run,
        "calls": m.calls,
        "judged": judged,
        "input": u.input_tokens + u.cache_write_tokens + u.cache_read_tokens,
        "cached": u.cache_read_tokens,
        "written": u.cache_write_tokens,
        "output": u.output_tokens,
        "usd_q": usd / judged if judged else None,
        "usd_run": usd,
    }


def edit_corpus(corpus: Path, n: int) -> list[str]:
    """Add one line under the title of the first ``n`` runbooks and guides (a week's edits); their paths."""
    edited = []
    for path in sorted([*corpus.glob("runbooks/*.md"), *corpus.glob("guides/*.md")])[:n]:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        lines.insert(1, "\nReviewed this week: the steps below were checked against the current setup.\n")
        path.write_text("".join(lines), encoding="utf-8")
        edited.append(str(path.relative_to(corpus)))
    return edited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=15)
    parser.add_argument("--limit", type=int, default=10, help="results per query shown to the judge")
    parser.add_argument("--edited", type=int, default=3, help="documents edited before the second weekly re-run")
    parser.add_argument("--concurrency", type=int, default=1, help="judge concurrency of the table's runs (1: reproducible)")
    parser.add_argument("--parallel", type=int, default=5, help="judge concurrency of the second caching ratio (the run's default)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the fake takes to answer")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    setup = Setup(args.limit, args.concurrency, args.latency)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="jr-judge-costs-"))
    corpus = workdir / "corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    shutil.copytree(ROOT / "fixtures", corpus)
    (workdir / "index.sqlite").unlink(missing_ok=True)
    for old_cache in workdir.glob("judgments-*.sqlite*"):
        old_cache.unlink()
    settings = load_settings({"db": str(workdir / "index.sqlite"), "provider": "offline"})
    quiet = Printer(lambda m: None, lambda m: None, True)
    index_fixtures(open_index(settings), settings, corpus, prune=True, printer=quiet).index.close()
    queries = generate_queries(HeuristicQueryWriter(), corpus, args.count).queries
    # one judgment cache per judge and mode: list verdicts are keyed without the label mode, so a shared
    # cache would hand the batched run the pointwise run's verdicts
    caches = {(c, mode): JudgmentCache(workdir / f"judgments-{MODELS[c]}-{mode}.sqlite") for c in MODELS for mode in MODES}
    first: dict[tuple[str, str], Measured] = {}
    uncached: dict[tuple[str, str], Measured] = {}
    again: dict[tuple[str, str], Measured] = {}
    edited_run: dict[tuple[str, str], Measured] = {}
    parallel: dict[tuple[str, str], Measured] = {}  # the first run again at the run's default concurrency, no judgment cache
    batched_api: dict[str, Measured] = {}  # Sonnet-class first run through the fake's Message Batches API
    concurrent = dataclasses.replace(setup, concurrency=args.parallel)
    try:
        with open_index(settings, must_exist=True) as index:
            for model_class, model in MODELS.items():
                for mode in MODES:
                    uncached[model_class, mode] = judge_run(model, mode, queries, index, workdir, setup, None, marked=False)
                    first[model_class, mode] = judge_run(model, mode, queries, index, workdir, setup, caches[model_class, mode])
                    again[model_class, mode] = judge_run(model, mode, queries, index, workdir, setup, caches[model_class, mode])
                    parallel[model_class, mode] = judge_run(model, mode, queries, index, workdir, concurrent, None)
            for mode in MODES:
                batched_api[mode] = judge_run(MODELS["Sonnet-class"], mode, queries, index, workdir, setup, None, batch=True)
        edited = edit_corpus(corpus, args.edited)
        index_fixtures(open_index(settings), settings, corpus, prune=True, printer=quiet).index.close()
        with open_index(settings, must_exist=True) as index:
            for model_class, model in MODELS.items():
                for mode in MODES:
                    edited_run[model_class, mode] = judge_run(model, mode, queries, index, workdir, setup, caches[model_class, mode])
    finally:
        for cache in caches.values():
            cache.close()

    off_topic = sum(q.queryType == "off-topic" for q in queries)
    print(
        f"judge costs on the fake server, {datetime.now(UTC):%Y-%m-%d}: {len(queries)} queries ({off_topic} off-topic), up to {args.limit} results each"
    )
    print(
        f"table: judge concurrency {args.concurrency}; fake latency {args.latency} s; tokens: the fake's count (a quarter of each "
        "request's JSON); prices: judge_runner/llm/pricing.json"
    )
    print()
    print(
        f"caching ratio (first run, input cost with the rubric cached / without any cache marker; target <= 0.60), "
        f"at concurrency {args.concurrency} and at concurrency {args.parallel}:"
    )
    for (model_class, mode), m in first.items():
        price = price_for(MODELS[model_class])
        assert price is not None
        plain = input_cost(uncached[model_class, mode].usage, price)
        ratio, ratio_parallel = input_cost(m.usage, price) / plain, input_cost(parallel[model_class, mode].usage, price) / plain
        minimum = anthropic_cache_minimum(MODELS[model_class])
        share = m.summary["cachedInputShare"] or 0.0
        print(
            f"  {model_class:<12} {mode:<9} {ratio:.2f} / {ratio_parallel:.2f}  (cached input share {share:.0%}, saved "
            f"${m.summary['cacheSavedUsd']:.4f}; tokens written {m.usage.cache_write_tokens:,} / "
            f"{parallel[model_class, mode].usage.cache_write_tokens:,}; {MODELS[model_class]} caches prefixes of {minimum}+ tokens)"
        )
    counts = sorted(set().union(*(m.result_counts for m in first.values())))
    print(f"  batched: the label schema pins the result count; counts seen {counts} -> {len(counts)} cached prefix(es) per model")
    print()
    unchanged = {k: m.calls for k, m in again.items()}
    print(
        f"weekly re-run, unchanged corpus (warm judgment cache): {sorted(set(unchanged.values()))} calls, "
        f"judged queries {sorted({m.summary['judgedQueries'] for m in again.values()})}, "
        f"${max(m.summary['costUsd'] for m in again.values()):.4f} per run: every label and list verdict comes from the judgment cache"
    )
    print(f"weekly re-run after edits: {len(edited)} documents edited ({', '.join(edited)}) and re-indexed")
    print()
    rows = []
    for model_class, model in MODELS.items():
        price = price_for(model)
        assert price is not None
        for mode in MODES:
            for prices, p in (("sync", price), ("batch", price.for_batch())):
                rows.append(row(model_class, mode, prices, "first run", first[model_class, mode], p))
                rows.append(row(model_class, mode, prices, "weekly re-run after edits", edited_run[model_class, mode], p))
    header = "| judge | mode | prices | run | calls | judged queries | input tokens (cache read / write) | output tokens | USD / judged query | USD / run |"
    print(header)
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        per = "-" if r["usd_q"] is None else f"{r['usd_q']:.4f}"
        print(
            f"| {r['judge']} | {r['mode']} | {r['prices']} | {r['run']} | {r['calls']} | {r['judged']} | "
            f"{r['input']:,} ({r['cached']:,} / {r['written']:,}) | {r['output']:,} | {per} | {r['usd_run']:.4f} |"
        )
    print()
    rerun = [r for r in rows if r["run"].startswith("weekly") and r["usd_q"] is not None]
    met = [r for r in rerun if r["usd_q"] <= GOAL_USD]
    print(f"goal <= ${GOAL_USD} per judged query on a weekly re-run: met by {len(met)} of {len(rerun)} re-run rows")
    for r in rerun:
        print(f"  {r['judge']:<12} {r['mode']:<9} {r['prices']:<5} ${r['usd_q']:.4f} {'met' if r['usd_q'] <= GOAL_USD else 'NOT met'}")
    print("batch rows: Price.for_batch() on the sync run's usage; checked against a first run sent through the fake's Message Batches API:")
    for mode, m in batched_api.items():
        sync = first["Sonnet-class", mode]
        price = price_for(MODELS["Sonnet-class"])
        assert price is not None
        estimated = cost_usd(sync.usage, price.for_batch()) or 0.0
        batch_block = m.summary.get("batch") or {}
        print(
            f"  Sonnet-class {mode:<9} {batch_block.get('batches', 0)} batch(es), {batch_block.get('requests', 0)} requests; input {m.usage.input_tokens + m.usage.cache_write_tokens + m.usage.cache_read_tokens:,} "
            f"(cache read {m.usage.cache_read_tokens:,}), output {m.usage.output_tokens:,}; "
            f"${m.summary['costUsd']:.4f} per run vs ${estimated:.4f} estimated from the sync run"
        )
    print(f"work files in {workdir}")


if __name__ == "__main__":
    main()
