"""Batch mode's face (``--batch``): :class:`BatchingProvider` is a ChatProvider whose calls go through a
:class:`~judge_runner.llm.batch.BatchCoordinator` into the provider's batch API, so the judge and the
labelling use it exactly as a synchronous provider; :func:`batching_provider` builds one after checking
that the server has the API.
"""

from __future__ import annotations

import dataclasses

from judge_runner.llm.base import ChatProvider, ChatRequest, Completion
from judge_runner.llm.batch import BATCH_CALL_DEADLINE_S, BatchCoordinator
from judge_runner.llm.batch_api import BatchBackend, custom_id
from judge_runner.llm.budget import Reservation
from judge_runner.llm.retry import ErrorClass


class BatchingProvider(ChatProvider):
    """A provider whose calls go through ``backend``'s batch API (see the module docstring): same name
    and model as ``inner``, price ``inner.price.for_batch()``, the same retry policy with a 25-hour
    call deadline (:data:`BATCH_CALL_DEADLINE_S`). ``coordinator`` is the run's; the judge reads it
    (``LLMJudge.batching``) to label a query's documents concurrently."""

    def __init__(self, inner: ChatProvider, backend: BatchBackend, coordinator: BatchCoordinator):
        super().__init__(inner.model, dataclasses.replace(inner.retry, deadline_s=BATCH_CALL_DEADLINE_S), inner.budget, inner.timeout_s)
        self.name = inner.name
        self.inner = inner
        self.backend = backend
        self.coordinator = coordinator
        self.price = inner.price.for_batch() if inner.price is not None else None

    @property
    def reasoning_allowance(self) -> int:
        """The synchronous provider's (its model and effort)."""
        return self.inner.reasoning_allowance

    def classify(self, exc: BaseException) -> ErrorClass | None:
        """The synchronous provider's classification of its SDK's errors."""
        return self.inner.classify(exc)

    def _reserve(self, input_tokens: int, max_tokens: int) -> Reservation:
        """The budget reservation, waiting for the next batch when it does not fit now
        (:meth:`BatchCoordinator.reserve`)."""
        return self.coordinator.reserve(
            lambda defer, margin: self.budget.reserve(self.price, input_tokens, max_tokens, defer=defer, margin_usd=margin)
        )

    def _send(self, request: ChatRequest, timeout: float) -> Completion:
        body = self.backend.body(request)
        raw = self.coordinator.call(custom_id(body), body)
        return self.backend.parse(raw, request.tools, request.force_tool)


def batching_provider(inner: ChatProvider, backend_cls: type, max_poll_s: float = 60.0) -> BatchingProvider:
    """Wrap ``inner`` for ``--batch``: build its backend (``backend_cls(inner)``), check the server has
    the batch API (one free request), and give it a fresh coordinator. Raises BatchUnavailable,
    BatchUnreachable or the LLMError of a refused key (:func:`check_failure`)."""
    backend = backend_cls(inner)
    backend.check()
    return BatchingProvider(inner, backend, BatchCoordinator(backend, inner.name, max_poll_s))
