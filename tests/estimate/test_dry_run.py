"""``--dry-run``: an estimate before spending, and the estimate in the real run's summary.

The "done when" check: ``evaluate --dry-run`` estimates within 15% of the input tokens the real run then
sends to the loopback fake server (through the REAL anthropic and openai SDKs, pointwise and batched); the
fake's accounting is what the run's summary adds up from the usage blocks it returned. Output tokens
depend on the fake's brain (the honest judge writes short reasons), so they are compared loosely and
reported.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from judge_runner.estimate.costs import (
    DryRunCache,
    PlannedCall,
    RecordingJudge,
    costs,
    tokens,
)
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.labelling import Channel, ProtocolSettings, judge_query
from judge_runner.llm.pricing import Price, price_for
from tests.support.clitools import KEEP_ALL, invoke, run_lines
from tests.support.fakes.fake_llm import FakeLLMServer

pytestmark = pytest.mark.hash_embedder

INPUT_TOLERANCE = 0.15


def fake_env(server: FakeLLMServer, api: str) -> dict:
    if api == "anthropic":
        return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
    return {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": server.openai_base_url}


@pytest.fixture
def query_set(fixtures_root, tmp_path):
    """15 queries about fixtures/ from the offline query writer (no provider)."""
    path = tmp_path / "queries.json"
    result = invoke(["generate", "--fixtures", str(fixtures_root), "--count", "15", "--out", str(path), *KEEP_ALL])
    assert result.exit_code == 0, result.output
    return path


def dry_run(args: list[str], env: dict) -> dict:
    result = invoke([*args, "--dry-run", "--json"], env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # stdout holds the JSON alone; notes and progress go to stderr


@pytest.mark.parametrize("mode", ["pointwise", "batched"])
@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_dry_run_estimates_within_15_percent_of_what_the_fake_server_counts(api, mode, query_set, db_copy, tmp_path):
    args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--judge-mode", mode, "--cache", str(tmp_path / "j.sqlite")]
    out = tmp_path / "runs"
    with FakeLLMServer() as server:
        env = fake_env(server, api)
        report = dry_run([*args, "--out-dir", str(out)], env)
        assert server.count() == 0, "a dry run sent a request"
        assert not out.exists() and not (tmp_path / "j.sqlite").exists(), "a dry run wrote a file"
        result = invoke([*args, "--out-dir", str(out)], env)
        assert result.exit_code == 0, result.output
        requests = server.count()
    summary = run_lines(out)[-1]
    chosen = report["phaseTwo"]["judges"][0]
    assert chosen["chosen"] and chosen["provider"] == api
    assert chosen["calls"] == requests == summary["usage"]["calls"]
    actual_in, actual_out = summary["usage"]["inputTokens"], summary["usage"]["outputTokens"]
    error_in = chosen["inputTokens"] / actual_in - 1
    error_out = chosen["outputTokens"] / actual_out - 1
    print(
        f"{api} {mode}: {requests} calls; input {chosen['inputTokens']} vs {actual_in} ({error_in:+.1%}); "
        f"output {chosen['outputTokens']} vs {actual_out} ({error_out:+.1%})"
    )
    assert abs(error_in) <= INPUT_TOLERANCE
    assert 0.5 <= chosen["outputTokens"] / actual_out <= 4  # a typical reply vs the honest judge's short reasons
    # the run's summary carries the same estimate, and the printed summary compares cost with it
    assert summary["estimate"]["calls"] == chosen["calls"]
    assert summary["estimate"]["inputTokens"] == pytest.approx(chosen["inputTokens"], rel=0.01)
    # the run's own mode: the judge marks its prompt cacheable, so the expected cost is the cached one
    assert summary["estimate"]["costUsd"] == pytest.approx(chosen["costUsd"]["cached"]["expected"], rel=0.01)
    assert summary["estimate"]["batch"] is False
    assert "(estimate $" in result.output and f"estimate: {chosen['calls']} judge calls" in result.output


def test_a_cached_rerun_is_estimated_at_no_call(query_set, db_copy, tmp_path):
    args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--cache", str(tmp_path / "j.sqlite")]
    with FakeLLMServer() as server:
        env = fake_env(server, "anthropic")
        first = dry_run(args, env)["phaseTwo"]["judges"][0]
        assert invoke([*args, "--out-dir", str(tmp_path / "runs")], env).exit_code == 0
        made = server.count()
        again = dry_run(args, env)["phaseTwo"]["judges"]
    assert first["calls"] == made and first["labelsCached"] == 0
    assert again[0]["calls"] == 0 and again[0]["labelsCached"] == first["labelsToJudge"] > 0
    # the cache is per judge: the other provider's default model would judge everything again
    assert again[1]["provider"] == "openai" and again[1]["calls"] == first["calls"]


def test_text_report_without_a_key_and_the_offline_choice(query_set, db_copy, tmp_path):
    result = invoke(["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--no-cache", "--dry-run"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "nothing sent to any provider" in text and "offline" in text
    assert "anthropic/claude-sonnet-4-6" in text and "openai/gpt-4.1" in text
    assert "sync $ (worst)" in text and "batch $ (worst)" in text and "cached $ (worst)" in text
    assert not list(tmp_path.glob("*.jsonl")) and not (tmp_path / "quality-results").exists()


def test_generate_and_evaluate_and_weekly_dry_runs_are_rough(fixtures_root, db_copy, tmp_path):
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}  # nothing listens: nothing may be sent
    common = ["--fixtures", str(fixtures_root), "--db", str(db_copy), "--count", "6"]
    report = dry_run(["generate-and-evaluate", *common, "--out-dir", str(tmp_path / "r")], env)
    writer = report["phaseOne"]["writers"][0]
    assert writer["chosen"] and writer["calls"] == 8 and writer["worstCalls"] == 30
    assert writer["worstInputTokens"] > writer["inputTokens"] > 0
    judge = report["phaseTwo"]["judges"][0]
    assert report["phaseTwo"]["precision"] == "rough" and judge["calls"] == 6 * 10 + 6
    assert any(a.startswith("rough: phase one") for a in report["assumptions"])
    modes = dry_run(["generate-and-evaluate", *common, "--search-mode", "fts,hybrid"], env)["phaseTwo"]
    assert modes["queries"] == 6 and modes["searches"] == 12 and modes["judges"][0]["calls"] == 2 * judge["calls"]
    weekly = dry_run(["weekly", *common, "--results", str(tmp_path / "w"), "--reports", str(tmp_path / "rep")], env)
    assert weekly["command"] == "weekly" and weekly["phaseOne"] is not None
    assert not (tmp_path / "r").exists() and not (tmp_path / "rep").exists()
    assert not (tmp_path / "w" / "weekly.log").exists() and not (tmp_path / "w" / ".weekly.lock").exists()


def test_weekly_with_a_pinned_set_searches_it(query_set, fixtures_root, db_copy, tmp_path):
    results = tmp_path / "w"
    results.mkdir()
    (results / "pinned-queries.json").write_text(query_set.read_text())
    report = dry_run(["weekly", "--fixtures", str(fixtures_root), "--db", str(db_copy), "--results", str(results), "--no-cache"], {})
    assert report["phaseOne"] is None and report["phaseTwo"]["precision"] == "searched" and report["phaseTwo"]["queries"] == 15
    assert sorted(p.name for p in results.iterdir()) == ["pinned-queries.json"]


# -- the parts -----------------------------------------------------------------------------------------------
def test_costs_per_mode():
    price = Price(3.0, 15.0, 3.75, 0.3)
    calls = [PlannedCall("label", 2000, 50, 1024, 1500, "p")] * 10
    c = costs(calls, price)
    assert c["sync"].expected == pytest.approx((20000 * 3 + 500 * 15) / 1e6)
    assert c["sync"].worst == pytest.approx((20000 * 3 + 10240 * 15) / 1e6)
    assert c["batch"].expected == pytest.approx(c["sync"].expected / 2)
    cached_in = (1500 * 3.75 + 9 * 1500 * 0.3 + 10 * 500 * 3) / 1e6  # the prefix written once, read nine times
    assert c["cached"].expected == pytest.approx(cached_in + 500 * 15 / 1e6)
    short = [PlannedCall("label", 2000, 50, 1024, 500, "p")] * 10  # under the minimum cacheable length
    assert costs(short, price)["cached"].expected == pytest.approx(costs(short, price)["sync"].expected)
    assert costs(calls, None)["batch"].expected is None


def test_tokens_is_a_quarter_of_the_json_length():
    assert tokens({"a": "x" * 100}) == len(json.dumps({"a": "x" * 100})) // 4
    assert tokens("") == 1


def test_recording_judge_uses_the_runs_cache_keys_and_counts_human_labelled_results(tmp_path):
    from tests.support.protocol_runs import StubSearch, queries

    answer = StubSearch(3).search("promote the redis replica 1")
    query = queries(1)[0]
    with JudgmentCache(tmp_path / "j.sqlite") as cache:
        judge = RecordingJudge("anthropic", "claude-sonnet-4-6")
        judge_query(judge, query, answer, ProtocolSettings(), via=Channel(cache))  # stores what the placeholder judge "said"
        assert [c.kind for c in judge.calls] == ["label"] * 3 + ["list"]
        again = RecordingJudge("anthropic", "claude-sonnet-4-6")
        judge_query(again, query, answer, ProtocolSettings(), via=Channel(DryRunCache(cache)))
        assert again.calls == []  # every label and the list verdict cached under the same keys
        other = RecordingJudge("anthropic", "claude-haiku-4-5")
        judge_query(other, query, answer, ProtocolSettings(), {"runbooks/redis-failover.md": 3}, Channel(DryRunCache(cache)))
        # regression: a human-labelled result is still judged (its judge label is kept beside the person's)
        assert [c.kind for c in other.calls] == ["label"] * 3 + ["list"]
    assert price_for("claude-sonnet-4-6") is not None


def test_calibrate_dry_run_counts_the_calls_the_calibration_makes(tmp_path):
    from tests.support.calibration_data import judge_qrels, write_collection
    from tests.support.fakes.calibration_judges import QrelsJudge

    data = write_collection(tmp_path / "beir")
    args = ["calibrate", "--beir", str(data), "--provider", "anthropic", "--db", str(tmp_path / "idx.sqlite")]
    args += ["--bootstrap", "20", "--quiet", "--probe-queries", "4", "--out", str(tmp_path / "cal.json")]
    with FakeLLMServer(brain=QrelsJudge(judge_qrels(data))) as server:
        env = fake_env(server, "anthropic")
        report = dry_run(args, env)
        assert server.count() == 0 and not (tmp_path / "cal.json").exists()
        assert invoke(args, env).exit_code == 0
        sent = list(server.requests)
    chosen = report["phaseTwo"]["judges"][0]
    assert report["command"] == "calibrate" and chosen["chosen"] and chosen["calls"] == len(sent)
    # the fake's accounting of what was sent: a quarter of the JSON of system, messages and tools
    from tests.support.fakes.fake_llm import _estimate_tokens

    sent_in = sum(_estimate_tokens({k: r.body.get(k) for k in ("system", "messages", "tools")}) for r in sent)
    print(f"calibrate: {len(sent)} calls; input {chosen['inputTokens']} vs {sent_in} ({chosen['inputTokens'] / sent_in - 1:+.1%})")
    assert abs(chosen["inputTokens"] / sent_in - 1) <= INPUT_TOLERANCE


def test_resume_dry_run_counts_only_the_queries_left_and_offline_runs_keep_no_estimate(query_set, db_copy, tmp_path):
    out = tmp_path / "runs"
    assert invoke(["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--out-dir", str(out), "--no-cache"]).exit_code == 0
    [run] = list(out.glob("*.jsonl"))
    lines = run.read_text().splitlines()
    assert json.loads(lines[-1])["estimate"] is None  # the heuristic judge makes no paid call
    cut = out / "cut.jsonl"  # beside the saved query set
    cut.write_text("\n".join(lines[:6]) + "\n")  # run_start and five evaluations
    report = dry_run(["evaluate", "--resume", str(cut), "--db", str(db_copy), "--provider", "anthropic", "--no-cache"], {})
    assert report["phaseTwo"]["queries"] == 10


def test_json_without_dry_run_is_a_usage_error(query_set, db_copy):
    result = invoke(["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--json"])
    assert result.exit_code == 2 and "--dry-run" in result.output


def test_ctrl_c_while_the_run_estimates_stops_the_run_loop_as_its_own_would(tmp_path):
    from judge_runner.estimate.start import start_estimate
    from judge_runner.evaluation.context import QUIET, RunContext
    from judge_runner.evaluation.loop import run_evaluation
    from judge_runner.evaluation.options import EvaluateOptions
    from judge_runner.runs.write import RunWriter, read_run
    from tests.support.protocol_runs import StubSearch, queries

    class Interrupting(StubSearch):
        calls = 0

        def search(self, query, mode="hybrid", limit=10, intent=""):
            Interrupting.calls += 1
            if Interrupting.calls == 2:
                raise KeyboardInterrupt
            return super().search(query, mode, limit)

    judge = RecordingJudge("anthropic", "claude-sonnet-4-6")
    search, estimate = start_estimate(queries(3), Interrupting(), judge, EvaluateOptions(), None, price=None, budget_cap_usd=None)
    assert estimate is None
    writer = RunWriter(tmp_path)
    outcome = run_evaluation(queries(3), search, writer, {"config": {}}, RunContext(judge, EvaluateOptions(), output=QUIET))
    assert outcome.summary["interrupted"] is True and outcome.summary["evaluated"] == 0
    assert [line["type"] for line in read_run(writer.path)] == ["run_start", "summary"] and judge.calls == []


def test_a_missing_fixtures_folder_is_a_usage_error_as_in_the_real_run(tmp_path):
    result = invoke(["generate-and-evaluate", "--fixtures", str(tmp_path / "none"), "--dry-run"])
    assert result.exit_code == 2 and "fixtures folder not found" in result.output


def test_cached_column_honours_each_models_cache_minimum():
    """A prefix shorter than the model's cacheMinTokens is billed at the input price: the judge's ~1.5k-token
    prefix is cached for a Sonnet-class judge (1024) but not for Haiku 4.5 (4096), as the fake server does."""
    from judge_runner.estimate.costs import PlannedCall, costs
    from judge_runner.llm.pricing import price_for

    calls = [PlannedCall("label", 2000, 50, 1024, prefix_tokens=1500, prefix_id="p") for _ in range(10)]
    sonnet, haiku = price_for("claude-sonnet-4-6"), price_for("claude-haiku-4-5")
    assert sonnet is not None and haiku is not None
    assert (sonnet.cache_min_tokens, haiku.cache_min_tokens) == (1024, 4096)
    assert costs(calls, haiku)["cached"].expected == pytest.approx(costs(calls, haiku)["sync"].expected)
    assert costs(calls, sonnet)["cached"].expected < 0.6 * costs(calls, sonnet)["sync"].expected


def test_a_reader_that_goes_away_neither_stops_the_job_nor_fails_it(query_set, db_copy, tmp_path):
    """`judge-runner ... | head`: stdout's reader closes the pipe before the job prints. The job finishes
    with its own exit code (0 here), not click's 1 for a broken pipe (1 reads as a failed quality gate),
    and prints no traceback."""
    import subprocess
    import sys

    code = "import sys; from judge_runner.cli.app import entry; sys.argv[0] = 'judge-runner'; entry()"
    args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--provider", "anthropic", "--dry-run"]
    env = {**os.environ, "ANTHROPIC_API_KEY": "unused", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line is written
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and "internal error" not in stderr


def test_printer_drops_lines_after_a_broken_pipe():
    from judge_runner.core.printer import Printer

    calls: list[str] = []

    def gone(message: str) -> None:
        calls.append(message)
        raise BrokenPipeError(32, "Broken pipe")

    saved = sys.stdout
    try:
        printer = Printer(gone, lambda m: None)
        printer.out("first")  # raises inside, swallowed: the job goes on
        assert calls == ["first"] and sys.stdout is not saved  # stdout now writes to the null device
    finally:
        sys.stdout = saved
    with pytest.raises(OSError, match="disk"):
        Printer(lambda m: (_ for _ in ()).throw(OSError(28, "No space left on disk")), print).out("x")


def test_dry_run_refuses_what_the_run_refuses_and_names_the_column_the_run_pays(query_set, db_copy, tmp_path):
    base = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--no-cache", "--dry-run"]
    refused = invoke([*base, "--provider", "offline", "--batch"])
    assert refused.exit_code == 2 and "heuristic judge makes no API calls" in refused.output  # as the real run says
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}  # nothing listens: nothing may be sent
    sync = invoke([*base, "--provider", "anthropic"], env)
    batch = invoke([*base, "--provider", "anthropic", "--batch", "--max-budget-usd", "0.05"], env)
    assert sync.exit_code == 0 and batch.exit_code == 0, batch.output
    assert "the run would pay the 'cached' column" in sync.stdout and "warning: the worst case" not in sync.stdout
    assert "the run would pay the 'batch+cached' column" in batch.stdout
    assert "above --max-budget-usd $0.05" in batch.stdout
    report = dry_run([*base[:-1], "--provider", "anthropic", "--batch"], env)
    costs_usd = report["phaseTwo"]["judges"][0]["costUsd"]
    assert report["runMode"] == "batch+cached"
    assert costs_usd["batch+cached"]["expected"] == pytest.approx(costs_usd["cached"]["expected"] / 2, abs=1e-6)  # rounded to 6 places


def test_a_dry_run_whose_searches_fail_says_why(query_set, db_copy, tmp_path):
    """`--search-command 'false {query}'`: every search fails; the report says so and gives the first reason
    instead of a bare "15 failed" and $0."""
    args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--no-cache", "--dry-run"]
    result = invoke([*args, "--search-command", "false {query}", "--corpus", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "warning: 15 searches failed" in result.stdout and "the first: " in result.stdout
    report = dry_run([*args[:-1], "--search-command", "false {query}", "--corpus", str(tmp_path)], {})
    assert report["phaseTwo"]["searchFailures"] == 15 and "exit" in report["phaseTwo"]["firstSearchFailure"].lower()


def test_the_offline_judges_dry_run_counts_its_own_cached_labels(query_set, db_copy, tmp_path):
    """The dry run counts the labels the run's judge reuses under its own cache key (the heuristic's embedder in it),
    not another provider's: after one offline run, evaluate and rejudge dry runs find every label, as the runs do."""
    args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--cache", str(tmp_path / "j.sqlite"), "--provider", "offline"]
    assert invoke([*args, "--out-dir", str(tmp_path / "runs")]).exit_code == 0
    run = next((tmp_path / "runs").glob("*.jsonl"))
    judged = sum(e["labelsJudged"] for e in run_lines(tmp_path / "runs") if e["type"] == "evaluation")
    estimated = dry_run(args, {})["phaseTwo"]
    assert estimated["runJudge"]["provider"] == "offline" and estimated["runJudge"]["model"].endswith("+hash-384-v1")
    assert estimated["runJudge"]["labelsToJudge"] == 0 and estimated["runJudge"]["labelsCached"] == judged > 0
    again = invoke([*args, "--out-dir", str(tmp_path / "again")])
    assert sum(e["labelsJudged"] for e in run_lines(tmp_path / "again") if e["type"] == "evaluation") == 0, again.output
    rejudge = ["rejudge", str(run), "--db", str(db_copy), "--cache", str(tmp_path / "j.sqlite"), "--provider", "offline"]
    text = invoke([*rejudge, "--dry-run"]).stdout
    assert f"0 to judge, {judged} in the judgment cache" in text and "why 0" not in text


def test_every_dry_run_names_the_judge_the_run_would_use(query_set, fixtures_root, db_copy, tmp_path):
    """With the offline provider the labels line names the heuristic judge, never a comparison row's model;
    phase one's worst case is given only for a chosen query writer."""
    env = {"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""}
    common = ["--fixtures", str(fixtures_root), "--db", str(db_copy), "--provider", "offline", "--no-cache", "--dry-run"]
    pinned = tmp_path / "pinned"
    pinned.mkdir()
    (pinned / "pinned-queries.json").write_text(query_set.read_text())
    commands = {
        "generate-and-evaluate": ["generate-and-evaluate", *common, "--count", "6"],
        "weekly, a new set": ["weekly", *common, "--results", str(tmp_path / "w"), "--count", "6"],
        "weekly, a pinned set": ["weekly", *common, "--results", str(pinned)],
        "evaluate": ["evaluate", "--queries", str(query_set), *common[2:]],
    }
    for name, args in commands.items():
        result = invoke(args, env)
        assert result.exit_code == 0, (name, result.output)
        labels = [line for line in result.stdout.splitlines() if line.startswith("labels (")]
        assert len(labels) == 1 and labels[0].startswith("labels (offline/offline-heuristic-v1+hash-384-v1): "), (name, labels)
        assert "worst case anthropic" not in result.stdout and "worst case openai" not in result.stdout, name
        judge = json.loads(invoke([*args, "--json"], env).stdout)["phaseTwo"]["runJudge"]
        assert judge["provider"] == "offline" and judge["labelsToJudge"] > 0, (name, judge)


def test_calibrate_dry_run_says_the_trials_of_the_judge_it_would_use(tmp_path):
    from tests.support.calibration_data import write_collection

    data = write_collection(tmp_path / "beir")
    args = ["calibrate", "--beir", str(data), "--provider", "offline", "--db", str(tmp_path / "idx.sqlite"), "--probe-queries", "4"]
    report = dry_run([*args, "--out", str(tmp_path / "cal.json")], {})
    assert report["trials"] == 1  # the heuristic judge's one trial, not the first comparison row's default
    assert not (tmp_path / "cal.json").exists()
