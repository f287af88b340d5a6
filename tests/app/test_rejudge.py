"""``judge-runner rejudge``: a past run's results judged again, with the same shown text, by today's judge."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.batch_runs import env_for, judge_requests
from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import FakeLLMServer
from tests.support.rejudge_runs import evaluations, judged_run, lines, new_file, rejudge, rewrite

pytestmark = pytest.mark.hash_embedder

VOLATILE = {"runId", "timestamp", "latencyMs", "usage", "labelsCached", "labelsJudged", "listCached"}


def test_the_same_judge_judging_a_run_again_pays_for_nothing_and_gives_the_same_labels(query_set, db_copy, tmp_path):
    out, cache = tmp_path / "results", tmp_path / "judgments.sqlite"
    first = judged_run(query_set, db_copy, out, cache)
    before = set(out.glob("*.jsonl"))
    result = rejudge(first, out, cache, "--provider", "offline")
    assert result.exit_code == 0, result.output
    again = new_file(out, before)
    start, summary = lines(again)[0], lines(again)[-1]
    origin = start["provenance"]["rejudgeOf"]
    was = lines(first)
    assert origin["runId"] == was[0]["runId"] and origin["file"] == first.name and origin["timestamp"] == was[0]["timestamp"]
    assert origin["queriesRejudged"] == len(evaluations(first)) and origin["queriesNotRejudged"] == 0 and origin["stopReason"] is None
    # the judge was shown exactly what it was shown then (source, anchor, text): every label and verdict is in the cache
    assert summary["labelsJudged"] == 0 and summary["labelsCached"] == sum(e["resultCount"] for e in evaluations(first))
    assert "same judge" in result.output
    old = [{k: v for k, v in e.items() if k not in VOLATILE} for e in evaluations(first)]
    new = [{k: v for k, v in e.items() if k not in VOLATILE} for e in evaluations(again)]
    for line in old + new:
        line["results"] = [{k: v for k, v in r.items() if k != "cached"} for r in line["results"]]
    assert new == old
    # the re-judged run describes the same search: corpus, query set, search configuration
    for key in ("corpusFingerprint", "querySetSha256", "searchConfig"):
        assert start["provenance"][key] == was[0]["provenance"][key], key
    # a re-judged run judged again keeps the first run's place in time
    before = set(out.glob("*.jsonl"))
    assert rejudge(again, out, cache, "--provider", "offline").exit_code == 0
    twice = lines(new_file(out, before))[0]["provenance"]["rejudgeOf"]
    assert twice["runId"] == start["runId"] and twice["timestamp"] == was[0]["timestamp"]


def test_a_new_judge_is_shown_the_text_the_first_judge_was_shown_and_nothing_is_searched(query_set, db_copy, tmp_path):
    out, cache = tmp_path / "results", tmp_path / "judgments.sqlite"
    first = judged_run(query_set, db_copy, out, cache)
    before = set(out.glob("*.jsonl"))
    with FakeLLMServer() as server:
        result = rejudge(first, out, cache, "--provider", "anthropic", env=env_for(server, "anthropic"))
        sent = [json.dumps(r.body, ensure_ascii=False) for r in judge_requests(server, "anthropic")]
    assert result.exit_code == 0, result.output
    again = new_file(out, before)
    assert not (out / "no-index.sqlite").exists()  # no index was opened: the results are the recorded ones
    shown = [(r["source"], r["shownAnchor"], r["shownText"]) for e in evaluations(first) for r in e["results"]]
    for source, anchor, text in shown:
        block = json.dumps(f"source: {source}\nanchor: {anchor}\ntext:\n{text}", ensure_ascii=False)[1:-1]
        assert any(block in body for body in sent), source
    rejudged = evaluations(again)
    assert [[r["source"] for r in e["results"]] for e in rejudged] == [[r["source"] for r in e["results"]] for e in evaluations(first)]
    assert [(r["shownText"], r["shownAnchor"]) for e in rejudged for r in e["results"]] == [(t, a) for _, a, t in shown]
    start = lines(again)[0]
    assert start["provenance"]["provider"] == "anthropic" and start["provenance"]["rejudgeOf"]["judge"].startswith("offline/")


def test_a_file_without_the_shown_text_is_refused_and_says_why(query_set, db_copy, tmp_path):
    out, cache = tmp_path / "results", tmp_path / "judgments.sqlite"
    first = judged_run(query_set, db_copy, out, cache)

    def without_text(line):
        for result in line.get("results") or []:
            result.pop("shownText", None)
        return line

    rewrite(first, without_text)
    result = rejudge(first, tmp_path / "again", cache, "--provider", "offline")
    assert result.exit_code == 2
    assert "carry no shownText" in result.output and "cannot rebuild it" in result.output
    assert not (tmp_path / "again").exists() or not list((tmp_path / "again").glob("*.jsonl"))


def test_a_compare_run_is_judged_again_system_by_system(query_set, db_copy, tmp_path):
    out, cache = tmp_path / "results", tmp_path / "judgments.sqlite"
    first = judged_run(query_set, db_copy, out, cache, "--search-mode", "fts,hybrid")
    before = set(out.glob("*.jsonl"))
    result = rejudge(first, out, cache, "--provider", "offline")
    assert result.exit_code == 0, result.output
    again = new_file(out, before)
    was, now = lines(first), lines(again)
    assert (
        [s["name"] for s in now[-1]["comparison"]["systems"]] == [s["name"] for s in was[-1]["comparison"]["systems"]] == ["fts", "hybrid"]
    )
    assert now[0]["provenance"]["searchSystems"] == was[0]["provenance"]["searchSystems"]
    ranked = {(e["system"], e["queryId"]): [r["source"] for r in e["results"]] for e in evaluations(first)}
    assert {(e["system"], e["queryId"]): [r["source"] for r in e["results"]] for e in evaluations(again)} == ranked
    assert now[-1]["labelsJudged"] == 0  # both systems' labels came from the cache: the same text shown
    assert [(e["system"], e["scores"]) for e in evaluations(again)] == [(e["system"], e["scores"]) for e in evaluations(first)]


def test_a_run_cut_short_is_judged_again_on_the_queries_it_judged(query_set, db_copy, tmp_path):
    out, cache = tmp_path / "results", tmp_path / "judgments.sqlite"
    first = judged_run(query_set, db_copy, out, cache)
    judged = evaluations(first)
    dropped = {e["queryId"] for e in judged[-4:]}

    def cut(line):
        if line["type"] == "evaluation" and line["queryId"] in dropped:
            return None
        if line["type"] == "summary":
            line.update(stopReason="budget_exhausted", budgetExhausted=True, evaluated=len(judged) - 4)
        return line

    rewrite(first, cut)
    before = set(out.glob("*.jsonl"))
    result = rejudge(first, out, cache, "--provider", "offline", "--batch")
    assert result.exit_code == 0, result.output
    assert "stopped early (budget_exhausted)" in result.output and "rejudge judges synchronously" in result.output
    again = new_file(out, before)
    origin = lines(again)[0]["provenance"]["rejudgeOf"]
    assert origin["queriesRejudged"] == len(judged) - 4 and origin["queriesNotRejudged"] == 4 and origin["stopReason"] == "budget_exhausted"
    assert {e["queryId"] for e in evaluations(again)} == {e["queryId"] for e in judged} - dropped
    assert lines(again)[-1]["stopReason"] is None  # the new run judged all it was given
    # a re-judging searched nothing: evaluate cannot continue it (rejudge again, from the cache, instead)
    resumed = invoke(["evaluate", "--resume", str(again), "--db", str(db_copy), "--out-dir", str(out), "--provider", "offline"])
    assert resumed.exit_code == 2 and "evaluate cannot continue it" in resumed.output and f"rejudge {first.name}" in resumed.output


def test_the_dry_run_gives_the_cost_first_and_writes_nothing(query_set, db_copy, tmp_path):
    out, cache = tmp_path / "results", tmp_path / "judgments.sqlite"
    first = judged_run(query_set, db_copy, out, cache)
    elsewhere = tmp_path / "copy.jsonl"
    shutil.copy(first, elsewhere)
    before = sorted(out.iterdir())
    result = invoke(["rejudge", str(elsewhere), "--dry-run", "--json", "--provider", "anthropic", "--cache", str(cache)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    judged = evaluations(first)
    on_topic = [e for e in judged if e["queryType"] != "off-topic" and e["results"]]
    chosen = next(j for j in report["phaseTwo"]["judges"] if j["chosen"])
    assert report["command"] == "rejudge" and report["phaseTwo"]["queries"] == len(judged) and report["phaseTwo"]["precision"] == "recorded"
    # one label call per result (pointwise) and one list call per on-topic query: the cache holds another judge's labels
    assert chosen["provider"] == "anthropic" and chosen["calls"] == sum(e["resultCount"] for e in judged) + len(on_topic)
    assert sorted(out.iterdir()) == before
