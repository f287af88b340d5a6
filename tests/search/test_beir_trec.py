"""Standard collections in, standard runs out: a BEIR corpus indexed, a batch of queries written as a
TREC run that ir-measures reads and scores."""

from __future__ import annotations

import json

import ir_measures
import pytest
from ir_measures import P, nDCG

from tests.support.clitools import invoke

CORPUS = [
    {
        "_id": "d1",
        "title": "Vitamin D and bone density",
        "text": "Vitamin D supplementation increases bone mineral density in older adults.",
    },
    {"_id": "d2", "title": "Statins and heart disease", "text": "Statin therapy lowers LDL cholesterol and cardiovascular events."},
    {"_id": "d3", "title": "Sleep and memory", "text": "Slow-wave sleep consolidates declarative memory in healthy volunteers."},
]
QUERIES = [
    {"_id": "1", "text": "vitamin D improves bone density"},
    {"_id": "2", "text": "statins reduce cardiovascular events"},
    {"_id": "3", "text": "sleep helps memory consolidation"},
]


@pytest.mark.minilm  # the CLI indexes and searches with the real model
def test_beir_index_and_trec_run(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in CORPUS) + "\nnot json\n", encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in QUERIES) + "\n", encoding="utf-8")
    db = tmp_path / "beir.sqlite"
    result = invoke(["index", "--beir-corpus", str(corpus), "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # progress goes to stderr, also with --json
    assert report["indexed"] == 3 and report["documents"] == 3 and report["skipped"] == {"not a BEIR record": 1}
    again = json.loads(invoke(["index", "--beir-corpus", str(corpus), "--db", str(db), "--json"]).stdout)
    assert again["unchanged"] == 3 and again["chunksEmbedded"] == 0

    qrels = {"1": {"d1": 1}, "2": {"d2": 1}, "3": {"d3": 1}}
    for mode in ("fts", "vector", "hybrid"):
        run_file = tmp_path / f"run-{mode}.txt"
        result = invoke(["search", "--queries", str(queries), "--trec-run", str(run_file), "--mode", mode, "--db", str(db)])
        assert result.exit_code == 0, result.output
        assert "p50" in result.output and "p95" in result.output
        lines = run_file.read_text().splitlines()
        first = lines[0].split()
        assert len(first) == 6 and first[1] == "Q0" and first[3] == "1" and first[5] == f"judge-runner-{mode}"
        scores = ir_measures.calc_aggregate([nDCG @ 10, P @ 1], qrels, ir_measures.read_trec_run(str(run_file)))
        assert scores[P @ 1] == 1.0, (mode, scores)


def test_beir_file_without_records_is_a_usage_error(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("nothing here\n")
    result = invoke(["index", "--beir-corpus", str(corpus), "--db", str(tmp_path / "x.sqlite")])
    assert result.exit_code == 2 and "no BEIR records" in result.output


@pytest.mark.hash_embedder  # the refusal does not depend on the model: no MiniLM index needed
def test_index_built_with_another_model_is_refused(db_copy):
    import sqlite3

    with sqlite3.connect(db_copy) as conn:
        conn.execute("UPDATE meta SET value = 'some-other-model' WHERE key = 'embedding_model'")
    result = invoke(["search", "kubernetes", "--db", str(db_copy)])
    assert result.exit_code == 2 and "some-other-model" in result.output and "index" in result.output
