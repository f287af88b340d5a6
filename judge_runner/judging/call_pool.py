"""One pool of judge calls for a run: at most ``size`` calls in flight, whichever queries they belong to, so
the tail of a run still fills every ``--concurrency`` slot. Each query hands its calls to its
:class:`CallLane`; waiting calls start in lane order, and a query's worker holds no slot while it waits.
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
    """At most ``size`` judge calls at once, in lane order; thread-safe. Once ``stop`` (a polled flag or
    event) is set, no waiting call starts. Raises ValueError for ``size`` < 1."""

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
        """A query's lane: its calls wait behind those of lanes with a lower ``priority``."""
        return CallLane(self, priority)

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._running

    def close(self, reason: str = "interrupted") -> None:
        """Waiting and new calls fail with CallsStopped; calls in flight finish. Idempotent."""
        with self._cond:
            self._closed = self._closed or reason
            waiting, self._queue = self._queue, []
        for _, _, job in waiting:
            job.future.set_exception(CallsStopped(f"the run stopped ({reason}) before this call started"))

    def shutdown(self) -> None:
        """:meth:`close`, then let every thread end without waiting for them."""
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
    """One query's way into a :class:`CallPool`. Once ``failed``, no later call of it starts."""

    def __init__(self, pool: CallPool, priority: int):
        self.pool = pool
        self.priority = priority
        self.failed = False

    def submit(self, fn: Callable[[], T]) -> Future:
        """``fn()``'s Future: CallsStopped when the pool closed first, canceled after a failure of the lane."""
        return self.pool._submit(self, fn)

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` run in a slot and waited for; raises CallsStopped once the pool is closed."""
        return cast(T, self.submit(fn).result())

    def map(self, fn: Callable[[Any], T], items: Sequence[Any]) -> list[tuple[Any, T | BaseException]]:
        """``(item, result or exception)`` of ``fn(item)`` run side by side, in the order of ``items``. The
        first failure cancels the calls not started, which get no entry."""
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
    """``fn(*args, **kwargs)`` in a new daemon thread, as a running Future: a query's worker."""
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
