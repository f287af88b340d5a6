"""A verdict needs evidence. Each check has a minimum of labelled queries (and pairs, systems,
trials, labelled share) below which it says "insufficient" and what is missing; n/a and insufficient are never a
pass, so a calibration where no check against the people has evidence is "insufficient", never "calibrated";
intervals stay honest at small n (a bootstrap over queries that all agree is not a point); and a system ranking
is computed over what people labelled (unlabelled documents left out, not counted 0).

The run files are written directly (tests/support/calibration_runs.py): no index, no judge."""

from __future__ import annotations

import json
import math

import pytest

from judge_runner.calibrate import verdicts as v
from judge_runner.calibrate.output import calibration_line
from judge_runner.calibrate.stats import agreement, bootstrap_interval, expanded_level, with_interval, zero_event_share
from tests.support.calibration_runs import agreeing, human_of, write_qrels, write_run
from tests.support.clitools import invoke


def calibrate_results(tmp_path, runs, qrels, *extra, code=0):
    out = tmp_path / "calibration.json"
    args = ["calibrate", *[a for r in runs for a in ("--results", str(r))], "--qrels", str(qrels), "--out", str(out), "--quiet"]
    result = invoke([*args, "--bootstrap", "200", *extra])
    assert result.exit_code == code, result.output
    return json.loads(out.read_text()), result.output


# -- the examples ------------------------------------------------------------------------------


def test_two_labelled_queries_that_agree_are_not_enough_evidence(tmp_path):
    """2 labelled queries gave kappa 1.000 [1.000, 1.000] and CALIBRATED."""
    ranked = agreeing(2)
    run = write_run(tmp_path / "r.jsonl", "r1", ranked)
    document, _ = calibrate_results(tmp_path, [run], write_qrels(tmp_path / "h.qrels", human_of(ranked)))
    kappa = document["verdict"]["checks"]["perPairAgreement"]
    assert kappa["status"] == "insufficient"
    assert f"2 labelled queries of the {v.MIN_QUERIES} needed" in kappa["message"]
    assert document["verdict"]["status"] == "insufficient"
    interval = document["modes"]["pointwise"]["agreement"]["all"]["kappaAt2"]["ci95"]
    assert interval[0] < v.KAPPA_TRUST  # two queries that agree say little: the interval is not a point at 1


def test_every_label_zero_is_not_enough_evidence_and_says_what_is_missing(tmp_path):
    """Every label 0 made every check n/a and the verdict CALIBRATED (n/a counted as passed)."""
    ranked = {f"q{q}": [(f"q{q}-d{d}", 0) for d in range(6)] for q in range(30)}
    run = write_run(tmp_path / "r.jsonl", "r1", ranked)
    qrels = write_qrels(tmp_path / "h.qrels", {q: {s: 0 for s, _ in docs} for q, docs in ranked.items()})
    document, _ = calibrate_results(tmp_path, [run], qrels)
    verdict = document["verdict"]
    assert verdict["status"] == "insufficient"
    assert {c["status"] for c in verdict["checks"].values()} <= {"insufficient", "n/a"}
    assert "no human-relevant pair" in verdict["checks"]["perPairAgreement"]["message"]
    assert "1 system" in verdict["checks"]["ranking"]["message"]
    assert set(verdict["missing"]) == set(verdict["checks"])  # each check says what it lacks
    line = calibration_line({**document, "createdAt": "2026-12-01T10:00:00Z"})
    assert line.startswith("judge calibration: insufficient (2026-12-01, not enough evidence: perPairAgreement")


def test_a_calibration_written_before_reads_n_a_as_no_evidence():
    """A format-2 file said "calibrated" with every check n/a; trend, report and --min-overall read its status
    again from its checks: not enough evidence, never calibrated."""
    old = {
        "type": "calibration",
        "formatVersion": 2,
        "createdAt": "2026-11-30T10:00:00Z",
        "verdict": {"status": "calibrated", "checks": checks_of(ranking="n/a", perPairAgreement="n/a", position="n/a")},
    }
    assert v.status_of(old) == "insufficient"
    assert calibration_line(old) == (
        "judge calibration: insufficient (2026-11-30, not enough evidence: perPairAgreement, ranking, position)"
    )
    passed = {**old, "verdict": {"status": "calibrated", "checks": checks_of(ranking="n/a", perPairAgreement="pass")}}
    assert v.status_of(passed) == "calibrated"


def ranked_lists(queries: int = 30) -> tuple[dict, dict]:
    """Four systems over the same documents of each query. The people labelled what run A returns (a0..a9:
    a1, a3, a5 grade 3, the others 0); B returns four documents nobody labelled, then a1, a3, a5, a0, a2, a4;
    C returns a1, a3, a5 after a9 and a8; D is A reversed. The judge gives the labelled documents the
    people's grade and every unlabelled one a 3."""
    grades = {f"a{i}": (3 if i in (1, 3, 5) else 0) for i in range(10)}
    orders = {
        "A": [f"a{i}" for i in range(10)],
        "B": ["u0", "u1", "u2", "u3", "a1", "a3", "a5", "a0", "a2", "a4"],
        "C": ["a9", "a8", "a1", "a3", "a5", "u4", "a0", "a2", "a4", "a6"],
        "D": [f"a{i}" for i in reversed(range(10))],
    }
    systems = {name: {f"q{q}": [(f"q{q}-{d}", grades.get(d, 3)) for d in order] for q in range(queries)} for name, order in orders.items()}
    human = {f"q{q}": {f"q{q}-{d}": g for d, g in grades.items()} for q in range(queries)}
    return systems, human


def test_a_system_ranking_is_computed_over_what_people_labelled(tmp_path):
    """Other systems' unlabelled documents counted 0, so the labelled system ranked first. Left out
    (condensed lists, Sakai 2007), B's labelled documents are the best-ordered: it ranks first by the people."""
    systems, human = ranked_lists()
    runs = [write_run(tmp_path / f"{n}.jsonl", n, ranked) for n, ranked in systems.items()]
    document, _ = calibrate_results(tmp_path, runs, write_qrels(tmp_path / "h.qrels", human))
    table = document["modes"]["pointwise"]["systems"]["nDCG@10"]["systems"]
    by_human = sorted(table, key=lambda s: -table[s]["human"])
    assert by_human[0] == "run:B" and table["run:B"]["human"] == pytest.approx(1.0)  # counted 0, B was below A
    assert table["run:A"]["labelledAt10"] == 1.0 and table["run:B"]["labelledAt10"] == pytest.approx(0.6)
    assert document["config"]["unlabelled"] == "unknown"
    # the judge's 3s on documents nobody labelled do not count either: its ranking is over the same documents
    assert table["run:B"]["judge"] == pytest.approx(table["run:B"]["human"])
    # counting them 0 (TREC pooling) is still there when asked for, and says so
    zero, _ = calibrate_results(tmp_path, runs, tmp_path / "h.qrels", "--unlabelled", "non-relevant")
    table = zero["modes"]["pointwise"]["systems"]["nDCG@10"]["systems"]
    assert table["run:A"]["human"] > table["run:B"]["human"]


def test_a_system_mostly_unlabelled_leaves_the_ranking_without_evidence(tmp_path):
    systems, human = ranked_lists()
    systems["E"] = {q: [(f"{q}-u{i}", 3) for i in range(8)] + docs[:2] for q, docs in systems["A"].items()}
    runs = [write_run(tmp_path / f"{n}.jsonl", n, ranked) for n, ranked in systems.items()]
    document, _ = calibrate_results(tmp_path, runs, write_qrels(tmp_path / "h.qrels", human))
    check = document["verdict"]["checks"]["ranking"]
    assert check["status"] == "insufficient"
    assert "run:E" in check["message"] and "20%" in check["message"]


# -- minimums of each check ----------------------------------------------------------------------------


def test_kappa_needs_enough_queries_and_pairs_of_each_class():
    good = {"value": 0.8, "ci95": [0.7, 0.9]}
    assert v.kappa_verdict(good, queries=v.MIN_QUERIES, relevant=40, nonrelevant=40)["status"] == "pass"
    few = v.kappa_verdict(good, queries=v.MIN_QUERIES - 1, relevant=40, nonrelevant=40)
    assert few["status"] == "insufficient" and f"{v.MIN_QUERIES - 1} labelled queries" in few["message"]
    rare = v.kappa_verdict(good, queries=40, relevant=v.MIN_CLASS_PAIRS - 1, nonrelevant=300)
    assert rare["status"] == "insufficient" and f"{v.MIN_CLASS_PAIRS - 1} human-relevant pairs" in rare["message"]
    undefined = v.kappa_verdict({"value": None, "ci95": None}, queries=40, relevant=0, nonrelevant=300)
    assert undefined["status"] == "insufficient" and "no human-relevant pair" in undefined["message"]
    # a failing interval on too little data is not a failure either
    assert v.kappa_verdict({"value": 0.1, "ci95": [0.0, 0.2]}, queries=3, relevant=40, nonrelevant=40)["status"] == "insufficient"


def test_ranking_needs_queries_systems_and_labelled_share():
    tau = {"value": 0.95, "ci95": [0.92, 1.0]}
    assert v.ranking_verdict(tau, systems=5, queries=v.MIN_RANKING_QUERIES)["status"] == "pass"
    assert v.ranking_verdict(tau, systems=5, queries=v.MIN_RANKING_QUERIES - 1)["status"] == "insufficient"
    assert v.ranking_verdict(tau, systems=3, queries=50)["status"] == "insufficient"
    thin = v.ranking_verdict(tau, systems=5, queries=50, labelled={"s1": 1.0, "s2": 0.3})
    assert thin["status"] == "insufficient" and "s2" in thin["message"] and "30%" in thin["message"]
    assert v.ranking_verdict(tau, systems=5, queries=50, labelled={"s1": 1.0, "s2": 0.5})["status"] == "pass"


def test_trial_stability_needs_trials_and_queries():
    alpha = {"value": 0.9, "ci95": [0.85, 0.95]}
    assert v.alpha_verdict(alpha, queries=v.MIN_QUERIES, trials=2)["status"] == "pass"
    assert v.alpha_verdict(alpha, queries=v.MIN_QUERIES, trials=1)["status"] == "n/a"
    assert v.alpha_verdict(alpha, queries=3, trials=2)["status"] == "insufficient"
    assert v.alpha_verdict({"value": 0.75, "ci95": [0.7, 0.78]}, queries=40, trials=2)["status"] == "warn"
    assert v.alpha_verdict({"value": 0.75, "ci95": [0.6, 0.9]}, queries=40, trials=2)["status"] == "inconclusive"
    assert v.alpha_verdict({"value": 0.5, "ci95": [0.4, 0.6]}, queries=40, trials=2)["status"] == "fail"


def position(diff, ci, queries):
    return {
        "difference": {"value": diff, "ci95": ci},
        "positionFlipRate": {"value": 0.0},
        "trialFlipRate": {"value": 0.0},
        "queries": queries,
    }


def test_probes_need_enough_probe_queries():
    assert v.position_verdict(position(0.0, [-0.01, 0.01], v.MIN_PROBE_QUERIES))["status"] == "pass"
    few = v.position_verdict(position(0.0, [-0.01, 0.01], 5))
    assert few["status"] == "insufficient" and "5 probe queries" in few["message"]
    probe = {
        "queries": 5,
        "attacks": {"instruction": {"success": {"value": 0.0, "ci95": [0.0, 0.0]}}, "query-prepended": {"success": {"value": 0.0}}},
    }
    assert {c["status"] for c in v.injection_verdicts(probe).values()} == {"insufficient"}
    shifts = {"queries": 5, "labelShift": {"padded": {"value": 0.0, "ci95": [0.0, 0.0]}}}
    assert v.length_verdicts(shifts)["padded"]["status"] == "insufficient"


def checks_of(**statuses):
    return {name: {"status": status, "value": None, "message": name, "source": ""} for name, status in statuses.items()}


@pytest.mark.parametrize(
    ("statuses", "overall"),
    [
        ({"perPairAgreement": "n/a", "ranking": "n/a", "position": "n/a"}, "insufficient"),
        ({"perPairAgreement": "insufficient", "ranking": "n/a", "position": "pass"}, "insufficient"),  # probes alone
        ({"perPairAgreement": "pass", "ranking": "insufficient", "position": "n/a"}, "calibrated"),
        ({"perPairAgreement": "pass", "ranking": "inconclusive"}, "inconclusive"),
        ({"perPairAgreement": "insufficient", "ranking": "fail"}, "failed"),
        ({"perPairAgreement": "insufficient", "ranking": "warn"}, "calibrated"),
    ],
)
def test_the_overall_status_never_counts_n_a_or_insufficient_as_a_pass(statuses, overall):
    status, missing = v.overall(checks_of(**statuses))
    assert status == overall
    assert set(missing) == {n for n, s in statuses.items() if s in ("n/a", "insufficient")}


# -- intervals honest at small n -----------------------------------------------------------------------


def test_an_interval_from_queries_that_all_agree_is_not_a_point():
    """A bootstrap over queries that all agree gives [1, 1] whatever their number. The interval is then the
    rule of three's: a share 1 - 0.025^(1/n) of the queries could disagree on every pair."""
    pairs = [(f"q{q}", h, h) for q in range(25) for h in (3, 3, 0, 0, 0, 0)]
    figures = agreement(pairs, graded=False, resamples=200, seed=1)
    low, high = figures["kappaAt2"]["ci95"]
    assert figures["kappaAt2"]["value"] == 1.0 and high == 1.0 and 0.4 < low < 0.9
    r = zero_event_share(25)
    assert r == pytest.approx(1 - 0.025 ** (1 / 25))
    # over-labelling: never seen in 25 queries, at most the same share
    assert figures["overLabelling"]["ci95"] == pytest.approx([0.0, r], abs=1e-6)
    # two queries: the bound is wide
    two = agreement(pairs[:12], graded=False, resamples=200, seed=1)
    assert two["kappaAt2"]["ci95"][0] < 0


def test_the_bootstrap_interval_is_expanded_at_small_n():
    """Hesterberg (2015): the percentile interval is too narrow in small samples; the expanded percentile
    interval reads the percentiles at the level whose normal quantile is sqrt(n/(n-1)) t_{n-1}."""
    from scipy.stats import norm, t

    for n in (5, 20, 100):
        z = math.sqrt(n / (n - 1)) * t.ppf(0.975, n - 1)
        assert expanded_level(n) == pytest.approx(1 - 2 * norm.sf(z))
    assert expanded_level(5) > expanded_level(20) > expanded_level(100) > 0.95
    from scipy.stats import bootstrap

    values = {str(i): float(i % 5) for i in range(10)}

    def mean(qs):
        return sum(values[q] for q in qs) / len(qs)

    expanded = bootstrap_interval(list(values), mean, 400, 3)
    plain = bootstrap(
        (list(values.values()),), lambda x: sum(x) / len(x), n_resamples=400, method="percentile", random_state=3, vectorized=False
    )
    assert expanded is not None and expanded[0] < plain.confidence_interval.low and expanded[1] > plain.confidence_interval.high


def test_a_probe_that_finds_nothing_in_few_queries_bounds_it_by_the_rule_of_three():
    """A position probe with no flip in 20 queries had [0, 0] and passed the 5-point bar. With the query as the
    unit, 20 queries without a flip bound the rate at 1 - 0.025^(1/20) = 16.8 points: inconclusive, and it
    says how many probe queries would decide it."""
    qids = [f"q{i}" for i in range(20)]
    interval = with_interval(qids, lambda sample: 0.0, 200, 1, bounds=(-1.0, 1.0))
    r = zero_event_share(20)
    assert interval["value"] == 0.0 and interval["ci95"] == pytest.approx([-r, r], abs=1e-6) and interval["ruleOfThree"]
    probe = {"difference": interval, "positionFlipRate": {"value": 0.0}, "trialFlipRate": {"value": 0.0}, "queries": 20}
    check = v.position_verdict(probe, available=100)
    assert check["status"] == "inconclusive"
    assert check["queriesToDecide"] == math.ceil(math.log(0.025) / math.log(1 - v.POSITION_MAX))  # 72
    assert "about 72 probe queries (--probe-queries; of the 100 in the set) would likely decide it" in check["message"]


# -- what would decide an inconclusive check -----------------------------------------------------------


def test_an_estimate_near_its_threshold_says_so_instead_of_a_huge_count():
    """Regression: "about 109287 labelled queries would likely decide it" where the estimate sat 0.0015 from
    the threshold."""
    check = v.kappa_verdict({"value": 0.4015, "ci95": [0.30, 0.50]}, queries=40, relevant=100, nonrelevant=300, available=300)
    assert check["status"] == "inconclusive" and check["queriesToDecide"] is None
    assert "sits 0.0015 from the 0.40 threshold: more labels are unlikely to decide it" in check["message"]
    assert "109" not in check["message"] and check["gapToThreshold"] == pytest.approx(0.0015)
    near = v.kappa_verdict({"value": 0.45, "ci95": [0.3, 0.6]}, queries=40, relevant=100, nonrelevant=300, available=400)
    assert near["queriesToDecide"] == 360 and "about 360 labelled queries (of the 400 in the set) would likely decide it" in near["message"]
    # without a set size, at most ten times the labelled queries is called sensible
    far = v.kappa_verdict({"value": 0.42, "ci95": [0.3, 0.54]}, queries=40, relevant=100, nonrelevant=300)
    assert far["queriesToDecide"] is None and "sits 0.0200 from the 0.40 threshold" in far["message"]
    for name, check in {
        "ranking": v.ranking_verdict({"value": 0.9004, "ci95": [0.8, 0.99]}, systems=6, queries=40, available=200),
        "alpha": v.alpha_verdict({"value": 0.8003, "ci95": [0.7, 0.9]}, queries=40, trials=2, available=200),
        "position": v.position_verdict(position(0.0498, [0.0, 0.1], 30), available=100),
    }.items():
        assert check["status"] == "inconclusive" and check["queriesToDecide"] is None, name
        assert "are unlikely to decide it" in check["message"] and "sits 0.000" in check["message"], name
    document = {"createdAt": "2026-12-01T10:00:00Z", "verdict": {"status": "inconclusive", "checks": {"perPairAgreement": check}}}
    assert "would decide" not in calibration_line(document)
