"""One writer per label set: the lock ``judge-runner label`` holds on a set while it serves its page.

Two processes labelling one set would each keep their own view of it and rewrite its qrels file (and its
human qrels set in the judgment cache) from that view, so the later one's writes drop the earlier one's
labels. A :class:`SetLock` is an exclusive ``flock(2)`` on a small file: ``labels/NAME.lock`` for the
set's files, and ``<cache>.label-NAME.lock`` beside the judgment cache for the set of that name in it (two
folders labelling one name into one cache would replace each other's set there). The kernel releases a
flock when the process ends, however it ends (Ctrl+C, a crash, ``kill -9``), so a lock is never stale:
the lock of a process that is gone is simply free, and the next one takes it.

The file holds who has it (JSON: ``pid``, ``host``, ``since`` in UTC, ``command``, ``labeller``,
``journal``, ``port`` once the page listens), so a second process can say which process to look for.
``qrels import --name NAME`` takes the cache's lock of the set too, for the moment it writes. It is emptied on
a clean release and never deleted (deleting a lock file lets two processes lock two different files); a
record found in a free lock was left by a process that ended without releasing it, and is reported when
it is taken over. On a network file system that does not share flocks between machines two machines
could both take a set: the record then names the other host.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from judge_runner.core.failures import UsageError

READ_TRIES = 20  # x 0.05 s: how long a refused process waits for the holder, which has just locked, to write its record


class SetBusy(UsageError):
    """The set is held by another process (exit 2); the message names it and says what to do."""


def cache_lock_path(cache: Path, name: str) -> Path:
    """The lock file of the human qrels set ``name`` of the judgment cache ``cache``: beside it."""
    return cache.parent / f"{cache.name}.label-{name}.lock"


def holder_record(command: str, **fields: Any) -> dict[str, Any]:
    """This process's record for a lock: pid, host, UTC time now, ``command`` (``label``, ``qrels import``) and ``fields``."""
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": since, "command": command, **fields}


def cache_set_lock(cache: Path, name: str) -> SetLock:
    """The lock of the human qrels set ``name`` in the judgment cache ``cache``."""
    return SetLock(cache_lock_path(cache, name), f"the human qrels set {name!r} of the judgment cache {cache}")


def describe(record: dict[str, Any]) -> str:
    """``pid 4242 on host devbox, since 2026-12-01T09:00:00.000Z (labeller ada, page on 127.0.0.1:PORT)``;
    what a lock ``record`` says of its holder, as much as it says."""
    if not record:
        return "a process that has not written its details yet"
    text = f"pid {record.get('pid', '?')} on host {record.get('host', '?')}, since {record.get('since', '?')}"
    extra = [f"labeller {record['labeller']}"] if record.get("labeller") else []
    if record.get("port"):
        extra.append(f"page on 127.0.0.1:{record['port']}")
    return text + (f" ({', '.join(extra)})" if extra else "")


def _alive_here(record: dict[str, Any]) -> bool | None:
    """Whether the process a record names runs (None: it names another host, or no pid)."""
    if record.get("host") != socket.gethostname() or not isinstance(record.get("pid"), int):
        return None
    try:
        os.kill(record["pid"], 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    return True


class SetLock:
    """The lock on one set at ``path``; ``what`` names the set in messages (``"the label set 'team'
    (labels/team.journal.jsonl)"``). :meth:`acquire` once, :meth:`release` at the end (idempotent)."""

    def __init__(self, path: Path, what: str):
        self.path, self.what = Path(path), what
        self._fd: int | None = None
        self._record: dict[str, Any] = {}

    def acquire(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """Take the lock and write ``record`` into it. Returns the record a holder that ended without
        releasing the lock left there (None when it was clean). Raises :class:`SetBusy` naming the holder
        when another process has it, UsageError when the file cannot be opened."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UsageError(f"cannot lock {self.what}: {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = self._holder(fd) if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else None
            os.close(fd)
            if holder is None:
                raise UsageError(f"cannot lock {self.what}: {self.path}: {exc.strerror or exc}") from None
            raise SetBusy(
                f"{self.what} is open in another `judge-runner {holder.get('command', 'label')}`: {describe(holder)}. Two processes writing one set "
                "drop each other's labels: label in that page (several tabs of one page are fine), stop it first (Ctrl+C), "
                "or label another set with another --name"
            ) from None
        self._fd = fd
        left = _read(fd)
        self._record = dict(record)
        self._write()
        return left or None

    def _holder(self, fd: int) -> dict[str, Any]:
        """The holder's record, waiting briefly while it is empty or names a process that is gone (the holder
        has just taken the lock and not yet written its own)."""
        record: dict[str, Any] = {}
        for _ in range(READ_TRIES):
            record = _read(fd)
            if record and _alive_here(record) is not False:
                return record
            time.sleep(0.05)
        return record

    def update(self, **fields: Any) -> None:
        """Add ``fields`` to the record (e.g. ``port`` once the page listens)."""
        if self._fd is not None:
            self._record.update(fields)
            self._write()

    def _write(self) -> None:
        assert self._fd is not None
        data = (json.dumps(self._record, ensure_ascii=False) + "\n").encode("utf-8")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        os.fsync(self._fd)

    def release(self) -> None:
        """Empty the record (a clean end) and let the lock go."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # the lock goes with the close anyway; the record left is reported as a take-over
        finally:
            os.close(fd)


def _read(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 65536, 0)
        record = json.loads(data.decode("utf-8")) if data.strip() else {}
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def takeover_note(what: str, left: dict[str, Any]) -> str:
    """What to say when a lock left by a process that ended without releasing it is taken over."""
    if left.get("host") != socket.gethostname():
        gone = (
            f"which holds no lock any more; it ran on host {left.get('host', '?')}: if it still runs there, this folder is on a "
            "file system that does not share locks between machines, so stop one of the two"
        )
    else:
        gone = "which no longer runs (it ended without releasing it: killed?)"
    return f"took over the lock of pid {left.get('pid', '?')} on {what} (since {left.get('since', '?')}), {gone}; every act it answered is in the journal"
