"""Issue 24: where a Ctrl+C or SIGTERM may land (judge_runner.core.interrupts), and that a stopped run starts
no request (Budget.halt): unit tests of the pieces tests/test_stop_signals.py drives end to end."""

from __future__ import annotations

import os
import signal

import pytest

from judge_runner.core.interrupts import STOP, handling
from judge_runner.llm.base import ChatProvider, Completion
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import CallsStopped, TransientError
from judge_runner.llm.pricing import Usage
from judge_runner.llm.retry import RetryPolicy


def deliver(number: int = signal.SIGINT) -> None:
    """Send this process ``number`` and give the main thread bytecodes to run its handler on."""
    os.kill(os.getpid(), number)
    for _ in range(10_000):
        pass


def test_outside_a_held_section_a_signal_is_ctrl_c_and_both_signals_are_one_request():
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with handling():
        with pytest.raises(KeyboardInterrupt):
            deliver(signal.SIGTERM)
        assert STOP.requested.is_set() and not STOP.urgent.is_set()
        with pytest.raises(KeyboardInterrupt):
            deliver(signal.SIGINT)
        assert STOP.urgent.is_set() and STOP.count == 2
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert not STOP.requested.is_set() and STOP.last_count == 2  # forgotten for what runs next, counted for the exit


def test_inside_a_held_section_signals_only_ask_and_a_raising_section_raises_once():
    with handling():
        with STOP.held():
            deliver()  # nothing raised: the code inside checks STOP.requested at its own safe points
            assert STOP.requested.is_set() and not STOP.urgent.is_set()
            deliver(signal.SIGTERM)
            assert STOP.urgent.is_set()
            with pytest.raises(KeyboardInterrupt):  # a stop was already asked for: a raising section refuses to start
                with STOP.raising():
                    pass
    with handling():
        with STOP.held():
            with pytest.raises(KeyboardInterrupt):
                with STOP.raising():  # e.g. a search: interruptible where it is
                    deliver()
            deliver()  # the second signal, while the first unwinds: only recorded
            assert STOP.urgent.is_set() and STOP.count == 2


def test_a_held_function_holds_each_call():
    calls = []

    @STOP.held()
    def run() -> None:
        deliver()
        calls.append(STOP.requested.is_set())

    with handling():
        run()
        run()
    assert calls == [True, True]


class _Flaky(ChatProvider):
    """A provider whose first request fails for a passing reason, while the run is stopped."""

    name = "flaky"

    def __init__(self, budget: Budget):
        super().__init__("flaky-model", RetryPolicy(max_retries=3, sleep=lambda s: None), budget)
        self.sent = 0

    def classify(self, exc):
        return "retryable" if isinstance(exc, TransientError) else None

    def _send(self, system, turns, tools, force_tool, max_tokens, cache_system, timeout, sampling=None) -> Completion:
        self.sent += 1
        self.budget.halt("interrupted")  # Ctrl+C while this request was on its way
        error = TransientError("HTTP 529 overloaded", 1)
        error.retryable = True
        raise error


def test_a_stopped_run_starts_no_call_and_no_retry():
    budget = Budget()
    provider = _Flaky(budget)
    with pytest.raises(CallsStopped):
        provider.complete("system", [], [])
    assert provider.sent == 1, "a retry was sent after the run stopped"
    assert budget.usage.calls == 1  # the request that went out is on the bill, the one that did not is not
    with pytest.raises(CallsStopped):
        provider.complete("system", [], [])  # a new call does not even reserve
    assert provider.sent == 1 and budget.usage == Usage(calls=1)
