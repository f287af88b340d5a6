"""The "done when" list of the label-first judge protocol, through the REAL anthropic and openai SDKs against
the loopback fake server (whose default brain answers the label-first tools with the honest judge of
tests/support/fakes/honest_judge.py), and through the offline heuristic judge.

- pointwise: one call per result plus one list-level call per query; batched: one call per query and
  trial, in a different order per trial; no request holds a rank number or an engine score; every
  document is inside its fence with nothing delimiter-like left; the schema puts reason before relevance;
- a re-run on the same index and queries makes no call at all (labels and list verdicts cached);
- trials: median label, spread per result, Krippendorff's alpha in the summary;
- the injection pair gets its clean twin's label on both judges;
- off-topic queries are kept out of the dimension means; human labels win.
"""

from __future__ import annotations

import json

import pytest

from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fence import render_document
from judge_runner.judging.heuristic import HeuristicJudge
from judge_runner.judging.labelling import LabelTask, ProtocolSettings, label_documents
from judge_runner.judging.llm_judge import LLMJudge
from judge_runner.judging.protocol import LabelReply, ListVerdict
from judge_runner.judging.qrels import import_human_qrels
from judge_runner.llm.anthropic_provider import AnthropicProvider
from judge_runner.llm.budget import Budget
from judge_runner.llm.openai_provider import OpenAIProvider
from judge_runner.llm.retry import RetryPolicy
from tests.support.fakes.fake_llm import FakeLLMServer, first_user_text, offered_tools
from tests.support.fakes.honest_judge import fenced_documents, request_problems
from tests.support.injection_cases import injection_pair
from tests.support.protocol_runs import DOCS, ENGINE_SCORES, queries, run

MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}
APIS = ["anthropic", "openai"]
LABEL_TOOLS = ("record_label", "record_labels")


def make_provider(server: FakeLLMServer, api: str):
    cls, url = (AnthropicProvider, server.anthropic_base_url) if api == "anthropic" else (OpenAIProvider, server.openai_base_url)
    return cls(
        MODELS[api],
        RetryPolicy(max_retries=1, base_s=0.01, cap_s=0.1, deadline_s=30.0),
        Budget(),
        timeout_s=10.0,
        api_key="test-key",
        base_url=url,
    )


def tool_of(request) -> str:
    names = set(offered_tools(request.api, request.body))
    assert len(names) == 1, names
    return names.pop()


def calls(server, tool: str) -> list:
    return [r for r in server.requests if tool_of(r) == tool]


# -- the request log ---------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_pointwise_sends_one_call_per_result_plus_one_list_call_per_query(api, tmp_path):
    with FakeLLMServer() as server:
        outcome, lines = run(tmp_path, LLMJudge(make_provider(server, api)), queries(2))
    assert outcome.summary["evaluated"] == 2 and outcome.summary["failed"] == 0
    assert len(calls(server, "record_label")) == 2 * 3 and len(calls(server, "record_list_verdict")) == 2
    assert server.count() == 2 * 3 + 2 == outcome.summary["usage"]["calls"]
    for request in server.requests:
        user = first_user_text(request.body)
        assert request_problems(user) == [], request_problems(user)
        wire = json.dumps(request.body)
        assert not any(str(score) in wire for score in ENGINE_SCORES), "an engine score reached the judge"
        if tool_of(request) == "record_label":
            assert len(fenced_documents(user)) == 1
    # the label schema sent puts the reason before the label (strict structured output writes keys in schema order)
    request = calls(server, "record_label")[0]
    schema = offered_tools(api, request.body)["record_label"]
    assert list(schema["properties"]) == ["reason", "injectionSuspected", "relevance"]
    if api == "openai":
        assert request.body["temperature"] == 0 and request.body["seed"] == 20240701  # pinned, and recorded in the fingerprint
    evaluation = lines[1]
    assert [r["relevance"] for r in evaluation["results"]] == [3, 0, 0]  # the honest judge: share of the query's words
    assert all(r["reason"] and r["trialLabels"] and r["shownFrom"] == "result" for r in evaluation["results"])
    assert evaluation["scores"]["relevance"] == 1.0  # the one answer first: all the gain attainable (scoring version 2)
    assert evaluation["scores"]["gradedPrecision"] == pytest.approx(1 / 3, abs=1e-6)  # graded precision of [3, 0, 0]
    assert evaluation["scores"]["ranking"] == 1.0 and "judgeOverall" in evaluation["scores"]
    assert evaluation["judgeModelsReturned"] == [MODELS[api]]
    assert outcome.summary["judgeReturnedModels"] == [MODELS[api]]


@pytest.mark.parametrize("api", APIS)
def test_batched_shows_a_different_order_per_trial_and_maps_labels_back(api, tmp_path):
    with FakeLLMServer() as server:
        outcome, lines = run(tmp_path, LLMJudge(make_provider(server, api)), queries(1), hits=6, judge_mode="batched", trials=3)
    label_calls = calls(server, "record_labels")
    assert len(label_calls) == 3 and len(calls(server, "record_list_verdict")) == 1
    search_order = [s for s, _, _ in DOCS]
    orders = []
    for request in label_calls:
        user = first_user_text(request.body)
        assert request_problems(user) == []
        docs = fenced_documents(user)
        assert [d["id"] for d in docs] == [f"D{i}" for i in range(1, 7)]
        orders.append([d["source"] for d in docs])
    assert len({tuple(o) for o in orders}) == 3, "every trial shows its own order"
    assert all(o != search_order and sorted(o) == sorted(search_order) for o in orders)
    results = lines[1]["results"]
    assert [r["relevance"] for r in results] == [3, 0, 0, 0, 1, 1]  # mapped back to the search's order
    assert all(len(r["shownAs"]) == 3 and r["trialLabels"] == [r["relevance"]] * 3 and r["labelSpread"] == 0 for r in results)
    assert outcome.summary["trials"] == 3 and outcome.summary["judgeMode"] == "batched"


@pytest.mark.parametrize("mode", ["pointwise", "batched"])
def test_a_rerun_on_the_same_results_makes_no_calls(mode, tmp_path):
    with FakeLLMServer() as server, JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        judge = LLMJudge(make_provider(server, "openai"))
        first, _ = run(tmp_path / "a", judge, queries(2), cache=cache, judge_mode=mode)
        made = server.count()
        second, lines = run(tmp_path / "b", judge, queries(2), cache=cache, judge_mode=mode)
    assert made == (2 * 3 + 2 if mode == "pointwise" else 2 + 2)
    assert server.count() == made, "the re-run sent requests"
    assert first.summary["labelsJudged"] == 6 and first.summary["labelsCached"] == 0
    assert second.summary["labelsJudged"] == 0 and second.summary["labelsCached"] == 6
    evaluations = [l for l in lines if l["type"] == "evaluation"]
    assert all(r["cached"] for e in evaluations for r in e["results"]) and all(e["listCached"] for e in evaluations)
    assert all(e["usage"]["inputTokens"] == 0 and e["usage"]["costUsd"] == 0 for e in evaluations)
    assert second.summary["averageScores"] == first.summary["averageScores"]


# -- trials, human labels, off-topic queries ----------------------------------------------------------


class FlakyJudge(HeuristicJudge):
    """The heuristic judge, but trial 1 labels every document one grade higher (capped at 3)."""

    calls = 0

    def label_one(self, query, intent, document, sampling, log=lambda m: None):
        reply = super().label_one(query, intent, document, sampling, log)
        FlakyJudge.calls += 1
        return reply if FlakyJudge.calls % 3 != 2 else type(reply)(label=min(3, reply.label + 1), reason=reply.reason)


@pytest.mark.hash_embedder
def test_trials_give_the_median_label_its_spread_and_alpha(tmp_path):
    from judge_runner.embed.registry import instance

    outcome, lines = run(tmp_path, FlakyJudge(instance("hash")), queries(3), trials=3, hits=4)
    results = [r for l in lines if l["type"] == "evaluation" for r in l["results"]]
    assert all(len(r["trialLabels"]) == 3 for r in results)
    for r in results:
        assert r["relevance"] == sorted(r["trialLabels"])[1] and r["labelSpread"] == max(r["trialLabels"]) - min(r["trialLabels"])
    assert any(r["labelSpread"] for r in results)
    alpha = outcome.summary["trialsAlpha"]
    assert alpha is not None and -1 <= alpha < 1


@pytest.mark.hash_embedder
def test_off_topic_queries_are_kept_out_of_the_means_and_scored_on_abstention(tmp_path):
    from judge_runner.embed.registry import instance

    outcome, lines = run(tmp_path, HeuristicJudge(instance("hash")), queries(2, off_topic=2))
    evaluations = {l["queryId"]: l for l in lines if l["type"] == "evaluation"}
    for qid in ("x1", "x2"):
        ev = evaluations[qid]
        assert all(v is None for v in ev["scores"].values()) and ev["metrics"] is None and ev["abstained"] is True
        assert len(ev["results"]) == 3 and all("reason" in r for r in ev["results"])  # still labelled
    on_topic = [evaluations["q1"]["scores"]["overall"], evaluations["q2"]["scores"]["overall"]]
    assert outcome.summary["averageScores"]["overall"] == pytest.approx(sum(on_topic) / 2, abs=1e-6)
    assert outcome.summary["abstention"]["accuracy"] == 1.0 and outcome.summary["abstention"]["falseAbstentionRate"] == 0.0


@pytest.mark.hash_embedder
def test_human_labels_win_and_the_judges_label_is_kept_beside(tmp_path):
    from judge_runner.embed.registry import instance

    qrels = tmp_path / "human.qrels"
    qrels.write_text("q1 0 notes/lunch.md 3\nq1 0 guides/local%20dev.md 0\n", encoding="utf-8")
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        assert import_human_qrels(cache, qrels, "team") == 2
        outcome, lines = run(tmp_path, HeuristicJudge(instance("hash")), queries(1), cache=cache)
    results = {r["source"]: r for r in lines[1]["results"]}
    assert results["notes/lunch.md"]["relevance"] == 3 and results["notes/lunch.md"]["labelOrigin"] == "human"
    assert lines[1]["humanLabels"] == 1 and outcome.summary["humanLabels"] == 1
    # regression: the judge still labels the human-labelled result (cached after), and its label is kept beside
    assert lines[1]["labelsJudged"] == 3
    lunch = results["notes/lunch.md"]
    assert lunch["judgeLabel"] in (0, 1, 2, 3) and lunch["trialLabels"] == [lunch["judgeLabel"]]
    assert all(r["judgeLabel"] is None for s, r in results.items() if s != "notes/lunch.md")
    # judgeOnly: the line's own relevance rule (scoring version 2), fed the judge's labels instead of the person's
    from judge_runner.judging.scores import label_dimensions

    own = [r["judgeLabel"] if r["labelOrigin"] == "human" else r["relevance"] for r in lines[1]["results"]]
    sources = [r["source"] for r in lines[1]["results"]]
    expected = label_dimensions(own, sources, lines[1]["expectedSources"], depth=10)["relevance"]
    assert lines[1]["judgeOnly"]["relevance"] == pytest.approx(expected, abs=1e-6)
    human = [r["relevance"] for r in lines[1]["results"]]
    assert lines[1]["scores"]["relevance"] == pytest.approx(
        label_dimensions(human, sources, lines[1]["expectedSources"], depth=10)["relevance"]
    )
    assert all(r["shownText"] for r in lines[1]["results"])


# -- the injection pair ---------------------------------------------------------------------------------


def _pair_labels(judge, mode):
    pair = injection_pair()
    protocol = ProtocolSettings(mode)
    alone = [label_documents(judge, LabelTask(pair.query, pair.intent, [doc]), protocol)[0] for doc in (pair.clean, pair.twin)]
    together = label_documents(judge, LabelTask(pair.query, pair.intent, [pair.clean, pair.twin]), protocol)
    return alone, together


@pytest.mark.parametrize("mode", ["pointwise", "batched"])
def test_injection_twin_gets_its_clean_label_on_the_offline_judge(mode, embedder):
    alone, together = _pair_labels(HeuristicJudge(embedder), mode=mode)
    assert alone[0].label == alone[1].label and together[0].label == together[1].label
    assert alone[1].injection_suspected and not alone[0].injection_suspected


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", ["pointwise", "batched"])
def test_injection_twin_gets_its_clean_label_on_an_honest_fake_judge(api, mode):
    with FakeLLMServer() as server:
        alone, together = _pair_labels(LLMJudge(make_provider(server, api)), mode=mode)
    assert alone[0].label == alone[1].label == 3 and together[0].label == together[1].label == 3
    assert alone[1].injection_suspected and not alone[0].injection_suspected
    for request in server.requests:
        user = first_user_text(request.body)
        assert request_problems(user) == [], request_problems(user)
    # each fenced twin shows its text with every spoofed tag neutralised
    twin = render_document(*injection_pair().twin)
    assert twin.injection_suspected and "replicaof no one" in twin.body


def test_replies_are_built_with_keywords_only():
    with pytest.raises(TypeError):
        LabelReply(2, "a reason")  # type: ignore[misc]
    with pytest.raises(TypeError):
        ListVerdict(0.5, 0.5, {}, {}, [])  # type: ignore[misc]
    reply = LabelReply(label=2, reason="a reason", shown_as="D1")
    assert (reply.label, reply.reason, reply.shown_as, reply.cost_usd) == (2, "a reason", "D1", 0.0)
    verdict = ListVerdict.from_payload(ListVerdict(coverage=0.5, snippet_quality=0.25, holistic={}, analysis={}, suggestions=[]).payload())
    assert (verdict.coverage, verdict.snippet_quality) == (0.5, 0.25)
