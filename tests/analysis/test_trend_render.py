"""trend readable at 100 columns: the compact default view shows every score digit and
whole run ids; --wide (or a format) gives every column, never folded."""

from __future__ import annotations

import json

import pytest

from judge_runner.analysis.trend import build_trend
from tests.support.clitools import invoke
from tests.support.trend_runs import noisy, write_run

pytestmark = pytest.mark.hash_embedder


@pytest.fixture
def results(tmp_path):
    """The widest case: run ids with milliseconds (a name clash), a compare run of three long-named
    systems, a pinned baseline, a failed run, a partial run."""
    write_run(tmp_path, "20261101T100000.123Z", noisy(0.61, 1), day=1)
    write_run(tmp_path, "20261102T100000.456Z", noisy(0.72, 2), day=2)
    path = write_run(tmp_path, "20261103T100000.789Z", noisy(0.66, 3) + noisy(0.50, 4) + noisy(0.80, 5), day=3)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    names = ["hybrid-reference", "lexical-bm25-only", "semantic-vectors"]
    evaluations = [line for line in lines if line["type"] == "evaluation"]
    for i, line in enumerate(evaluations):
        line["system"], line["queryId"] = names[i // 20], f"q{i % 20:02d}"
    lines[-1]["comparison"] = {
        "reference": names[0],
        "minEffect": 0.03,
        "systems": [{"name": n, "evaluated": 20, "failed": 0} for n in names],
        "differences": [
            {
                "system": n,
                "against": names[0],
                "column": c,
                "kind": "score",
                "delta": -0.123,
                "ci95": [-0.2, -0.05],
                "n": 20,
                "verdict": "regression",
            }
            for n in names[1:]
            for c in ("overall", "nDCG@10")
        ],
    }
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    write_run(tmp_path, "20261104T100000.000Z", [], day=4, errors=20)
    write_run(tmp_path, "20261105T100000.000Z", noisy(0.4, 6), day=5, summary=False)
    assert invoke(["baseline", "set", "20261101T100000.123Z", "--results", str(tmp_path)]).exit_code == 0
    return tmp_path


def expected_cells(folder) -> tuple[set[str], list[str]]:
    """Every score figure the rows hold (three decimals) and every run id."""
    figures, ids = set(), []
    for group in build_trend(folder).groups:
        for row in group["runs"]:
            ids.append(row["runId"])
            figures |= {f"{row['means'][c]:.3f}" for c in ("overall", "nDCG@10", "R@10") if row["means"][c] is not None}
    return figures, ids


def test_the_compact_view_at_100_columns_shows_every_score_digit_and_whole_run_ids(results):
    result = invoke(["trend", str(results)], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    table = result.stdout
    lines = table.splitlines()
    rows = [line for line in lines if line.startswith(("2026", "└ "))]
    assert len(rows) == 5 + 3  # five runs; the compare run's reference system under its id, and its two other systems
    assert all(len(line) <= 100 for line in lines if not line.startswith("  ")), [len(x) for x in lines]  # the notes may wrap
    assert "…" not in table and "0.…" not in table
    figures, ids = expected_cells(results)
    cells = {cell for line in rows for cell in line.split()}
    assert figures <= cells, figures - cells
    assert all(run_id in cells for run_id in ids)
    assert "Δ vs baseline" in table
    for name in ("hybrid-reference", "lexical-bm25-only", "semantic-vectors"):
        assert f"└ {name} " in table, name
    assert "FAILED: 20 of 20 queries failed" in table


def test_a_pipe_without_columns_gets_the_same_whole_view(results):
    result = invoke(["trend", str(results)], env={"COLUMNS": None})
    figures, ids = expected_cells(results)
    assert "…" not in result.stdout and all(run_id in result.stdout for run_id in ids) and all(f in result.stdout for f in figures)


def test_wide_and_the_formats_hold_every_column_unfolded(results):
    wide = invoke(["trend", str(results), "--wide"], env={"COLUMNS": "100"})
    assert wide.exit_code == 0 and "…" not in wide.stdout
    for header in ("rel", "rank", "cov", "snip", "abstain", "Δprev overall nDCG", "Δbaseline", "USD/judged q", "prices"):
        assert header in wide.stdout, header
    figures, _ = expected_cells(results)
    assert all(f in wide.stdout for f in figures)
    csv = invoke(["trend", str(results), "--format", "csv"]).stdout.splitlines()[0]
    assert "rel" in csv and "USD/judged q" in csv
