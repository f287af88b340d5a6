"""Issue 15 follow-up: what a new-user trial of ``--batch`` found (budget, resume, weekly, refused keys,
lost batches, summary scopes, cost), each through the REAL SDKs against the loopback fake's batch APIs
(tests/fakes/fake_batches.py) on the 15-query set of tests/test_batch.py (hash embedder)."""

from __future__ import annotations

import json

import pytest

from tests.fakes.fake_llm import FakeLLMServer, first_user_text, offered_tools
from tests.test_batch import evaluate, lines_of, query_set  # noqa: F401 - query_set is a fixture

pytestmark = pytest.mark.hash_embedder


def submitted_bodies(server) -> list[dict]:
    return [body for b in server.batches.submitted for body in b["bodies"]]


# -- 1. a budget below the batch's worst case ----------------------------------------------------------------


def test_a_budget_below_the_worst_case_waits_for_the_next_batch_instead_of_failing(query_set, db_copy, tmp_path):  # noqa: F811
    with FakeLLMServer() as server:
        result = evaluate(server, "anthropic", query_set, db_copy, tmp_path / "runs", "--batch", "--max-budget-usd", "1.0")
        batches = server.batches.count()
    lines = lines_of(tmp_path / "runs")
    summary = lines[-1]
    assert result.exit_code == 0, result.output
    assert summary["evaluated"] == 15 and summary["failed"] == 0 and summary["budgetExhausted"] is False
    assert summary["costUsd"] <= 1.0 and batches > 2  # what did not fit waited for a later batch
    # the start warning compares the budget with the worst case at batch prices, and says what happens
    assert "at batch prices is above --max-budget-usd 1.00: requests that do not fit wait for a later batch" in result.output


def test_a_query_whose_labels_were_paid_gets_its_list_verdict_first(query_set, db_copy, tmp_path):  # noqa: F811
    with FakeLLMServer() as server:
        result = evaluate(server, "anthropic", query_set, db_copy, tmp_path / "runs", "--batch", "--max-budget-usd", "0.2")
        bodies = submitted_bodies(server)
    lines = lines_of(tmp_path / "runs")
    summary = lines[-1]
    assert result.exit_code == 3 and summary["budgetExhausted"] is True and summary["costUsd"] <= 0.2
    assert summary["evaluated"] > 0 and summary["evaluated"] + summary["failed"] == 15
    labelled = [first_user_text(b) for b in bodies if "record_label" in offered_tools("anthropic", b)]
    verdicts = [b for b in bodies if "record_list_verdict" in offered_tools("anthropic", b)]
    queries = [q["query"] for q in json.loads(query_set.read_text())["queries"]]
    paid = [q for q in queries if any(q in text for text in labelled)]
    without_verdict = [q for q in paid if not any(q in first_user_text(v) for v in verdicts)]
    assert paid and without_verdict == [], "labels paid for, list verdict never asked"
    errors = [line for line in lines if line["type"] == "error"]
    assert {e["errorType"] for e in errors} <= {"budget_exhausted"}
