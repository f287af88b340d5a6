"""Judge calls through a provider's batch API (``--batch``), at half price. The coordinator gathers the
synchronous request bodies of every worker and, once each is waiting, sends them as one batch; replies are
parsed and validated as synchronous ones. A request's ``custom_id`` is stable across processes, so
``--resume`` takes an earlier batch's result instead of paying again. See docs/batch.md.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from judge_runner.core.interrupts import Flag
from judge_runner.llm.batch_api import BatchBackend, ItemResult
from judge_runner.llm.batch_exchange import BatchAbandoned, BatchExchange, BatchStats, QueuedRequest
from judge_runner.llm.budget import BudgetDeferred
from judge_runner.llm.retry import ErrorClass

__all__ = ["BATCH_CALL_DEADLINE_S", "MARGIN_FACTOR", "BatchAbandoned", "BatchCoordinator", "BatchStats"]

T = TypeVar("T")

BATCH_CALL_DEADLINE_S = 25 * 3600.0
"""Seconds one call may take in batch mode: both APIs promise results within 24 hours."""
MARGIN_FACTOR = 2.0
"""Room a new query leaves per started query, in units of the largest worst case seen so far: a list
verdict's worst case can exceed every label's before it."""


@dataclass
class _Waiter:
    attempt: Callable[[bool, float], Any]
    key: object
    value: Any = None
    error: BaseException | None = None
    done: bool = False


class BatchCoordinator(BatchExchange):
    """Gathers the requests of a run's counted workers into batches; thread-safe. Count a worker with
    :meth:`expect` before it starts and run it inside :meth:`unit`; when every counted worker is blocked in
    :meth:`call`, one of them sends the queue as a batch. ``record(fields)`` gets the ``batch`` line's
    fields the moment a batch exists; ``max_poll_s``: the longest wait between status checks, in seconds."""

    def __init__(self, backend: BatchBackend, provider_name: str, max_poll_s: float = 60.0, classify: Callable | None = None):
        self.backend = backend
        self.provider_name = provider_name
        self.max_poll_s = max_poll_s
        self.classify: Callable[[BaseException], ErrorClass | None] = classify or backend.provider.classify
        self.record: Callable[[dict[str, Any]], None] = lambda fields: None
        self.note: Callable[[str], None] = lambda line: None
        self.warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
        self.stats = BatchStats()
        self.resume_hint: str | None = None  # what picks the batches up after Ctrl+C (default: evaluate --resume RUN)
        self._cond = threading.Condition()
        self._local = threading.local()
        self._active = 0
        self._pending: list[QueuedRequest] = []
        self._deferred: list[_Waiter] = []  # requests waiting for budget (reserve)
        self._paid: set[object] = set()  # keys of workers that already received a result
        self._started: dict[object, None] = {}  # keys of unfinished workers holding or having held a reservation, in start order
        self._largest_usd = 0.0  # the largest worst case reserved so far
        self._flushing = False
        self._submitting = False
        self._abandon = threading.Event()
        self._known: dict[str, str] = {}  # custom_id -> id of a batch an earlier process submitted
        self._sent: dict[str, set[str]] = {}  # batch id -> the custom ids this process submitted in it
        self._fetched: dict[str, dict[str, ItemResult]] = {}

    # -- counting workers ------------------------------------------------------------------------------

    def expect(self, n: int = 1) -> None:
        with self._cond:
            self._active += n

    def release(self, n: int = 1) -> None:
        with self._cond:
            self._active = max(0, self._active - n)
            self._cond.notify_all()

    @contextmanager
    def unit(self) -> Iterator[None]:
        """Run the current thread as a counted worker (counted first with :meth:`expect`)."""
        self._local.unit, self._local.key = True, object()
        try:
            yield
        finally:
            with self._cond:
                self._started.pop(self._local.key, None)
                self._paid.discard(self._local.key)
            self._local.unit, self._local.key = False, None
            self.release()

    def as_unit(self, fn: Callable[..., T]) -> Callable[..., T]:

        def run(*args: Any, **kwargs: Any) -> T:
            with self.unit():
                return fn(*args, **kwargs)

        return run

    def map(self, fn: Callable[[Any], T], items: Sequence[Any]) -> list[T | BaseException]:
        """``fn`` of each item on its own thread, so their calls share a batch: each result or exception,
        in order."""
        n = len(items)
        if n == 0:
            return []
        parent = bool(getattr(self._local, "unit", False))
        key = self._key()
        results: list[Any] = [None] * n
        remaining = [n]
        self.expect(n)

        def run(k: int) -> None:
            self._local.unit, self._local.key = True, key
            try:
                results[k] = fn(items[k])
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller in order
                results[k] = exc
            finally:
                self._local.unit = False
                with self._cond:
                    remaining[0] -= 1
                    if not (parent and remaining[0] == 0):  # the last one hands its place back to the caller
                        self._active = max(0, self._active - 1)
                    self._cond.notify_all()

        threads = [threading.Thread(target=run, args=(k,), daemon=True, name=f"batch-map-{k}") for k in range(n)]
        for t in threads:
            t.start()
        if parent:
            self.release()  # lent to the threads until the last one ends
        for t in threads:
            t.join()
        return results

    # -- resume and stop -------------------------------------------------------------------------------

    def resume(self, lines: Sequence[dict[str, Any]]) -> None:
        """Take an earlier process's ``batch`` lines: a request with one of their ids takes that batch's
        result. Lines of another provider are skipped."""
        with self._cond:
            for line in lines:
                if line.get("provider") not in (None, self.provider_name):
                    continue  # another provider's batch API: this server does not know it (warned by the pipeline)
                batch_id = line.get("batchId")
                if isinstance(batch_id, str) and batch_id:
                    for cid in line.get("customIds") or []:
                        self._known[str(cid)] = batch_id

    def abandon(self, wait_s: float = 30.0, hurry: Flag | threading.Event | None = None) -> list[str]:
        """Stop waiting: blocked calls raise :class:`BatchAbandoned`, batches are not canceled. A submission
        under way is waited for (``wait_s`` seconds, until ``hurry`` is set) so its line is written. Returns
        the ids of the batches in flight."""
        self._abandon.set()
        deadline = time.monotonic() + wait_s
        with self._cond:
            self._cond.notify_all()
            while self._submitting and time.monotonic() < deadline and not (hurry is not None and hurry.is_set()):
                self._cond.wait(timeout=0.1)
            return list(self.stats.in_flight)

    # -- calls -----------------------------------------------------------------------------------------

    def call(self, cid: str, body: dict) -> Any:
        """The raw reply to one request, once its batch ends. Raises the item's LLMError, or BatchAbandoned."""
        counted = bool(getattr(self._local, "unit", False))
        item = QueuedRequest(cid, body)
        with self._cond:
            if not counted:
                self._active += 1
            self._pending.append(item)
            try:
                while not item.done:
                    if self._abandon.is_set():
                        if item in self._pending:
                            self._pending.remove(item)
                        raise BatchAbandoned("interrupted while the batch was in flight (not canceled: --resume picks it up)")
                    if not self._step():
                        self._cond.wait(timeout=0.5)
            finally:
                if not counted:
                    self._active = max(0, self._active - 1)
                    self._cond.notify_all()
        if item.error is not None:
            raise item.error
        with self._cond:
            self._paid.add(self._key())
        return item.result

    def reserve(self, attempt: Callable[[bool, float], T]) -> T:
        """A budget reservation for one request, waiting for room. ``attempt(defer, margin)`` wraps
        ``Budget.reserve``; the margin leaves room for one more call of each earlier unfinished query, so
        none is left with paid labels and no verdict. A request that does not fit waits for the batch in
        flight to settle, and fails (BudgetExhausted) only when nothing else is pending. Raises
        BatchAbandoned when the run is abandoned meanwhile."""
        key = self._key()
        with self._cond:
            queue = bool(self._deferred) and key not in self._started  # a new query waits behind those started
            margin = self._margin(key)
        if not queue:
            try:
                value = attempt(True, margin)
            except BudgetDeferred:
                pass
            else:
                with self._cond:
                    self._took(key, value)
                return value
        counted = bool(getattr(self._local, "unit", False))
        waiter = _Waiter(attempt, key)
        with self._cond:
            if not counted:
                self._active += 1
            self._deferred.append(waiter)
            self._cond.notify_all()
            try:
                while not waiter.done:
                    if self._abandon.is_set():
                        raise BatchAbandoned("interrupted while waiting for budget (no request was sent)")
                    if not self._step():
                        self._cond.wait(timeout=0.5)
            finally:
                if waiter in self._deferred:
                    self._deferred.remove(waiter)
                if not counted:
                    self._active = max(0, self._active - 1)
                self._cond.notify_all()
        if waiter.error is not None:
            raise waiter.error
        return cast(T, waiter.value)

    def _key(self) -> object:
        """The current worker's key, shared with its :meth:`map` threads."""
        key = getattr(self._local, "key", None)
        return key if key is not None else threading.get_ident()

    def _step(self) -> bool:
        """With the lock held and every worker blocked: grant waiting reservations, else flush, else fail the
        waiting requests. Returns whether it did anything."""
        if self._flushing or not (self._pending or self._deferred) or len(self._pending) + len(self._deferred) < self._active:
            return False
        if self._deferred and self._grant():
            return True
        if self._pending:
            batch, self._pending = self._pending, []
            self._flushing = True
            self._cond.release()
            try:
                self._flush(batch)
            finally:
                self._cond.acquire()
                self._flushing = False
                self._cond.notify_all()
            return True
        # nothing queued or in flight: as much room as there will ever be. Whichever waiting requests fit
        # now go (in the order of _grant, no tier held back); if none does, the budget is exhausted.
        if self._grant(final=True):
            return True
        for waiter in self._by_priority():
            self._deferred.remove(waiter)
            try:
                waiter.value = waiter.attempt(False, self._margin(waiter.key))
                self._took(waiter.key, waiter.value)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                waiter.error = exc
            waiter.done = True
            if waiter.error is None:
                break
        self._cond.notify_all()
        return True

    def _margin(self, key: object) -> float:
        """USD a request of ``key`` must leave free: MARGIN_FACTOR times the largest worst case, per
        unfinished query started before it. At most the youngest query can be left without its verdict."""
        ahead = list(self._started).index(key) if key in self._started else len(self._started)
        return ahead * MARGIN_FACTOR * self._largest_usd

    def _took(self, key: object, reservation: Any) -> None:
        self._started.setdefault(key, None)
        self._largest_usd = max(self._largest_usd, float(getattr(reservation, "usd", 0.0)))

    def _tier(self, key: object) -> int:
        """0: a worker with a paid result; 1: a worker holding or having held a reservation; 2: a new one."""
        return 0 if key in self._paid else 1 if key in self._started else 2

    def _by_priority(self) -> list[_Waiter]:
        return sorted(self._deferred, key=lambda w: self._tier(w.key))

    def _grant(self, final: bool = False) -> bool:
        """Try the waiting requests again by tier; once one does not fit, no lower tier goes (unless
        ``final``: nothing in flight). Returns whether any fit."""
        granted = False
        stop_tier: int | None = None
        for waiter in self._by_priority():
            tier = self._tier(waiter.key)
            if stop_tier is not None and tier > stop_tier and not final:
                break
            try:
                waiter.value = waiter.attempt(True, self._margin(waiter.key))
            except BudgetDeferred:
                stop_tier = tier if stop_tier is None else stop_tier
                continue
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                waiter.error = exc
            self._deferred.remove(waiter)
            if waiter.error is None:
                self._took(waiter.key, waiter.value)
            waiter.done = granted = True
        if granted:
            self._cond.notify_all()
        return granted
