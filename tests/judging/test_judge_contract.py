"""The judge contract (docs/design.md, "The judge protocol"), run over every Judge implementation of
tests/support/judges.py: the LLM judge on both providers and over a batch API, the offline heuristic judge, and
the dry run's recording judge.

Each labels the same query and six documents: a 0-3 integer label per document with the documented fields,
the labels of a batched call in the documents' own order whatever order they were shown in and equal to the
pointwise ones, list verdicts with the documented fields in range, usage and cost reported consistently
(nothing for a judge that sends nothing; tokens, attempts and a price on the one paid reply of a call), the
same answer to the same call, and no call that takes a rank, a score or a system.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
from pathlib import Path

import pytest

from judge_runner.judging.fence import RenderedDocument, render_document
from judge_runner.judging.fingerprint import sampling_settings
from judge_runner.judging.protocol import Judge, LabelReply, ListVerdict
from judge_runner.judging.requests import ListItem
from judge_runner.llm.pricing import Usage
from tests.support.judges import JUDGES, JudgeCase
from tests.support.protocol_runs import DOCS

PACKAGE = Path(__file__).resolve().parents[2] / "judge_runner"
QUERY = "promote the redis replica"
INTENT = "Fail the cache over."
DOCUMENTS = [render_document(source, anchor, text) for source, anchor, text in DOCS]
RELEVANT, UNRELATED = 0, 2  # the redis failover runbook; the canteen's lunch note
ORDERS = [list(range(len(DOCS))), list(reversed(range(len(DOCS)))), [2, 0, 5, 1, 4, 3]]
METHODS = ("label_one", "label_batch", "list_verdict")


@pytest.fixture(params=JUDGES, ids=[case.id for case in JUDGES])
def case(request) -> JudgeCase:
    return request.param


@pytest.fixture
def under_test(case):
    with case.open() as opened:
        yield opened


def sampling(judge) -> dict:
    return sampling_settings(judge.name) if not judge.heuristic else {}


def label_one(under_test, k: int) -> LabelReply:
    return under_test.call("label_one", QUERY, INTENT, DOCUMENTS[k], sampling(under_test.judge))


def label_batch(under_test, order: list[int]) -> list[LabelReply]:
    return under_test.call("label_batch", QUERY, INTENT, DOCUMENTS, order, sampling(under_test.judge))


def list_items(labels: list[int]) -> list[ListItem]:
    return [
        ListItem(render_document(source, anchor, text[:60]), label, "the contract's label")
        for (source, anchor, text), label in zip(DOCS, labels)
    ]


def check_cost(case: JudgeCase, reply: LabelReply | ListVerdict, *, paid: bool) -> None:
    """What a call reports it cost: nothing for a judge that sends nothing or a reply that carries no call
    (a batched call's cost is on its first reply); tokens, at least one attempt and a price otherwise."""
    assert isinstance(reply.usage, Usage)
    assert isinstance(reply.attempts, int) and reply.attempts >= 0
    assert isinstance(reply.latency_s, float | int) and reply.latency_s >= 0
    assert reply.cost_usd is None or (isinstance(reply.cost_usd, float | int) and math.isfinite(reply.cost_usd) and reply.cost_usd >= 0)
    if case.offline or not paid:
        assert reply.usage == Usage() and reply.attempts == 0 and not reply.cost_usd
    else:
        assert reply.attempts >= 1 and reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
        assert reply.cost_usd is not None and reply.cost_usd > 0  # both models are priced in pricing.json


def check_label(reply: LabelReply) -> None:
    assert isinstance(reply, LabelReply)
    assert type(reply.label) is int and 0 <= reply.label <= 3
    assert isinstance(reply.reason, str) and isinstance(reply.injection_suspected, bool)
    assert reply.model_returned is None or isinstance(reply.model_returned, str)


# -- the registry ---------------------------------------------------------------------------------------------
def judge_classes() -> set[str]:
    """``module:Class`` of every class in judge_runner/ that answers the three calls of the judge protocol
    (the protocol itself left out)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not any(getattr(b, "id", None) == "Protocol" for b in node.bases):
                methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                if set(METHODS) <= methods:
                    found.add(f"{module}:{node.name}")
    return found


def test_every_judge_of_the_package_is_under_the_contract():
    registered = {f"{case.cls.__module__}:{case.cls.__name__}" for case in JUDGES}
    found = judge_classes()
    assert "judge_runner.judging.llm_judge:LLMJudge" in found and "judge_runner.judging.heuristic:HeuristicJudge" in found
    assert found <= registered, f"judges without a case in tests/support/judges.py: {sorted(found - registered)}"


def test_what_a_judge_is_given_holds_no_rank_score_or_system():
    for model in (RenderedDocument, ListItem):
        names = {f.name.lower() for f in dataclasses.fields(model)}
        assert not {n for n in names if "rank" in n or "score" in n or "system" in n}, (model, names)


# -- the contract ---------------------------------------------------------------------------------------------
def test_a_judge_says_what_it_is(case, under_test):
    judge = under_test.judge
    assert isinstance(judge, case.cls)
    assert isinstance(judge.name, str) and judge.name and isinstance(judge.model, str) and judge.model
    assert judge.heuristic is case.heuristic


def test_its_calls_take_what_the_protocol_gives_and_nothing_more(case):
    for method in METHODS:
        wanted = list(inspect.signature(getattr(Judge, method)).parameters)
        assert list(inspect.signature(getattr(case.cls, method)).parameters) == wanted, method


def test_label_one_grades_each_document_0_to_3_and_says_what_it_cost(case, under_test):
    replies = [label_one(under_test, k) for k in range(len(DOCS))]
    for reply in replies:
        check_label(reply)
        check_cost(case, reply, paid=True)
        assert reply.shown_as is None
    if under_test.server is not None and not case.batch_api:
        assert sum(r.attempts for r in replies) == under_test.server.count()  # every request the fake received


def test_label_batch_answers_in_the_documents_order_whatever_order_they_were_shown_in(case, under_test):
    answers = []
    for order in ORDERS:
        replies = label_batch(under_test, order)
        assert len(replies) == len(DOCS)
        for k, reply in enumerate(replies):
            check_label(reply)
            check_cost(case, reply, paid=k == 0)  # the call's cost on the first reply, once
            assert reply.shown_as == f"D{order.index(k) + 1}"
        answers.append([r.label for r in replies])
    assert answers[0] == answers[1] == answers[2]


def test_a_label_belongs_to_the_query_and_the_document_not_to_the_call(case, under_test):
    pointwise = [label_one(under_test, k).label for k in range(len(DOCS))]
    assert [r.label for r in label_batch(under_test, ORDERS[2])] == pointwise
    if case.grades:
        assert pointwise[RELEVANT] >= 2 and pointwise[UNRELATED] == 0, pointwise


def test_list_verdict_has_the_documented_fields_in_range(case, under_test):
    verdict = under_test.call(
        "list_verdict", QUERY, INTENT, [DOCS[RELEVANT][0]], list_items([3, 1, 0, 0, 2, 0]), sampling(under_test.judge)
    )
    assert isinstance(verdict, ListVerdict)
    assert 0 <= verdict.coverage <= 1 and 0 <= verdict.snippet_quality <= 1
    assert {"relevance", "ranking", "overall"} <= set(verdict.holistic)
    assert all(0 <= float(v) <= 1 for v in verdict.holistic.values()), verdict.holistic
    assert {"coverage", "snippetQuality"} <= set(verdict.analysis) and all(isinstance(v, str) for v in verdict.analysis.values())
    assert isinstance(verdict.suggestions, list | tuple) and all(isinstance(s, str) for s in verdict.suggestions)
    check_cost(case, verdict, paid=True)
    payload = verdict.payload()
    assert payload["scores"] == {"coverage": verdict.coverage, "snippetQuality": verdict.snippet_quality}


def test_the_same_call_gets_the_same_answer(case, under_test):
    first = [label_one(under_test, k) for k in (RELEVANT, UNRELATED)]
    again = [label_one(under_test, k) for k in (RELEVANT, UNRELATED)]
    assert [(r.label, r.reason) for r in first] == [(r.label, r.reason) for r in again]
    items = list_items([3, 0, 0, 0, 0, 0])
    verdicts = [under_test.call("list_verdict", QUERY, INTENT, [DOCS[RELEVANT][0]], items, sampling(under_test.judge)) for _ in range(2)]
    assert verdicts[0].payload() == verdicts[1].payload()
