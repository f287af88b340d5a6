"""Ctrl+C and SIGTERM during a command: a stop request, and where it may land (docs/design.md, "Stopping").

The command line installs :func:`handling` for the length of a command (``judge_runner.cli.app``), so
SIGINT and SIGTERM mean the same (``timeout``, ``kill`` and service managers send SIGTERM). Outside a
:func:`held` section a signal raises KeyboardInterrupt in the main thread, as Python's own Ctrl+C does:
indexing and phase one stop where they are. Inside one (phase two, from its first line to its summary) a
signal raises nothing: it only sets :data:`STOP`'s events, which the run loop checks at its own waits.
So no signal can land between a line written and its record (the summary then always agrees with its
file), nor inside a lock's wait (CPython's ``Condition.wait`` interrupted while it re-acquires its lock
leaves it released: ``RuntimeError: release unlocked lock``). :func:`raising` re-opens a held section for
code that is safe to interrupt and may block for long (a search: it holds none of the run's locks).

The first signal asks for the graceful stop (:attr:`StopSignals.requested`: no new call, keep what is
judged, write the summary); a second one (:attr:`StopSignals.urgent`) cuts the stop's waits short, and the
process then ends without waiting for the calls still in flight (``judge_runner.cli.app.entry``).

The handler takes no lock. A Python signal handler runs in the main thread between two of its bytecodes,
inside whatever that thread is doing, the handler of an earlier signal included: a handler that takes a
lock (``threading.Event.set`` takes the event's) deadlocks when the main thread already holds it, as when
a second signal lands while the first one's handler is inside ``set()`` (two SIGTERMs at once). So the
requests are :class:`Flag` objects, which the run loop and the workers poll.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Flag:
    """A stop request: set, cleared and read without a lock, so a signal handler may set it whatever the
    main thread holds (see the module docstring); one attribute assignment, atomic under the GIL. It has
    no ``wait``: whoever needs it polls :meth:`is_set` at its own interval (the run loop every
    ``POLL_S``, a call slot before each call)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        """Whether the request was made."""
        return self._set

    def set(self) -> None:
        """Make the request (idempotent)."""
        self._set = True

    def clear(self) -> None:
        """Forget it."""
        self._set = False


@dataclass
class StopSignals:
    """The stop requests of one command. ``requested``: set by the first SIGINT or SIGTERM; ``urgent``:
    set by the second; ``count``: signals received. Signals are only ever handled in the main thread."""

    requested: Flag = field(default_factory=Flag)
    urgent: Flag = field(default_factory=Flag)
    count: int = 0
    last_count: int = 0
    _held: int = 0
    _open: bool = False

    def reset(self) -> None:
        """Forget the requests (a command ended; a new one starts in the same process, as tests run them):
        their number is kept as ``last_count`` for the process's exit."""
        self.last_count = self.count
        self.requested.clear()
        self.urgent.clear()
        self.count, self._held, self._open = 0, 0, False

    def handle(self, signum: int, frame: Any) -> None:
        """The signal handler: count the signal, set ``requested`` (and ``urgent`` from the second one), and
        raise KeyboardInterrupt unless inside a :func:`held` section (inside a :func:`raising` one, once).
        Takes no lock, and stays right when a second signal's handler runs inside it: the count is one
        bytecode-atomic increment, and urgency is read from it after ``requested`` is set."""
        self.count += 1
        self.requested.set()
        if self.count > 1:
            self.urgent.set()
        if self._held and not self._open:
            return
        self._open = False  # a second signal while this one unwinds is only recorded
        raise KeyboardInterrupt

    @contextmanager
    def held(self) -> Iterator[None]:
        """While inside (main thread), a signal raises nothing; the code inside checks ``requested``."""
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
        """Inside a held section: the first signal raises KeyboardInterrupt here, as outside one (for code
        that may block for long and holds none of the run's locks). Raises it at once when a stop was
        already requested."""
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
"""The process's stop requests (signals reach the main thread only, so there is one)."""


@contextmanager
def handling() -> Iterator[StopSignals]:
    """For the length of a command: SIGINT and SIGTERM go to :data:`STOP`; on the way out the previous
    handlers are restored and the requests forgotten (their number kept in ``STOP.last_count``), so code
    run later in the process (a library call, the next command of a test) starts unstopped. Does nothing
    outside the main thread (signals go to it only)."""
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
