"""judge_runner.measures.ir.query_metrics against hand-computed values.

nDCG@10 (trec_eval semantics): DCG = sum over ranks i of grade_i / log2(i + 1), linear gain; the ideal
DCG sorts every judged grade (the judge's labels, the grades known from elsewhere, and unlabelled expected
sources at grade 3). R@10 (trec_eval): the share of the documents graded 1 or more found in the top 10.
"""

from __future__ import annotations

from math import log2

import pytest

from judge_runner.measures.ir import query_metrics


def dcg(grades: list[int]) -> float:
    return sum(g / log2(i + 2) for i, g in enumerate(grades[:10]))


def ndcg(run_grades: list[int], all_grades: list[int]) -> float:
    return dcg(run_grades) / dcg(sorted(all_grades, reverse=True))


def test_hand_computed_with_an_unlabelled_expected_source():
    # run a(3) b(0) c(2); expected a and d; d is not returned, so it enters the ideal at grade 3
    m = query_metrics(["a", "b", "c"], [3, 0, 2], ["a", "d"])
    dcg_run = 3 / 1 + 0 / log2(3) + 2 / 2  # = 4
    idcg = 3 / 1 + 3 / log2(3) + 2 / 2 + 0  # ideal order 3, 3, 2, 0
    assert m["nDCG@10"] == pytest.approx(dcg_run / idcg, abs=1e-5)
    assert m["nDCG@10"] == pytest.approx(0.678795, abs=1e-5)
    assert m["R@10"] == pytest.approx(2 / 3)  # a and c found, d missing
    assert m["RR(rel=2)"] == pytest.approx(1.0)  # a at rank 1 has grade 3


def test_hand_computed_without_expected_sources():
    m = query_metrics(["x", "y", "z"], [1, 0, 2], [])
    assert m["nDCG@10"] == pytest.approx((1 + 2 / 2) / (2 + 1 / log2(3)), abs=1e-5)
    assert m["nDCG@10"] == pytest.approx(0.760189, abs=1e-5)
    assert m["R@10"] == 1.0  # x and z, the two graded 1 or more, are both found
    assert m["RR(rel=2)"] == pytest.approx(1 / 3, abs=1e-6)  # first grade >= 2 is z at rank 3


def test_rr_ignores_grade_one_results():
    m = query_metrics(["a", "b", "c", "d"], [1, 1, 0, 2], [])
    assert m["RR(rel=2)"] == pytest.approx(0.25)
    m = query_metrics(["a", "b"], [1, 1], [])
    assert m["RR(rel=2)"] == 0.0
    assert m["nDCG@10"] == pytest.approx(1.0)  # only grade-1 documents, ranked ideally


def test_judge_label_of_an_expected_source_wins_over_grade_3():
    m = query_metrics(["a", "b"], [1, 2], ["a"])
    # qrels a=1 (the judge's label, not 3), b=2: the ideal puts b first
    assert m["nDCG@10"] == pytest.approx(ndcg([1, 2], [1, 2]), abs=1e-5)
    assert m["nDCG@10"] == pytest.approx((1 + 2 / log2(3)) / (2 + 1 / log2(3)), abs=1e-5)
    assert m["R@10"] == pytest.approx(1.0)  # a (1) and b (2) are both found
    assert m["RR(rel=2)"] == pytest.approx(0.5)


def test_recall_counts_every_relevant_document_of_the_qrels():
    # b and c found; a and e expected and never graded: 3 each
    m = query_metrics(["b", "c"], [3, 3], ["a", "c", "e"])
    assert m["R@10"] == pytest.approx(2 / 4)


def test_grades_known_from_elsewhere_join_the_qrels_of_the_documents_not_returned():
    # a person graded four runbooks 3; the search returned the first: trec_eval's 0.390, not 1.0
    m = query_metrics(["r1"], [3], [], {"r1": 0, "r2": 3, "r3": 3, "r4": 3})
    assert m["nDCG@10"] == pytest.approx(1 / (1 + 1 / log2(3) + 1 / 2 + 1 / log2(5)), abs=1e-6)
    assert m["R@10"] == 0.25 and m["RR(rel=2)"] == 1.0  # r1's own label is the line's: known grades fill the rest


def test_cutoff_at_ten():
    sources = [f"s{i}" for i in range(12)]
    labels = [0] * 11 + [3]
    m = query_metrics(sources, labels, ["s11"])
    assert m["nDCG@10"] == 0.0  # the only relevant document is at rank 12
    assert m["R@10"] == 0.0
    assert m["RR(rel=2)"] == pytest.approx(1 / 12, abs=1e-6)  # RR has no cutoff


def test_perfect_run():
    m = query_metrics(["a", "b", "c"], [3, 2, 0], ["a", "b"])
    assert m == {"nDCG@10": pytest.approx(1.0), "R@10": pytest.approx(1.0), "RR(rel=2)": pytest.approx(1.0)}


def test_all_irrelevant_results():
    m = query_metrics(["a", "b"], [0, 0], [])
    assert m == {"nDCG@10": 0.0, "R@10": 0.0, "RR(rel=2)": 0.0}  # as ir_measures: no relevant document, 0


def test_empty_results_with_expected_sources():
    assert query_metrics([], [], ["a"]) == {"nDCG@10": 0.0, "R@10": 0.0, "RR(rel=2)": 0.0}


def test_empty_results_without_expected_sources():
    assert query_metrics([], [], []) == {"nDCG@10": 0.0, "R@10": 0.0, "RR(rel=2)": 0.0}


def test_labels_must_line_up():
    with pytest.raises(ValueError):
        query_metrics(["a", "b"], [1], [])


def test_order_matters():
    good = query_metrics(["rel", "junk"], [3, 0], ["rel"])
    bad = query_metrics(["junk", "rel"], [0, 3], ["rel"])
    assert good["nDCG@10"] == pytest.approx(1.0)
    assert bad["nDCG@10"] == pytest.approx(1 / log2(3), abs=1e-5)
    assert bad["RR(rel=2)"] == pytest.approx(0.5)
    assert good["R@10"] == bad["R@10"] == 1.0


def test_a_source_returned_twice_counts_at_its_best_rank():
    # e.g. an external backend that returns chunks: "a" at ranks 1 and 3 is "a" at rank 1
    assert query_metrics(["a", "b", "a"], [3, 0, 3], ["a"]) == query_metrics(["a", "b"], [3, 0], ["a"])
    m = query_metrics(["a", "b", "a"], [3, 0, 3], ["a"])
    assert m["RR(rel=2)"] == pytest.approx(1.0)
    assert m["nDCG@10"] == pytest.approx(1.0)
