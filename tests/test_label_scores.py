"""judge_runner.judging.scores and judge_runner.measures.agreement: dimensions from labels, trials, alpha."""

from __future__ import annotations

import itertools
import math

import pytest

from judge_runner.judging.scores import (
    dcg,
    expected_source_disagreements,
    label_dimensions,
    label_spread,
    median_label,
    ranking_score,
    relevance_score,
)
from judge_runner.measures.agreement import trials_alpha
from judge_runner.measures.ir import query_metrics


def test_relevance_is_graded_precision():
    assert relevance_score([3, 0, 2, 1]) == 0.5
    assert relevance_score([3, 3]) == 1.0
    assert relevance_score([0, 0, 0]) == 0.0
    assert relevance_score([1]) == pytest.approx(1 / 3, abs=1e-6)
    assert relevance_score([]) == 0.0


def test_relevance_ignores_order_and_ranking_does_not():
    assert relevance_score([3, 0]) == relevance_score([0, 3])
    assert ranking_score([3, 0]) == 1.0
    assert ranking_score([0, 3]) == pytest.approx((3 / math.log2(3)) / 3, abs=1e-6)


def test_ranking_is_one_when_labels_never_increase():
    for labels in ([3, 2, 1, 0], [1, 1, 0], [2], [3, 3, 3], [1, 0, 0, 0, 0]):
        assert ranking_score(labels) == 1.0


def test_ranking_all_zero_and_empty_are_zero_not_a_free_pass():
    assert ranking_score([0, 0, 0, 0]) == 0.0
    assert ranking_score([]) == 0.0
    # a list with one useful result at the bottom scores above the all-zero list, below a good order
    assert 0.0 < ranking_score([0, 0, 0, 1]) < ranking_score([1, 0, 0, 0]) == 1.0


def test_ranking_matches_ir_measures_ndcg_when_the_qrels_are_the_returned_labels():
    # with no expected sources outside the list, nDCG@10 over the run's own labels IS this formula
    for labels in ([0, 3, 1, 2], [2, 0, 0, 3, 1, 0, 2], [1, 2, 3]):
        sources = [f"d{i}.md" for i in range(len(labels))]
        ndcg = query_metrics(sources, labels, [])["nDCG@10"]
        assert ranking_score(labels) == pytest.approx(ndcg, abs=1e-5)


def test_dcg_uses_log2_of_rank_plus_one():
    assert dcg([3, 2, 1]) == pytest.approx(3 + 2 / math.log2(3) + 1 / 2)


@pytest.mark.parametrize("bad", [[4], [-1], [1.5], ["2"], [True], [None]])
def test_labels_outside_the_scale_are_refused(bad):
    for fn in (relevance_score, ranking_score, median_label, label_spread):
        with pytest.raises(ValueError, match="0-3"):
            fn(bad)


def test_label_dimensions_bundles_both():
    assert label_dimensions([3, 0]) == {"relevance": 0.5, "ranking": 1.0}


def test_median_label_takes_the_lower_middle_on_a_tie():
    assert median_label([2]) == 2
    assert median_label([1, 3, 2]) == 2
    assert median_label([3, 0, 3]) == 3
    assert median_label([2, 3]) == 2  # a split vote never raises a label
    assert median_label([0, 3, 3, 1]) == 1
    with pytest.raises(ValueError):
        median_label([])


def test_label_spread():
    assert label_spread([2, 2, 2]) == 0
    assert label_spread([3]) == 0
    assert label_spread([0, 3, 1]) == 3
    with pytest.raises(ValueError):
        label_spread([])


def test_expected_source_disagreements():
    labelled = [("a.md", 3), ("b.md", 1), ("c.md", 0), ("b.md", 0), ("d.md", 2), ("e.md", 1), ("e.md", 2)]
    assert expected_source_disagreements(labelled, ["a.md", "b.md", "c.md", "e.md", "missing.md", "c.md"]) == ["b.md", "c.md"]
    assert expected_source_disagreements([], ["a.md"]) == []


# -- Krippendorff's alpha ----------------------------------------------------------------------------


def reference_ordinal_alpha(units):
    """Textbook ordinal alpha (Krippendorff 2011, sections C and E): coincidence matrix over pairable
    units, ordinal distance from the marginal frequencies. Independent of the package."""
    values = [0, 1, 2, 3]
    o = {(c, k): 0.0 for c in values for k in values}
    for unit in units:
        present = [v for v in unit if v is not None]
        m = len(present)
        if m < 2:
            continue
        for a, b in itertools.permutations(range(m), 2):
            o[(present[a], present[b])] += 1 / (m - 1)
    n_c = {c: sum(o[(c, k)] for k in values) for c in values}
    n = sum(n_c.values())

    def delta(c, k):
        lo, hi = min(c, k), max(c, k)
        return (sum(n_c[g] for g in values if lo <= g <= hi) - (n_c[c] + n_c[k]) / 2) ** 2

    d_o = sum(o[(c, k)] * delta(c, k) for c in values for k in values)
    d_e = sum(n_c[c] * n_c[k] * delta(c, k) for c in values for k in values) / (n - 1)
    return 1 - d_o / d_e


@pytest.mark.parametrize(
    "units",
    [
        [[0, 0], [1, 1], [3, 2], [2, 2], [3, 3], [0, 1]],
        [[0, 0, 1], [3, 3, 3], [2, 1, 2], [1, 1, 1], [0, 0, 0], [3, 2, 3]],
        [[0, None, 0], [3, 3], [2, 1, None], [1], [0, 2, 0], [3, 2, 3, 3]],  # missing trials, ragged rows
    ],
)
def test_alpha_matches_the_textbook_computation(units):
    assert trials_alpha(units) == pytest.approx(reference_ordinal_alpha(units), abs=1e-6)


def test_alpha_perfect_and_systematic_disagreement():
    assert trials_alpha([[0, 0], [1, 1], [2, 2], [3, 3]]) == 1.0
    assert trials_alpha([[0, 3], [3, 0], [0, 3], [3, 0]]) < 0


def test_alpha_undefined_cases_are_none():
    assert trials_alpha([]) is None
    assert trials_alpha([[2], [3], [0]]) is None  # one trial
    assert trials_alpha([[2, 2], [2, 2]]) is None  # one value only: 0/0, not 1.0
    assert trials_alpha([[2, 2], [3], [0, None]]) is None  # the only pairable unit has one value
    with pytest.raises(ValueError):
        trials_alpha([[0, 4], [1, 1]])


def test_labels_from_trials():
    from judge_runner.judging.scores import labels_from_trials

    assert labels_from_trials([[3, 3, 2], [0, 1], [2]]) == ([3, 0, 2], [1, 1, 0])
    with pytest.raises(ValueError):
        labels_from_trials([[1], []])


def test_query_scores_from_labels_and_the_list_verdict():
    from judge_runner.judging.scores import query_scores

    scores = query_scores([3, 0, 2, 1], {"coverage": 0.8, "snippetQuality": 0.6}, {"relevance": 0.7, "ranking": 0.9, "overall": 0.75})
    ranking = ranking_score([3, 0, 2, 1])
    assert scores["relevance"] == 0.5 and scores["ranking"] == ranking
    assert scores["overall"] == pytest.approx((0.5 + ranking + 0.8 + 0.6) / 4, abs=1e-6)
    assert (scores["judgeRelevance"], scores["judgeRanking"], scores["judgeOverall"]) == (0.7, 0.9, 0.75)
    weighted = query_scores(
        [3, 3], {"coverage": 0.0, "snippetQuality": 0.0}, weights={"relevance": 1, "ranking": 0, "coverage": 0, "snippetQuality": 0}
    )
    assert weighted["overall"] == 1.0 and "judgeOverall" not in weighted
    with pytest.raises(KeyError):
        query_scores([1], {"coverage": 0.5})
