"""What trend concludes from run files with known differences: an improvement, a regression, noise
only, a partial run, a run from another judge model, a resumed run, files that are not runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from judge_runner.analysis.trend import build_trend, compare, read_runs, set_baseline
from tests.support.clitools import invoke
from tests.support.trend_runs import N, noisy, write_run

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder


def verdict(folder: Path, old: str, new: str, column="overall") -> str:
    runs = {r.run_id: r for r in read_runs(folder)[0]}
    return compare(runs[old], runs[new], column).verdict


def test_improvement_regression_and_noise(tmp_path):
    base = noisy(0.60, 1)
    write_run(tmp_path, "r1", base, day=1)
    write_run(tmp_path, "r2", [min(1, v + 0.10) for v in base], day=2)  # same query set, +0.10 each
    write_run(tmp_path, "r3", [max(0, v - 0.08) for v in base], day=3)  # -0.08 each
    write_run(tmp_path, "r4", [v + d for v, d in zip(base, np.random.default_rng(7).normal(0, 0.01, N))], day=4)  # noise only
    assert verdict(tmp_path, "r1", "r2") == "improvement"
    assert verdict(tmp_path, "r1", "r3") == "regression"
    assert verdict(tmp_path, "r1", "r4") == "within noise"


def test_a_real_but_tiny_change_is_not_a_regression(tmp_path):
    base = noisy(0.60, 2)
    write_run(tmp_path, "r1", base, day=1)
    write_run(tmp_path, "r2", [v - 0.01 for v in base], day=2)  # beyond noise (every query lower) but under --min-effect
    runs = {r.run_id: r for r in read_runs(tmp_path)[0]}
    result = compare(runs["r1"], runs["r2"], "overall", min_effect=0.03)
    assert result.high < 0 and result.verdict == "within noise"


def test_different_query_sets_are_compared_unpaired(tmp_path):
    write_run(tmp_path, "r1", noisy(0.55, 3), query_set="a" * 64, day=1)
    write_run(tmp_path, "r2", noisy(0.80, 4), query_set="b" * 64, day=2)
    runs = {r.run_id: r for r in read_runs(tmp_path)[0]}
    result = compare(runs["r1"], runs["r2"], "overall")
    assert result.paired is False and result.verdict == "improvement"
    assert result.low < result.delta < result.high


def test_too_few_queries_says_so(tmp_path):
    write_run(tmp_path, "r1", [0.5, 0.6, 0.7], day=1)
    write_run(tmp_path, "r2", [0.1, 0.2, 0.3], day=2)
    assert verdict(tmp_path, "r1", "r2") == "too few queries"


def test_partial_runs_and_other_judges_are_not_compared(tmp_path):
    write_run(tmp_path, "r1", noisy(0.6, 5), day=1)
    write_run(tmp_path, "r2", noisy(0.3, 6), day=2, summary=False)  # killed: no summary
    write_run(tmp_path, "r3", noisy(0.9, 7), judge_model="gpt-4.1", day=3)  # another judge
    write_run(tmp_path, "r4", noisy(0.6, 8), day=4)
    trend = build_trend(tmp_path)
    assert len(trend.groups) == 2
    claude = next(g for g in trend.groups if "claude" in g["judge"])
    assert "another provider, model or judge prompt" in claude["reason"]
    rows = {r["runId"]: r for r in claude["runs"]}
    assert rows["r2"]["partial"] is True and "vsPrevious" not in rows["r2"]
    assert rows["r4"]["vsPrevious"]["runId"] == "r1"  # compared with r1, skipping the partial run and the other judge
    gpt = next(g for g in trend.groups if "gpt" in g["judge"])
    assert "vsPrevious" not in gpt["runs"][0]


def test_what_changed_is_listed_not_a_barrier(tmp_path):
    write_run(tmp_path, "r1", noisy(0.6, 9), day=1, search={"rrf_k": 60})
    write_run(tmp_path, "r2", noisy(0.6, 9), day=2, search={"rrf_k": 30})
    row = build_trend(tmp_path).groups[0]["runs"][1]
    assert row["vsPrevious"]["changes"] == ["search config: rrf_k 60 -> 30"]
    assert row["vsPrevious"]["comparisons"]["overall"]["verdict"] == "within noise"


def test_robust_reading(tmp_path):
    write_run(tmp_path, "r1", noisy(0.6, 10), day=1, extra_lines='{"type": "evaluation", "runId": "r1", "queryId": "torn')
    (tmp_path / "notes.jsonl").write_text('{"hello": "world"}\n')
    # U+2028 inside a string is not a line break
    path = write_run(tmp_path, "r2", noisy(0.6, 11), day=2)
    text = path.read_text().replace("query 3", "query\u2028three")
    path.write_text(text)
    # a resumed run: the second file with the same runId and more evaluations wins
    write_run(tmp_path, "r3", noisy(0.6, 12)[:10], day=3, summary=False)
    resumed = write_run(tmp_path, "r3-resumed", noisy(0.6, 12), day=3)
    resumed.write_text(resumed.read_text().replace('"r3-resumed"', '"r3"'))
    runs, warnings = read_runs(tmp_path)
    assert [r.run_id for r in runs] == ["r1", "r2", "r3"]
    assert len(runs[0].evaluations) == N  # the torn last line is ignored
    assert any(e.query == "query\u2028three" for e in runs[1].evaluations)
    assert len(runs[2].evaluations) == N and not runs[2].partial
    assert warnings == ["skipped notes.jsonl: not a judge-runner run file"]


def test_legacy_format_is_read(tmp_path):
    lines = [
        {
            "type": "query_evaluation",
            "query": "q",
            "queryId": f"q{i}",
            "scores": {"relevance": 0.5, "ranking": 0.5, "coverage": 0.5, "snippetQuality": 0.5},
        }
        for i in range(6)
    ]
    lines.append({"type": "run_summary", "model": "claude-3-5-sonnet", "timestamp": "2025-01-01T00:00:00Z"})
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    runs, _ = read_runs(tmp_path)
    assert runs[0].legacy and runs[0].mean("overall") == pytest.approx(0.5) and not runs[0].partial


def test_cli_fail_on_regression_against_baseline(tmp_path):
    base = noisy(0.6, 13)
    write_run(tmp_path, "r1", base, day=1)
    write_run(tmp_path, "r2", [min(1, v + 0.1) for v in base], day=2)
    write_run(tmp_path, "r3", [max(0, v - 0.02) for v in base], ndcg=[max(0, v - 0.02) for v in base], day=3)
    # against the previous run (r2) the latest is a clear regression
    result = invoke(["trend", str(tmp_path), "--fail-on-regression"])
    assert result.exit_code == 1 and "regression" in result.output and "r2" in result.output
    # pinned to r1, the latest is within 0.03 of it: not a regression
    assert invoke(["baseline", "set", "r1", "--results", str(tmp_path)]).exit_code == 0
    assert json.loads((tmp_path / "baseline.json").read_text())["runId"] == "r1"
    result = invoke(["trend", str(tmp_path), "--fail-on-regression", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["baseline"] == "r1" and data["latest"]["against"] == "r1" and data["latest"]["regression"] is False


def test_cli_formats_query_history_and_plot(tmp_path):
    write_run(tmp_path, "r1", noisy(0.6, 14), day=1)
    write_run(tmp_path, "r2", noisy(0.7, 15), day=2)
    assert set_baseline(tmp_path, "latest").run_id == "r2"
    csv_out = invoke(["trend", str(tmp_path), "--format", "csv"]).output.splitlines()
    assert csv_out[0].startswith("group,date,run") and len(csv_out) == 3
    md = invoke(["trend", str(tmp_path), "--format", "markdown"]).output
    assert "| date | run |" in md
    table = invoke(["trend", str(tmp_path), "--plot", str(tmp_path / "trend.png")])
    assert table.exit_code == 0 and "r2" in table.output
    png = (tmp_path / "trend.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    history = invoke(["trend", str(tmp_path), "--query", "q03", "--format", "json"])
    assert [h["runId"] for h in json.loads(history.stdout)] == ["r1", "r2"]
    assert invoke(["trend", str(tmp_path), "--query", "nope"]).exit_code == 2
    assert invoke(["baseline", "set", "nope", "--results", str(tmp_path)]).exit_code == 2


def test_query_history_shows_the_text_where_the_query_set_changed(tmp_path):
    old = write_run(tmp_path, "r1", noisy(0.6, 16), day=1)
    lines = [json.loads(line) for line in old.read_text(encoding="utf-8").splitlines()]
    for line in lines:  # r1 asked another query set: its q01 is another query, its q02 the same
        if line.get("queryId") == "q01":
            line["query"] = "devDependencies " + line["query"]
    old.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    write_run(tmp_path, "r2", noisy(0.6, 17), day=2)
    write_run(tmp_path, "r3", noisy(0.6, 18), day=3)
    table = invoke(["trend", str(tmp_path), "--query", "q01"])
    assert table.exit_code == 0, table.output
    assert "q01 names 2 different queries" in table.stderr and "1 of 3 runs" in table.stderr
    shown = table.stdout.splitlines()
    assert shown[0] == "query: 'devDependencies query 1'" and shown[2] == "query: 'query 1' (another query under this id)"
    assert len(shown) == 5  # r3 asks r2's query again: no third text line
    data = json.loads(invoke(["trend", str(tmp_path), "--query", "q01", "--format", "json"]).stdout)
    assert [(h["query"], h["queryChanged"]) for h in data] == [("devDependencies query 1", False), ("query 1", True), ("query 1", False)]
    md = invoke(["trend", str(tmp_path), "--query", "q01", "--format", "markdown"])
    rows = md.stdout.splitlines()
    assert rows[0].startswith("| date | run | query |") and "devDependencies query 1" in rows[2] and "| query 1 |" in rows[3]
    assert "″" in rows[4] and "q01 names 2 different queries" in md.stderr
    same = invoke(["trend", str(tmp_path), "--query", "q02"])
    assert same.exit_code == 0 and "different queries" not in same.stderr


def test_a_run_that_judged_nothing_is_never_the_baseline_and_is_the_latest_as_failed(tmp_path):
    base = noisy(0.6, 30)
    write_run(tmp_path, "r1", base, day=1)
    write_run(tmp_path, "r2", [max(0, v - 0.1) for v in base], day=2)
    write_run(tmp_path, "r3", [], day=3)  # budget spent in phase one: run_start and summary, nothing judged
    assert set_baseline(tmp_path, "latest").run_id == "r2"
    trend = build_trend(tmp_path)
    # regression: a bad week is the latest run, shown as failed (it used to hide behind r2)
    assert trend.latest_verdict["runId"] == "r3" and trend.latest_verdict["failed"] is True
    rows = {r["runId"]: r for r in trend.groups[0]["runs"]}
    assert rows["r3"]["comparable"] is False and "vsPrevious" not in rows["r3"]
    table = invoke(["trend", str(tmp_path)]).output
    assert "FAILED: no query was judged" in table


def test_too_few_queries_is_marked_not_called_noise(tmp_path):
    write_run(tmp_path, "r1", [0.5, 0.6, 0.7], day=1)
    write_run(tmp_path, "r2", [0.5, 0.6, 0.7], day=2)
    out = invoke(["trend", str(tmp_path), "--format", "csv"]).output
    assert "?+0.000" in out and "·" not in out


def test_stray_lines_are_not_runs(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"type": "run_start"}\n')
    (tmp_path / "e.jsonl").write_text('{"type": "summary", "runId": 5}\n')
    write_run(tmp_path, "r1", noisy(0.6, 31), day=1)
    runs, warnings = read_runs(tmp_path)
    assert [r.run_id for r in runs] == ["r1"]
    assert sorted(warnings) == ["skipped d.jsonl: not a judge-runner run file", "skipped e.jsonl: not a judge-runner run file"]


def test_table_is_not_truncated_in_a_pipe(tmp_path):
    write_run(tmp_path, "20261130T011656Z", noisy(0.6, 32), day=1)
    out = invoke(["trend", str(tmp_path)]).output
    assert "20261130T011656Z" in out and "…" not in out


def _rewrite(path: Path, edit) -> None:
    """Apply ``edit(line)`` to every JSON line of a run file."""
    lines = [json.loads(raw) for raw in path.read_text(encoding="utf-8").splitlines()]
    path.write_text("".join(json.dumps(edit(line)) + "\n" for line in lines), encoding="utf-8")


def test_cost_per_judged_query_in_every_trend_format(tmp_path):
    """New runs show their summary's costPerJudgedQueryUsd (null: blank); an older format-2 file gets the
    figure from its evaluation lines (only queries that made a judge call count); a format-1 file, whose
    judge had no cache, the summary's costUsd over its evaluated queries."""
    write_run(tmp_path, "r1", noisy(0.6, 40), day=1)  # format 1, costUsd 0.12 over 20 queries

    def format_two(cost_field: bool, value: float | None = None):
        def edit(line: dict) -> dict:
            if line["type"] == "run_start":
                line["formatVersion"] = 2
            if line["type"] == "evaluation":
                cached = int(line["queryId"][1:]) % 2 == 0  # every other query wholly from the judgment cache
                line.update(
                    labelsJudged=0 if cached else 10,
                    listCached=cached,
                    usage={"inputTokens": 9, "outputTokens": 1, "costUsd": 0 if cached else 0.003},
                )
            if line["type"] == "summary" and cost_field:
                line["costPerJudgedQueryUsd"] = value
            return line

        return edit

    _rewrite(write_run(tmp_path, "r2", noisy(0.6, 41), day=2), format_two(False))
    _rewrite(write_run(tmp_path, "r3", noisy(0.6, 42), day=3), format_two(True, 0.0042))
    _rewrite(write_run(tmp_path, "r4", noisy(0.6, 43), day=4), format_two(True, None))
    rows = {row["runId"]: row for row in build_trend(tmp_path).groups[0]["runs"]}
    assert rows["r1"]["costPerJudgedQueryUsd"] == pytest.approx(0.006)
    assert rows["r2"]["costPerJudgedQueryUsd"] == pytest.approx(0.003)  # 10 judged queries at 0.003, 10 free ones left out
    assert rows["r3"]["costPerJudgedQueryUsd"] == 0.0042 and rows["r4"]["costPerJudgedQueryUsd"] is None
    data = json.loads(invoke(["trend", str(tmp_path), "--format", "json"]).output)
    assert [r["costPerJudgedQueryUsd"] for r in data["groups"][0]["runs"]] == [0.006, 0.003, 0.0042, None]
    csv_out = invoke(["trend", str(tmp_path), "--format", "csv"]).output.splitlines()
    column = csv_out[0].split(",").index("USD/judged q")
    assert [line.split(",")[column] for line in csv_out[1:]] == ["$0.0060", "$0.0030", "$0.0042", "-"]
    md = invoke(["trend", str(tmp_path), "--format", "markdown"]).output
    assert "USD/judged q" in md and "$0.0042" in md
    table = invoke(["trend", str(tmp_path), "--wide"]).output  # a column of the wide view (the compact one fits 100 columns)
    assert "USD/judged q" in table and "$0.0030" in table


def test_trend_marks_runs_whose_judge_calls_went_through_a_batch_api(tmp_path):
    """A --batch run pays half price: trend says which runs did ("prices" column, JSON ``batch``), from the
    run's config or its batch lines, so a cheaper week is not read as a cheaper judge."""
    write_run(tmp_path, "r1", noisy(0.6, 40), day=1)

    def batch_config(line: dict) -> dict:
        if line["type"] == "run_start":
            line["config"] = {**(line.get("config") or {}), "batch": True}
        return line

    _rewrite(write_run(tmp_path, "r2", noisy(0.6, 41), day=2), batch_config)
    r3 = write_run(tmp_path, "r3", noisy(0.6, 42), day=3)
    lines = r3.read_text(encoding="utf-8").splitlines()
    batch = {"type": "batch", "runId": "r3", "timestamp": "2026-11-03T00:00:00Z", "batchId": "msgbatch_1", "provider": "anthropic"}
    r3.write_text("\n".join([lines[0], json.dumps({**batch, "requests": 1, "customIds": ["jr-1"]}), *lines[1:]]) + "\n", encoding="utf-8")
    rows = {row["runId"]: row for row in build_trend(tmp_path).groups[0]["runs"]}
    assert [rows[r]["batch"] for r in ("r1", "r2", "r3")] == [False, True, True]
    csv_out = invoke(["trend", str(tmp_path), "--format", "csv"]).output.splitlines()
    column = csv_out[0].split(",").index("prices")
    assert [line.split(",")[column] for line in csv_out[1:]] == ["sync", "batch", "batch"]


def test_trend_table_into_a_pipe_whose_reader_went_away_keeps_trends_exit_code(tmp_path):
    """`judge-runner trend DIR | head`: the rich table goes through the Printer like every other line, so a
    reader that goes away silences it; trend still exits with its own code (0), not click's 1 for a broken
    pipe (which reads as a regression or a failed gate)."""
    import os
    import subprocess
    import sys

    write_run(tmp_path, "r1", noisy(0.6, 40), day=1)
    write_run(tmp_path, "r2", noisy(0.6, 41), day=2)
    code = "import sys; from judge_runner.cli.app import entry; sys.argv[0] = 'judge-runner'; entry()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "trend", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ}
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, stderr
    assert "Traceback" not in stderr
    table = invoke(["trend", str(tmp_path)]).output
    assert "judge " in table and "r2" in table and "overall" in table  # the table itself still prints
