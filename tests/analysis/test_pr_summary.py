"""The latest run as Markdown for a pull request (analysis/pr_summary.py, ``report --format github``)."""

from __future__ import annotations

import json

import pytest

from judge_runner.analysis.pr_summary import github_summary
from judge_runner.analysis.trend import build_trend
from judge_runner.app.history import ci_report_url
from tests.support.clitools import invoke
from tests.support.trend_runs import noisy, write_run

pytestmark = pytest.mark.hash_embedder

BASE = noisy(0.70, 5)


def with_results(path, sources) -> None:
    """Give each evaluation line of ``path`` one result, ``sources(i)`` for its i-th query."""
    lines = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]
    number = 0
    for line in lines:
        if line["type"] == "evaluation":
            line["results"] = [{"rank": 1, "source": sources(number), "score": 1.0, "relevance": 2, "relevant": True}]
            number += 1
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def summary_of(folder, url=None) -> str:
    return github_summary(build_trend(folder), folder, url)


def test_a_regression_is_named_with_its_interval_and_the_gate(tmp_path):
    with_results(write_run(tmp_path, "r1", BASE, day=1), lambda i: f"doc{i}.md")
    with_results(write_run(tmp_path, "r2", [v - 0.1 for v in BASE], day=2), lambda i: f"other{i}.md")
    text = summary_of(tmp_path, "https://ci.example/run/1")
    assert "Run `r2`, judge anthropic/claude-sonnet-4-6, against the previous run `r1`." in text
    assert "| built-in hybrid search | 20 | " in text and "overall ▼-0.100" in text
    assert "**Regression**: overall -0.100, 95% CI [-0.100" in text and "Gated by `trend --fail-on-regression`: overall" in text
    assert "**Cost**: $0.1200" in text and "**Full report**: [the full report](https://ci.example/run/1)" in text


def test_the_same_results_are_no_change_even_when_their_labels_moved(tmp_path):
    with_results(write_run(tmp_path, "r1", BASE, day=1), lambda i: f"doc{i}.md")
    with_results(write_run(tmp_path, "r2", BASE, day=2), lambda i: f"doc{i}.md")
    assert "**No change**: the search returned the same results as run `r1` on all 20 queries." in summary_of(tmp_path)
    with_results(write_run(tmp_path, "r3", [v - 0.1 for v in BASE], day=3), lambda i: f"doc{i}.md")
    text = summary_of(tmp_path)
    assert "**No change**" in text and "Their labels changed, not the search: overall -0.100" in text and "Regression" not in text


def test_a_run_that_returned_other_results_is_not_no_change_and_a_first_run_says_so(tmp_path):
    with_results(write_run(tmp_path, "r1", BASE, day=1), lambda i: f"doc{i}.md")
    assert "**First run** of this judge" in summary_of(tmp_path)
    with_results(write_run(tmp_path, "r2", BASE, day=2), lambda i: f"doc{i}.md" if i else "moved.md")
    text = summary_of(tmp_path)
    assert "No change" not in text and "**Within noise**" in text


def test_values_from_run_files_are_literal_markdown(tmp_path):
    write_run(tmp_path, "r1", BASE, day=1, judge_model="m|*[x](y)")
    text = summary_of(tmp_path)
    assert "anthropic/m\\|\\*\\[x\\](y)" in text and "[x](y)" not in text


def test_the_command_prints_it_and_refuses_a_folder_without_a_complete_run(tmp_path):
    empty = invoke(["report", str(tmp_path), "--format", "github"])
    assert empty.exit_code == 2 and "no summary: no complete run" in empty.output
    write_run(tmp_path, "r1", BASE, day=1)
    shown = invoke(
        ["report", str(tmp_path), "--format", "github"],
        {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "9"},
    )
    assert shown.exit_code == 0 and shown.output.startswith("## Search quality")
    assert "(https://github.com/o/r/actions/runs/9)" in shown.output
    assert not (tmp_path.parent / "reports").exists() and not list(tmp_path.glob("report-*"))


def test_the_ci_run_page_comes_from_github_actions_variables():
    assert (
        ci_report_url({"GITHUB_SERVER_URL": "https://g", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "1"})
        == "https://g/o/r/actions/runs/1"
    )
    assert ci_report_url({"GITHUB_REPOSITORY": "o/r"}) is None


def test_a_search_reconfigured_stays_a_regression_and_says_what_changed(tmp_path):
    with_results(write_run(tmp_path, "r1", BASE, day=1, config={"searchMode": "hybrid"}), lambda i: f"doc{i}.md")
    with_results(write_run(tmp_path, "r2", [v - 0.2 for v in BASE], day=2, config={"searchMode": "fts"}), lambda i: f"other{i}.md")
    text = invoke(["report", str(tmp_path), "--format", "github"]).output
    assert "**Regression**: overall -0.200, 95% CI [-0.200, -0.200] (regression)" in text
    assert "What changed since `r1`: system under test: built-in hybrid search -> built-in fts search." in text


def test_each_mark_has_one_meaning_given_where_it_is_shown(tmp_path):
    few, failed = tmp_path / "few", tmp_path / "failed"
    few.mkdir(), failed.mkdir()
    write_run(few, "r1", [0.5, 0.6, 0.7], day=1)
    write_run(few, "r2", [0.4, 0.5, 0.6], day=2)
    write_run(failed, "r1", BASE, day=1)
    write_run(failed, "r2", [v + 0.05 for v in BASE][:15], day=2, errors=5, error_ids=[f"q{i}" for i in range(15, 20)])
    too_few = invoke(["report", str(few), "--format", "github"]).output
    assert "overall ?-0.100" in too_few and "Marks: ? too few queries to tell." in too_few
    could_turn = invoke(["report", str(failed), "--format", "github"]).output
    assert "overall !-0.127" in could_turn and "Marks: ! cannot tell: failed queries could turn it." in could_turn
    assert "No change" not in could_turn and "Within noise" not in could_turn  # five queries answered before failed now
    assert "**Cannot tell**: this run failed 5 of 20 queries (5 on-topic); its failed queries could turn the change." in could_turn
    assert "?" not in could_turn
    table = invoke(["trend", str(failed)], {"COLUMNS": "200"}).output
    assert "!-0.127" in table and "marks: ! cannot tell: failed queries could turn it" in table
    help_text = " ".join(invoke(["trend", "--help"]).output.split())
    assert "? too few queries to tell; ! cannot tell: failed queries could turn it" in help_text
