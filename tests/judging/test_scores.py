"""judge_runner.judging.scores and judge_runner.measures.agreement: dimensions from labels, trials, alpha."""

from __future__ import annotations

import itertools
import math

import pytest

from judge_runner.judging.scores import (
    NEEDED_GAIN,
    attainable_gains,
    dcg,
    expected_source_disagreements,
    graded_precision,
    label_dimensions,
    label_spread,
    median_label,
    needed_sources,
    query_scores,
    ranking_score,
    relevance_score,
)
from judge_runner.measures.agreement import trials_alpha
from judge_runner.measures.ir import query_metrics


def test_graded_precision_is_the_mean_label_over_three():
    assert graded_precision([3, 0, 2, 1]) == 0.5
    assert graded_precision([3, 3]) == 1.0
    assert graded_precision([0, 0, 0]) == 0.0
    assert graded_precision([1]) == pytest.approx(1 / 3, abs=1e-6)
    assert graded_precision([]) == 0.0
    assert graded_precision([3, 0]) == graded_precision([0, 3])  # order-free


def test_ranking_depends_on_order():
    assert ranking_score([3, 0]) == 1.0
    assert ranking_score([0, 3]) == pytest.approx((3 / math.log2(3)) / 3, abs=1e-6)


# -- relevance (scoring version 2): graded gain over the attainable gain ----------------------------------
ANSWER = "apache-php/README.md"
OTHERS = [f"other-{i}.md" for i in range(9)]
PERFECT_LIST = {"coverage": 1.0, "snippetQuality": 1.0}


def test_an_ideal_list_for_a_one_answer_query_scores_overall_at_least_0_95_at_limit_10():
    # the "PHP application with Apache2": the expected document first, labelled 3, nine others 0
    scores = query_scores([3] + [0] * 9, PERFECT_LIST, sources=[ANSWER, *OTHERS], expected_sources=[ANSWER], depth=10)
    assert scores["overall"] >= 0.95
    assert scores["relevance"] == 1.0
    assert scores["gradedPrecision"] == pytest.approx(0.1)  # what relevance was: kept as its own figure
    # the same list cut to 1 or 3 results scores the same: relevance no longer counts the empty slots
    for limit in (1, 3):
        short = query_scores(
            [3] + [0] * (limit - 1), PERFECT_LIST, sources=[ANSWER, *OTHERS][:limit], expected_sources=[ANSWER], depth=limit
        )
        assert short["relevance"] == 1.0


@pytest.mark.parametrize("list_scores", [PERFECT_LIST, {"coverage": 0.6, "snippetQuality": 0.4}, {"coverage": 0.0, "snippetQuality": 0.0}])
def test_the_answer_moved_from_rank_1_to_rank_10_lowers_overall_by_at_least_0_2(list_scores):
    first = query_scores([3] + [0] * 9, list_scores, sources=[ANSWER, *OTHERS], expected_sources=[ANSWER], depth=10)
    last = query_scores([0] * 9 + [3], list_scores, sources=[*OTHERS, ANSWER], expected_sources=[ANSWER], depth=10)
    assert first["overall"] - last["overall"] >= 0.2
    # and every rank in between falls in order: the user meets the answer later
    by_rank = []
    for rank in range(10):
        labels, sources = [0] * 10, list(OTHERS)
        labels[rank] = 3
        sources.insert(rank, ANSWER)
        by_rank.append(relevance_score(labels, sources, [ANSWER], depth=10))
    assert by_rank == sorted(by_rank, reverse=True) and len(set(by_rank)) == 10


def test_a_list_missing_a_needed_expected_source_never_scores_one():
    # the reverse case: "Deploy with docker compose", 40 READMEs with that heading labelled 3,
    # the expected document not in the top 10
    readmes = [f"app-{i}/README.md" for i in range(10)]
    scores = query_scores([3] * 10, PERFECT_LIST, sources=readmes, expected_sources=["docker-compose/README.md"], depth=10)
    assert scores["relevance"] < 1.0 and scores["overall"] < 1.0
    assert scores["gradedPrecision"] == 1.0 and scores["ranking"] == 1.0
    # the same list holding the expected source (labelled 3) first scores 1
    found = query_scores(
        [3] * 10, PERFECT_LIST, sources=["docker-compose/README.md", *readmes[:9]], expected_sources=["docker-compose/README.md"], depth=10
    )
    assert found["relevance"] == 1.0 and found["overall"] == 1.0


def test_no_list_missing_a_needed_expected_source_scores_one_whatever_its_labels():
    # every list of up to 10 results, labels 0-3, with 1-2 expected sources of which one is missing
    import random

    rng = random.Random(21)
    for _ in range(3000):
        n = rng.randint(1, 10)
        labels = [rng.randint(0, 3) for _ in range(n)]
        sources = [f"d{rng.randint(0, 12)}.md" for _ in range(n)]
        expected = ["missing.md"] + ([rng.choice(sources)] if rng.random() < 0.5 else [])
        for list_scores in (PERFECT_LIST, {"coverage": rng.random(), "snippetQuality": rng.random()}):
            scores = query_scores(labels, list_scores, sources=sources, expected_sources=expected, depth=10)
            assert scores["relevance"] < 1.0 and scores["overall"] < 1.0, (labels, sources, expected)
            assert 0.0 <= scores["relevance"] <= 1.0


def test_an_expected_source_the_judge_labelled_0_or_1_is_not_needed():
    labelled = [("a.md", 1), ("b.md", 3)]
    assert needed_sources(labelled, ["a.md", "b.md", "c.md"]) == ["b.md", "c.md"]
    # a wrong expected source (labelled 1) does not hold the list below 1 when a 3 is first
    assert relevance_score([3, 1], ["b.md", "a.md"], ["a.md"], depth=2) == 1.0


def test_a_needed_expected_source_found_below_a_result_labelled_3_costs_a_little():
    assert 0.9 < relevance_score([3, 3], ["x.md", "e.md"], ["e.md"], depth=10) < 1.0


def test_relevance_without_a_perfect_document_known_is_held_below_one():
    # an on-topic query has an answer: a list of merely related results is not its own ideal
    assert relevance_score([1, 1, 1]) < 0.6
    assert relevance_score([0, 0, 0]) == 0.0 and relevance_score([]) == 0.0
    assert relevance_score([3, 0]) == 1.0
    assert relevance_score([0, 3]) == pytest.approx((3 / math.log2(3)) / 3, abs=1e-6)


def test_known_labels_from_other_systems_raise_the_attainable_gain():
    assert relevance_score([2, 0], ["a.md", "b.md"], depth=2) < 1.0  # nothing reaches 3: an unseen answer is assumed
    assert relevance_score([3, 0], ["a.md", "b.md"], known={"c.md": 3}, depth=2) < 1.0
    assert relevance_score([3, 3], ["a.md", "c.md"], known={"c.md": 3}, depth=2) == 1.0
    assert attainable_gains([("a.md", 3)], ["e.md"], {"c.md": 2}, depth=5) == [NEEDED_GAIN, 3, 2]


def test_relevance_is_cut_at_the_depth_and_a_duplicate_chunk_never_lifts_it_above_one():
    assert relevance_score([3, 3, 3], ["a.md", "a.md", "a.md"], ["a.md"], depth=10) == 1.0
    assert relevance_score([0, 3], ["a.md", "e.md"], ["e.md"], depth=1) == 0.0  # the answer past the cut-off


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
    for fn in (relevance_score, graded_precision, ranking_score, median_label, label_spread):
        with pytest.raises(ValueError, match="0-3"):
            fn(bad)


def test_label_dimensions_bundles_all_three():
    assert label_dimensions([3, 0]) == {"relevance": 1.0, "ranking": 1.0, "gradedPrecision": 0.5}


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
    relevance = relevance_score([3, 0, 2, 1])
    assert scores["relevance"] == relevance and scores["ranking"] == ranking and scores["gradedPrecision"] == 0.5
    assert scores["overall"] == pytest.approx((relevance + ranking + 0.8 + 0.6) / 4, abs=1e-6)  # graded precision is not in it
    assert (scores["judgeRelevance"], scores["judgeRanking"], scores["judgeOverall"]) == (0.7, 0.9, 0.75)
    weighted = query_scores(
        [3, 3], {"coverage": 0.0, "snippetQuality": 0.0}, weights={"relevance": 1, "ranking": 0, "coverage": 0, "snippetQuality": 0}
    )
    assert weighted["overall"] == 1.0 and "judgeOverall" not in weighted
    with pytest.raises(KeyError):
        query_scores([1], {"coverage": 0.5})
