"""One pool of judge calls. The label calls of every query in flight share the
``--concurrency`` slots (judge_runner.judging.call_pool), so 3 queries at concurrency 5 keep 5 calls in
flight; the lines, the labels and the budget stay as they were.

Against the loopback fake (the real anthropic SDK, the honest judge's deterministic labels), pointwise,
ten results per query (ten label calls and one list-level call), and the pool's own rules in unit tests.
"""

from __future__ import annotations

import threading
import time

import anthropic  # noqa: F401  - imported here so no test's timing includes the SDK's import
import pytest

from judge_runner.core.models import Query
from judge_runner.evaluation.context import QUIET, RunContext
from judge_runner.evaluation.loop import run_evaluation
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.judging.call_pool import CallPool
from judge_runner.judging.llm_judge import LLMJudge
from judge_runner.llm.anthropic_provider import AnthropicProvider
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import CallsStopped
from judge_runner.llm.retry import RetryPolicy
from judge_runner.runs.write import RunWriter, read_run
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit
from tests.support.fakes.fake_llm import DefaultBrain, FakeLLMServer, first_user_text

pytestmark = pytest.mark.hash_embedder

MODEL = "claude-sonnet-4-6"
HITS = 10
WORDS = ["redis", "failover", "sentinel", "replica", "promote", "quorum", "latency", "backup", "restore", "cluster"]


class TenHits:
    """Ten results per query, each holding a different share of the query's words (so the honest judge
    gives them different labels)."""

    def search(self, query, mode="hybrid", limit=10, intent=""):
        words = query.split()
        hits = [
            SearchHit(
                rank=i,
                source=f"doc{i}.md",
                anchor=None,
                lineStart=1,
                lineEnd=2,
                snippet=f"snippet {i}",
                text=" ".join(words[: (i % 4) + 1] + ["filler"] * i),
                score=1.0 / i,
                scores=HitScores(),
                matchedBy=["fts"],
            )
            for i in range(1, min(limit, HITS) + 1)
        ]
        return SearchAnswer(query=query, mode=mode, results=hits, confident=True, latencyMs=1.0)


def make_queries(n: int) -> list[Query]:
    return [
        Query(
            id=f"q{i}",
            query=f"{WORDS[i % len(WORDS)]} {WORDS[(i + 3) % len(WORDS)]} {WORDS[(i + 5) % len(WORDS)]} number{i}",
            queryIntent="find it",
            queryType="keyword",
            expectedSources=["doc1.md"],
        )
        for i in range(1, n + 1)
    ]


class SlowFirstQuery(DefaultBrain):
    """The fake's default brain, answering every call about the first query after ``first_s`` seconds
    and the others at once: the other queries finish first."""

    def __init__(self, first: str, first_s: float):
        super().__init__()
        self.first, self.first_s = first, first_s

    def __call__(self, api, body):
        if f"<query>{self.first}</query>" in first_user_text(body):
            time.sleep(self.first_s)
        return super().__call__(api, body)


def evaluate(server, tmp_path, queries, concurrency: int, budget: Budget | None = None):
    budget = budget if budget is not None else Budget()
    provider = AnthropicProvider(
        MODEL, RetryPolicy(max_retries=0), budget, timeout_s=30, api_key="test-key", base_url=server.anthropic_base_url
    )
    writer = RunWriter(tmp_path / f"runs-c{concurrency}-{time.monotonic_ns()}")
    options = EvaluateOptions(search_limit=HITS, concurrency=concurrency, judge_mode="pointwise")
    outcome = run_evaluation(
        queries, TenHits(), writer, {"config": {}}, RunContext(LLMJudge(provider), options, budget=budget, output=QUIET)
    )
    return outcome, list(read_run(writer.path))


def judged(lines: list[dict]) -> list[tuple]:
    """Per evaluation line, in file order: query id, the labels per result, and the scores."""
    return [(line["queryId"], [r["relevance"] for r in line["results"]], line["scores"]) for line in lines if line["type"] == "evaluation"]


# -- the run loop against the fake --------------------------------------------------------------------------


def test_three_queries_at_concurrency_5_keep_5_calls_in_flight_and_never_more(tmp_path):
    with FakeLLMServer(latency_s=0.3) as server:
        outcome, lines = evaluate(server, tmp_path, make_queries(3), concurrency=5)
        calls, most = server.count(), server.max_in_flight
    assert outcome.exit_code == 0
    assert calls == 3 * (HITS + 1)  # ten labels and one list-level call per query
    assert most == 5, f"at most {most} calls in flight (3 queries' calls one after another would be 3)"


def test_lines_follow_the_query_order_and_say_what_concurrency_1_says(tmp_path):
    queries = make_queries(7)
    with FakeLLMServer(brain=SlowFirstQuery(queries[0].query, 0.2)) as server:
        _, lines = evaluate(server, tmp_path, queries, concurrency=5)
        assert server.max_in_flight == 5
    with FakeLLMServer() as server:
        _, alone = evaluate(server, tmp_path, queries, concurrency=1)
        assert server.max_in_flight == 1
    # the first query finished last, yet its line comes first: the lines are in the queries' order
    assert [line["queryId"] for line in lines if line["type"] == "evaluation"] == [q.id for q in queries]
    assert judged(lines) == judged(alone)
    assert len({label for _, labels, _ in judged(lines) for label in labels}) > 1  # the labels say something


def test_a_budget_cap_stops_new_calls_across_the_pool(tmp_path):
    # claude-sonnet-4-6 here: a label call's worst case is about $0.022, a list-level call's $0.071, what
    # one really costs about $0.003; $0.15 holds five label calls in flight and runs out within the run
    max_usd = 0.15
    with FakeLLMServer(latency_s=0.05) as server:
        budget = Budget(max_usd=max_usd)
        outcome, lines = evaluate(server, tmp_path, make_queries(3), concurrency=5, budget=budget)
        sent, most = server.count(), server.max_in_flight
    summary = lines[-1]
    errors = [line for line in lines if line["type"] == "error"]
    assert summary["budgetExhausted"] is True and summary["stopReason"] == "budget_exhausted"
    assert errors and {e["errorType"] for e in errors} == {"budget_exhausted"}
    assert budget.charged_usd <= max_usd and 5 <= sent < 3 * (HITS + 1)
    assert most == 5  # the cap holds the calls' worst cases, it does not serialise them
    # every request the fake received is counted in a line (none went out for a query that had failed),
    # and the run's cost is theirs
    assert sent == sum(line["usage"]["calls"] for line in lines if line["type"] in ("evaluation", "error"))
    assert summary["costUsd"] == pytest.approx(budget.spent_usd, abs=1e-6)
    assert outcome.exit_code == 3


# -- the pool's rules --------------------------------------------------------------------------------------------


def blocker(pool: CallPool, priority: int = 99):
    """Fill one slot of ``pool`` with a call that runs until the returned event is set."""
    release, started = threading.Event(), threading.Event()

    def hold():
        started.set()
        release.wait(10)
        return "held"

    future = pool.lane(priority).submit(hold)
    assert started.wait(5)
    return release, future


def test_waiting_calls_start_in_lane_order_then_in_the_order_handed_in():
    pool = CallPool(1)
    try:
        release, held = blocker(pool)
        ran: list[str] = []
        futures = [pool.lane(p).submit(lambda tag=tag: ran.append(tag)) for p, tag in [(3, "q3a"), (1, "q1a"), (3, "q3b"), (1, "q1b")]]
        release.set()
        for f in [held, *futures]:
            f.result(5)
        assert ran == ["q1a", "q1b", "q3a", "q3b"]
    finally:
        pool.shutdown()


def test_a_failed_call_starts_no_later_call_of_its_query_and_others_go_on():
    pool = CallPool(1)
    try:
        release, held = blocker(pool)
        made: list[int] = []

        def label(i: int) -> int:
            made.append(i)
            if i == 0:
                raise RuntimeError("HTTP 500")
            return i

        failing, other = pool.lane(1), pool.lane(2)
        result: dict = {}
        worker = threading.Thread(target=lambda: result.setdefault("out", failing.map(label, [0, 1, 2])))
        worker.start()
        time.sleep(0.1)  # its three calls wait behind the blocker
        later = other.submit(lambda: label(7))
        release.set()
        worker.join(5)
        assert later.result(5) == 7
        [(item, exc)] = result["out"]
        assert item == 0 and isinstance(exc, RuntimeError)
        assert made == [0, 7], "a call of the failed query was made after its failure"
    finally:
        pool.shutdown()


def test_a_closed_pool_starts_no_waiting_call_and_lets_the_one_in_flight_finish():
    pool = CallPool(2)
    try:
        release, held = blocker(pool)
        _, held2 = blocker(pool)
        ran: list[int] = []
        waiting = [pool.lane(1).submit(lambda i=i: ran.append(i)) for i in range(3)]
        pool.close("interrupted")
        release.set()
        assert held.result(5) == "held"
        for f in waiting:
            with pytest.raises(CallsStopped):
                f.result(5)
        with pytest.raises(CallsStopped):
            pool.lane(0).call(lambda: ran.append(99))
        time.sleep(0.1)
        assert ran == []
    finally:
        pool.shutdown()


def test_no_more_calls_than_slots_run_at_once():
    pool = CallPool(3)
    lock, now, most = threading.Lock(), [0], [0]

    def call(i: int) -> int:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.02)
        with lock:
            now[0] -= 1
        return i

    try:
        outs: list = []
        lanes = [pool.lane(k) for k in range(4)]
        workers = [threading.Thread(target=lambda lane=lane: outs.append(lane.map(call, range(10)))) for lane in lanes]
        for w in workers:
            w.start()
        for w in workers:
            w.join(10)
        assert sorted(len(o) for o in outs) == [10] * 4 and all([i for i, _ in o] == list(range(10)) for o in outs)
        assert most[0] == pool.max_in_flight == 3
    finally:
        pool.shutdown()


def test_a_stop_request_starts_no_waiting_call_before_the_loop_sees_it():
    stop = threading.Event()
    pool = CallPool(1, stop=stop)
    try:
        release, held = blocker(pool)
        ran: list[int] = []
        waiting = pool.lane(1).submit(lambda: ran.append(1))
        stop.set()  # Ctrl+C: the loop sees it at its next wait; the slot frees first
        release.set()
        assert held.result(5) == "held"
        with pytest.raises(CallsStopped):
            waiting.result(5)
        assert ran == []
    finally:
        pool.shutdown()
