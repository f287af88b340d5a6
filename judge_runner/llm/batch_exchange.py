"""One exchange with a batch API, for :class:`~judge_runner.llm.batch.BatchCoordinator`: submit the
requests a flush gathered as one batch (or pick them up from an earlier process's batch), poll it until it
ends, read its results and give each request its reply or error.

What the batch API may do to a run, and what happens then (docs/batch.md, "When a batch goes wrong"):

- a status check or a result download that fails for a passing reason (a connection error, a 5xx) is
  tried again, up to MAX_POLL_FAILURES times in a row;
- a result file is read line by line (:func:`~judge_runner.llm.batch_api.read_jsonl`): a line cut short
  or not JSON costs its own request only; a download that lacks results is fetched once more; a request
  still without a readable result (and one whose result came back under an id this run never sent, which
  is warned about and ignored) is asked again in the next batch (``BatchStats.unread``);
- a batch the server forgets right after creating it (HTTP 404 on its status or results) is warned about
  and its requests are submitted again, up to MAX_RESUBMITS times (a batch of an earlier process is
  forgotten once and its requests submitted anew);
- the batch line of a batch that cannot be recorded (a full disk) is warned about; the run loop stops.

The provider may bill requests whose results this run never read: they are counted
(``BatchStats.unread``), never priced (their cost is unknown).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from judge_runner.llm.batch_api import BatchBackend, ItemResult
from judge_runner.llm.errors import LLMError, TransientError
from judge_runner.llm.retry import ErrorClass, translate

FIRST_POLL_S = 1.0
"""Seconds before the first status check of a batch; each later wait is 1.5 times the one before,
capped at the ``batch_poll`` setting (default 60 s)."""
POLL_FACTOR = 1.5
PROGRESS_EVERY_S = 600.0
"""A progress line is printed when the count of finished requests changes, else once per this many seconds."""
MAX_POLL_FAILURES = 10
"""Consecutive failed status checks or result downloads (connection errors, 5xx) tolerated before the batch's requests fail."""
MAX_RESUBMITS = 2
"""Times the requests of a batch the server forgot right after creating it (HTTP 404) are submitted again."""


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
    succeeded + errored + expired + canceled + unread once every batch ended; ``unread``: requests whose
    result this run could not read (a result line cut short or not JSON, a result under an id it never
    sent, a batch the server forgot after creating it), each asked again: the provider may have billed
    them, and what they cost is not in the run's cost; ``in_flight``: ids of batches not ended when the run
    stopped (``--resume`` picks them up)."""

    batches: int = 0
    resumed: int = 0
    submitted: int = 0
    picked_up: int = 0
    succeeded: int = 0
    errored: int = 0
    expired: int = 0
    canceled: int = 0
    unread: int = 0
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
            "unreadResults": self.unread,
            "inFlight": list(self.in_flight),
        }


@dataclass
class QueuedRequest:
    """One request a worker queued for the next batch, and (once ``done``) its raw reply or its error."""

    custom_id: str
    body: dict
    result: Any = None
    error: BaseException | None = None
    done: bool = False


class BatchExchange:
    """The batch-API side of :class:`~judge_runner.llm.batch.BatchCoordinator` (its base class): the
    coordinator decides when to flush (every counted worker waiting) and holds the state declared here;
    these methods do the flush's I/O. ``_cond`` guards ``stats.in_flight``, ``_known`` and ``_sent``."""

    backend: BatchBackend
    provider_name: str
    max_poll_s: float
    classify: Callable[[BaseException], ErrorClass | None]
    record: Callable[[dict[str, Any]], None]
    note: Callable[[str], None]
    warn: Callable[[str], None]
    stats: BatchStats
    _cond: threading.Condition
    _abandon: threading.Event
    _submitting: bool
    _known: dict[str, str]
    _sent: dict[str, set[str]]
    _fetched: dict[str, dict[str, ItemResult]]

    def _flush(self, items: list[QueuedRequest]) -> None:
        """Submit ``items`` (those an earlier process already submitted are picked up from its batch
        instead), wait for the batches to end and set every item's result or error. A batch the server
        forgets (HTTP 404) right after creating it is submitted again, up to MAX_RESUBMITS times. Never
        raises but KeyboardInterrupt (after marking the items abandoned)."""
        seen: Counter[str] = Counter()
        for item in items:  # two identical requests in one batch: distinct ids, the same reply
            seen[item.custom_id] += 1
            if seen[item.custom_id] > 1:
                item.custom_id = f"{item.custom_id[:56]}-{seen[item.custom_id]}"
        groups: dict[str | None, list[QueuedRequest]] = {}
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
            for submission in range(MAX_RESUBMITS + 1):
                if not new:
                    break
                if self._abandon.is_set():
                    self._fail(new, BatchAbandoned("interrupted before the batch was submitted"))
                    break
                batch_id = self._submit(new)
                if batch_id is None or self._finish(batch_id, new):
                    break
                if submission == MAX_RESUBMITS:  # forgotten every time: give up on these requests
                    self._fail(new, TransientError(f"the server forgot batch {batch_id} and {submission} before it (HTTP 404)", 1))
        except KeyboardInterrupt:
            self._abandon.set()
            for item in items:
                if not item.done:
                    item.error, item.done = BatchAbandoned("interrupted while the batch was in flight"), True
            raise

    def _submit(self, items: list[QueuedRequest]) -> str | None:
        """Create a batch of ``items`` and record its ``batch`` line; returns its id, or None when it could
        not be created (the items then fail: retryably when nothing was created)."""
        with self._cond:
            self._submitting = True
        try:
            try:
                batch_id = self.backend.submit([(i.custom_id, i.body) for i in items])
            except Exception as exc:  # noqa: BLE001 - nothing was created: the retry layer may try again
                self._fail(items, exc, retryable_ok=True)
                return None
            self.stats.batches += 1
            self.stats.submitted += len(items)
            with self._cond:
                self.stats.in_flight.append(batch_id)
                self._sent[batch_id] = {i.custom_id for i in items}
            try:  # written before anything else happens: the id is what --resume needs
                self.record(
                    {"batchId": batch_id, "provider": self.provider_name, "requests": len(items), "customIds": [i.custom_id for i in items]}
                )
            except Exception as exc:  # noqa: BLE001 - the run file cannot take it (a full disk): the run loop stops the run
                self.warn(
                    f"warning: batch {batch_id} ({len(items)} requests) was submitted but could not be recorded in the run file "
                    f"({exc}): --resume cannot pick it up; cancel it in the provider's console or API if the run does not finish"
                )
        finally:
            with self._cond:
                self._submitting = False
                self._cond.notify_all()
        self.note(f"batch {batch_id}: {len(items)} request(s) submitted to the {self.provider_name} batch API")
        return batch_id

    def _fail(self, items: list[QueuedRequest], exc: BaseException, retryable_ok: bool = False) -> None:
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

    def _finish(self, batch_id: str, items: list[QueuedRequest], prior: bool = False) -> bool:
        """Wait for ``batch_id`` to end and give ``items`` their results (:meth:`_fetch`). A batch the server
        no longer knows (HTTP 404 on its status or results) leaves the items untouched and returns False:
        an earlier process's (``prior``) is warned about once and forgotten, this run's own is warned about
        (its requests are submitted again by the caller; the provider may have billed them). Else True."""
        results = self._fetched.get(batch_id)
        if results is None:
            with self._cond:
                if batch_id not in self.stats.in_flight:
                    self.stats.in_flight.append(batch_id)
            try:
                self._poll(batch_id)
                with self._cond:  # it ended: whatever its results hold, it is no longer in flight
                    if batch_id in self.stats.in_flight:
                        self.stats.in_flight.remove(batch_id)
                results = self._fetch(batch_id, {i.custom_id for i in items})
            except Exception as exc:  # noqa: BLE001 - the items fail (abandoned: still in flight), the run goes on
                if getattr(exc, "status_code", None) == 404:
                    if prior:
                        self._forget(batch_id)
                    else:
                        self._lost(batch_id, items)
                    return False
                self._fail(items, exc)
                return True
            self._fetched[batch_id] = results
        missing = [item for item in items if item.custom_id not in results]
        if missing:
            self.warn(
                f"warning: batch {batch_id} gave no readable result for {len(missing)} request(s); they are asked again "
                f"in the next batch (the provider may have billed them: that is not in the run's cost)"
            )
        for item in items:
            found = results.get(item.custom_id)
            with self._cond:
                self._known.pop(item.custom_id, None)  # a retry of this request is a new submission
            if found is None:
                error = TransientError(f"batch {batch_id} gave no readable result for request {item.custom_id}", 1)
                error.retryable = True  # asked again, in the next batch
                item.error = error
                self.stats.unread += 1
            elif found.outcome == "succeeded":
                item.result = found.value
                self.stats.succeeded += 1
            else:
                item.error = found.error or TransientError(f"batch {batch_id}: request {found.outcome}", 1)
                setattr(self.stats, found.outcome, getattr(self.stats, found.outcome) + 1)
            item.done = True
        return True

    def _fetch(self, batch_id: str, wanted: set[str]) -> dict[str, ItemResult]:
        """The readable results of an ended batch by ``custom_id``. A download that fails for a passing reason
        is tried again (up to MAX_POLL_FAILURES times, as a status check is); one that lacks a result for
        some of ``wanted`` (a line cut short, not JSON, or a result under an id this run never sent) is
        downloaded once more; lines that stay unreadable and results under unknown ids are warned about.
        Raises BatchAbandoned, or the SDK's error."""
        failures, downloads = 0, 0
        wait = min(FIRST_POLL_S, self.max_poll_s)
        while True:
            if self._abandon.is_set():
                raise BatchAbandoned("interrupted while the batch's results were fetched")
            try:
                got = self.backend.results(batch_id)
            except Exception as exc:
                failures += 1
                if self.classify(exc) != "retryable" or failures >= MAX_POLL_FAILURES:
                    raise
                self.note(f"batch {batch_id}: fetching its results failed ({type(exc).__name__}); trying again")
                if self._abandon.wait(wait):
                    raise BatchAbandoned("interrupted while the batch's results were fetched") from None
                wait = min(self.max_poll_s, wait * POLL_FACTOR)
                continue
            downloads += 1
            if downloads < 2 and (got.unreadable or not wanted <= set(got.items)):
                self.note(f"batch {batch_id}: its results came back incomplete; fetching them again")
                continue
            break
        with self._cond:
            sent = self._sent.get(batch_id, set()) | wanted | {cid for cid, known in self._known.items() if known == batch_id}
        foreign = sorted(set(got.items) - sent)
        if got.unreadable:
            self.warn(f"warning: batch {batch_id}: {got.unreadable} result line(s) could not be read (cut short, or not a result)")
        if foreign:
            self.warn(
                f"warning: batch {batch_id} returned {len(foreign)} result(s) under custom ids this run never sent "
                f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}): ignored"
            )
        return {cid: result for cid, result in got.items.items() if cid in sent}

    def _lost(self, batch_id: str, items: list[QueuedRequest]) -> None:
        """This run's batch the server answers 404 for (it forgot it after creating it): warned; its requests
        are submitted again by the caller (:meth:`_flush`)."""
        with self._cond:
            if batch_id in self.stats.in_flight:
                self.stats.in_flight.remove(batch_id)
        self.stats.unread += len(items)
        self.warn(
            f"warning: batch {batch_id} is unknown to the server (HTTP 404) though this run created it; its {len(items)} "
            f"request(s) are submitted again (the provider may have billed the lost batch: that is not in the run's cost)"
        )

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
