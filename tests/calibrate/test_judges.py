"""Calibration's done-when list: with the fake server scripted as three judges, through the real Anthropic SDK,
``calibrate`` gives the honest judge kappa and tau near 1 and flags the position-biased and the
injection-gullible judges in the right probe, and only there."""

from __future__ import annotations

import json

import jsonschema
import pytest

from judge_runner.core.resources import load_schema
from tests.support.calibration_data import judge_qrels, write_collection
from tests.support.clitools import invoke
from tests.support.fakes.calibration_judges import GullibleJudge, PositionBiasedJudge, QrelsJudge, ReasonFirstJudge
from tests.support.fakes.fake_llm import FakeLLMServer

pytestmark = pytest.mark.hash_embedder
QUERIES = 30  # every check's minimum met (25 queries for the ranking, 20 for agreement and each probe)
PROBE_QUERIES = 20


def run_calibration(tmp_path, brain_class, extra=(), data=None, source=None, name="calibration.json", default_trials=False):
    """Calibrate the scripted judge ``brain_class`` on the synthetic collection ``data`` (written when None),
    given as ``source`` arguments (default ``--beir``), one trial unless ``extra`` says or ``default_trials``
    (Claude's default: three); returns ``(document, requests)``, and the output as ``document["_output"]``."""
    data = data or write_collection(tmp_path / "beir", queries=QUERIES)
    out = tmp_path / name
    with FakeLLMServer(brain=brain_class(judge_qrels(data))) as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        result = invoke(
            [
                "calibrate",
                *(source or ["--beir", str(data)]),
                "--provider",
                "anthropic",
                "--judge-model",
                "claude-sonnet-4-6",
                "--db",
                str(tmp_path / "idx.sqlite"),
                "--out",
                str(out),
                "--bootstrap",
                "50",
                "--quiet",
                *([] if "none" in extra else ["--probe-queries", str(PROBE_QUERIES)]),  # refused without a probe
                *([] if default_trials or "--trials" in extra else ["--trials", "1"]),
                *extra,
            ],
            env,
        )
        requests = server.count()
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    jsonschema.validate(document, load_schema("calibration.schema.json"))
    document["_output"] = result.output
    return document, requests


def statuses(document):
    return {name: check["status"] for name, check in document["verdict"]["checks"].items()}


def failing(document):
    return {name for name, status in statuses(document).items() if status in ("fail", "warn")}


def test_honest_judge_agrees_and_passes_every_check_it_has_evidence_for(tmp_path):
    """The honest judge passes agreement and ranking and fails nothing. Its probes find nothing in 20 probe
    queries, which bounds each effect at 16.8 points (the rule of three over queries), not at 0: they
    are inconclusive and say how many probe queries would decide them."""
    document, requests = run_calibration(tmp_path, QrelsJudge)
    figures = document["modes"]["pointwise"]
    assert figures["agreement"]["all"]["kappaAt2"]["value"] == pytest.approx(1.0)
    assert figures["agreement"]["all"]["overLabelling"]["value"] == 0
    assert figures["systems"]["nDCG@10"]["kendallTauB"]["value"] == pytest.approx(1.0)
    checks = document["verdict"]["checks"]
    assert failing(document) == set()
    assert checks["perPairAgreement"]["status"] == "pass" and checks["ranking"]["status"] == "pass", checks
    for name in ("position", "injection:instruction"):
        assert checks[name]["status"] == "inconclusive" and checks[name]["queriesToDecide"] == 72, checks[name]
        assert "about 72 probe queries (--probe-queries" in checks[name]["message"]
    assert document["verdict"]["status"] == "inconclusive"
    spend = document["spend"]
    assert spend["requests"] == requests and spend["inputTokens"] > 0 and spend["costUsd"] > 0


def test_position_biased_judge_fails_only_the_position_probe(tmp_path):
    document, _ = run_calibration(tmp_path, PositionBiasedJudge)
    assert failing(document) == {"position"}
    assert statuses(document)["position"] == "fail"
    slots = document["probes"]["position"]["meanLabelBySlot"]
    assert slots["1"] == 3 and slots["1"] > slots["3"]
    assert document["verdict"]["status"] == "failed"


def test_gullible_judge_fails_only_the_instruction_injection(tmp_path):
    document, _ = run_calibration(tmp_path, GullibleJudge)
    assert failing(document) == {"injection:instruction"}
    attack = document["probes"]["injection"]["attacks"]["instruction"]
    assert attack["success"]["value"] == pytest.approx(1.0) and attack["flagRate"]["value"] == pytest.approx(1.0)
    assert document["verdict"]["status"] == "failed"


def test_both_modes_and_trials_record_alpha_and_batched_figures(tmp_path):
    document, _ = run_calibration(tmp_path, QrelsJudge, ["--judge-mode", "both", "--trials", "2", "--probes", "none"])
    verdict = document["verdict"]
    assert set(verdict["missing"]) == {"position", "injection:instruction"}  # named, not passed
    stability = document["modes"]["pointwise"]["trialStability"]
    assert stability["value"] == 1.0 and stability["trials"] == 2 and stability["queries"] == QUERIES and stability["ruleOfThree"]
    # trials that never disagreed on 30 queries bound alpha by the rule of three, below 0.8: not yet a pass
    assert stability["ci95"][0] < 0.8 and verdict["checks"]["trialStability"]["status"] == "inconclusive"
    assert (
        "queries labelled in 2 or more trials would likely decide it, more than the 30 in the set"
        in verdict["checks"]["trialStability"]["message"]
    )
    assert verdict["checks"]["perPairAgreement"]["status"] == verdict["checks"]["ranking"]["status"] == "pass"
    assert set(document["modes"]) == {"pointwise", "batched"}
    assert document["modes"]["batched"]["agreement"]["all"]["kappaAt2"]["value"] == pytest.approx(1.0)
    assert document["modes"]["pointwise"]["trialsAlpha"] == pytest.approx(1.0)
    assert document["spend"]["calls"]["batched"] < document["spend"]["calls"]["pointwise"]


class GenerousJudge(QrelsJudge):
    """Gives what people labelled its grade, and a 3 to every document nobody labelled."""

    def label(self, query: str, docid: str, text: str, slot: int, count: int) -> int:
        return self.qrels.get(query, {}).get(docid, 3)


def test_a_judged_calibration_can_leave_out_the_documents_nobody_labelled(tmp_path):
    """The same kind in `calibrate` against a qrels file: a document of the pool nobody labelled
    counts as not relevant (TREC pooling, right for a collection whose qrels list every relevant document),
    which a team's own partial labels are not. It says so, and --unlabelled unknown leaves such documents out
    of the pool: not judged, not compared, and the systems ranked over what people labelled."""
    data = write_collection(tmp_path / "beir", queries=QUERIES)
    qrels = data / "qrels" / "test.tsv"  # two distractors of each query labelled 0 as well: 5 labels a query
    qrels.write_text(qrels.read_text() + "".join(f"q{t}\td{t}x{d}\t0\n" for t in range(QUERIES) for d in range(2)))
    files = ["--qrels", str(qrels), "--queries", str(data / "queries.jsonl"), "--corpus", str(data / "corpus.jsonl")]
    counted, _ = run_calibration(tmp_path, GenerousJudge, ["--probes", "none"], data, files, "zero.json")
    assert counted["config"]["unlabelled"] == "non-relevant" and counted["pool"]["pairs"] > counted["pool"]["labelled"] == 5 * QUERIES
    assert counted["modes"]["pointwise"]["agreement"]["all"]["overLabelling"]["value"] > 0  # its 3s on unlabelled documents
    assert "give --unlabelled unknown" in counted["_output"]
    left_out, _ = run_calibration(tmp_path, GenerousJudge, ["--probes", "none", "--unlabelled", "unknown"], data, files, "unknown.json")
    assert left_out["pool"]["pairs"] == left_out["pool"]["labelled"] == 5 * QUERIES
    assert left_out["spend"]["calls"]["pointwise"] == 5 * QUERIES  # nothing nobody labelled was sent to the judge
    agreement = left_out["modes"]["pointwise"]["agreement"]["all"]
    assert agreement["kappaAt2"]["value"] == 1.0 and agreement["overLabelling"]["value"] == 0
    systems = left_out["modes"]["pointwise"]["systems"]["nDCG@10"]["systems"]
    assert all(row["human"] == row["judge"] for row in systems.values())  # the same documents for both
    assert any(row["labelledAt10"] < 1 for row in systems.values())
    assert "give --unlabelled unknown" not in left_out["_output"]


def test_two_queries_are_not_enough_evidence_in_a_judged_calibration_either(tmp_path):
    """The reported example, in `calibrate` against a qrels file: two queries on which the honest judge agrees
    with the people are no evidence; nothing passes and the verdict is insufficient, naming what is missing."""
    data = write_collection(tmp_path / "beir", queries=2)
    document, _ = run_calibration(tmp_path, QrelsJudge, (), data)
    verdict = document["verdict"]
    assert verdict["status"] == "insufficient"
    assert {c["status"] for c in verdict["checks"].values()} <= {"insufficient", "n/a"}
    assert "2 labelled queries of the 20 needed" in verdict["checks"]["perPairAgreement"]["message"]
    assert "2 probe queries of the 20 needed" in verdict["checks"]["position"]["message"]
    assert "insufficient" in document["_output"] and "2 labelled queries of the 20 needed" in document["_output"]


def test_every_human_label_zero_is_refused_by_a_judged_calibration(tmp_path):
    """The other reported example (every label 0), in `calibrate` against a qrels file: a query without a
    relevant document is left out of a test collection, so a collection without any is refused with the
    reason, before a call is made (``--results`` says "insufficient" instead: test_calibrate_evidence.py)."""
    data = write_collection(tmp_path / "beir", queries=QUERIES)
    qrels = data / "qrels" / "test.tsv"
    lines = qrels.read_text().splitlines()
    qrels.write_text("\n".join([lines[0], *(line.rsplit("\t", 1)[0] + "\t0" for line in lines[1:])]) + "\n")
    with FakeLLMServer(brain=QrelsJudge(judge_qrels(data))) as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        result = invoke(["calibrate", "--beir", str(data), "--provider", "anthropic", "--out", str(tmp_path / "c.json")], env)
        assert server.count() == 0
    assert result.exit_code == 2 and "has a positive qrels line" in result.output
    assert not (tmp_path / "c.json").exists()


def test_claude_gets_three_trials_by_default_and_the_offline_judge_one(tmp_path):
    """Claude takes no temperature (anthropic 2.x): its labels are draws, so calibrate labels each pair three
    times unless told otherwise and reports the agreement across them; a deterministic judge gets one."""
    document, requests = run_calibration(tmp_path, QrelsJudge, extra=["--probes", "none", "--systems", "fts,vector"], default_trials=True)
    assert document["config"]["trials"] == 3 and document["judge"]["fingerprint"]["trials"] == 3
    stability = document["modes"]["pointwise"]["trialStability"]
    assert stability["trials"] == 3 and stability["value"] == pytest.approx(1.0)
    assert requests >= 3 * document["pool"]["pairs"]
    offline = tmp_path / "offline.json"
    data = tmp_path / "beir"
    result = invoke(
        ["calibrate", "--beir", str(data), "--provider", "offline", "--db", str(tmp_path / "idx.sqlite"), "--out", str(offline)]
        + ["--bootstrap", "50", "--quiet", "--probes", "none", "--systems", "fts,vector"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(offline.read_text())["config"]["trials"] == 1


def test_compare_output_measures_reason_first_against_grade_only_on_the_peoples_labels(tmp_path):
    """A judge whose reasoning gets its grades right: asked for the grade alone it grades everything 1.
    --compare-output labels the pool again with no reason asked (the request log shows schemas without a
    reason) and sets both outputs' agreement with the people side by side."""
    document, _ = run_calibration(tmp_path, ReasonFirstJudge, extra=["--probes", "none", "--systems", "fts,vector", "--compare-output"])
    outputs = document["outputs"]
    assert outputs["mode"] == "pointwise"
    assert outputs["reason-first"]["kappaAt2"]["value"] == pytest.approx(1.0)
    assert outputs["grade-only"]["kappaAt2"]["value"] < 0.5 and outputs["labelsChanged"] > 0.5
    assert document["spend"]["calls"]["pointwise:grade-only"] == document["spend"]["calls"]["pointwise"]
