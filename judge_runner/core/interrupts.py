"""Ctrl+C and SIGTERM during a command: one stop request, and where it may land (docs/design.md, "Stopping").
Outside a :func:`held` section a signal raises KeyboardInterrupt; inside one (phase two) it only sets
:data:`STOP`'s flags, which the run loop polls, so it never lands between a line written and its record nor
inside a lock's wait. The first signal asks for a graceful stop, the second is urgent. The handler takes no
lock: it runs between any two bytecodes of the main thread, which may hold it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Flag:
    """A stop request set and read without a lock (one attribute assignment, atomic under the GIL), so a signal
    handler may set it whatever the main thread holds. Polled: it has no ``wait``."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True

    def clear(self) -> None:
        self._set = False


@dataclass
class StopSignals:
    """The stop requests of one command: ``requested`` by the first SIGINT or SIGTERM, ``urgent`` by the second.
    Signals are handled in the main thread only."""

    requested: Flag = field(default_factory=Flag)
    urgent: Flag = field(default_factory=Flag)
    count: int = 0
    last_count: int = 0
    signum: int | None = None
    """The last signal received (SIGINT or SIGTERM), None before one."""
    _held: int = 0
    _open: bool = False

    def reset(self) -> None:
        """Forget the requests, keeping their number as ``last_count`` for the process's exit."""
        self.last_count = self.count
        self.requested.clear()
        self.urgent.clear()
        self.count, self._held, self._open, self.signum = 0, 0, False, None

    def handle(self, signum: int, frame: Any) -> None:
        """The signal handler: raises KeyboardInterrupt unless inside a :func:`held` section (inside a
        :func:`raising` one, once). Stays right when a second signal's handler runs inside it: urgency is read
        from the count after ``requested`` is set."""
        self.count += 1
        self.signum = signum
        self.requested.set()
        if self.count > 1:
            self.urgent.set()
        if self._held and not self._open:
            return
        self._open = False  # a second signal while this one unwinds is only recorded
        raise KeyboardInterrupt

    @contextmanager
    def held(self) -> Iterator[None]:
        """While inside (main thread), a signal raises nothing; the code checks ``requested``."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self._held += 1
        saved = self._open
        self._open = False
        try:
            yield
        finally:
            self._held -= 1
            self._open = saved

    @contextmanager
    def raising(self) -> Iterator[None]:
        """Inside a held section, lets the first signal raise KeyboardInterrupt again, for code that may block
        long and holds none of the run's locks; raises at once when a stop was requested."""
        if threading.current_thread() is not threading.main_thread() or not self._held:
            yield
            return
        if self.requested.is_set():
            raise KeyboardInterrupt
        self._open = True
        try:
            yield
        finally:
            self._open = False


STOP = StopSignals()
"""The process's stop requests (signals reach the main thread only)."""


@contextmanager
def handling() -> Iterator[StopSignals]:
    """For one command, SIGINT and SIGTERM go to :data:`STOP`; on the way out the previous handlers come back
    and the requests are forgotten. Does nothing outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield STOP
        return
    STOP.reset()
    previous = {number: signal.signal(number, STOP.handle) for number in SIGNALS}
    try:
        yield STOP
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        STOP.reset()
