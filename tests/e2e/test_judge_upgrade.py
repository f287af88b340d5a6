"""A judge upgrade end to end: a compare run judged offline, judged again by an LLM judge (``rejudge``), then
the LLM judge's weekly run on the same search; ``trend`` bridges the judge change through the re-judged run,
and the pull-request summary says nothing changed and nothing was paid for."""

from __future__ import annotations

import json

import pytest

from tests.support.batch_runs import env_for, judge_requests
from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import FakeLLMServer
from tests.support.rejudge_runs import judged_run, lines, new_file, rejudge

pytestmark = pytest.mark.hash_embedder


def test_a_judge_upgrade_is_bridged_system_by_system_and_an_unchanged_search_costs_nothing(query_set, db_copy, tmp_path):
    out, cache = tmp_path / "results", tmp_path / "judgments.sqlite"
    old = judged_run(query_set, db_copy, out, cache, "--search-mode", "fts,hybrid")
    with FakeLLMServer() as server:
        env = env_for(server, "anthropic")
        before = set(out.glob("*.jsonl"))
        assert rejudge(old, out, cache, "--provider", "anthropic", env=env).exit_code == 0
        bridge = new_file(out, before)
        paid = len(judge_requests(server, "anthropic"))
        before = set(out.glob("*.jsonl"))
        args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--out-dir", str(out), "--cache", str(cache)]
        weekly = invoke([*args, "--search-mode", "fts,hybrid", "--provider", "anthropic"], env)
        assert weekly.exit_code == 0, weekly.output
        assert len(judge_requests(server, "anthropic")) == paid > 0  # the same results under the same judge: nothing asked
    new = new_file(out, before)
    ids = {name: lines(path)[0]["runId"] for name, path in (("old", old), ("bridge", bridge), ("new", new))}

    trend = json.loads(invoke(["trend", str(out), "--format", "json"]).output)
    [step] = trend["judgeChanges"]
    assert (step["from"], step["to"]) == (ids["old"], ids["bridge"]) and step["fromJudge"].startswith("offline/")
    assert set(step["comparisons"]) == {"overall", "nDCG@10"} and set(step["systems"]) == {"hybrid"}  # fts is the shown system
    rows = {(r["runId"], r.get("system")): r for g in trend["groups"] for r in g["runs"]}
    against = rows[(ids["new"], "fts")]["vsPrevious"]
    assert against["runId"] == ids["bridge"] and against["changes"][0].startswith(f"compared through {ids['bridge']}")
    assert all(c["delta"] == 0 for c in against["comparisons"].values())
    assert trend["latest"]["runId"] == ids["new"] and not trend["latest"]["regression"]

    summary = invoke(["report", str(out), "--format", "github"])
    assert summary.exit_code == 0, summary.output
    text = summary.output
    assert f"against the previous run `{ids['bridge']}`" in text and "**No change**" in text and "0 judge calls" in text
    assert "| hybrid (vs fts) |" in text
    assert "Judge change at " in text and f"re-judged as {ids['bridge']}" in text
