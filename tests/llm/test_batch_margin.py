"""The batch coordinator's budget room (llm/batch.BatchCoordinator.reserve): queries running at once under
``--batch --max-budget-usd``, played out with real threads and a real Budget over a batch API that answers
at once, so the order of the reservations, not the timing, decides what is paid."""

from __future__ import annotations

import threading
import time

from judge_runner.llm.batch import BatchCoordinator
from judge_runner.llm.batch_exchange import QueuedRequest
from judge_runner.llm.budget import Budget, BudgetExhausted
from judge_runner.llm.pricing import Price, Usage

PRICE = Price(input=10.0, output=0.0, cache_write=0.0, cache_read=0.0)  # 1,000 input tokens: 0.01 USD
LABEL_TOKENS, VERDICT_TOKENS = 1000, 3000  # a label's worst case 0.01 USD, a list verdict's 0.03 USD


class InstantBatches(BatchCoordinator):
    """A coordinator whose batch API ends every batch at once, each request answered ``"ok"``."""

    def __init__(self) -> None:
        super().__init__(backend=None, provider_name="fake", classify=lambda exc: None)  # type: ignore[arg-type]
        self.batches: list[list[str]] = []

    def _flush(self, items: list[QueuedRequest]) -> None:
        self.batches.append([item.custom_id for item in items])
        for item in items:
            item.result, item.done = "ok", True


def run_query(coord: InstantBatches, budget: Budget, name: str, labels: int, outcome: dict) -> None:
    """One query as the run loop plays it in batch mode: its labels at once (:meth:`map`), then its list
    verdict; records ``(labels paid, verdict paid)``."""

    def call(tokens: int, cid: str) -> None:
        reservation = coord.reserve(lambda defer, margin: budget.reserve(PRICE, tokens, 0, defer=defer, margin_usd=margin))
        coord.call(cid, {})
        budget.settle(reservation, Usage(input_tokens=tokens, calls=1), PRICE)

    with coord.unit():
        results = coord.map(lambda i: call(LABEL_TOKENS, f"{name}-label-{i}"), list(range(labels)))
        paid = sum(not isinstance(r, BaseException) for r in results)
        try:
            call(VERDICT_TOKENS, f"{name}-verdict")
            verdict = True
        except BudgetExhausted:
            verdict = False
    outcome[name] = (paid, verdict)


def wait_until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_younger_querys_labels_leave_the_money_an_older_query_needs_for_its_list_verdict():
    # Z runs alone first, so the largest worst case seen is a verdict's (0.03 USD) and 0.04 USD is spent; then A
    # (3 labels) and B (5 labels) run at once, A's labels reserved first, with 0.1005 USD left: enough for A's
    # labels and verdict and four of B's labels, not for both queries' labels and both verdicts.
    coord, budget, outcome = InstantBatches(), Budget(max_usd=0.1405), {}
    coord.expect(1)
    run_query(coord, budget, "Z", 1, outcome)
    assert outcome["Z"] == (1, True) and abs(budget.charged_usd - 0.04) < 1e-9
    coord.expect(2)  # A and B, counted before either starts, as the run loop does
    a = threading.Thread(target=run_query, args=(coord, budget, "A", 3, outcome))
    a.start()
    wait_until(lambda: budget.held_usd >= 0.03 - 1e-9)  # A's three labels hold their reservations
    b = threading.Thread(target=run_query, args=(coord, budget, "B", 5, outcome))
    b.start()
    a.join(10)
    b.join(10)
    assert not a.is_alive() and not b.is_alive()
    # the older query gets its verdict; only the younger one can be left with paid labels and no verdict
    assert outcome["A"] == (3, True), outcome
    assert outcome["B"][1] is False and outcome["B"][0] >= 1, outcome
    assert budget.charged_usd <= 0.1405 + 1e-9
    verdict_batch = next(i for i, batch in enumerate(coord.batches) if "A-verdict" in batch)
    b_labels_before = sum(cid.startswith("B-label") for batch in coord.batches[: verdict_batch + 1] for cid in batch)
    assert b_labels_before == 1, f"B's later labels waited for A's verdict: {coord.batches}"


def test_queries_that_fit_the_budget_together_are_not_held_back():
    coord, budget, outcome = InstantBatches(), Budget(max_usd=1.0), {}
    coord.expect(1)
    run_query(coord, budget, "Z", 1, outcome)
    coord.expect(2)
    threads = [threading.Thread(target=run_query, args=(coord, budget, name, 4, outcome)) for name in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert outcome["A"] == (4, True) and outcome["B"] == (4, True)
    # with room for everyone, both queries' labels share the first batch after Z's
    assert sum(cid.endswith(("label-0", "label-1", "label-2", "label-3")) for cid in coord.batches[2]) == 8, coord.batches
