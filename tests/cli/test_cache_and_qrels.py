"""The judge protocol through the command line (offline judge, hash embedder): the judgment cache across
runs and processes, ``cache stats|prune``, ``qrels export|import``, format version 2 and ``trend`` over
versions 1 and 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ir_measures
import pytest

from judge_runner.analysis.trend import build_trend
from judge_runner.search.trec import encode_id
from tests.support.clitools import KEEP_ALL, invoke, run_lines

pytestmark = pytest.mark.hash_embedder
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def indexed(fixtures_root, tmp_path):
    """A hash-embedder index of the fixtures and a 6-query offline query set: ``(db, queries.json)``."""
    db = tmp_path / "idx" / "index.sqlite"
    assert invoke(["index", str(fixtures_root), "--db", str(db)]).exit_code == 0
    queries = tmp_path / "queries.json"
    result = invoke(["generate", "--fixtures", str(fixtures_root), "--count", "6", "--out", str(queries), *KEEP_ALL])
    assert result.exit_code == 0, result.output
    return db, queries


def evaluate(db, queries, out, *extra):
    result = invoke(["evaluate", "--queries", str(queries), "--db", str(db), "--out-dir", str(out), *extra])
    assert result.exit_code == 0, result.output
    return run_lines(out), result.output


def test_rerun_is_served_by_the_cache_and_says_so(indexed, tmp_path):
    db, queries = indexed
    first, _ = evaluate(db, queries, tmp_path / "a")
    second, output = evaluate(db, queries, tmp_path / "b")
    assert (db.parent / "judgments.sqlite").is_file()  # beside the index
    start = second[0]
    assert start["formatVersion"] == 2 and start["provenance"]["judgeFingerprint"]["mode"] == "pointwise"
    assert start["config"]["judgmentCache"] == str(db.parent / "judgments.sqlite")
    assert first[-1]["labelsCached"] == 0 and first[-1]["labelsJudged"] > 0
    assert second[-1]["labelsJudged"] == 0 and second[-1]["labelsCached"] == first[-1]["labelsJudged"]
    assert f"{second[-1]['labelsCached']} from the cache" in output
    assert [e["scores"] for e in first[1:-1]] == [e["scores"] for e in second[1:-1]]
    third, _ = evaluate(db, queries, tmp_path / "c", "--no-cache")
    assert third[-1]["labelsCached"] == 0 and third[0]["config"]["judgmentCache"] is None
    batched, _ = evaluate(
        db, queries, tmp_path / "d", "--judge-mode", "batched", "--trials", "2", "--cache", str(tmp_path / "other.sqlite")
    )
    assert batched[0]["provenance"]["judgeFingerprint"]["mode"] == "batched" and batched[-1]["trials"] == 2
    assert (tmp_path / "other.sqlite").is_file()


def test_two_processes_sharing_the_cache_both_finish(indexed, tmp_path):
    db, queries = indexed
    env = {**os.environ, "JUDGE_RUNNER_EMBEDDER": "hash", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(key, None)
    cache = tmp_path / "shared.sqlite"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "judge_runner.cli",
                "evaluate",
                "--queries",
                str(queries),
                "--db",
                str(db),
                "--out-dir",
                str(tmp_path / f"p{i}"),
                "--cache",
                str(cache),
                "--quiet",
            ],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    runs = [run_lines(tmp_path / f"p{i}") for i in (1, 2)]
    for lines in runs:
        assert lines[-1]["type"] == "summary" and lines[-1]["evaluated"] == 6 and lines[-1]["failed"] == 0
    assert [e["scores"] for e in runs[0][1:-1]] == [e["scores"] for e in runs[1][1:-1]]
    result = invoke(["cache", "stats", "--cache", str(cache), "--json"])
    stats = json.loads(result.output)
    assert stats["judgments"] == runs[0][-1]["labelsJudged"] + runs[0][-1]["labelsCached"] + sum(
        1 for e in runs[0][1:-1] if e["listCached"] is not None
    )


def test_qrels_export_gives_the_runs_own_ndcg_through_ir_measures(indexed, tmp_path):
    db, queries = indexed
    lines, _ = evaluate(db, queries, tmp_path / "a")
    run_file = next((tmp_path / "a").glob("*.jsonl"))
    qrels_path = tmp_path / "judged.qrels"
    result = invoke(["qrels", "export", str(run_file), "--out", str(qrels_path), "--db", str(db)])
    assert result.exit_code == 0, result.output
    qrels = list(ir_measures.read_trec_qrels(str(qrels_path)))
    run = [
        ir_measures.ScoredDoc(e["queryId"], encode_id(r["source"]), float(len(e["results"]) - i))
        for e in lines[1:-1]
        if e["metrics"]
        for i, r in enumerate(e["results"])
    ]
    measured = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 10], qrels, run)}
    own = {e["queryId"]: e["metrics"]["nDCG@10"] for e in lines[1:-1] if e["metrics"] and e["results"]}
    assert own and set(own) <= set(measured)
    for qid, value in own.items():
        assert measured[qid] == pytest.approx(value, abs=1e-6), qid


def _export_ndcg(lines, qrels_path):
    """Per query, ir_measures' nDCG@10 of the run ``lines`` on the qrels at ``qrels_path``, and the run's own."""
    qrels = list(ir_measures.read_trec_qrels(str(qrels_path)))
    run = [
        ir_measures.ScoredDoc(e["queryId"], encode_id(r["source"]), float(len(e["results"]) - i))
        for e in lines[1:-1]
        if e["metrics"]
        for i, r in enumerate(e["results"])
    ]
    measured = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 10], qrels, run)}
    own = {e["queryId"]: e["metrics"]["nDCG@10"] for e in lines[1:-1] if e["metrics"] and e["results"]}
    return measured, own


def test_qrels_export_takes_the_people_sets_the_run_was_scored_with(indexed, tmp_path):
    db, queries = indexed
    first, _ = evaluate(db, queries, tmp_path / "a")
    ev = next(e for e in first[1:-1] if len(e["results"]) >= 2)
    qid, top, second = ev["queryId"], ev["results"][0]["source"], ev["results"][1]["source"]
    judged = ev["results"][0]["relevance"]
    for name, doc, grade in (("team", top, 3 - judged), ("other", second, 3), ("other", "docs/nobody-returned.md", 3)):
        path = tmp_path / f"{name}.qrels"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{qid} 0 {encode_id(doc)} {grade}\n")
    for name in ("team", "other"):
        result = invoke(["qrels", "import", str(tmp_path / f"{name}.qrels"), "--name", name, "--queries", str(queries), "--db", str(db)])
        assert result.exit_code == 0, result.output
    for out, extra in (("team", ("--human-qrels", "team")), ("nocache", ("--no-cache",))):
        lines, _ = evaluate(db, queries, tmp_path / out, *extra)
        run_file = next((tmp_path / out).glob("*.jsonl"))
        qrels_path = tmp_path / f"{out}.export"
        result = invoke(["qrels", "export", str(run_file), "--out", str(qrels_path), "--db", str(db)])
        assert result.exit_code == 0, result.output
        assert "nobody-returned" not in qrels_path.read_text(encoding="utf-8")  # the set the run did not use
        measured, own = _export_ndcg(lines, qrels_path)
        assert qid in own
        for q, value in own.items():
            assert measured[q] == pytest.approx(value, abs=1e-6), (out, q)
    team_run = str(next((tmp_path / "team").glob("*.jsonl")))
    judge_only = tmp_path / "judge.export"
    assert invoke(["qrels", "export", team_run, "--out", str(judge_only), "--db", str(db), "--no-human"]).exit_code == 0
    assert f"{qid} 0 {encode_id(top)} {judged}\n" in judge_only.read_text(encoding="utf-8")  # the judge's label, not the person's
    every = tmp_path / "every.export"
    assert invoke(["qrels", "export", str(run_file), "--out", str(every), "--db", str(db), "--all-human"]).exit_code == 0
    assert "nobody-returned" in every.read_text(encoding="utf-8")
    both = invoke(
        ["qrels", "export", *(str(next((tmp_path / o).glob("*.jsonl"))) for o in ("team", "nocache")), "--out", str(every), "--db", str(db)]
    )
    assert both.exit_code == 2 and "different sets of people's grades" in both.output


def test_qrels_import_then_runs_use_human_labels(indexed, tmp_path):
    db, queries = indexed
    first, _ = evaluate(db, queries, tmp_path / "a")
    ev = next(e for e in first[1:-1] if e["results"])
    source = ev["results"][0]["source"]
    human = tmp_path / "human.qrels"
    human.write_text(f"{ev['queryId']} 0 {encode_id(source)} 1\n", encoding="utf-8")
    result = invoke(["qrels", "import", str(human), "--name", "team", "--rescale", "1=3", "--db", str(db)])
    assert result.exit_code == 0 and "imported 1 human labels" in result.output
    second, output = evaluate(db, queries, tmp_path / "b")
    assert second[-1]["humanLabels"] == 1 and "1 human" in output
    again = next(e for e in second[1:-1] if e["queryId"] == ev["queryId"])
    assert again["results"][0]["relevance"] == 3 and again["results"][0]["labelOrigin"] == "human"
    other, _ = evaluate(db, queries, tmp_path / "c", "--human-qrels", "another-set")  # only the sets named apply
    assert other[-1]["humanLabels"] == 0
    bad = invoke(["qrels", "import", str(human), "--name", "bad name", "--db", str(db)])
    assert bad.exit_code == 2


def test_cache_prune_and_usage_errors(indexed, tmp_path):
    db, queries = indexed
    evaluate(db, queries, tmp_path / "a")
    cache = str(db.parent / "judgments.sqlite")
    assert "judgments" in invoke(["cache", "stats", "--db", str(db)]).output
    assert invoke(["cache", "prune", "--older-than", "30d", "--cache", cache]).output.strip() == "deleted 0 judgments"
    assert invoke(["cache", "prune", "--older-than", "0h", "--cache", cache]).output.startswith("deleted ")
    assert json.loads(invoke(["cache", "stats", "--cache", cache, "--json"]).output)["judgments"] == 0
    assert invoke(["cache", "prune", "--older-than", "soon", "--cache", cache]).exit_code == 2
    assert invoke(["cache", "stats", "--cache", str(tmp_path / "missing.sqlite")]).exit_code == 2


def test_trend_reads_versions_1_and_2_and_never_compares_them(indexed, tmp_path):
    db, queries = indexed
    results = tmp_path / "results"
    for _ in range(2):
        assert invoke(["evaluate", "--queries", str(queries), "--db", str(db), "--out-dir", str(results)]).exit_code == 0
    v1 = ROOT / "tests" / "data" / "runs-before-format-version"
    for path in v1.glob("*.jsonl"):
        (results / path.name).write_bytes(path.read_bytes())
    trend = build_trend(results)
    keys = [g["judgeKey"] for g in trend.groups]
    assert len(keys) == len(set(keys)) and len(trend.groups) >= 2
    v2 = [g for g in trend.groups if not g["judgeKey"].startswith("v1:")]
    assert len(v2) == 1 and len(v2[0]["runs"]) == 2
    latest = v2[0]["runs"][-1]
    assert latest["vsPrevious"]["runId"] == v2[0]["runs"][0]["runId"]  # compared only within its fingerprint
    for group in trend.groups:
        if group["judgeKey"].startswith("v1:"):
            assert all(r.get("vsPrevious", {}).get("runId") not in {x["runId"] for x in v2[0]["runs"]} for r in group["runs"])
    result = invoke(["trend", str(results), "--format", "json"])
    assert result.exit_code == 0
    report = invoke(["report", str(results), "--out", str(tmp_path / "reports")])
    assert report.exit_code == 0, report.output
