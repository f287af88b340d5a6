"""One pool of judge calls (issue 23, item 4): does a small query set fill every ``--concurrency`` slot?

Runs phase two's loop (``run_evaluation``, the pointwise LLM judge through the real anthropic SDK) against
the loopback fake (tests/support/fakes/fake_llm.py) whose brain takes exactly ``--reply-s`` (1 s) per reply, over
``--queries`` (7) queries of ten results each (a stub search over ``fixtures/``' files: no index, no
embedding model, so the figures are the judge loop's alone): ten label calls and one list-level call per
query. Measured at concurrency 1 and 5, then ``--small`` (3) queries at concurrency 5. Each checkout
(``--code DIR``, repeatable: e.g. an older checkout for a before/after table; default this repository)
runs in a fresh interpreter with its own ``judge_runner`` and this repository's fake.

Figures per checkout:

- ``wall c=1`` / ``wall c=5``: seconds for the run (the SDK imported and one call made before the clock);
- ``speed-up``: wall(c=1) / wall(c=5); ``ideal``: calls / ceil(calls / 5), the speed-up of a loop that
  keeps every slot busy with no overhead (77 calls: 77 / 16 = 4.81); ``of ideal``: their ratio (the
  issue's target: >= 90%);
- ``in flight``: the most replies the fake model was computing at once, with ``--small`` queries at
  concurrency 5 (the target: 5; one query's calls one after another give 3).

    .venv/bin/python benchmarks/judge_pool.py [--code OLD_CHECKOUT] [--code .] [--queries 7] [--small 3]
        [--reply-s 1]

Writes nothing into the repository (run files go to a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "claude-sonnet-4-6"
RESULTS = 10


def worker(args: argparse.Namespace) -> None:
    """Measure with the ``judge_runner`` on ``sys.path``; print one RESULT line of JSON."""
    from judge_runner.core.models import Query
    from judge_runner.evaluation.context import RunContext, RunOutput
    from judge_runner.evaluation.loop import run_evaluation
    from judge_runner.evaluation.options import EvaluateOptions
    from judge_runner.judging.llm_judge import LLMJudge
    from judge_runner.llm.anthropic_provider import AnthropicProvider
    from judge_runner.llm.budget import Budget
    from judge_runner.llm.retry import RetryPolicy
    from judge_runner.runs.write import RunWriter, read_run
    from judge_runner.search.base import HitScores, SearchAnswer, SearchHit
    from tests.support.fakes.fake_llm import DefaultBrain, FakeLLMServer

    class TimedBrain(DefaultBrain):
        """The fake's default brain, answering after exactly ``reply_s`` seconds; counts the replies
        being computed at once (``most``)."""

        def __init__(self, reply_s: float):
            super().__init__()
            self.reply_s, self.now, self.most = reply_s, 0, 0
            self.lock = threading.Lock()

        def __call__(self, api, body):
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            try:
                time.sleep(self.reply_s)
                return super().__call__(api, body)
            finally:
                with self.lock:
                    self.now -= 1

    files = sorted(p for p in (ROOT / "fixtures").rglob("*.md"))[: RESULTS * 2]

    class FixtureSearch:
        """Ten results per query, each the opening of a fixture file (a real result's size)."""

        def search(self, query, mode="hybrid", limit=10):
            hits = []
            for i in range(1, min(limit, RESULTS) + 1):
                path = files[(i + len(query)) % len(files)]
                text = path.read_text(encoding="utf-8")[:1500]
                source = str(path.relative_to(ROOT / "fixtures"))
                scores = HitScores()
                hits.append(
                    SearchHit(
                        rank=i,
                        source=source,
                        anchor=None,
                        lineStart=1,
                        lineEnd=20,
                        snippet=text[:200],
                        text=text,
                        score=1.0 / i,
                        scores=scores,
                        matchedBy=["fts"],
                    )
                )
            return SearchAnswer(query=query, mode=mode, results=hits, confident=True, latencyMs=1.0)

    words = [
        "redis failover",
        "rotate the api keys",
        "backup retention",
        "deploy rollback",
        "rate limits",
        "on-call handover",
        "log levels",
    ]
    queries = [
        Query(
            id=f"q{i + 1}",
            query=f"{words[i % len(words)]} {i + 1}",
            queryIntent="find the runbook",
            queryType="keyword",
            expectedSources=[],
        )
        for i in range(max(args.queries, args.small))
    ]
    workdir = Path(tempfile.mkdtemp(prefix="jr-judge-pool-"))

    def evaluate(qs, concurrency: int, reply_s: float) -> dict:
        brain = TimedBrain(reply_s)
        with FakeLLMServer(brain=brain) as server:
            budget = Budget()
            provider = AnthropicProvider(
                MODEL, RetryPolicy(max_retries=0), budget, timeout_s=60, api_key="fake", base_url=server.anthropic_base_url
            )
            writer = RunWriter(workdir / f"c{concurrency}-{len(qs)}-{time.monotonic_ns()}")
            options = EvaluateOptions(search_limit=RESULTS, concurrency=concurrency, judge_mode="pointwise")
            started = time.perf_counter()
            ctx = RunContext(LLMJudge(provider), options, budget=budget, output=RunOutput(echo=lambda m: None))
            run_evaluation(qs, FixtureSearch(), writer, {"config": {}}, ctx)
            wall = time.perf_counter() - started
            calls = server.count()
        lines = list(read_run(writer.path))
        errors = [f"{x['queryId']}: {x['errorType']}: {x['message']}" for x in lines if x.get("type") == "error"]
        if errors:
            raise SystemExit(f"{len(errors)} queries failed, e.g. {errors[0]}")
        order = [x["queryId"] for x in lines if x.get("type") == "evaluation"]
        return {"wall": wall, "calls": calls, "inFlight": brain.most, "inOrder": order == [q.id for q in qs]}

    evaluate(queries[:1], 1, 0.0)  # warm up outside the clock: the SDK, the validators, the prompts
    rows = {
        "c1": evaluate(queries[: args.queries], 1, args.reply_s),
        "c5": evaluate(queries[: args.queries], 5, args.reply_s),
        "small": evaluate(queries[: args.small], 5, args.reply_s),
    }
    print("RESULT " + json.dumps({"code": args.code_label, "rows": rows}))


def run_worker(args: argparse.Namespace, code: Path, label: str) -> dict:
    """One checkout in a fresh interpreter (its package first on the path, then this repository's fakes)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), str(ROOT)])}
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--code-label", label]
    command += ["--queries", str(args.queries), "--small", str(args.small), "--reply-s", str(args.reply_s)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"worker failed ({code}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=7, help="queries of the c=1 / c=5 comparison")
    parser.add_argument("--small", type=int, default=3, help="queries of the calls-in-flight measurement at c=5")
    parser.add_argument("--reply-s", type=float, default=1.0, help="seconds the fake model takes per reply")
    parser.add_argument("--code", action="append", type=Path, default=None, help="a checkout whose judge_runner to measure (repeatable)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code-label", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    codes = [c.resolve() for c in (args.code or [ROOT])]
    print(
        f"pointwise judge, {RESULTS} results per query (10 label calls + 1 list-level call), fake model {args.reply_s:g} s per reply, "
        f"stub search; {os.cpu_count()} cores"
    )
    print(
        f"{'code':<14} {'calls':>5} {'wall c=1':>9} {'wall c=5':>9} {'speed-up':>8} {'ideal':>6} {'of ideal':>8} "
        f"{f'in flight ({args.small} q, c=5)':>22} {'lines in order':>14}"
    )
    for code in codes:
        label = "this" if code == ROOT else code.name
        print(f"measuring {label} ({code}) ...", file=sys.stderr, flush=True)
        rows = run_worker(args, code, label)["rows"]
        c1, c5, small = rows["c1"], rows["c5"], rows["small"]
        calls = c1["calls"]
        ideal = calls / math.ceil(calls / 5)
        speedup = c1["wall"] / c5["wall"]
        ordered = "yes" if c1["inOrder"] and c5["inOrder"] and small["inOrder"] else "no"
        print(
            f"{label:<14} {calls:>5} {c1['wall']:>8.1f}s {c5['wall']:>8.1f}s {speedup:>7.2f}x {ideal:>5.2f}x {speedup / ideal:>8.0%} "
            f"{small['inFlight']:>22} {ordered:>14}"
        )


if __name__ == "__main__":
    main()
