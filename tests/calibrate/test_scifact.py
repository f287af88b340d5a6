"""CI check of calibration: ``calibrate`` with the offline judge on a 20-query SciFact slice in under 2 minutes.

The data is read from ``../shared/data/scifact`` beside the checkout (evaluation data only; never copied into
the project), or from ``JUDGE_RUNNER_SCIFACT``; the test is skipped when neither exists. Design for speed:
``--corpus-scope candidates`` indexes only the qrels documents of the 20 queries plus the BM25 top 15 of each
(about 300 abstracts) with MiniLM, so the vector and hybrid systems are real but embedding the whole corpus
(minutes) is avoided (see judge_runner/calibrate/pool.py), and the pool takes each system's top 5. The
two-minute bound is asserted when the machine is not overloaded (load average at most 1.5 per core): MiniLM's
CPU time grows with contention, so a shared machine cannot tell.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import jsonschema
import pytest

from judge_runner.core.resources import load_schema
from tests.support.clitools import invoke

ROOT = Path(__file__).resolve().parents[2]
SCIFACT = Path(os.environ.get("JUDGE_RUNNER_SCIFACT") or ROOT.parent / "shared" / "data" / "scifact")


@pytest.mark.minilm  # the vector and hybrid systems index with the real model
@pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").is_file(), reason=f"SciFact not found at {SCIFACT} (set JUDGE_RUNNER_SCIFACT)")
def test_offline_judge_on_a_scifact_slice_in_under_two_minutes(tmp_path):
    out = tmp_path / "calibration.json"
    started = time.monotonic()
    result = invoke(
        [
            "calibrate",
            "--beir",
            str(SCIFACT),
            "--queries-sample",
            "20",
            "--seed",
            "7",
            "--provider",
            "offline",
            "--corpus-scope",
            "candidates",
            "--candidates",
            "15",
            "--pool-depth",
            "5",
            "--db",
            str(tmp_path / "idx.sqlite"),
            "--bootstrap",
            "200",
            "--probe-queries",
            "5",
            "--out",
            str(out),
            "--quiet",
        ],
        {"JUDGE_RUNNER_EMBEDDER": None},
    )
    elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.output
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    if load <= 1.5:  # the bound is for a machine not shared with other jobs; an overloaded one still checks the figures
        assert elapsed < 120, f"calibrate took {elapsed:.0f} s"
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
    # the fence strips the instruction before the heuristic scores; query stuffing cannot be fenced
    assert attacks["instruction"]["success"]["value"] <= 0.05 and attacks["instruction"]["flagRate"]["value"] == 1
    assert attacks["query-prepended"]["success"]["value"] > 0.3
    # 5 probe queries are below the 20 a probe needs: no verdict either way, and it says why
    instruction = document["verdict"]["checks"]["injection:instruction"]
    assert instruction["status"] == "insufficient" and "5 probe queries of the 20 needed" in instruction["message"]
    checks = document["verdict"]["checks"]
    assert checks["perPairAgreement"]["status"] in ("pass", "fail", "inconclusive")  # 20 queries: enough to read kappa
    assert checks["ranking"]["status"] == "insufficient" and "20 labelled queries of the 25 needed" in checks["ranking"]["message"]
