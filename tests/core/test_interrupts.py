"""Where a Ctrl+C or SIGTERM may land (judge_runner.core.interrupts), and that a stopped run starts
no request (Budget.halt): unit tests of the pieces tests/e2e/test_stop_signals.py drives end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judge_runner.core.interrupts import STOP, handling
from judge_runner.llm.base import ChatProvider, Completion
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import CallsStopped, TransientError
from judge_runner.llm.pricing import Usage
from judge_runner.llm.retry import RetryPolicy
from tests.support.isolated import run_isolated

# The tests below that send signals to their own process run each body in a fresh interpreter (run_isolated):
# a crashed test worker of the suite's two, seen under load, took the whole run with it.


def deliver(number: int = signal.SIGINT) -> None:
    """Send this process ``number`` and give the main thread bytecodes to run its handler on, until it has
    run (it counts the signal, or raises), for at most 10 s: a fixed number of loops was too few on a
    loaded machine."""
    before = STOP.count
    os.kill(os.getpid(), number)
    deadline = time.monotonic() + 10.0
    while STOP.count == before and time.monotonic() < deadline:
        pass
    assert STOP.count > before, "the signal's handler did not run within 10 s"


def outside_a_held_section_a_signal_is_ctrl_c_and_both_signals_are_one_request() -> None:
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


def test_outside_a_held_section_a_signal_is_ctrl_c_and_both_signals_are_one_request():
    run_isolated(f"{__name__}:outside_a_held_section_a_signal_is_ctrl_c_and_both_signals_are_one_request")


def inside_a_held_section_signals_only_ask_and_a_raising_section_raises_once() -> None:
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


def test_inside_a_held_section_signals_only_ask_and_a_raising_section_raises_once():
    run_isolated(f"{__name__}:inside_a_held_section_signals_only_ask_and_a_raising_section_raises_once")


def a_held_function_holds_each_call() -> None:
    calls = []

    @STOP.held()
    def run() -> None:
        deliver()
        calls.append(STOP.requested.is_set())

    with handling():
        run()
        run()
    assert calls == [True, True]


def test_a_held_function_holds_each_call():
    run_isolated(f"{__name__}:a_held_function_holds_each_call")


# A second signal landing at each line the first one's handler runs (its callees' lines included), one
# after the other, in a process of its own: a handler that takes a lock (threading.Event.set did) deadlocks
# at the line where it holds it, as two SIGTERMs at once hung a run for good. os.kill to itself
# in a single-threaded process: the second handler runs at the main thread's next check for signals, there.
SECOND_SIGNAL_EVERYWHERE = """
import os, signal, sys
from judge_runner.core.interrupts import STOP, handling

state = {"inside": 0, "lines": 0, "at": 0, "sent": False}

def local(frame, event, arg):
    if event == "line" and state["inside"] and not state["sent"]:
        state["lines"] += 1
        if state["lines"] == state["at"]:
            state["sent"] = True
            os.kill(os.getpid(), signal.SIGTERM)
    if event == "return" and frame.f_code is STOP.handle.__func__.__code__:
        state["inside"] -= 1
    return local

def tracer(frame, event, arg):
    if frame.f_code is STOP.handle.__func__.__code__:
        state["inside"] += 1
    return local if state["inside"] else None

at = 0
while True:
    at += 1
    state.update(inside=0, lines=0, at=at, sent=False)
    with handling():
        with STOP.held():
            sys.settrace(tracer)
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):
                    pass
            finally:
                sys.settrace(None)
            if state["sent"]:  # both counted, and the second made the stop urgent
                assert STOP.count == 2 and STOP.requested.is_set() and STOP.urgent.is_set(), (at, STOP.count)
    if not state["sent"]:  # the first handler has fewer lines than this: every line was tried
        print(f"tried {at - 1} lines")
        break
"""


def test_a_second_signal_anywhere_inside_the_first_ones_handler_neither_hangs_nor_is_lost():
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    try:
        done = subprocess.run([sys.executable, "-c", SECOND_SIGNAL_EVERYWHERE], env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a second signal inside the first one's handler deadlocked it")
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[1]) >= 3, done.stdout  # the handler's own lines at least


class _Flaky(ChatProvider):
    """A provider whose first request fails for a passing reason, while the run is stopped."""

    name = "flaky"

    def __init__(self, budget: Budget):
        super().__init__("flaky-model", RetryPolicy(max_retries=3, sleep=lambda s: None), budget)
        self.sent = 0

    def classify(self, exc):
        return "retryable" if isinstance(exc, TransientError) else None

    def _send(self, request, timeout) -> Completion:
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
