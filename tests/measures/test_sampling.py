"""The estimators: labels spent where they narrow the answer. Sampling probabilities for a
budget, the Poisson draw, inverse-probability-weighted corrected means that stay unbiased under any such
design (whole queries and single pairs), and what a budget buys."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge_runner.measures.ipw import SCALED_DCG_IDEAL, DesignUnit, PairTerm, design_mean, discount, ipw_mean, ipw_pair_mean
from judge_runner.measures.sampling import (
    DEFAULT_RHO,
    LabelNoise,
    Unit,
    budget_text,
    choose_probabilities,
    choose_rho,
    labels_for_half_width,
    pair_units,
    poisson_sample,
    predicted_half_width,
    query_units,
)


def finite_population(seed: int = 0, n: int = 300):
    """People's values ``y``, a judge ``f`` that tracks them with query-dependent noise, and a spread that
    predicts that noise (as a label-noise model would)."""
    rng = np.random.default_rng(seed)
    y = rng.beta(2, 2, n)
    noise_sd = np.where(rng.random(n) < 0.3, 0.35, 0.04)  # a third of the queries are hard for the judge
    f = np.clip(y + 0.1 + rng.normal(0, 1, n) * noise_sd, 0, 1)
    return y, f, noise_sd


@pytest.mark.parametrize("mode", ["uniform", "active", "stratified", "robust"])
def test_the_weighted_estimate_is_unbiased_and_covers_under_every_design(mode):
    y, f, sd = finite_population()
    units = [Unit(str(i), 1.0, float(s)) for i, s in enumerate(sd)]
    pi = choose_probabilities(units, 60, mode=mode)
    truth = float(y.mean())
    estimates, covered, draws = [], 0, 400
    for seed in range(draws):
        drawn = set(poisson_sample(pi, seed))
        found = design_mean([DesignUnit(float(f[i]), float(y[i]) if str(i) in drawn else None, pi[str(i)]) for i in range(len(y))])
        estimates.append(found.estimate)
        covered += found.ci95[0] <= truth <= found.ci95[1]
    spread = float(np.std(estimates)) / math.sqrt(draws)
    assert abs(float(np.mean(estimates)) - truth) < 4 * spread + 1e-3  # unbiased (the judge alone is 0.1 off)
    assert covered / draws >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / draws)


def test_active_sampling_narrows_the_interval_for_the_same_budget_when_the_spreads_are_right():
    y, f, sd = finite_population(1)
    units = [Unit(str(i), 1.0, float(s)) for i, s in enumerate(sd)]
    widths = {}
    for mode in ("uniform", "active", "robust"):
        pi = choose_probabilities(units, 50, mode=mode, rho=0.5)
        found = []
        for seed in range(150):
            drawn = set(poisson_sample(pi, seed))
            found.append(design_mean([DesignUnit(float(f[i]), float(y[i]) if str(i) in drawn else None, pi[str(i)]) for i in range(300)]))
        widths[mode] = float(np.mean([m.ci95[1] - m.ci95[0] for m in found]))
    assert widths["active"] < 0.9 * widths["uniform"]  # the part of the variance from the queries themselves stays
    assert widths["uniform"] > widths["robust"] > widths["active"] * 0.99


def test_probabilities_spend_the_budget_and_never_leave_an_open_unit_at_zero():
    units = [Unit(f"q{i}", float(1 + i % 5), float(i % 7) / 10) for i in range(100)]
    units += [Unit("known", 10.0, 0.0, known=True), Unit("done", 0.0, 0.3)]
    for mode in ("uniform", "active", "stratified", "robust"):
        pi = choose_probabilities(units, 80, mode=mode)
        assert pi["known"] == 1.0 and pi["done"] == 1.0  # known without a label, or labelled before: free
        spent = sum(pi[u.id] * u.cost for u in units if not u.known and u.cost > 0)
        assert spent == pytest.approx(80, rel=1e-6)
        assert all(0 < pi[u.id] <= 1 for u in units)
    uniform = choose_probabilities(units, 80, mode="uniform")
    assert len({round(uniform[u.id], 9) for u in units if u.id.startswith("q")}) == 1
    with pytest.raises(ValueError):
        choose_probabilities(units, 10, mode="greedy")
    with pytest.raises(ValueError):
        choose_probabilities(units, -1)
    assert set(choose_probabilities(units, 10_000).values()) == {1.0}  # a budget that covers everything labels everything


def test_the_robust_mix_falls_back_to_uniform_when_past_labels_say_the_spreads_mislead():
    rng = np.random.default_rng(3)
    spread = rng.uniform(0.05, 0.5, 200)
    units = [Unit(str(i), 1.0, float(s)) for i, s in enumerate(spread)]
    misleading = [(str(i), float(0.6 - spread[i]) * rng.normal(), 0.3) for i in range(60)]  # errors large where spread is small
    honest = [(str(i), float(spread[i]) * rng.normal() * 2, 0.3) for i in range(60)]
    assert choose_rho(units, 40, misleading) == 0.0
    assert choose_rho(units, 40, honest) > 0.0
    assert choose_rho(units, 40, honest[:3]) == DEFAULT_RHO == 0.0  # too few past labels: uniform, nothing checked the spreads


def test_a_labelled_query_needs_its_probability():
    with pytest.raises(ValueError, match="no sampling probability"):
        ipw_mean({"a": 0.5, "b": 0.4}, {"a": 0.3}, {})
    with pytest.raises(ValueError):
        design_mean([DesignUnit(0.5, 0.4, 0.0)] * 12)


def test_query_units_for_a_difference_know_identical_rankings_and_count_shared_documents_once():
    a = {"q1": [("d1", 3), ("d2", 0)], "q2": [("d1", 2), ("d2", 1)], "q3": [("d1", 3)]}
    b = {"q1": [("d1", 3), ("d2", 0)], "q2": [("d2", 1), ("d1", 2), ("d3", 0)], "q3": [("d4", 0)]}
    units = {u.id: u for u in query_units(b, other=a, labelled={"q3": {"d1"}})}
    assert units["q1"].known and units["q1"].spread == 0.0
    assert units["q2"].cost == 3 and units["q2"].spread > 0  # d1, d2, d3: each once
    assert units["q3"].cost == 1  # d1 labelled already
    mean_units = {u.id: u for u in query_units(a)}
    assert not mean_units["q1"].known and mean_units["q1"].cost == 2
    noisy = LabelNoise.fit([(3, 0), (3, 3), (3, 1), (0, 0), (0, 0), (0, 0)] * 5)
    assert noisy.of(3) > noisy.of(0)  # the people disagree with the judge's 3s, not with its 0s


def scaled_dcg(ranked: list[str], grades: dict[str, int]) -> float:
    return sum(grades[d] * discount(r) for r, d in enumerate(ranked, start=1)) / SCALED_DCG_IDEAL


def test_pairs_estimate_scaled_dcg_and_its_difference_without_bias():
    rng = np.random.default_rng(7)
    queries = 60
    human = {(f"q{q}", f"d{d}"): int(rng.integers(0, 4)) for q in range(queries) for d in range(15)}
    judge = {k: int(min(3, v + rng.integers(0, 2))) for k, v in human.items()}
    run_a = {f"q{q}": [f"d{d}" for d in rng.permutation(15)[:10]] for q in range(queries)}
    run_b = {q: docs[:6] + [d for d in (f"d{x}" for x in range(15)) if d not in docs][:4] for q, docs in run_a.items()}  # same top 6
    coefficient: dict[tuple[str, str], float] = {}
    for q in run_a:
        for r, d in enumerate(run_b[q], start=1):
            coefficient[(q, d)] = coefficient.get((q, d), 0.0) + discount(r) / SCALED_DCG_IDEAL
        for r, d in enumerate(run_a[q], start=1):
            coefficient[(q, d)] = coefficient.get((q, d), 0.0) - discount(r) / SCALED_DCG_IDEAL
    truth = float(
        np.mean(
            [
                scaled_dcg(run_b[q], {d: human[(q, d)] for d in run_b[q]}) - scaled_dcg(run_a[q], {d: human[(q, d)] for d in run_a[q]})
                for q in run_a
            ]
        )
    )
    units = pair_units(coefficient, judge)
    assert sum(1 for u in units if u.known) == 6 * queries  # the shared top 6 add nothing to the difference
    pi = choose_probabilities(units, 120, mode="active")
    estimates, covered = [], 0
    for seed in range(400):
        drawn = set(poisson_sample(pi, seed))
        terms = [
            PairTerm(q, c, judge[(q, d)], human[(q, d)] if f"{q}\t{d}" in drawn else None, pi[f"{q}\t{d}"])
            for (q, d), c in coefficient.items()
            if c != 0
        ]
        found = ipw_pair_mean(terms, queries, bounds=(-1, 1))
        estimates.append(found.estimate)
        covered += found.ci95[0] <= truth <= found.ci95[1]
    assert abs(float(np.mean(estimates)) - truth) < 4 * float(np.std(estimates)) / 20 + 1e-3
    assert covered / 400 >= 0.9


def test_what_a_budget_buys():
    units = [Unit(f"q{i}", 10.0, 0.2) for i in range(100)]
    wide = predicted_half_width(units, choose_probabilities(units, 100), 0.2, 100)
    narrow = predicted_half_width(units, choose_probabilities(units, 400), 0.2, 100)
    assert narrow < wide
    needed = labels_for_half_width(units, narrow, 0.2, 100)
    assert needed is not None and abs(needed - 400) <= 10
    assert labels_for_half_width(units, 0.0001, 0.2, 100) is None  # not reachable on this query set
    assert budget_text(150, 0.03, "the difference", 10) == "about 150 labels (25 min at 10 s each) for ±0.03 on the difference"
    assert budget_text(1, 0.05, "the mean") == "about 1 label for ±0.05 on the mean"
    assert budget_text(1, None, "the mean", why_none="too few") == "about 1 label: too few for an interval on the mean: too few"


def test_without_evidence_the_plan_is_a_fixed_size_uniform_draw_and_known_units_are_free():
    from judge_runner.measures.ipw import planned_mean
    from judge_runner.measures.sampling import plan_budget

    rng = np.random.default_rng(4)
    n = 240
    known = rng.random(n) < 0.25  # e.g. queries two systems ranked alike: their difference is exactly 0
    y = np.where(known, 0.0, rng.normal(0.05, 0.2, n).clip(-1, 1))
    f = np.where(known, 0.0, (y + rng.normal(0.08, 0.1, n)).clip(-1, 1))
    units = [Unit(f"q{i}", 10.0, 0.1, bool(k)) for i, k in enumerate(known)]
    plan = plan_budget(units, 400)
    assert plan.design == "uniform" and plan.rho == 0 and plan.size == 40
    assert all(plan.probabilities[u.id] == 1.0 for u in units if u.known)
    truth, estimates, covered = float(y.mean()), [], 0
    judge = {f"q{i}": float(v) for i, v in enumerate(f)}
    for seed in range(300):
        drawn = plan.draw(seed)
        assert sum(1 for u in drawn if not known[int(u[1:])]) == 40
        found = planned_mean(plan.design, judge, {u: float(y[int(u[1:])]) for u in drawn}, plan.probabilities, bounds=(-1, 1))
        estimates.append(found.estimate)
        covered += found.ci95[0] <= truth <= found.ci95[1]
    assert abs(float(np.mean(estimates)) - truth) < 4 * float(np.std(estimates)) / math.sqrt(300) + 1e-3
    assert covered / 300 >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 300)
    with pytest.raises(ValueError):
        planned_mean("greedy", judge, {}, plan.probabilities)


def test_with_past_labels_that_back_the_spreads_the_plan_weights():
    from judge_runner.measures.sampling import plan_budget

    y, f, sd = finite_population(2)
    units = [Unit(str(i), 1.0, float(s)) for i, s in enumerate(sd)]
    past = [(str(i), float(y[i] - f[i] + 0.1), 1.0) for i in range(60)]
    plan = plan_budget(units, 50, past)
    assert plan.design == "weighted" and plan.rho > 0
    assert sum(plan.probabilities.values()) == pytest.approx(50, rel=1e-6)


@pytest.mark.parametrize(("grade", "bounds"), [(0, (-1.0, 1.0)), (0, (0.0, 1.0)), (3, (0.0, 1.0))])
def test_pairs_all_labelled_alike_get_the_rule_of_three_interval_not_a_point(grade, bounds):
    # a new user's trial: 10 drawn pairs all labelled 0 ended "+0.000 [+0.000, +0.000]: cannot tell yet"; whole
    # queries in the same case get the rule of three's interval
    rng = np.random.default_rng(3)
    terms = []
    for q in range(30):
        for rank in range(1, 6):
            c = discount(rank) / SCALED_DCG_IDEAL * (1 if bounds[0] == 0 else rng.choice([-1, 1]))
            drawn = len(terms) % 5 == 0
            terms.append(PairTerm(f"q{q}", c, float(rng.integers(0, 4)), float(grade) if drawn else None, 0.2))
    found = ipw_pair_mean(terms, 30, bounds=bounds)
    n = sum(t.human is not None for t in terms)
    low, high = found.ci95
    assert low <= found.estimate <= high and high - low > 0, found
    assert math.isclose(high - found.estimate, 3 / n * (bounds[1] - found.estimate), abs_tol=1e-9) or math.isclose(
        found.estimate - low, 3 / n * (found.estimate - bounds[0]), abs_tol=1e-9
    ), found
    assert not found.judge_informative and found.weight == 0


def test_a_uniform_draw_beside_a_certain_stratum_keeps_its_variance_and_its_rule_of_three():
    from judge_runner.measures.ipw import planned_mean

    judge = {f"q{i}": 0.01 * (i % 7) for i in range(60)}
    certain = {f"q{i}": 0.05 * (i % 3) for i in range(20)}  # labelled before: probability 1
    drawn = {f"q{i}": 0.1 * (i % 4) - 0.1 for i in range(20, 32)}
    probabilities = {q: (1.0 if q in certain else 12 / 40) for q in judge}
    found = planned_mean("uniform", judge, {**certain, **drawn}, probabilities, bounds=(-1, 1))
    # the figure's variance is the one its interval uses (it was divided by the labelled count of both strata)
    assert found.half_width == pytest.approx((found.ci95[1] - found.ci95[0]) / 2)
    # every drawn value alike: the sampled stratum's rule-of-three interval is not narrowed away by the certain one
    alike = planned_mean("uniform", judge, {**certain, **dict.fromkeys(drawn, 0.0)}, probabilities, bounds=(-1, 1))
    share = 40 / 60
    assert alike.ci95[1] - alike.ci95[0] >= share * (2 * 3 / 12) - 1e-9


def test_a_weighted_draw_of_fewer_than_fifteen_units_is_drawn_as_a_fixed_number_instead():
    from judge_runner.measures.sampling import WEIGHTED_MIN_UNITS, Unit, plan_budget

    units = [Unit(f"q{i}", 5.0, 0.6 if i % 4 == 0 else 0.05) for i in range(120)]
    past = [(u.id, u.spread * (1 if i % 2 else -1), 0.5) for i, u in enumerate(units[:40])]  # residuals follow the spreads
    large = plan_budget(units, 200, past, units)  # about 40 units
    assert large.design == "weighted" and large.rho > 0
    small = plan_budget(units, 60, past, units)  # about 12 units: the Poisson size would vary too much
    assert WEIGHTED_MIN_UNITS == 15 and small.design == "uniform" and small.size == 12 and small.rho == 0
