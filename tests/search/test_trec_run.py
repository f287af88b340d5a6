"""A TREC run is read in the order trec_eval and ir-measures score it: by score as a 32-bit
float, ties by docid descending; the rank column never orders anything. Before, ties followed the rank
column: on an all-ties run nDCG@10 was 0.924 where trec_eval says 0.525."""

from __future__ import annotations

from pathlib import Path

import ir_measures
import pytest

from judge_runner.calibrate.pool import read_run
from judge_runner.core.failures import UsageError
from judge_runner.search.documents import open_documents
from judge_runner.search.trec_run import TrecRunError, TrecRunSearch, read_trec_run

NDCG = ir_measures.parse_measure("nDCG@10")
DOCS = ["a1", "a2", "a3", "z1", "z2", "z3", "z4", "z5", "z6", "z7"]
QRELS = {"q1": {"a1": 3, "a2": 2, "a3": 1}}


def write_run(path: Path, rows: list[tuple[str, int, str]]) -> Path:
    path.write_text("".join(f"q1 Q0 {d} {r} {s} tag\n" for d, r, s in rows), encoding="utf-8")
    return path


def trec_eval_ndcg(path: Path) -> float:
    """nDCG@10 as ir-measures (pytrec_eval, trec_eval's code) computes it from the file itself."""
    qrels = [ir_measures.Qrel(q, d, g) for q, docs in QRELS.items() for d, g in docs.items()]
    return ir_measures.calc_aggregate([NDCG], qrels, list(ir_measures.read_trec_run(str(path))))[NDCG]


def ndcg_of_order(order: list[str]) -> float:
    run = {"q1": {d: float(len(order) - i) for i, d in enumerate(order)}}
    return ir_measures.calc_aggregate([NDCG], {q: dict(d) for q, d in QRELS.items()}, run)[NDCG]


@pytest.mark.parametrize(
    "scores",
    [
        ["1.0"] * 10,  # the all-ties run
        ["1.0", "1.00000001", "0.99999999"] + ["1.0"] * 7,  # ties only as 32-bit floats (trec_eval's C float)
        ["2"] * 5 + ["1"] * 5,  # two blocks of ties
    ],
)
def test_ties_are_ordered_as_trec_eval_orders_them(tmp_path, scores):
    run = write_run(tmp_path / "run.trec", [(d, rank, s) for rank, (d, s) in enumerate(zip(DOCS, scores), start=1)])
    ours = [d for d, _ in read_trec_run(run)["q1"]]
    assert ndcg_of_order(ours) == pytest.approx(trec_eval_ndcg(run))
    assert read_run(run, ["q1"])["q1"] == ours  # calibrate reads runs the same way


def test_the_all_ties_example_scores_as_trec_eval_says(tmp_path):
    run = write_run(tmp_path / "run.trec", [(d, rank, "1.0") for rank, d in enumerate(DOCS, start=1)])
    ours = [d for d, _ in read_trec_run(run)["q1"]]
    assert ours == sorted(DOCS, reverse=True)  # docid descending, whatever the rank column says
    assert round(ndcg_of_order(ours), 3) == round(trec_eval_ndcg(run), 3) < round(ndcg_of_order(DOCS), 3)


def test_the_search_replays_the_trec_eval_order(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(f'{{"_id": "{d}", "title": "{d}", "text": "text of {d}"}}\n' for d in DOCS), encoding="utf-8")
    run = write_run(tmp_path / "run.trec", [(d, rank, "1.0") for rank, d in enumerate(DOCS, start=1)])
    search = TrecRunSearch(run, open_documents(corpus), {"the query": "q1"})
    assert [h.source for h in search.search("the query").results] == sorted(DOCS, reverse=True)


def test_a_score_that_is_not_a_finite_number_is_refused(tmp_path):
    with pytest.raises(TrecRunError, match="line 1: score 'nan' is not a finite number"):
        read_trec_run(write_run(tmp_path / "run.trec", [("a1", 1, "nan")]))


def test_calibrate_names_the_ids_of_a_run_that_matches_no_sampled_query(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("".join(f"{i} Q0 d{i} 1 1.0 t\n" for i in range(1, 16)), encoding="utf-8")
    with pytest.raises(UsageError, match=r"its query ids \(1, 10, 11 \.\.\.\) match none of the collection's \(q01, q02, q03 \.\.\.\)"):
        read_run(run, [f"q{i:02d}" for i in range(1, 16)])
