"""One pool of judge calls for a run (issue 23): at most ``size`` calls in flight, whichever queries they
belong to, so that a small query set or the tail of a run still fills every ``--concurrency`` slot.

The run loop owns a :class:`CallPool` and gives each query a :class:`CallLane` (its place in the queue:
the query's number); :func:`judge_runner.judging.labelling.judge_query` hands its calls (labels, the
list-level call) to that lane. The threads of the pool are the only ones that make requests; a query's
own worker only waits for its lane's calls, holding no slot, so no query can block the calls it waits
for. Waiting calls start in lane order (an earlier query's calls first, then the order they were
handed in), so queries end, and their lines are written, in about the order they started.

What a run spends stays where the run loop decides it: a call of a query that failed starts no later
call of that query (as when they ran one after another), and :meth:`CallPool.close` (Ctrl+C, a file the
run cannot write) starts no waiting call again: each fails with
:class:`~judge_runner.llm.errors.CallsStopped`; the calls in flight finish.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from functools import partial
from typing import Any, TypeVar, cast

from judge_runner.core.interrupts import Flag
from judge_runner.llm.errors import CallsStopped

T = TypeVar("T")


class _Job:
    """One call waiting in (or taken from) the pool's queue."""

    __slots__ = ("fn", "future", "lane")

    def __init__(self, lane: CallLane, fn: Callable[[], Any]):
        self.lane = lane
        self.fn = fn
        self.future: Future = Future()


class CallPool:
    """At most ``size`` (>= 1) judge calls at once, from any number of queries, in lane order. Raises
    ValueError for ``size`` < 1.

    ``stop``: a flag or event, polled (the run's stop request, :data:`judge_runner.core.interrupts.STOP`'s
    ``requested``): once it is set no waiting call starts, as after :meth:`close`, even before the loop
    has seen the request. Threads (not daemons, so the process knows a call is in flight when it ends)
    are started as calls wait, up to ``size``, and end at :meth:`shutdown`. ``max_in_flight``: the most
    calls that ran at once (for tests and benchmarks). Thread-safe."""

    def __init__(self, size: int, *, stop: Flag | threading.Event | None = None, name: str = "judge-call"):
        if size < 1:
            raise ValueError("a call pool needs at least one slot")
        self.size = size
        self.stop = stop
        self.name = name
        self.max_in_flight = 0
        self._cond = threading.Condition()
        self._queue: list[tuple[int, int, _Job]] = []
        self._order = itertools.count()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._running = 0
        self._closed: str | None = None
        self._ended = False

    def lane(self, priority: int) -> CallLane:
        """The lane of one query: its calls wait behind those of lanes with a lower ``priority`` (the
        run loop gives the query's number)."""
        return CallLane(self, priority)

    @property
    def in_flight(self) -> int:
        """Calls running now."""
        with self._cond:
            return self._running

    def close(self, reason: str = "interrupted") -> None:
        """Start no waiting call, and take no new one: each fails with CallsStopped (``reason`` in its
        message). Calls in flight finish. Idempotent."""
        with self._cond:
            self._closed = self._closed or reason
            waiting, self._queue = self._queue, []
        for _, _, job in waiting:
            job.future.set_exception(CallsStopped(f"the run stopped ({reason}) before this call started"))

    def shutdown(self) -> None:
        """:meth:`close`, then let every thread end (those in a call end after it; not waited for)."""
        self.close("ended")
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    # -- inside --------------------------------------------------------------------------------------

    def _submit(self, lane: CallLane, fn: Callable[[], Any]) -> Future:
        job = _Job(lane, fn)
        with self._cond:
            if self._closed is not None:
                job.future.set_exception(CallsStopped(f"the run stopped ({self._closed}) before this call started"))
                return job.future
            heapq.heappush(self._queue, (lane.priority, next(self._order), job))
            if len(self._queue) > self._idle and len(self._threads) < self.size:  # more waiting than threads to take them
                # not a daemon (a query's thread, which starts it, is one): the process sees a call in flight
                thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads) + 1}", daemon=False)
                self._threads.append(thread)
                thread.start()
            else:
                self._cond.notify()
        return job.future

    def _work(self) -> None:
        while True:
            with self._cond:
                self._idle += 1
                while not self._queue and not self._ended:
                    self._cond.wait()
                self._idle -= 1
                if not self._queue:  # ended
                    return
                _, _, job = heapq.heappop(self._queue)
                if job.lane.failed:
                    job.future.cancel()  # a call of its query failed: the query fails, this call is not made
                if not job.future.set_running_or_notify_cancel():
                    continue  # canceled (by its lane, or just above)
                if self.stop is not None and self.stop.is_set():
                    job.future.set_exception(CallsStopped("the run was asked to stop before this call started"))
                    continue
                self._running += 1
                self.max_in_flight = max(self.max_in_flight, self._running)
            try:
                result = job.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the query waiting for it
                with self._cond:  # before this thread takes another call
                    job.lane.failed = True
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
            finally:
                with self._cond:
                    self._running -= 1


class CallLane:
    """One query's way into a :class:`CallPool` (:meth:`CallPool.lane`). ``failed``: a call of it failed
    (the query fails: no later call of it starts, as when its calls ran one after another). Used by one
    query's worker at a time."""

    def __init__(self, pool: CallPool, priority: int):
        self.pool = pool
        self.priority = priority
        self.failed = False

    def submit(self, fn: Callable[[], T]) -> Future:
        """Hand ``fn()`` to the pool; its Future (which raises CallsStopped once the pool is closed
        before it started, and is canceled when an earlier call of this lane failed)."""
        return self.pool._submit(self, fn)

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` run in a slot of the pool, waited for; raises what it raises (CallsStopped once the
        pool is closed)."""
        return cast(T, self.submit(fn).result())

    def map(self, fn: Callable[[Any], T], items: Sequence[Any]) -> list[tuple[Any, T | BaseException]]:
        """``fn(item)`` for each of ``items``, all handed to the pool at once (so they run side by side
        as slots allow); the first failure cancels the calls that have not started (those running
        finish). Returns ``(item, result or the exception it raised)`` for every call made or failed, in
        the order of ``items``; a canceled call has no entry."""
        futures = [self.submit(partial(fn, item)) for item in items]
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        if pending:
            for future in pending:
                future.cancel()  # only those still waiting: running ones finish
            wait([f for f in pending if not f.cancelled()])
        out: list[tuple[Any, T | BaseException]] = []
        for item, future in zip(items, futures):
            if future.cancelled():
                continue
            exc = future.exception()
            out.append((item, exc if exc is not None else future.result()))
        return out


def detached(fn: Callable[..., T], *args: Any, name: str = "judge-query", **kwargs: Any) -> Future:
    """``fn(*args, **kwargs)`` in a new daemon thread; its Future (already running, so it cannot be
    canceled). For a query's worker, which only waits for its calls: the process never waits for it
    at exit (the pool's threads, in a call, are the ones it counts)."""
    future: Future = Future()
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the run loop, which records it
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
