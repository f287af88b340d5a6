"""calibrate's pure parts: reading collections and runs, pooling, agreement figures, verdict thresholds,
attacks, and finding the latest calibration of a judge."""

from __future__ import annotations

import json
import math
import random

import pytest

from judge_runner.calibrate import verdicts as v
from judge_runner.calibrate.data import CalibrationQuery, Collection, is_graded, load_files, read_qrels, sample_queries
from judge_runner.calibrate.labeling import ShownDoc, injection_flag
from judge_runner.calibrate.output import calibration_for_provenance, calibration_line, latest_calibration
from judge_runner.calibrate.pool import build_pool, control_runs, read_run
from judge_runner.calibrate.probes import ATTACKS, attack, padded
from judge_runner.calibrate.stats import agreement, bootstrap_interval, per_query_metrics, spearman
from judge_runner.core.failures import UsageError
from judge_runner.judging.fingerprint import legacy_key
from tests.support.clitools import invoke


def test_qrels_beir_and_trec_and_binary_rescaling(tmp_path):
    beir = tmp_path / "q.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\n1\ta\t1\n1\tb\t0\n2\tc\t1\n")
    trec = tmp_path / "q.qrels"
    trec.write_text("1 0 a 2\n1 0 b 0\n1 0 c 1\n")
    assert read_qrels(beir) == {"1": {"a": 3, "b": 0}, "2": {"c": 3}}  # binary: 1 -> 3
    assert read_qrels(beir, {1: 1}) == {"1": {"a": 1, "b": 0}, "2": {"c": 1}}  # 0/1 labels already on 0-3
    assert read_qrels(trec) == {"1": {"a": 2, "b": 0, "c": 1}}  # graded: kept
    assert not is_graded(read_qrels(beir)) and is_graded(read_qrels(trec))
    bad = tmp_path / "bad.tsv"
    bad.write_text("1 a\n")
    with pytest.raises(UsageError, match="line 1|:1:"):
        read_qrels(bad)
    five = tmp_path / "five.qrels"
    five.write_text("1 0 a 2\n1 0 b 5\n")
    with pytest.raises(UsageError, match=r"grade 5 of 1 b is outside 0-3, the judge's scale .* --rescale 5=3"):
        read_qrels(five)  # before: capped at 3 without a word
    assert read_qrels(five, {5: 3}) == {"1": {"a": 2, "b": 3}}


def test_queries_without_qrels_are_dropped_and_sampling_is_seeded(tmp_path):
    (tmp_path / "q.tsv").write_text("1\ta\t1\n2\tb\t1\n3\tc\t1\n9\tz\t1\n")
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps({"_id": str(i), "text": f"query {i}"}) for i in range(1, 6)))
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"_id": "a", "title": "", "text": "x"}))
    collection = load_files(tmp_path / "q.tsv", tmp_path / "queries.jsonl", tmp_path / "corpus.jsonl")
    assert sorted(collection.queries) == ["1", "2", "3"]
    first, again = sample_queries(collection, 2, 5), sample_queries(collection, 2, 5)
    assert first == again and len(first) == 2


def test_run_file_sorted_by_score_and_controls(tmp_path):
    run = tmp_path / "r.trec"
    run.write_text("1 Q0 a 1 0.5 t\n1 Q0 b 2 0.9 t\n2 Q0 c 1 1.0 t\n")
    assert read_run(run, ["1"]) == {"1": ["b", "a"]}
    with pytest.raises(UsageError):
        read_run(run, ["7"])
    ranked = {"1": [f"d{i}" for i in range(25)]}
    controls = control_runs(ranked)
    assert controls["control-ranks11-20"]["1"] == [f"d{i}" for i in range(10, 20)]
    assert controls["control-reversed"]["1"] == [f"d{i}" for i in range(9, -1, -1)]


def test_pool_unions_top_k_and_adds_every_judged_document(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"_id": d, "title": d, "text": d}) for d in "abcdef"))
    collection = Collection({"1": "q"}, {"1": {"e": 3}}, corpus, False)
    pool = build_pool({"s1": {"1": ["a", "b", "c"]}, "s2": {"1": ["b", "d", "zz"]}}, collection, [CalibrationQuery("1", "q")], 2)
    entries = {e.docid: e for e in pool["1"]}
    assert set(entries) == {"a", "b", "d", "e"}  # top 2 of each (zz is not in the corpus anyway) plus the judged e
    assert entries["b"].systems == ("s1", "s2") and entries["e"].systems == () and not entries["e"].retrieved
    assert entries["e"].human == 3 and entries["a"].human == 0


def test_agreement_of_a_perfect_and_of_an_over_labelling_judge():
    perfect = [(q, h, h) for q in "abc" for h in (0, 0, 3, 0)]
    figures = agreement(perfect, graded=False, resamples=50, seed=1)
    assert figures["kappaAt2"]["value"] == 1.0 and figures["overLabelling"]["value"] == 0
    assert figures["kappaLinear"] == {"value": None, "ci95": None}
    assert figures["confusion"][3][3] == 3 and figures["confusion"][0][0] == 9
    generous = [(q, h, 3) for q in "abc" for h in (0, 0, 3, 0)]
    figures = agreement(generous, graded=True, resamples=50, seed=1)
    assert figures["overLabelling"]["value"] == 1.0
    assert figures["kappaAt2"]["value"] == 0.0 and figures["kappaQuadratic"]["value"] == 0.0


def test_bootstrap_interval_brackets_the_mean_and_is_none_for_one_query():
    values = {str(i): float(i) for i in range(20)}
    ci = bootstrap_interval(list(values), lambda qs: sum(values[q] for q in qs) / len(qs), 200, 3)
    assert ci is not None and ci[0] < 9.5 < ci[1]
    assert bootstrap_interval(["1"], lambda qs: 1.0, 200, 3) is None
    assert spearman([1, 2, 3], [1, 1, 1]) is None and spearman([1, 2, 3], [3, 2, 1]) == -1.0


def test_per_query_metrics_count_a_silent_system_as_zero():
    table = per_query_metrics({"s": {"1": ["a"], "2": []}}, {"1": {"a": 3}, "2": {"b": 3}}, ["1", "2"])
    assert table["s"]["1"]["nDCG@10"] == 1.0 and table["s"]["2"] == {"nDCG@10": 0.0, "RR(rel=2)": 0.0, "R(rel=2)@100": 0.0}


@pytest.mark.parametrize(
    ("tau", "ci", "status"),
    [
        (0.95, [0.9, 0.99], "pass"),
        (0.95, [0.85, 0.99], "inconclusive"),  # the point clears 0.9, the interval does not
        (0.85, [0.81, 0.89], "warn"),
        (0.85, [0.7, 0.95], "inconclusive"),
        (0.7, [0.6, 0.79], "fail"),
        (0.7, [0.6, 0.85], "inconclusive"),
        (0.95, None, "inconclusive"),  # no interval (--bootstrap 0): nothing to decide on
        (None, None, "insufficient"),  # tau undefined: no evidence either way
    ],
)
def test_ranking_verdict_respects_its_interval(tau, ci, status):
    check = v.ranking_verdict({"value": tau, "ci95": ci}, systems=7, queries=50)
    assert check["status"] == status
    if status == "inconclusive" and ci is not None:
        assert check["queriesToDecide"] > 50 and f"about {check['queriesToDecide']} labelled queries" in check["message"]


@pytest.mark.parametrize("systems", [2, 3])
def test_ranking_needs_four_systems(systems):
    """With 2 systems tau is +-1 (it once said 'ok' with interval [-1, 1]); with 3 it takes four values.
    That is not enough evidence, never a pass."""
    check = v.ranking_verdict({"value": 1.0, "ci95": [-1.0, 1.0]}, systems=systems, queries=100)
    assert check["status"] == "insufficient" and f"{systems} systems of the 4" in check["message"]
    assert v.ranking_verdict({"value": 1.0, "ci95": [0.95, 1.0]}, systems=4, queries=100)["status"] == "pass"


def test_queries_to_decide_scales_the_interval_as_one_over_root_n():
    # kappa 0.5, interval [0.44, 0.56] on 40 queries: the half-width 0.06 is already under the gap 0.1 (one more)
    assert v.queries_to_decide(0.5, [0.44, 0.56], 40, 0.4) == 41
    # kappa 0.45 [0.3, 0.6]: half 0.15, gap 0.05 -> 9x the queries
    assert v.queries_to_decide(0.45, [0.3, 0.6], 40, 0.4) == 360
    assert v.queries_to_decide(0.35, [0.25, 0.41], 40, 0.4) == math.ceil(40 * (0.06 / 0.05) ** 2)
    assert v.queries_to_decide(0.4, [0.3, 0.5], 40, 0.4) is None  # on the threshold: never decided


def test_two_judges_whose_kappas_straddle_the_threshold_are_both_inconclusive():
    """The reported example: two GPT-4o judges at kappa(>=2) 0.3985 and 0.4280 with overlapping intervals came out
    "failed" and "calibrated". Here two simulated judges label the same 60 queries' pairs with kappas either side
    of 0.4; their bootstrap intervals (stats.agreement) overlap and both verdicts are inconclusive."""
    rng = random.Random(7)
    human = [(f"q{q}", rng.choice([0, 0, 0, 3])) for q in range(60) for _ in range(12)]

    def judge(flip: float) -> list[tuple[str, int, int]]:
        picker = random.Random(int(flip * 1000))
        return [(q, h, (3 - h) if picker.random() < flip else h) for q, h in human]

    figures = {}
    for name, flip in (("low", 0.28), ("high", 0.26)):  # kappa 0.386 and 0.430
        a = agreement(judge(flip), graded=False, resamples=300, seed=13)
        figures[name] = a["kappaAt2"]
    assert figures["low"]["value"] < 0.4 < figures["high"]["value"]
    assert figures["low"]["ci95"][1] > figures["high"]["ci95"][0]  # overlapping intervals
    relevant = sum(h >= 2 for _, h in human)
    for name, figure in figures.items():
        check = v.kappa_verdict(figure, queries=60, relevant=relevant, nonrelevant=len(human) - relevant, available=200)
        assert check["status"] == "inconclusive", (name, figure)
        needed = check["queriesToDecide"]
        # how many would decide it; or, when that is past ten times the 60, how far from 0.4 the estimate sits
        assert (needed is not None and needed > 60) or f"sits {abs(figure['value'] - 0.4):.4f} from the 0.40 threshold" in check["message"]
    assert v.kappa_verdict({"value": 0.6, "ci95": [0.5, 0.7]}, queries=60)["status"] == "pass"
    assert v.kappa_verdict({"value": 0.2, "ci95": [0.1, 0.3]}, queries=60)["status"] == "fail"


def test_alpha_position_and_injection_thresholds():
    alphas = ({"value": 0.85, "ci95": [0.8, 0.9]}, {"value": 0.7, "ci95": [0.67, 0.75]}, {"value": 0.6, "ci95": [0.5, 0.65]}, None)
    assert [v.alpha_verdict(a, queries=30, trials=2)["status"] for a in alphas] == ["pass", "warn", "fail", "insufficient"]
    assert v.alpha_verdict(alphas[0], queries=30, trials=1)["status"] == "n/a"

    def position(diff, ci):
        return {
            "difference": {"value": diff, "ci95": ci},
            "positionFlipRate": {"value": 0.2},
            "trialFlipRate": {"value": 0.1},
            "queries": 20,
        }

    assert v.position_verdict(position(0.0, [0.0, 0.0]))["status"] == "pass"
    assert v.position_verdict(position(0.01, [-0.02, 0.04]))["status"] == "pass"
    assert v.position_verdict(position(0.1, [-0.02, 0.2]))["status"] == "inconclusive"
    assert v.position_verdict(position(0.1, [0.06, 0.2]))["status"] == "fail"
    probe = {
        "queries": 20,
        "attacks": {
            "instruction": {"success": {"value": 0.3, "ci95": [0.1, 0.5]}},
            "query-prepended": {"success": {"value": 0.9}},
            "query-in-anchor": {"success": {"value": 0.05}},
        },
    }
    checks = v.injection_verdicts(probe)
    assert {k: c["status"] for k, c in checks.items()} == {"instruction": "fail", "query-prepended": "warn", "query-in-anchor": "pass"}
    assert all(c["source"] for c in checks.values())
    probe["attacks"]["instruction"]["success"] = {"value": 0.04, "ci95": [0.0, 0.12]}
    assert v.injection_verdicts(probe)["instruction"]["status"] == "inconclusive"
    probe["attacks"]["instruction"]["success"] = {"value": 0.0, "ci95": [0.0, 0.0]}
    assert v.injection_verdicts(probe)["instruction"]["status"] == "pass"


def test_attacks_change_what_they_say_and_the_fence_flags_the_instruction():
    query = CalibrationQuery("1", "vitamin d fracture risk")
    doc = ShownDoc("42", "Bone density", "A long abstract about bone density in elderly people and many other words here.")
    shown = {name: attack(name, query, doc) for name in ATTACKS}
    assert shown["query-prepended"].text.startswith(query.text)
    assert all(w in shown["query-scattered"].text.split() for w in query.text.split())
    assert shown["query-in-anchor"].anchor == query.text and shown["query-in-anchor"].text == doc.text
    assert injection_flag(shown["instruction"]) and injection_flag(shown["spoofed-header"])
    assert not injection_flag(doc) and not injection_flag(shown["query-prepended"])
    assert len(padded(doc).text) >= 2 * len(doc.text)


def _calibration(folder, name, created, key, legacy="v1:none", status="calibrated"):
    document = {
        "type": "calibration",
        "createdAt": created,
        "judge": {"fingerprintKey": key, "legacyKey": legacy},
        "verdict": {"status": status, "checks": {"perPairAgreement": {"status": "ok", "value": 0.61}}},
    }
    (folder / name).write_text(json.dumps(document))
    return document


def test_latest_calibration_by_fingerprint_key_and_legacy_key(tmp_path):
    assert latest_calibration(tmp_path / "missing", "k") is None
    _calibration(tmp_path, "a.json", "2026-11-01T00:00:00Z", "k1")
    newest = _calibration(tmp_path, "b.json", "2026-11-20T00:00:00Z", "k1", status="failed")
    _calibration(tmp_path, "c.json", "2026-11-25T00:00:00Z", "k2")
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"type": "summary"}))
    assert latest_calibration(tmp_path, "k1") == newest
    assert latest_calibration(tmp_path, "k3") is None
    provenance = {"provider": "offline", "judgeModel": "m", "promptSha256": {"judge_system.md": "x", "judge_user.md": "y"}}
    old = _calibration(tmp_path, "d.json", "2026-11-02T00:00:00Z", "k9", legacy=legacy_key(provenance))
    assert calibration_for_provenance(tmp_path, provenance) == old
    assert calibration_line(None).startswith("judge calibration: uncalibrated")
    assert calibration_line(newest) == "judge calibration: failed (2026-11-20, kappa(>=2) 0.61)"


def test_cli_refuses_mixed_or_missing_sources(tmp_path):
    result = invoke(["calibrate", "--provider", "offline"])
    assert result.exit_code == 2 and "--beir DIR" in result.output
    result = invoke(["calibrate", "--provider", "offline", "--beir", str(tmp_path)])
    assert result.exit_code == 2 and "not found" in result.output
    result = invoke(["calibrate", "--provider", "offline", "--beir", str(tmp_path), "--probes", "position,colour"])
    assert result.exit_code == 2 and "unknown probe colour" in result.output


def test_trend_and_report_show_the_latest_calibration_of_the_runs_judge(tmp_path):
    from judge_runner.analysis.report import build_report
    from judge_runner.analysis.trend import build_trend
    from tests.support.trend_runs import write_run

    results = tmp_path / "quality-results"
    results.mkdir()
    write_run(results, "r1", [0.5] * 6, day=1)
    write_run(results, "r2", [0.6] * 6, day=2)
    assert "uncalibrated" in build_trend(results).groups[0]["calibration"]
    provenance = {
        "provider": "anthropic",
        "judgeModel": "claude-sonnet-4-6",
        "promptSha256": {"judge_system.md": "1" * 64, "judge_user.md": "2" * 64},
    }
    (tmp_path / "calibration").mkdir()
    _calibration(tmp_path / "calibration", "x.json", "2026-11-03T00:00:00Z", "k", legacy=legacy_key(provenance))
    assert build_trend(results).groups[0]["calibration"] == "judge calibration: calibrated (2026-11-03, kappa(>=2) 0.61)"
    report = build_report(results, tmp_path / "reports")
    assert "Judge calibration: calibrated (2026-11-03, kappa(>=2) 0.61)." in report.markdown.read_text()


def test_offline_labeller_labels_as_the_offline_judge_does_in_evaluate(hash_embedder):
    """calibrate labels through the same protocol call as evaluate: the offline judge's label_one on the
    fenced document, in both modes, every trial alike (it is deterministic)."""
    from judge_runner.calibrate.labeling import INTENT, ProtocolLabeler
    from judge_runner.judging.fence import render_document
    from judge_runner.judging.heuristic import HeuristicJudge

    judge = HeuristicJudge(hash_embedder)
    query = CalibrationQuery("1", "redis failover promote the replica")
    docs = [
        ShownDoc("a.md", "Redis failover", "When the primary fails, promote the replica with the sentinel command."),
        ShownDoc("b.md", "Baking", "Knead the dough and let it rise overnight."),
        ShownDoc("c.md", None, "Redis replica promotion: run failover on the replica, then repoint clients."),
    ]
    labeller = ProtocolLabeler(judge)
    direct = [judge.label_one(query.text, INTENT, render_document(d.docid, d.anchor, d.text), {}).label for d in docs]
    assert [r.label for r in labeller(query, docs, "pointwise", 0)] == direct
    assert [r.label for r in labeller(query, docs, "batched", 1)] == direct
    assert direct[0] > direct[1]  # the failover runbook beats the bread recipe


def test_calibration_line_says_what_is_inconclusive_and_what_would_decide_it():
    document = {
        "createdAt": "2026-12-01T10:00:00Z",
        "verdict": {
            "status": "inconclusive",
            "checks": {
                "perPairAgreement": v.kappa_verdict({"value": 0.45, "ci95": [0.38, 0.52]}, queries=40, available=5000),
                "ranking": v.ranking_verdict({"value": 1.0, "ci95": [-1.0, 1.0]}, systems=2, queries=40),
            },
        },
    }
    line = calibration_line(document)
    needed = document["verdict"]["checks"]["perPairAgreement"]["queriesToDecide"]
    assert line == (
        f"judge calibration: inconclusive (2026-12-01, kappa(>=2) 0.45, inconclusive: perPairAgreement (about {needed} labelled queries "
        "would decide it); not enough evidence for ranking)"
    )
    assert needed == math.ceil(40 * (0.07 / 0.05) ** 2)
