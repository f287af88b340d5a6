"""Judge calls through a provider's batch API (``--batch``): the Anthropic Message Batches API or the
OpenAI Batch API, both billed at half the standard price (``pricing.json`` ``batchDiscount``).

The protocol is unchanged: :class:`BatchingProvider` is a :class:`~judge_runner.llm.base.ChatProvider`
whose ``_send`` builds the very request body the synchronous provider would send (its
``request_body``), hands it to the run's :class:`BatchCoordinator` and blocks; the coordinator
gathers the requests of every worker thread and, once each active worker is waiting, submits them as
one batch, polls it with backoff, fetches the results and gives each thread its reply, parsed by the
synchronous provider's own parser. So :func:`judge_runner.judging.llm_judge.ask` validates batch replies exactly
as synchronous ones, and its re-asks go into a follow-up batch. Retries, budget reservations (every
request of a batch is reserved before the batch is submitted) and usage are the base class's; the
price is :meth:`~judge_runner.llm.pricing.Price.for_batch`.

A failed item becomes the :class:`~judge_runner.llm.errors.LLMError` kind a synchronous failure of the
same cause would be (an ``overloaded_error`` item is retried into the next batch; an invalid request
is a ``request_error``); an item whose batch expired or was canceled before it was processed is a
``transient_error`` saying so. Either way the run writes that query's ``error`` line.

**Resume.** Each request's ``custom_id`` is a hash of its body with the fence's random delimiter
taken out (:func:`custom_id`), so the same request has the same id in another process. The run
writes a ``batch`` line (``judge_runner.runs.lines.BatchLine``) the moment a batch exists; ``--resume`` hands those
lines to :meth:`BatchCoordinator.resume`, and a request whose id is in an earlier batch takes that
batch's result (polled until it ends) instead of being submitted again.

Backends (one per API) implement :class:`BatchBackend`: ``judge_runner.llm.anthropic_batches`` and
``judge_runner.llm.openai_batches``, named by the provider registry's ``batch_target``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from judge_runner.llm.batch_api import BatchBackend, ItemResult
from judge_runner.llm.budget import BudgetDeferred
from judge_runner.llm.errors import LLMError, TransientError
from judge_runner.llm.retry import ErrorClass, translate

T = TypeVar("T")

BATCH_CALL_DEADLINE_S = 25 * 3600.0
"""Seconds one logical call may take in batch mode: both APIs promise results within 24 hours."""
FIRST_POLL_S = 1.0
"""Seconds before the first status check of a batch; each later wait is 1.5 times the one before,
capped at the ``batch_poll`` setting (default 60 s)."""
POLL_FACTOR = 1.5
PROGRESS_EVERY_S = 600.0
"""A progress line is printed when the count of finished requests changes, else once per this many seconds."""
MAX_POLL_FAILURES = 10
"""Consecutive failed status checks (connection errors, 5xx) tolerated before the batch's requests fail."""
MARGIN_FACTOR = 2.0
"""Room a new query leaves per started query, in units of the largest worst case seen so far: a list
verdict's input holds all of a query's results, so its worst case can exceed every one before it
(measured on the fake: label 0.011 USD, list verdicts 0.02-0.037 USD)."""


class BatchAbandoned(LLMError):
    """The run was interrupted while this request's batch was in flight; the batch was not canceled,
    so ``--resume`` picks its results up."""

    kind = "interrupted"


def format_wait(seconds: float) -> str:
    """``2m10s``, ``45s``, ``1h03m``: a waiting time for the progress line."""
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


@dataclass
class BatchStats:
    """What the run's batches did (the summary's ``batch`` block), all request counts in one scope: the
    requests whose results this run took from a batch. ``batches``: batches this run submitted;
    ``resumed``: batches of an earlier process it picked up; ``submitted`` requests sent in its own
    batches, ``picked_up`` requests taken from earlier batches; ``requests`` = submitted + picked up =
    succeeded + errored + expired + canceled once every batch ended; ``in_flight``: ids of batches not
    ended when the run stopped (``--resume`` picks them up)."""

    batches: int = 0
    resumed: int = 0
    submitted: int = 0
    picked_up: int = 0
    succeeded: int = 0
    errored: int = 0
    expired: int = 0
    canceled: int = 0
    in_flight: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        """Requests submitted by this run plus those picked up from earlier batches."""
        return self.submitted + self.picked_up

    def as_dict(self) -> dict[str, Any]:
        """The summary's ``batch`` block (camelCase)."""
        return {
            "batches": self.batches,
            "resumedBatches": self.resumed,
            "requests": self.requests,
            "submittedRequests": self.submitted,
            "pickedUpRequests": self.picked_up,
            "succeeded": self.succeeded,
            "errored": self.errored,
            "expired": self.expired,
            "canceled": self.canceled,
            "inFlight": list(self.in_flight),
        }


@dataclass
class _Waiter:
    attempt: Callable[[bool, float], Any]
    key: object
    value: Any = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class _Item:
    custom_id: str
    body: dict
    result: Any = None
    error: BaseException | None = None
    done: bool = False


class BatchCoordinator:
    """Gathers the requests of a run's worker threads into batches (thread-safe).

    Workers are counted: the run loop calls :meth:`expect` before it starts a worker (or holds one
    place for itself while it is still starting workers) and each worker runs inside :meth:`unit`,
    which gives its place back when the worker ends. A worker's :meth:`call` queues its request and
    blocks; when every counted worker is blocked, one of them submits the queued requests as a batch
    and polls it (:meth:`_flush`). A thread that is not a counted worker counts itself for the length
    of its call. :meth:`map` runs several calls of one worker concurrently (a query's pointwise labels).

    ``record(fields)`` receives the ``batch`` line's fields the moment a batch exists; ``warn(line)``
    warnings (stderr by default); ``note(line)`` the progress lines (``batch msgbatch_…: 120/300 done, waited 2m10s so far``). ``max_poll_s``: the
    longest wait between two status checks (seconds); every wait ends early when the run is abandoned
    (:meth:`abandon`). Each request in flight holds one blocked thread (a few thousand for a weekly run
    of hundreds of queries: measured at about 90 MB for 5000 idle threads).
    """

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
        self._pending: list[_Item] = []
        self._deferred: list[_Waiter] = []  # requests waiting for budget (reserve)
        self._paid: set[object] = set()  # keys of workers that already received a result
        self._started: set[object] = set()  # keys of unfinished workers holding or having held a reservation
        self._largest_usd = 0.0  # the largest worst case reserved so far
        self._flushing = False
        self._submitting = False
        self._abandon = threading.Event()
        self._known: dict[str, str] = {}  # custom_id -> id of a batch an earlier process submitted
        self._fetched: dict[str, dict[str, ItemResult]] = {}

    # -- counting workers ------------------------------------------------------------------------------

    def expect(self, n: int = 1) -> None:
        """Count ``n`` more workers (before they start)."""
        with self._cond:
            self._active += n

    def release(self, n: int = 1) -> None:
        """Give back ``n`` places (a worker ended, or the run loop's own place)."""
        with self._cond:
            self._active = max(0, self._active - n)
            self._cond.notify_all()

    @contextmanager
    def unit(self) -> Iterator[None]:
        """Run the current thread as one counted worker (its place taken beforehand with :meth:`expect`),
        giving the place back when it ends."""
        self._local.unit, self._local.key = True, object()
        try:
            yield
        finally:
            with self._cond:
                self._started.discard(self._local.key)
                self._paid.discard(self._local.key)
            self._local.unit, self._local.key = False, None
            self.release()

    def as_unit(self, fn: Callable[..., T]) -> Callable[..., T]:
        """``fn`` run inside :meth:`unit` (for a thread pool's task; call :meth:`expect` first)."""

        def run(*args: Any, **kwargs: Any) -> T:
            with self.unit():
                return fn(*args, **kwargs)

        return run

    def map(self, fn: Callable[[Any], T], items: Sequence[Any]) -> list[T | BaseException]:
        """``fn`` of each item, run concurrently (one thread each) so that their calls share a batch;
        returns each result or the exception it raised, in order. The calling worker's own place is
        lent to the threads while they run."""
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
        """Know the batches an earlier process of this run submitted (its ``batch`` lines: ``batchId``,
        ``customIds``): a request with one of those ids takes that batch's result. Lines of another
        provider are skipped."""
        with self._cond:
            for line in lines:
                if line.get("provider") not in (None, self.provider_name):
                    continue  # another provider's batch API: this server does not know it (warned by the pipeline)
                batch_id = line.get("batchId")
                if isinstance(batch_id, str) and batch_id:
                    for cid in line.get("customIds") or []:
                        self._known[str(cid)] = batch_id

    def abandon(self, wait_s: float = 30.0) -> list[str]:
        """Stop waiting (Ctrl+C): every blocked call raises :class:`BatchAbandoned`; batches are NOT
        canceled. A submission under way is waited for (at most ``wait_s`` seconds) so that its
        ``batch`` line is written. Returns the ids of batches still in flight."""
        self._abandon.set()
        deadline = time.monotonic() + wait_s
        with self._cond:
            self._cond.notify_all()
            while self._submitting and time.monotonic() < deadline:
                self._cond.wait(timeout=0.1)
            return list(self.stats.in_flight)

    # -- calls -----------------------------------------------------------------------------------------

    def call(self, cid: str, body: dict) -> Any:
        """Queue one request and block until its batch ends; returns the raw reply for the backend's
        ``parse``. Raises the item's LLMError, or BatchAbandoned."""
        counted = bool(getattr(self._local, "unit", False))
        item = _Item(cid, body)
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
        """A budget reservation for one request, waiting for room (``--batch``, issue 15 follow-up).
        ``attempt(defer, margin)`` is ``Budget.reserve(..., defer=defer, margin_usd=margin)``: it raises
        BudgetDeferred when the request does not fit while other requests hold reservations. A request of
        a query not started yet must leave room (``margin``) for one more call of each query started
        and not finished, at the largest worst case seen, so that no query is left with paid labels and
        no list verdict because a new one took the money. Such a request waits (counted as
        blocked, so the batch in hand still leaves) and is tried again when every worker is blocked, after
        the batch in flight settled its reservations: first the requests of queries that already have a
        paid result (a list verdict after its labels), then the others in arrival order. Only when nothing
        is pending or in flight and it still does not fit does it fail (``attempt(False)``:
        BudgetExhausted). Raises BatchAbandoned when the run is abandoned meanwhile."""
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
        return waiter.value

    def _key(self) -> object:
        """The current worker's key (a query's worker and its :meth:`map` threads share one)."""
        key = getattr(self._local, "key", None)
        return key if key is not None else threading.get_ident()

    def _step(self) -> bool:
        """With the lock held, when every counted worker is blocked: let waiting requests that now fit in
        the budget go (:meth:`reserve`), else submit the queued requests (:meth:`_flush`), else (nothing
        queued, nothing in flight) fail the waiting requests for good. Returns whether it did anything."""
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
        """USD a new query's request must leave free: for each query started and not finished, one call at
        MARGIN_FACTOR times the largest worst case seen (0 for a started query's own requests)."""
        return 0.0 if key in self._started else len(self._started) * MARGIN_FACTOR * self._largest_usd

    def _took(self, key: object, reservation: Any) -> None:
        self._started.add(key)
        self._largest_usd = max(self._largest_usd, float(getattr(reservation, "usd", 0.0)))

    def _tier(self, key: object) -> int:
        """0: a worker with a paid result; 1: a worker holding or having held a reservation; 2: a new one."""
        return 0 if key in self._paid else 1 if key in self._started else 2

    def _by_priority(self) -> list[_Waiter]:
        """The waiting requests by :meth:`_tier`, arrival order within each."""
        return sorted(self._deferred, key=lambda w: self._tier(w.key))

    def _grant(self, final: bool = False) -> bool:
        """Try the waiting requests again in the order of :meth:`_by_priority`; once one does not fit, none
        of a lower tier goes (a query with a paid result is finished before another is advanced, a
        started one before a new one is begun; ``final``: nothing is in flight, so a lower tier may take
        what a higher one cannot use). Returns whether any fit."""
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

    # -- one flush: submit (or pick up), poll, hand out ------------------------------------------------

    def _flush(self, items: list[_Item]) -> None:
        """Submit ``items`` (those an earlier process already submitted are picked up from its batch
        instead), wait for the batches to end and set every item's result or error. Never raises but
        KeyboardInterrupt (after marking the items abandoned)."""
        seen: Counter[str] = Counter()
        for item in items:  # two identical requests in one batch: distinct ids, the same reply
            seen[item.custom_id] += 1
            if seen[item.custom_id] > 1:
                item.custom_id = f"{item.custom_id[:56]}-{seen[item.custom_id]}"
        groups: dict[str | None, list[_Item]] = {}
        with self._cond:
            for item in items:
                groups.setdefault(self._known.get(item.custom_id), []).append(item)
        try:
            new = list(groups.get(None) or [])
            for batch_id, group in groups.items():
                if batch_id is not None:
                    self.note(f"batch {batch_id}: picking up {len(group)} request(s) submitted before --resume")
                    counted = batch_id in self._fetched or batch_id in self.stats.in_flight
                    if not self._finish(batch_id, group, prior=True):
                        new.extend(group)  # the server no longer knows it: submitted anew below
                        continue
                    self.stats.picked_up += len(group)
                    if not counted:
                        self.stats.resumed += 1  # each earlier batch counted once
            if new and self._abandon.is_set():
                self._fail(new, BatchAbandoned("interrupted before the batch was submitted"))
            elif new:
                with self._cond:
                    self._submitting = True
                try:
                    batch_id = self.backend.submit([(i.custom_id, i.body) for i in new])
                    self.stats.batches += 1
                    self.stats.submitted += len(new)
                    with self._cond:
                        self.stats.in_flight.append(batch_id)
                    # written before anything else happens: the id is what --resume needs
                    self.record(
                        {"batchId": batch_id, "provider": self.provider_name, "requests": len(new), "customIds": [i.custom_id for i in new]}
                    )
                except Exception as exc:  # noqa: BLE001 - nothing was created: the retry layer may try again
                    self._fail(new, exc, retryable_ok=True)
                    return
                finally:
                    with self._cond:
                        self._submitting = False
                        self._cond.notify_all()
                self.note(f"batch {batch_id}: {len(new)} request(s) submitted to the {self.provider_name} batch API")
                self._finish(batch_id, new)
        except KeyboardInterrupt:
            self._abandon.set()
            for item in items:
                if not item.done:
                    item.error, item.done = BatchAbandoned("interrupted while the batch was in flight"), True
            raise

    def _fail(self, items: list[_Item], exc: BaseException, retryable_ok: bool = False) -> None:
        """Give ``items`` the failure ``exc``: as it is when another attempt may retry it (nothing was
        submitted), else as a non-retryable LLMError (a batch exists: retrying would pay twice)."""
        if isinstance(exc, BatchAbandoned):
            error: BaseException = exc
        elif retryable_ok and self.classify(exc) is not None:
            error = exc
        elif isinstance(exc, LLMError):
            error = exc
        elif self.classify(exc) is None:
            error = exc  # a programming error: surfaces as it is
        else:
            error = translate(exc, 1, self.classify)
        for item in items:
            item.error, item.done = error, True

    def _finish(self, batch_id: str, items: list[_Item], prior: bool = False) -> bool:
        """Wait for ``batch_id`` to end and give ``items`` their results. For a ``prior`` batch (one an
        earlier process submitted) the server no longer knows (HTTP 404), warn once, forget it and
        return False with the items untouched (the caller submits them anew); else True."""
        results = self._fetched.get(batch_id)
        if results is None:
            with self._cond:
                if batch_id not in self.stats.in_flight:
                    self.stats.in_flight.append(batch_id)
            try:
                self._poll(batch_id)
                results = self.backend.results(batch_id)
            except Exception as exc:  # noqa: BLE001 - the items fail, the run goes on
                if prior and getattr(exc, "status_code", None) == 404:
                    self._forget(batch_id)
                    return False
                self._fail(items, exc)
                return True
            with self._cond:
                self.stats.in_flight.remove(batch_id)
            self._fetched[batch_id] = results
        for item in items:
            found = results.get(item.custom_id)
            with self._cond:
                self._known.pop(item.custom_id, None)  # a retry of this request is a new submission
            if found is None:
                item.error = TransientError(f"batch {batch_id} returned no result for request {item.custom_id}", 1)
                self.stats.errored += 1
            elif found.outcome == "succeeded":
                item.result = found.value
                self.stats.succeeded += 1
            else:
                item.error = found.error or TransientError(f"batch {batch_id}: request {found.outcome}", 1)
                setattr(self.stats, found.outcome, getattr(self.stats, found.outcome) + 1)
            item.done = True
        return True

    def _forget(self, batch_id: str) -> None:
        """Drop an earlier process's batch the server answers 404 for (expired from its records, or
        another account): warned once; its requests are submitted anew."""
        with self._cond:
            if batch_id in self.stats.in_flight:
                self.stats.in_flight.remove(batch_id)
            dropped = [cid for cid, known in self._known.items() if known == batch_id]
            for cid in dropped:
                del self._known[cid]
        self.warn(
            f"warning: batch {batch_id} is unknown to the server (HTTP 404: expired from its records, or another "
            f"account); its {len(dropped)} request(s) not yet taken are submitted anew"
        )

    def _poll(self, batch_id: str) -> None:
        """Check the batch's status with growing waits until it ends, saying how far it got (when that
        changes, else every PROGRESS_EVERY_S seconds). Raises
        BatchAbandoned when the run is abandoned, or the SDK's error after MAX_POLL_FAILURES
        consecutive retryable failures (at once for any other failure)."""
        started = time.monotonic()
        wait = min(FIRST_POLL_S, self.max_poll_s)
        failures = 0
        said: tuple[int, float] | None = None  # (done, when) of the last progress line
        while True:
            if self._abandon.is_set():
                raise BatchAbandoned("interrupted while the batch was in flight")
            try:
                status = self.backend.status(batch_id)
            except Exception as exc:
                failures += 1
                if self.classify(exc) != "retryable" or failures >= MAX_POLL_FAILURES:
                    raise
                self.note(f"batch {batch_id}: status check failed ({type(exc).__name__}); trying again")
            else:
                failures = 0
                waited = format_wait(time.monotonic() - started)
                if status.ended:
                    self.note(f"batch {batch_id}: {status.done}/{status.total} done ({status.state}) after {waited}")
                    return
                now = time.monotonic()
                if said is None or status.done != said[0] or now - said[1] >= PROGRESS_EVERY_S:
                    self.note(f"batch {batch_id}: {status.done}/{status.total} done, waited {waited} so far")
                    said = (status.done, now)
            if self._abandon.wait(wait):
                raise BatchAbandoned("interrupted while the batch was in flight")
            wait = min(self.max_poll_s, wait * POLL_FACTOR)
