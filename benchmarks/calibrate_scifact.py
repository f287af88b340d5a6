"""Calibrate the offline heuristic judge on SciFact test queries, then measure what a Sonnet-class judge would
need for the same run on the fake LLM server's usage accounting (no network, no key, no cost).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/calibrate_scifact.py [--data ../shared/data/scifact]
        [--queries 100] [--workdir /tmp/jr-calibrate]

Prints the offline judge's calibration table, then what a Sonnet-class judge would need for the same run: the
call count is the offline run's (calls depend on the pool and the probes, not on the judge), the tokens per call
are measured on a --fake-queries run through the Anthropic SDK against the fake server's honest judge (the fake
server's usage accounting: a quarter of the JSON length of each request part), priced as claude-sonnet-4-6.
Writes only under --workdir.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from click.testing import CliRunner  # noqa: E402

from judge_runner.cli import main  # noqa: E402


def run(args: list[str], env: dict) -> None:
    started = time.monotonic()
    result = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    print(result.output)
    print(f"(exit {result.exit_code}, {time.monotonic() - started:.0f} s)")


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--probe-queries", type=int, default=50)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/jr-calibrate"))
    parser.add_argument("--skip-offline", action="store_true")
    parser.add_argument("--fake-queries", type=int, default=10, help="queries of the fake-server run whose tokens per call are scaled")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    common = [
        "calibrate",
        "--beir",
        str(args.data),
        "--queries-sample",
        str(args.queries),
        "--seed",
        "13",
        "--judge-mode",
        "both",
        "--trials",
        "2",
        "--probe-queries",
        str(args.probe_queries),
        "--db",
        str(args.workdir / "scifact-full.sqlite"),
    ]
    clean = {"ANTHROPIC_API_KEY": None, "OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "ANTHROPIC_BASE_URL": None, "COLUMNS": "140"}
    if not args.skip_offline:
        print("== offline heuristic judge ==")
        run([*common, "--provider", "offline", "--out", str(args.workdir / "offline.json")], clean)
    print(f"== Sonnet-class judge on the fake server: {args.fake_queries} queries (honest brain; usage accounting) ==")
    from judge_runner.calibrate.data import load_beir
    from judge_runner.llm.pricing import Usage, cost_usd, price_for
    from tests.support.fakes.calibration_judges import QrelsJudge
    from tests.support.fakes.fake_llm import FakeLLMServer

    collection = load_beir(args.data)
    qrels = {collection.queries[q]: docs for q, docs in collection.qrels.items()}
    fake = [*common, "--queries-sample", str(args.fake_queries), "--probe-queries", str(min(args.fake_queries, args.probe_queries))]
    with FakeLLMServer(brain=QrelsJudge(qrels)) as server:
        env = {**clean, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        run(
            [
                *fake,
                "--provider",
                "anthropic",
                "--judge-model",
                "claude-sonnet-4-6",
                "--quiet",
                "--out",
                str(args.workdir / "sonnet-fake.json"),
            ],
            env,
        )
        requests = [json.loads(r.body) if isinstance(r.body, (bytes, str)) else r.body for r in getattr(server, "requests", [])]
    spend = json.loads((args.workdir / "sonnet-fake.json").read_text())["spend"]
    print("fake run spend:", json.dumps(spend))
    offline = args.workdir / "offline.json"
    if offline.is_file():
        calls = json.loads(offline.read_text())["spend"]["calls"]
        per_call_in = spend["inputTokens"] / spend["totalCalls"]
        per_call_out = spend["outputTokens"] / spend["totalCalls"]
        total = sum(calls.values())
        usage = Usage(round(per_call_in * total), round(per_call_out * total))
        print(
            f"{args.queries}-query run: {total} calls ({json.dumps(calls)}); at the fake run's mean "
            f"{per_call_in:.0f} input / {per_call_out:.0f} output tokens per call: {usage.input_tokens} in, "
            f"{usage.output_tokens} out; claude-sonnet-4-6 list price ${cost_usd(usage, price_for('claude-sonnet-4-6')):.2f}"
            f" (no prompt caching; {len(requests)} requests logged)"
        )


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    main_()
