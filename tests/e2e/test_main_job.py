"""The main job end to end through the CLI: offline provider, and the real anthropic and openai SDKs
against the loopback fake server."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from judge_runner.core.resources import load_schema
from tests.support.clitools import invoke, run_lines
from tests.support.fakes.fake_llm import DefaultBrain, FakeLLMServer, ToolCall, first_user_text, offered_tools

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder


def test_offline_main_job(fixtures_root, db_copy, tmp_path):
    out = tmp_path / "results"
    result = invoke(["generate-and-evaluate", "--fixtures", str(fixtures_root), "--db", str(db_copy), "--out-dir", str(out)])
    assert result.exit_code == 0, result.output
    lines = run_lines(out)
    # phase one's checks may drop some of the 15 written queries; the card accounts for each
    card = lines[0]["querySetCard"]
    assert card["written"] == 15 and card["kept"] + len(card["dropped"]) == 15 and card["kept"] >= 10
    assert [l["type"] for l in lines] == ["run_start"] + ["evaluation"] * card["kept"] + ["summary"]
    start, summary = lines[0], lines[-1]
    assert start["provenance"]["provider"] == "offline" and start["provenance"]["heuristicJudge"] is True
    assert set(start["provenance"]["promptSha256"]) == {
        "generate_system.md",
        "generate_user.md",
        "judge_label_system.md",
        "judge_label_user.md",
        "judge_labels_user.md",
        "judge_list_system.md",
        "judge_list_user.md",
    }
    assert start["formatVersion"] == 2 and start["provenance"]["judgeFingerprint"]["heuristic"] is True
    assert summary["evaluated"] == card["kept"] and summary["failed"] == 0 and summary["heuristicJudge"] is True
    evaluations = lines[1:-1]
    off_topic = [e for e in evaluations if e["queryType"] == "off-topic"]
    assert off_topic and all(e["metrics"] is None and e["abstained"] is not None for e in off_topic)
    assert all(e["metrics"] is not None and e["abstained"] is None for e in evaluations if e["queryType"] != "off-topic")
    assert summary["abstention"]["offTopic"] == len(off_topic)
    assert summary["abstention"]["correct"] == sum(e["abstained"] for e in off_topic)
    on_topic = [e for e in evaluations if e["queryType"] != "off-topic"]
    assert all(e["scores"]["overall"] is None for e in off_topic)  # scored on abstention only
    mean_overall = sum(e["scores"]["overall"] for e in on_topic) / len(on_topic)
    assert summary["averageScores"]["overall"] == pytest.approx(mean_overall, abs=1e-6)
    # phase one's answerability labels are in the judgment cache: phase two reuses those whose passage it shows
    assert summary["labelsJudged"] + summary["labelsCached"] == sum(e["resultCount"] for e in evaluations)
    assert 0 < summary["labelsCached"] <= card["answerability"]["calls"] and summary["judgeMode"] == "pointwise"
    assert f"[1/{card['kept']}]" in result.output and "overall:" in result.output and "heuristic" in result.output
    assert "abstained" in result.output


def test_offline_quality_gate_exit_1(fixtures_root, db_copy, tmp_path):
    result = invoke(
        [
            "generate-and-evaluate",
            "--fixtures",
            str(fixtures_root),
            "--db",
            str(db_copy),
            "--out-dir",
            str(tmp_path / "r"),
            "--count",
            "3",
            "--min-overall",
            "0.99",
            "--quiet",
        ]
    )
    assert result.exit_code == 1, result.output


def test_generate_then_evaluate_separately(fixtures_root, db_copy, tmp_path):
    queries = tmp_path / "q.json"
    result = invoke(["generate", "--fixtures", str(fixtures_root), "--count", "4", "--out", str(queries), "--no-cache"])
    assert result.exit_code == 0, result.output
    data = json.loads(queries.read_text())
    jsonschema.validate(data, load_schema("query_set.schema.json"))
    assert len(data["queries"]) + len(data["card"]["dropped"]) == 4 and data["card"]["kept"] == len(data["queries"]) >= 2
    result = invoke(["evaluate", "--queries", str(queries), "--db", str(db_copy), "--out-dir", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    lines = run_lines(tmp_path / "r")
    assert [l["queryId"] for l in lines if l["type"] == "evaluation"] == [q["id"] for q in data["queries"]]


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_main_job_through_real_sdk(api, fixtures_root, db_copy, tmp_path):
    out = tmp_path / "results"
    with FakeLLMServer() as server:
        env = (
            {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
            if api == "anthropic"
            else {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": server.openai_base_url}
        )
        result = invoke(
            [
                "generate-and-evaluate",
                "--fixtures",
                str(fixtures_root),
                "--db",
                str(db_copy),
                "--out-dir",
                str(out),
                "--count",
                "5",
                "--provider",
                "auto",
            ],
            env,
        )
        requests = list(server.requests)
    assert result.exit_code == 0, result.output
    lines = run_lines(out)
    evaluations = [l for l in lines if l["type"] == "evaluation"]
    summary = lines[-1]
    assert lines[0]["provenance"]["provider"] == api and lines[0]["provenance"]["heuristicJudge"] is False
    # the default brain globs **/*.md and submits 4 on-topic queries plus one off-topic query; phase one's
    # answerability check drops those the judge finds unanswered by their expected source (the card says which)
    card = lines[0]["querySetCard"]
    assert card["written"] == 5 and card["kept"] + len(card["dropped"]) == 5 and card["answerability"]["checked"] == 4
    assert len(evaluations) == card["kept"] >= 3 and summary["evaluated"] == card["kept"] and summary["failed"] == 0
    assert {e["queryType"] for e in evaluations} >= {"off-topic"}
    # phase one used the sandboxed tools: list_dir, glob, read_file, then submit_queries (4 requests)
    judge_tools = {"record_label", "record_labels", "record_list_verdict"}
    phase_one = [r for r in requests if not set(offered_tools(api, r.body)) & judge_tools]
    assert len(phase_one) == 4
    # pointwise: one label call per result not in the judgment cache (phase one's answerability labels are
    # there: phase two reuses each one whose passage it shows), plus one list-level call per on-topic query with results
    judge_requests = [r for r in requests if r not in phase_one]
    labels = [r for r in judge_requests if "record_label" in offered_tools(api, r.body)]
    assert len(labels) == card["answerability"]["calls"] + sum(e["labelsJudged"] for e in evaluations)
    assert sum(e["labelsJudged"] + e["labelsCached"] for e in evaluations) == sum(e["resultCount"] for e in evaluations)
    assert sum(e["labelsCached"] for e in evaluations) >= 1  # at least one label of phase one reused
    assert len(judge_requests) - len(labels) == sum(1 for e in evaluations if e["queryType"] != "off-topic" and e["resultCount"])
    for e in evaluations:
        assert len(e["results"]) == e["resultCount"]
        if e["queryType"] != "off-topic" and e["resultCount"]:
            parts = [e["scores"][d] for d in ("relevance", "ranking", "coverage", "snippetQuality")]
            assert e["scores"]["overall"] == pytest.approx(sum(parts) / 4, abs=1e-6) and "judgeOverall" in e["scores"]
    # usage and cost add up: default models are priced, so cost is known and positive
    assert summary["costUsd"] is not None and summary["costUsd"] > 0
    assert summary["usage"]["calls"] == len(requests)
    assert summary["judgeReturnedModels"] and "test-key" not in json.dumps(lines)
    # one model wrote the queries and judges them: the run says so (circularity)
    assert lines[0]["provenance"]["judgeIsGenerator"] is True and summary["judgeIsGenerator"] is True
    assert "also wrote the queries" in result.output
    if api == "openai":  # the judge asks for structured output, strict, reason before the label
        response_format = labels[0].body["response_format"]
        assert response_format["type"] == "json_schema" and response_format["json_schema"]["strict"] is True
        assert list(response_format["json_schema"]["schema"]["properties"]) == ["reason", "injectionSuspected", "relevance"]
    if api == "anthropic":
        system = judge_requests[0].body["system"]
        assert system[0]["cache_control"] == {"type": "ephemeral"}
        assert summary["usage"]["cacheReadTokens"] > 0
        assert summary["cachedInputShare"] > 0 and "of input tokens read from it" in result.output


def test_invalid_verdict_becomes_error_line_and_run_goes_on(fixtures_root, db_copy, tmp_path):
    """One query's judge keeps answering a label of 7: after 2 re-asks it is an error line, never a zero,
    and the other queries are still judged."""
    default = DefaultBrain()
    bad_query = {}

    def brain(api, body):
        reply = default(api, body)
        if isinstance(reply, ToolCall) and reply.name == "record_label":
            query = re.search(r"<query>(.*?)</query>", first_user_text(body)).group(1)
            bad_query.setdefault("query", query)
            if query == bad_query["query"]:
                return ToolCall("record_label", {**reply.input, "relevance": 7})
        return reply

    out = tmp_path / "results"
    with FakeLLMServer(brain=brain) as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        result = invoke(
            [
                "generate-and-evaluate",
                "--fixtures",
                str(fixtures_root),
                "--db",
                str(db_copy),
                "--out-dir",
                str(out),
                "--count",
                "5",
                "--concurrency",
                "1",
            ],
            env,
        )
    lines = run_lines(out)
    errors = [l for l in lines if l["type"] == "error"]
    summary = lines[-1]
    assert len(errors) == 1 and errors[0]["errorType"] == "invalid_output" and errors[0]["stage"] == "judge"
    assert "relevance" in errors[0]["message"]
    assert summary["evaluated"] == 4 and summary["failed"] == 1
    evaluated = [l for l in lines if l["type"] == "evaluation" and l["queryType"] != "off-topic"]
    assert summary["averageScores"]["overall"] == pytest.approx(sum(e["scores"]["overall"] for e in evaluated) / len(evaluated), abs=1e-6)
    assert "raw reply" in result.output  # the invalid reply is logged (stderr is mixed into output here)
    assert result.exit_code == 0  # 1 of 5 failed is under the incomplete threshold


def test_invalid_api_key_exits_2(fixtures_root, db_copy, tmp_path):
    with FakeLLMServer() as server:
        env = {"ANTHROPIC_API_KEY": "invalid-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        result = invoke(
            [
                "generate-and-evaluate",
                "--fixtures",
                str(fixtures_root),
                "--db",
                str(db_copy),
                "--out-dir",
                str(tmp_path / "r"),
                "--count",
                "3",
            ],
            env,
        )
        assert server.count() == 1  # 401 is never retried
    assert result.exit_code == 2
    assert "invalid-key" not in result.output and "API key was refused" in result.output


def test_search_json_contract(db_copy):
    result = invoke(["search", "drain a kubernetes node", "--db", str(db_copy), "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert answer["results"][0]["source"] == "runbooks/kubernetes-node-drain.md"
    first = answer["results"][0]
    assert set(first) >= {"rank", "source", "anchor", "lineStart", "lineEnd", "snippet", "score", "scores", "matchedBy"}
    assert answer["confident"] is True


def test_missing_index_and_bad_fixtures_are_usage_errors(tmp_path):
    result = invoke(["search", "x", "--db", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2 and "no index" in result.output
    result = invoke(["generate-and-evaluate", "--fixtures", str(tmp_path / "missing"), "--db", str(tmp_path / "i.sqlite")])
    assert result.exit_code == 2 and "not found" in result.output


def test_budget_spent_in_phase_one_still_writes_a_run_file(fixtures_root, db_copy, tmp_path):
    out = tmp_path / "results"
    with FakeLLMServer() as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        # one generation call may cost up to 8192 output tokens x $15/M = $0.12: over a $0.01 budget
        result = invoke(
            [
                "generate-and-evaluate",
                "--fixtures",
                str(fixtures_root),
                "--db",
                str(db_copy),
                "--out-dir",
                str(out),
                "--max-budget-usd",
                "0.01",
            ],
            env,
        )
        assert server.count() == 0  # no call was started
    assert result.exit_code == 3, result.output
    lines = run_lines(out)
    assert [l["type"] for l in lines] == ["run_start", "summary"]
    assert lines[-1]["budgetExhausted"] is True and lines[-1]["stopReason"] == "phase one: budget_exhausted"


def test_resume_judges_only_what_is_missing(fixtures_root, db_copy, tmp_path):
    out = tmp_path / "results"
    with FakeLLMServer() as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        assert (
            invoke(
                ["generate-and-evaluate", "--fixtures", str(fixtures_root), "--db", str(db_copy), "--out-dir", str(out), "--count", "5"],
                env,
            ).exit_code
            == 0
        )
        full = run_lines(out)
        original = next(out.glob("*.jsonl"))
        # simulate a run killed after two judgments, mid-write of the third
        interrupted_dir = tmp_path / "interrupted"
        interrupted_dir.mkdir()
        raw = original.read_text().splitlines()
        cut = interrupted_dir / original.name
        cut.write_text("\n".join(raw[:3]) + "\n" + raw[3][:40])
        (interrupted_dir / full[0]["config"]["querySetFile"]).write_text((out / full[0]["config"]["querySetFile"]).read_text())
        before = server.count()
        result = invoke(["evaluate", "--resume", str(cut), "--db", str(db_copy), "--out-dir", str(interrupted_dir), "--no-cache"], env)
        judged_again = server.count() - before
    assert result.exit_code == 0, result.output
    # the two finished queries were not sent again (without the cache, the other three are judged anew)
    rest = [e for e in full if e["type"] == "evaluation"][2:]
    assert judged_again == sum(e["resultCount"] + (1 if e["queryType"] != "off-topic" and e["resultCount"] else 0) for e in rest)
    assert cut.read_text().endswith(raw[3][:40])  # the old file is untouched
    resumed = sorted(interrupted_dir.glob("*.jsonl"))
    resumed = [p for p in resumed if p != cut]
    assert len(resumed) == 1
    lines = [json.loads(l) for l in resumed[0].read_text().splitlines()]
    assert {l["runId"] for l in lines} == {full[0]["runId"]}
    assert lines[0]["resumedFrom"] == cut.name
    evaluations = [l for l in lines if l["type"] == "evaluation"]
    # the copied lines first, in their order; the rest as they were judged (concurrently: any order)
    ids = [e["queryId"] for e in full if e["type"] == "evaluation"]
    assert [e["queryId"] for e in evaluations][:2] == ids[:2] and sorted(e["queryId"] for e in evaluations) == sorted(ids)
    kept = full[0]["querySetCard"]["kept"]  # phase one's checks may drop some of the 5 written
    assert lines[-1]["type"] == "summary" and lines[-1]["evaluated"] == kept and lines[-1]["totalQueries"] == kept >= 3
    assert lines[0]["timestamp"] == full[0]["timestamp"] and "resumedAt" in lines[0]  # keeps its place in time
    # resuming a run whose queries are all judged does nothing and writes nothing
    again = invoke(["evaluate", "--resume", str(resumed[0]), "--db", str(db_copy), "--out-dir", str(interrupted_dir)])
    assert again.exit_code == 0 and "nothing to resume" in again.output
    assert len(list(interrupted_dir.glob("*.jsonl"))) == 2
