"""CI check of issue 11: ``calibrate`` with the offline judge on a 20-query SciFact slice in under 2 minutes.

The data is read from ``../shared/data/scifact`` beside the checkout (evaluation data only; never copied into
the project), or from ``JUDGE_RUNNER_SCIFACT``; the test is skipped when neither exists. Design for speed:
``--corpus-scope candidates`` indexes only the qrels documents of the 20 queries plus the BM25 top 30 of each
(about 600 abstracts) with MiniLM, so the vector and hybrid systems are real but embedding the whole corpus
(minutes) is avoided; see judge_runner/calibrate/pool.py. The two-minute bound is on the process's CPU time
(load-independent); on an idle two-core machine wall time is below it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import jsonschema
import pytest

from judge_runner.resources import load_schema
from tests.clitools import invoke

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = Path(os.environ.get("JUDGE_RUNNER_SCIFACT") or ROOT.parent / "shared" / "data" / "scifact")


@pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").is_file(), reason=f"SciFact not found at {SCIFACT} (set JUDGE_RUNNER_SCIFACT)")
def test_offline_judge_on_a_scifact_slice_in_under_two_minutes(tmp_path):
    out = tmp_path / "calibration.json"
    started, cpu_started = time.monotonic(), time.process_time()
    result = invoke(["calibrate", "--beir", str(SCIFACT), "--queries-sample", "20", "--seed", "7", "--provider", "offline",
                     "--corpus-scope", "candidates", "--candidates", "30", "--db", str(tmp_path / "idx.sqlite"),
                     "--bootstrap", "200", "--probe-queries", "10", "--out", str(out), "--quiet"],
                    {"JUDGE_RUNNER_EMBEDDER": None})
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_started
    assert result.exit_code == 0, result.output
    # CPU seconds of this process (all its threads), not wall time: the bound must hold on an idle CI machine
    # whatever else shares this one; wall time is in the message
    assert cpu < 120, f"calibrate used {cpu:.0f} CPU seconds ({elapsed:.0f} s wall)"
    document = json.loads(out.read_text())
    jsonschema.validate(document, load_schema("calibration.schema.json"))
    assert document["judge"]["heuristic"] and document["collection"]["queries"] == 20
    figures = document["modes"]["pointwise"]
    kappa = figures["agreement"]["all"]["kappaAt2"]
    assert kappa["value"] is not None and kappa["ci95"][0] <= kappa["value"] <= kappa["ci95"][1]
    systems = figures["systems"]["nDCG@10"]["systems"]
    assert systems["control-ranks11-20"]["human"] < systems["hybrid"]["human"]  # the controls are worse, by the humans
    assert figures["systems"]["nDCG@10"]["kendallTauB"]["value"] is not None
    attacks = document["probes"]["injection"]["attacks"]
    # the fence strips the instruction before the heuristic scores; query stuffing cannot be fenced (issue 14)
    assert attacks["instruction"]["success"]["value"] <= 0.05 and attacks["instruction"]["flagRate"]["value"] == 1
    assert attacks["query-prepended"]["success"]["value"] > 0.3
    assert document["verdict"]["checks"]["injection:instruction"]["status"] == "ok"
