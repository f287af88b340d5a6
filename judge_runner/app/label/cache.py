"""People's grades from ``judge-runner label`` into the judgment cache, without ever holding up the page.

:class:`CacheSync` keeps the cache's human qrels set ``NAME`` equal to the session's qrels file from a
thread of its own: the page is answered once a grade is in the journal and the qrels file (both
fsynced), and the import follows, only the pairs changed since the last one. A cache another process
holds locked is waited for :data:`CACHE_WAIT_S` seconds, then tried again every :data:`RETRY_S`. The
import is ``qrels import --rescale 1=1``: the page's grades are on the 0-3 scale already.
"""

from __future__ import annotations

import shlex
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_runner.core.failures import UsageError
from judge_runner.core.printer import Say, silent
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.cache_failures import CacheError
from judge_runner.judging.qrels import QrelsError, import_human_qrels, read_trec_qrels

CACHE_WAIT_S = 2.0
"""Seconds one import waits for another process's write lock (a run's 30 s is too long for a person)."""
RETRY_S = 1.0
"""Seconds between imports while the cache stays locked."""
CLOSE_WAIT_S = 5.0
"""Seconds the job's end waits for a locked cache to take the last grades."""
SAME_SCALE = {1: 1}
"""``--rescale 1=1``: without it a set of only 0s and 1s would read as binary qrels (1 becoming 3)."""


def import_command(qrels: Path, name: str, cache: Path | None) -> str:
    """The ``qrels import`` command that puts ``qrels`` into ``cache`` (None: the default) as set ``name``."""
    journal = qrels.with_name(f"{name}.journal.jsonl")
    command = f"judge-runner qrels import {shlex.quote(str(qrels))} --name {name} --rescale 1=1 --queries {shlex.quote(str(journal))}"
    return command + (f" --cache {shlex.quote(str(cache))}" if cache is not None else "")


def _plural(n: int) -> str:
    return f"{n} label" if n == 1 else f"{n} labels"


@dataclass(frozen=True)
class CacheReport:
    """Where the file's grades are at the end: ``given`` in the file; ``in_cache`` with the same grade (None:
    unknown); ``extra`` pairs only the cache holds (undone since); ``reason`` the cache is behind, or None."""

    cache: Path
    name: str
    qrels: Path
    given: int
    in_cache: int | None
    extra: int
    reason: str | None

    @property
    def complete(self) -> bool:
        """Whether the cache's set is exactly the file."""
        return self.in_cache == self.given and self.extra == 0

    def lines(self) -> list[str]:
        """The closing line's account of the cache, and the command that imports what it misses."""
        where = f"the judgment cache {self.cache}, human qrels set {self.name!r}"
        if self.complete:
            return [f"  in {where}: all {_plural(self.given)}"]
        if self.in_cache is None:
            head = f"  NOT in {where}: {self.reason}; the set there holds what an earlier import put there, if anything"
        else:
            missing = self.given - self.in_cache
            head = f"  in {where}: {self.in_cache} of the {_plural(self.given)}; {missing} NOT imported"
            if self.extra:
                head += f", and it still holds {_plural(self.extra)} no longer given here (undone)"
            head += f" ({self.reason})"
        return [head, "  import them with:", "    " + import_command(self.qrels, self.name, self.cache)]


def _locked(exc: BaseException) -> bool:
    if isinstance(exc, CacheError):  # at open; or a write that waited for the lock, its SQLite error the cause
        return exc.reason == "cache_locked" or (exc.__cause__ is not None and _locked(exc.__cause__))
    return isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", None) in (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    )


class CacheSync:
    """Imports the session's qrels file into the judgment cache at ``path`` as set ``name`` in its own thread.
    ``say`` hears when the cache locks, fails or recovers. :meth:`open` first, :meth:`changed` after every
    write of the file, :meth:`status` for the page, :meth:`close` at the end."""

    def __init__(self, path: Path, name: str, say: Say = silent, wait_s: float = CACHE_WAIT_S, retry_s: float = RETRY_S):
        self.path, self.name, self.say = Path(path), name, say
        self.wait_s, self.retry_s = wait_s, retry_s
        self._cache: JudgmentCache | None = None
        self._cond = threading.Condition()
        self._wanted = self._done = 0
        self._qrels: Path | None = None
        self._count = 0
        self._whole = False  # the whole file is to be imported
        self._pending: dict[tuple[str, str], int | None] = {}  # else these pairs: a grade, or None (taken back)
        self._state, self._message = "current", ""
        self._imported_at: str | None = None
        self._next_try = 0.0
        self._deadline: float | None = None  # set by close()
        self._thread = threading.Thread(target=self._run, name="label-cache-import", daemon=True)
        self._report_made: CacheReport | None = None
        self.design: dict[str, Any] | None = None
        """The set's draw (``label --budget``), kept beside it in the cache; None removes an earlier session's."""
        self.texts: dict[str, str] = {}
        """``{qid: query text}`` of the session's queries, stored with each grade (grades follow the query's text)."""

    def open(self) -> None:
        """Connect and start the importing thread. Raises UsageError for a file that is no judgment cache (or a
        newer one, or read-only); a locked cache is said and waited for."""
        error = self._connect()
        if error is not None and not _locked(error):
            raise UsageError(str(error))
        if error is not None:
            self._set("locked", f"locked by another process ({error})")
        self._thread.start()

    def _connect(self) -> BaseException | None:
        if self._cache is None:
            try:
                self._cache = JudgmentCache(self.path, busy_timeout_s=self.wait_s)
            except CacheError as exc:
                return exc
        return None

    def changed(self, qrels: Path, count: int, pairs: Mapping[tuple[str, str], int | None] | None = None) -> None:
        """The session wrote ``qrels`` (``count`` grades), changing ``pairs`` (``{(qid, docid): grade}``, None for a
        grade taken back; ``pairs`` None: written whole)."""
        with self._cond:
            self._wanted += 1
            self._qrels, self._count = qrels, count
            if pairs is None:
                self._whole, self._pending = True, {}
            elif not self._whole:
                self._pending.update(pairs)
            if self._state == "failed":
                self._next_try = 0.0  # a failed cache is tried again at each change
            self._cond.notify_all()

    def status(self) -> dict[str, Any]:
        """For the page: ``state`` (``current``, ``pending``, ``locked`` or ``failed``), ``importedAt`` (UTC or
        None), ``message`` and ``path``."""
        with self._cond:
            state = self._state if self._state != "current" or self._done >= self._wanted else "pending"
            return {"state": state, "importedAt": self._imported_at, "message": self._message, "path": str(self.path)}

    def _set(self, state: str, message: str) -> None:
        with self._cond:
            before, self._state, self._message = self._state, state, message
        if state != before:
            if state == "locked":
                self.say(
                    f"the judgment cache is locked by another process ({self.path}): every label is saved in the journal and "
                    f"the qrels file, and goes into the cache when it frees (tried every {self.retry_s:g} s)"
                )
            elif state == "failed":
                self.say(f"the judgment cache cannot take the labels ({message}): they are saved in the journal and the qrels file")
            elif before in ("locked", "failed"):
                self.say(f"the judgment cache took the labels again ({self.path})")

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due():
                    if self._deadline is not None and (self._done >= self._wanted or time.monotonic() >= self._deadline):
                        return
                    self._cond.wait(self._pause())
                wanted, qrels, count = self._wanted, self._qrels, self._count
                whole, pending = self._whole, self._pending
                self._whole, self._pending = False, {}
            error = self._import(qrels, count, whole, pending)
            with self._cond:
                if error is None:
                    self._done = max(self._done, wanted)
                    self._imported_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                else:  # what did not go in waits for the next try; a later change of a pair wins
                    if whole or self._whole:
                        self._whole, self._pending = True, {}
                    else:
                        self._pending = {**pending, **self._pending}
                    self._next_try = time.monotonic() + (self.retry_s if _locked(error) else float("inf"))
                self._cond.notify_all()
            if error is None:
                self._set("current", "")
            elif _locked(error):
                self._set("locked", f"locked by another process (an import waited {self.wait_s:g} s)")
            else:
                self._set("failed", str(error))

    def _due(self) -> bool:
        return (
            self._done < self._wanted
            and time.monotonic() >= self._next_try
            and (self._deadline is None or time.monotonic() < self._deadline)
        )

    def _pause(self) -> float | None:
        waits = [self._next_try - time.monotonic()] if self._done < self._wanted and self._next_try != float("inf") else []
        if self._deadline is not None:
            waits.append(self._deadline - time.monotonic())
        return max(0.01, min(waits)) if waits else None

    def _import(self, qrels: Path | None, count: int, whole: bool, pending: Mapping[tuple[str, str], int | None]) -> BaseException | None:
        error = self._connect()
        if error is not None or self._cache is None or qrels is None:
            return error
        try:
            if whole and count:
                import_human_qrels(self._cache, qrels, self.name, rescale=SAME_SCALE, texts=self.texts or None)
            elif whole:
                self._cache.delete_human_qrels(self.name)
            elif pending:
                self._cache.update_human_qrels(self.name, pending, self.texts)  # the page's grades: 0-3 already
            self._cache.set_label_design(self.name, self.design)
        except (CacheError, QrelsError, sqlite3.Error, OSError) as exc:
            return exc
        return None

    def close(self, wait_s: float = CLOSE_WAIT_S) -> CacheReport:
        """Give the last import up to ``wait_s`` seconds, stop the thread, and report what the cache holds of the
        file, read back. Once closed, the same report again."""
        if self._report_made is not None:
            return self._report_made
        with self._cond:
            behind = self._done < self._wanted
            self._deadline = time.monotonic() + (wait_s if behind else 0.0)
            if behind:
                self._next_try = time.monotonic()  # one more try at once, a failed cache too
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(wait_s + self.wait_s + 5.0)
        self._report_made = self._report()
        return self._report_made

    def _report(self) -> CacheReport:
        qrels = self._qrels
        given = read_trec_qrels(qrels) if qrels is not None and qrels.is_file() and qrels.read_text(encoding="utf-8").strip() else []
        reason = None
        if self._done < self._wanted:
            reason = self._message or "an import was still on its way"
            if self._state == "locked":
                reason = f"the cache stayed locked by another process to the end; the last import waited {self.wait_s:g} s"
        in_cache: int | None = None
        extra = 0
        if self._cache is not None:
            try:
                stored = {(q, d): g for _, q, d, g in self._cache.human_qrels([self.name])}
                in_cache = sum(1 for q, d, g in given if stored.get((q, d)) == g)
                extra = len(set(stored) - {(q, d) for q, d, _ in given})
            except (CacheError, sqlite3.Error) as exc:
                reason = reason or f"the cache could not be read back ({exc})"
            finally:
                self._cache.close()
                self._cache = None
        elif reason is None:
            reason = "the cache could not be opened"
        if reason is None and (in_cache != len(given) or extra):
            reason = "another process changed the set in the cache"
        return CacheReport(self.path, self.name, qrels or Path(), len(given), in_cache, extra, reason)
