"""The judge protocol's bottom: what a judge is (:class:`Judge`) and what its calls return
(:class:`LabelReply` for a label, :class:`ListVerdict` for the list-level call).

Implementations (:class:`~judge_runner.judging.llm_judge.LLMJudge`,
:class:`~judge_runner.judging.heuristic.HeuristicJudge`) and the orchestration that caches, repeats and
scores their calls (:mod:`judge_runner.judging.labelling`) import this module; it imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from judge_runner.judging.fence import RenderedDocument
from judge_runner.judging.requests import ListItem
from judge_runner.llm.pricing import Usage


class Judge(Protocol):
    """Phase two's judge: answers single calls of the label-first protocol. ``name``: the provider
    recorded as ``provenance.provider``; ``model``: the ``judgeModel``; ``heuristic``: True when the
    scores come from a heuristic, not an LLM (recorded as ``heuristicJudge``; a heuristic judge is
    CPU-bound and runs one query at a time). An optional ``cache_model`` names the model in judgment-cache
    keys (default ``model``); an optional ``batching`` (a :class:`~judge_runner.llm.batch.BatchCoordinator`,
    ``--batch``) makes the run loop and the labelling issue their calls concurrently so they share batches. Every call takes the ``sampling`` fields to send
    (``judge_runner.judging.fingerprint.sampling_settings``), is never shown a rank or an engine score, and raises an
    :class:`~judge_runner.llm.errors.LLMError` kind when no valid reply can be had; ``log`` receives
    diagnostics (never a secret)."""

    name: str
    model: str
    heuristic: bool

    def label_one(
        self, query: str, intent: str, document: RenderedDocument, sampling: Mapping[str, Any], log: Callable[[str], None] = ...
    ) -> LabelReply:
        """The 0-3 label of one fenced document (pointwise mode)."""
        ...

    def label_batch(
        self,
        query: str,
        intent: str,
        documents: Sequence[RenderedDocument],
        order: Sequence[int],
        sampling: Mapping[str, Any],
        log: Callable[[str], None] = ...,
    ) -> list[LabelReply]:
        """The labels of ``documents`` shown in ``order`` (``order[i]``: index of the i-th shown), returned in
        the documents' own order (batched mode)."""
        ...

    def list_verdict(
        self,
        query: str,
        intent: str,
        expected_sources: Sequence[str],
        items: Sequence[ListItem],
        sampling: Mapping[str, Any],
        log: Callable[[str], None] = ...,
    ) -> ListVerdict:
        """The list-level verdict (coverage, snippetQuality, holistic figures) on labelled results."""
        ...


@dataclass(frozen=True, kw_only=True)
class LabelReply:
    """What one judge call said about one document: ``label`` 0-3, ``reason``, the judge's own
    ``injection_suspected`` flag, the model id the API returned (None if unknown), and what the call
    cost: ``usage`` (tokens), ``cost_usd`` (USD; None when the price is unknown), ``latency_s``
    (seconds), ``attempts`` (HTTP requests), ``recoveries`` applied to the raw reply. In batched mode
    one call gives one reply per document, the call's cost on the first; ``shown_as`` is the local id
    the document had (``D3``); ``order``: how the model wrote the reply, ``reason-first`` or
    ``grade-first`` by the keys' order as written, ``grade-only`` when no reason was asked (None: no model)."""

    label: int
    reason: str = ""
    injection_suspected: bool = False
    model_returned: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    latency_s: float = 0.0
    attempts: int = 0
    recoveries: tuple[str, ...] = ()
    shown_as: str | None = None
    order: str | None = None


@dataclass(frozen=True, kw_only=True)
class ListVerdict:
    """The list-level call's verdict on one query: ``coverage`` and ``snippet_quality`` in [0, 1] (the
    run's dimensions of those names), ``holistic`` ``{relevance, ranking, overall}`` in [0, 1] (kept as
    ``judge*`` fields), ``analysis`` ``{coverage, snippetQuality}`` and ``suggestions``, plus what the
    call cost (as in :class:`LabelReply`)."""

    coverage: float
    snippet_quality: float
    holistic: Mapping[str, float]
    analysis: Mapping[str, str]
    suggestions: Sequence[str]
    model_returned: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    latency_s: float = 0.0
    attempts: int = 0
    recoveries: tuple[str, ...] = ()

    def payload(self) -> dict[str, Any]:
        """The verdict as stored in the judgment cache (``CachedJudgment.payload``)."""
        return {
            "scores": {"coverage": self.coverage, "snippetQuality": self.snippet_quality},
            "holistic": dict(self.holistic),
            "analysis": dict(self.analysis),
            "suggestions": list(self.suggestions),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any] | None, model_returned: str | None = None) -> ListVerdict:
        """The verdict stored as ``payload`` (a cached list-level judgment's, free), the inverse of
        :meth:`payload`."""
        p = payload or {}
        return cls(
            coverage=float(p["scores"]["coverage"]),
            snippet_quality=float(p["scores"]["snippetQuality"]),
            holistic=dict(p.get("holistic") or {}),
            analysis=dict(p.get("analysis") or {}),
            suggestions=list(p.get("suggestions") or []),
            model_returned=model_returned,
        )
