"""One exchange with a batch API: submit a flush as one batch (or pick up an earlier process's), poll it,
read its results and give each request its reply or error. A result that cannot be read is asked again and
counted as unread, never priced. See docs/batch.md, "When a batch goes wrong".
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
"""Seconds before the first status check; each later wait is 1.5 times longer, up to ``batch_poll``."""
POLL_FACTOR = 1.5
PROGRESS_EVERY_S = 600.0
"""Seconds between progress lines while the count of finished requests does not change."""
MAX_POLL_FAILURES = 10
"""Consecutive retryable failures of status checks or downloads tolerated before the requests fail."""
MAX_RESUBMITS = 2
"""Times the requests of a batch the server forgot (HTTP 404) are submitted again."""


class BatchAbandoned(LLMError):
    """The run stopped while the batch was in flight; not canceled, so ``--resume`` picks it up."""

    kind = "interrupted"


def format_wait(seconds: float) -> str:
    """``2m10s``, ``45s``, ``1h03m``."""
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


@dataclass
class BatchStats:
    """The summary's ``batch`` block. Once every batch ended, ``requests`` = succeeded + errored + expired
    + canceled + unread; ``unread`` requests may have been billed but are not in the run's cost."""

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
        return self.submitted + self.picked_up

    def as_dict(self) -> dict[str, Any]:
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
    """One queued request and, once ``done``, its raw reply or its error."""

    custom_id: str
    body: dict
    result: Any = None
    error: BaseException | None = None
    done: bool = False


class BatchExchange:
    """The flush's I/O, base of :class:`~judge_runner.llm.batch.BatchCoordinator`. ``_cond`` guards
    ``stats.in_flight``, ``_known`` and ``_sent``."""

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
        """Submit or pick up ``items``, wait, and set every item's result or error. Raises only
        KeyboardInterrupt, after marking the items abandoned."""
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
        """The id of a new batch of ``items``, its line recorded; None when it failed (the items fail)."""
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
        """Fail ``items`` with ``exc``, non-retryable unless ``retryable_ok``: a retry may pay twice."""
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
        """Wait for ``batch_id`` and give ``items`` their results. False, the items untouched, when the server
        no longer knows the batch (HTTP 404)."""
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
        """The readable results of an ended batch by ``custom_id``; a download missing some of ``wanted`` is
        fetched once more. Raises BatchAbandoned, or the SDK's error."""
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
        """Warn of this run's batch the server forgot (HTTP 404); the caller submits it again."""
        with self._cond:
            if batch_id in self.stats.in_flight:
                self.stats.in_flight.remove(batch_id)
        self.stats.unread += len(items)
        self.warn(
            f"warning: batch {batch_id} is unknown to the server (HTTP 404) though this run created it; its {len(items)} "
            f"request(s) are submitted again (the provider may have billed the lost batch: that is not in the run's cost)"
        )

    def _forget(self, batch_id: str) -> None:
        """Drop an earlier process's batch the server forgot (HTTP 404), warned once."""
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
        """Poll with growing waits until the batch ends. Raises BatchAbandoned, or the SDK's error after
        MAX_POLL_FAILURES consecutive retryable failures (at once for another)."""
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
