"""``calibrate --results`` on labels made with ``label`` reads the judge's labels from the run
files: no judge call (the fake server's request log), the unweighted 4-grade kappa beside today's figures,
and the same figures as a calibration whose judge labels the same pairs (``calibrate``'s --qrels path).

The judge is the fake server's scripted judge through the real Anthropic SDK; it labels a (query, document)
by a hash of the two, so both paths get the same judge labels; the "person" labels by another hash.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from judge_runner.app.label.cache import CacheSync
from judge_runner.app.label.server import new_session
from judge_runner.calibrate.from_runs import system_lists
from judge_runner.core.printer import Printer
from judge_runner.human.journal import LabelSession
from judge_runner.human.options import Sampling
from judge_runner.runs.read import read_run_file
from tests.support.clitools import KEEP_ALL, invoke, run_lines
from tests.support.fakes.calibration_judges import QrelsJudge
from tests.support.fakes.fake_llm import FakeLLMServer

pytestmark = pytest.mark.hash_embedder
QUIET = Printer(lambda m: None, lambda m: None, quiet=True)


class HashJudge(QrelsJudge):
    """Labels a pair by a hash of (query, document): deterministic wherever and however it is shown."""

    def __init__(self):
        super().__init__({})

    def label(self, query: str, docid: str, text: str, slot: int, count: int) -> int:
        return zlib.crc32(f"{query}|{docid}".encode()) % 4


@pytest.fixture
def judged(fixtures_root, tmp_path):
    """An index, a 6-query set, and a run judged by the scripted judge: ``(server, env, run file, cache)``."""
    db = tmp_path / "idx" / "index.sqlite"
    assert invoke(["index", str(fixtures_root), "--db", str(db)]).exit_code == 0
    queries = tmp_path / "queries.json"
    assert invoke(["generate", "--fixtures", str(fixtures_root), "--count", "6", "--out", str(queries), *KEEP_ALL]).exit_code == 0
    cache = tmp_path / "judgments.sqlite"
    with FakeLLMServer(brain=HashJudge()) as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}

        def evaluate(out: str) -> Path:
            args = ["evaluate", "--queries", str(queries), "--db", str(db), "--out-dir", str(tmp_path / out), "--cache", str(cache)]
            result = invoke([*args, "--provider", "anthropic", "--judge-model", "claude-sonnet-4-6", "--quiet"], env)
            assert result.exit_code == 0, result.output
            run_lines(tmp_path / out)  # every line valid against its schema
            return next((tmp_path / out).glob("*.jsonl"))

        yield server, env, evaluate, cache


def label_everything(tmp_path, run: Path, cache: Path) -> Path:
    """Label every document of every query of ``run`` through a label session (as the page would; the person's
    grade is a hash of (query id, document), unrelated to the judge's), importing into ``cache``; returns the
    qrels file."""
    sync = CacheSync(cache, "team")
    sync.open()
    session = LabelSession(tmp_path / "labels", "team", sync)
    new_session(session, [read_run_file(run)], Sampling(queries=100, seed=1), "ada", QUIET)
    while (item := session.current()) is not None:
        grade = zlib.crc32(f"{item.qid}/{item.source}".encode()) % 4
        session.act("label", item.id, "ada", grade)
    assert sync.close().complete
    return session.qrels


def calibrate_results(tmp_path, env, out: str, *extra) -> dict:
    path = tmp_path / out
    result = invoke(["calibrate", *extra, "--out", str(path), "--bootstrap", "200", "--quiet"], env)
    assert result.exit_code == 0, result.output
    assert "no judge call" in result.output
    return json.loads(path.read_text())


def test_calibrate_on_labels_from_label_makes_no_call_and_matches_the_judged_calibration(tmp_path, judged, monkeypatch):
    server, env, evaluate, cache = judged
    first = evaluate("runs-a")
    qrels = label_everything(tmp_path, first, cache)
    before = server.count()
    from_set = calibrate_results(tmp_path, env, "a.json", "--results", str(first), "--human-qrels", "team", "--cache", str(cache))
    from_file = calibrate_results(tmp_path, env, "b.json", "--results", str(first), "--qrels", str(qrels))
    assert server.count() == before  # the request log: not one judge call
    figures = from_set["modes"]["pointwise"]
    agreement = figures["agreement"]["all"]
    assert agreement["pairs"] == len(qrels.read_text().splitlines()) and agreement["pairs"] > 20
    assert agreement["kappaUnweighted"]["value"] is not None and from_set["collection"]["graded"]
    assert from_file["modes"] == from_set["modes"] and from_file["verdict"] == from_set["verdict"]
    assert from_set["judge"]["fingerprintKey"] and from_set["judge"]["provider"] == "anthropic"
    assert from_set["verdict"]["checks"]["ranking"]["status"] == "insufficient"  # one system: not enough evidence
    assert from_set["spend"]["totalCalls"] == 0 and from_set["labels"]["humanQrelsSet"] == "team"

    # the same pairs labelled by the same judge through calibrate's own path (what `calibrate --qrels` runs)
    from judge_runner.app.steps import make_roles
    from judge_runner.calibrate.data import CalibrationQuery, Collection
    from judge_runner.calibrate.labeling import labeler_for
    from judge_runner.calibrate.run import CalibrationConfig, calibrate
    from judge_runner.config import load_settings
    from judge_runner.judging.qrels import read_trec_qrels

    run = read_run_file(first)
    human: dict[str, dict[str, int]] = {}
    for qid, docid, grade in read_trec_qrels(qrels):
        human.setdefault(qid, {})[docid] = grade
    corpus = tmp_path / "corpus.jsonl"
    docs = {r.source: (r.anchor or "", r.shownText or "") for ev in run.evaluations for r in ev.results}
    corpus.write_text("".join(json.dumps({"_id": s, "title": t, "text": x}) + "\n" for s, (t, x) in docs.items()), encoding="utf-8")
    texts = {ev.queryId: ev.query for ev in run.evaluations if ev.queryId in human}
    collection = Collection(texts, human, corpus, True, "run files")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = load_settings({"provider": "anthropic", "judge_model": "claude-sonnet-4-6"}, cwd=tmp_path)
    labeler = labeler_for(make_roles(settings, False, lambda m: None).judge)
    config = CalibrationConfig(probes=(), resamples=200, depth=10)
    judged_doc = calibrate(collection, [CalibrationQuery(q, t) for q, t in sorted(texts.items())], system_lists([run]), labeler, config)
    assert server.count() > before  # this one did call the judge
    ours, theirs = figures, judged_doc["modes"]["pointwise"]
    assert ours["agreement"]["all"] == theirs["agreement"]["all"]
    assert ours["systems"]["nDCG@10"]["systems"] == theirs["systems"]["nDCG@10"]["systems"]


def test_a_later_run_keeps_the_judges_label_beside_the_human_one_and_calibrates_alike(tmp_path, judged):
    server, env, evaluate, cache = judged
    first = evaluate("runs-a")
    label_everything(tmp_path, first, cache)
    second = evaluate("runs-b")  # the human labels now win; the judge's come from the cache, recorded beside
    lines = [json.loads(line) for line in second.read_text().splitlines()]
    # every document of every scored query was labelled (off-topic queries have no nDCG@10: not sampled)
    results = [r for line in lines if line["type"] == "evaluation" and line["metrics"] is not None for r in line["results"]]
    assert results and all(r["labelOrigin"] == "human" and r["judgeLabel"] is not None for r in results)
    summary = lines[-1]
    assert summary["labelsJudged"] == 0 and summary["biasCorrected"]["labelledQueries"] >= 5
    a = calibrate_results(tmp_path, env, "a.json", "--results", str(first), "--human-qrels", "team", "--cache", str(cache))
    b = calibrate_results(tmp_path, env, "b.json", "--results", str(second), "--human-qrels", "team", "--cache", str(cache))
    assert a["modes"]["pointwise"]["agreement"] == b["modes"]["pointwise"]["agreement"]
    both = calibrate_results(
        tmp_path, env, "c.json", "--results", str(first), "--results", str(second), "--human-qrels", "team", "--cache", str(cache)
    )
    assert len(both["systems"]) == 2 and both["verdict"]["checks"]["ranking"]["status"] == "insufficient"  # 2 systems


def test_results_mode_refuses_what_does_not_apply(tmp_path, judged):
    _, env, evaluate, cache = judged
    run = evaluate("runs-a")
    result = invoke(["calibrate", "--results", str(run), "--beir", str(tmp_path)], env)
    assert result.exit_code == 2 and "--beir does not apply" in result.output
    result = invoke(["calibrate", "--results", str(run)], env)
    assert result.exit_code == 2 and "--qrels FILE" in result.output
    result = invoke(["calibrate", "--results", str(run), "--human-qrels", "nobody", "--cache", str(cache)], env)
    assert result.exit_code == 2 and "no human qrels named 'nobody'" in result.output
    other = tmp_path / "other.qrels"
    other.write_text("zz 0 nothing.md 3\n", encoding="utf-8")
    result = invoke(["calibrate", "--results", str(run), "--qrels", str(other)], env)
    assert result.exit_code == 2 and "no query of these runs has human labels" in result.output
