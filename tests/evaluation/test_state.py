"""The run loop's pure parts: RunState's record and stop operations, and the status a run ends with."""

from __future__ import annotations

import pytest

from judge_runner.core.failures import RunStatus
from judge_runner.evaluation.state import MAX_FAILED_SHARE, RunEnd, RunState, end_status
from judge_runner.llm.errors import AuthError, BudgetExhausted, SpendLimitError, TransientError


def line(query_id: str = "q1") -> dict:
    return {"queryId": query_id}


def test_records_count_and_ordinary_failures_do_not_stop():
    state = RunState(total=10)
    state.record_evaluation(line("q1"))
    state.record_error(line("q2"), TransientError("HTTP 503", 4))
    assert state.done == 2 and not state.stopped and state.stop_reason is None
    assert end_status(state, budget_exhausted=False, gate=None) == RunEnd(RunStatus.OK)


@pytest.mark.parametrize(
    "exc,status,reason,budget",
    [
        (BudgetExhausted("budget spent"), RunStatus.INCOMPLETE, "budget_exhausted", True),
        (SpendLimitError("spend limit reached"), RunStatus.INCOMPLETE, "spend_limit", False),
        (AuthError("the API key was refused"), RunStatus.CONFIG_ERROR, "auth_error", False),
    ],
)
def test_stopping_failures(exc, status, reason, budget):
    state = RunState(total=10)
    state.record_error(line(), exc)
    assert state.stopped and state.stop_status is status and state.stop_reason == reason
    assert state.budget_exhausted is budget
    end = end_status(state, budget_exhausted=budget, gate=None)
    assert end.status is status and reason in end.reasons


def test_first_reason_kept_and_the_graver_status_wins():
    state = RunState(total=10)
    state.record_error(line("q1"), BudgetExhausted("spent"))
    state.record_error(line("q2"), AuthError("refused"))
    state.record_error(line("q3"), SpendLimitError("limit"))
    assert state.stop_status is RunStatus.CONFIG_ERROR and state.stop_reason == "budget_exhausted"
    assert end_status(state, budget_exhausted=True, gate=None).status is RunStatus.CONFIG_ERROR


def test_interrupt_is_incomplete():
    state = RunState(total=5)
    state.record_evaluation(line())
    state.interrupt()
    assert state.interrupted and state.stopped and state.stop_reason == "interrupted"
    assert end_status(state, budget_exhausted=False, gate=None) == RunEnd(RunStatus.INCOMPLETE, ("interrupted",))


def test_too_many_failures_is_incomplete_with_the_count():
    state = RunState(total=4)
    for i in range(2):
        state.record_error(line(f"q{i}"), RuntimeError("database is locked"))
    assert 2 / 4 > MAX_FAILED_SHARE and not state.stopped
    end = end_status(state, budget_exhausted=False, gate=None)
    assert end.status is RunStatus.INCOMPLETE and end.reasons == ("2 of 4 queries failed (more than 25%)",)
    state = RunState(total=4)
    state.record_error(line(), RuntimeError("x"))
    assert end_status(state, budget_exhausted=False, gate=None).status is RunStatus.OK  # a quarter is not more


def test_the_failure_gate_counts_each_system_of_a_compare_run_on_its_own_queries():
    state = RunState(total=28, systems=2)  # hybrid and a command, 14 queries each
    for i in range(5):
        state.record_error({"queryId": f"q{i}", "system": "command:b"}, RuntimeError("exit status 1"))
    assert 5 / 28 < MAX_FAILED_SHARE < 5 / 14  # over every system it would pass
    end = end_status(state, budget_exhausted=False, gate=None)
    assert end.status is RunStatus.INCOMPLETE and end.reasons == ("command:b: 5 of 14 queries failed (more than 25%)",)
    state = RunState(total=28, systems=2)
    for i in range(3):  # 3 of 14 is not more than a quarter, nor is each system's share
        state.record_error({"queryId": f"q{i}", "system": "command:b"}, RuntimeError("x"))
        state.record_error({"queryId": f"q{i}", "system": "hybrid"}, RuntimeError("x"))
    assert end_status(state, budget_exhausted=False, gate=None).status is RunStatus.OK


def test_gate_failed_says_by_how_much_and_incomplete_outranks_it():
    state = RunState(total=2)
    gate = {"minOverall": 0.6, "overall": 0.5, "passed": False}
    assert end_status(state, budget_exhausted=False, gate=gate) == RunEnd(
        RunStatus.GATE_FAILED, ("average overall 0.500 is below --min-overall 0.6",)
    )
    assert end_status(state, budget_exhausted=False, gate={**gate, "overall": None}).reasons == (
        "average overall none evaluated is below --min-overall 0.6",
    )
    assert end_status(state, budget_exhausted=False, gate={**gate, "passed": True}).status is RunStatus.OK
    state.interrupt()
    assert end_status(state, budget_exhausted=False, gate=gate).status is RunStatus.INCOMPLETE


def test_budget_seen_exhausted_only_at_the_end_is_incomplete():
    state = RunState(total=2)
    assert end_status(state, budget_exhausted=True, gate=None) == RunEnd(RunStatus.INCOMPLETE, ("budget_exhausted",))


@pytest.mark.parametrize(
    "exc,status,reason,interrupted,budget",
    [
        (KeyboardInterrupt(), RunStatus.INCOMPLETE, "interrupted", True, False),
        (BudgetExhausted("spent"), RunStatus.INCOMPLETE, "phase one: budget_exhausted", False, True),
        (AuthError("refused"), RunStatus.CONFIG_ERROR, "phase one: auth_error", False, False),
        (TransientError("HTTP 529", 4), RunStatus.INCOMPLETE, "phase one: transient_error", False, False),
    ],
)
def test_phase_one_stopped(exc, status, reason, interrupted, budget):
    state = RunState(total=0)
    state.phase_one_stopped(exc)
    assert (state.stop_status, state.stop_reason, state.interrupted, state.budget_exhausted) == (status, reason, interrupted, budget)
    assert end_status(state, budget_exhausted=budget, gate=None).status is status
