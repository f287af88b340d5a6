"""One writer per label set: two processes grading one set would rewrite its qrels from their own views and drop
each other's grades. A :class:`SetLock` is an exclusive ``flock(2)`` on ``labels/NAME.lock`` and on
``<cache>.label-NAME.lock`` beside the judgment cache (docs/calibration.md, "One process per set"); the kernel
releases it however the process ends, so it is never stale. The file records its holder (JSON), is emptied on a
clean release and never deleted, so a record found in a free lock names a holder that ended without releasing
it."""

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
    """The set is held by another process (exit 2)."""


def cache_lock_path(cache: Path, name: str) -> Path:
    return cache.parent / f"{cache.name}.label-{name}.lock"


def holder_record(command: str, **fields: Any) -> dict[str, Any]:
    """This process's record: pid, host, UTC time, ``command`` and ``fields``."""
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": since, "command": command, **fields}


def cache_set_lock(cache: Path, name: str) -> SetLock:
    return SetLock(cache_lock_path(cache, name), f"the human qrels set {name!r} of the judgment cache {cache}")


def describe(record: dict[str, Any]) -> str:
    """What a lock ``record`` says of its holder: ``pid 4242 on host devbox, since ...``."""
    if not record:
        return "a process that has not written its details yet"
    text = f"pid {record.get('pid', '?')} on host {record.get('host', '?')}, since {record.get('since', '?')}"
    extra = [f"labeller {record['labeller']}"] if record.get("labeller") else []
    if record.get("port"):
        extra.append(f"page on 127.0.0.1:{record['port']}")
    return text + (f" ({', '.join(extra)})" if extra else "")


def _alive_here(record: dict[str, Any]) -> bool | None:
    """Whether the process a record names runs (None: another host, or no pid)."""
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
    """The lock on one set; ``what`` names the set in messages. :meth:`acquire` once, :meth:`release` at the end
    (idempotent)."""

    def __init__(self, path: Path, what: str):
        self.path, self.what = Path(path), what
        self._fd: int | None = None
        self._record: dict[str, Any] = {}

    def acquire(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """Take the lock and write ``record``; returns the record a holder that ended without releasing left
        (None when clean). Raises :class:`SetBusy` naming the holder, UsageError when the file cannot be opened."""
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
        """The holder's record, waiting briefly while the holder that has just locked writes it."""
        record: dict[str, Any] = {}
        for _ in range(READ_TRIES):
            record = _read(fd)
            if record and _alive_here(record) is not False:
                return record
            time.sleep(0.05)
        return record

    def update(self, **fields: Any) -> None:
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
        """Empty the record and let the lock go."""
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
    """What to say when the lock of a holder that ended without releasing it is taken over."""
    if left.get("host") != socket.gethostname():
        gone = (
            f"which holds no lock any more; it ran on host {left.get('host', '?')}: if it still runs there, this folder is on a "
            "file system that does not share locks between machines, so stop one of the two"
        )
    else:
        gone = "which no longer runs (it ended without releasing it: killed?)"
    return f"took over the lock of pid {left.get('pid', '?')} on {what} (since {left.get('since', '?')}), {gone}; every act it answered is in the journal"
