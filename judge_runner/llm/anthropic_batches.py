"""The Anthropic Message Batches API (https://docs.anthropic.com/en/api/creating-message-batches) as a
:class:`~judge_runner.llm.batch_api.BatchBackend`, through the SDK's ``client.messages.batches``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anthropic.types.messages import MessageBatchIndividualResponse

from judge_runner.llm.anthropic_provider import AnthropicProvider
from judge_runner.llm.base import ChatRequest, Completion, ToolSpec
from judge_runner.llm.batch_api import BatchResults, BatchStatus, ItemResult, check_failure, read_jsonl
from judge_runner.llm.errors import AuthError, LLMError, RequestError, SpendLimitError, TransientError

# an errored item's error.type -> the kind a synchronous failure with that error would be
_AUTH = {"authentication_error", "permission_error"}
_SPEND = {"billing_error"}
_RETRYABLE = {"rate_limit_error", "overloaded_error", "api_error", "timeout_error", "gateway_timeout_error"}


def item_error(batch_id: str, error_type: str, message: str) -> LLMError:
    """The LLMError an errored item becomes, by the API's error ``type``."""
    text = f"batch {batch_id}: {error_type}: {message}"[:600]
    if error_type in _AUTH:
        return AuthError(f"the API key was refused: {text}", 1)
    if error_type in _SPEND:
        return SpendLimitError(f"the provider account's spend limit is reached: {text}", 1)
    if error_type in _RETRYABLE:
        error = TransientError(text, 1)
        error.retryable = True
        return error
    return RequestError(f"the provider refused the request: {text}", 1)


class AnthropicBatches:
    def __init__(self, provider: AnthropicProvider):
        self.provider = provider
        self._batches = provider._client.messages.batches

    def check(self) -> None:
        """``GET /v1/messages/batches?limit=1``, free."""
        try:
            self._batches.list(limit=1)
        except Exception as exc:  # noqa: BLE001 - classified: refused key, unreachable, or no batch API
            where = str(self.provider._client.base_url).rstrip("/")
            raise check_failure(
                exc, self.provider, "GET /v1/messages/batches", where, f"the server at {where} has no Message Batches API"
            ) from None

    def body(self, request: ChatRequest) -> dict:
        """The synchronous request body (``AnthropicProvider.request_body``)."""
        return self.provider.request_body(request)

    def parse(self, value: Any, tools: list[ToolSpec], force_tool: str | None) -> Completion:
        return self.provider.parse_message(value)

    def submit(self, requests: Sequence[tuple[str, dict]]) -> str:
        batch = self._batches.create(requests=[{"custom_id": cid, "params": body} for cid, body in requests])  # type: ignore[typeddict-item]
        return batch.id

    def status(self, batch_id: str) -> BatchStatus:
        batch = self._batches.retrieve(batch_id)
        c = batch.request_counts
        total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
        return BatchStatus(batch.processing_status == "ended", total - c.processing, total, batch.processing_status)

    def results(self, batch_id: str) -> BatchResults:
        """The results; an expired or canceled item is a TransientError saying so."""
        out: dict[str, ItemResult] = {}
        stream = self._batches.results(batch_id)
        try:
            objects, unreadable = read_jsonl(stream.http_response.read())
        finally:
            stream.close()
        for value in objects:
            try:
                line = MessageBatchIndividualResponse.model_validate(value)
            except ValueError:  # pydantic's ValidationError: not a result of this API
                unreadable += 1
                continue
            result = line.result
            if result.type == "succeeded":
                out[line.custom_id] = ItemResult("succeeded", result.message)
            elif result.type == "errored":
                inner = getattr(result.error, "error", None)
                out[line.custom_id] = ItemResult(
                    "errored",
                    error=item_error(batch_id, str(getattr(inner, "type", "api_error")), str(getattr(inner, "message", ""))),
                )
            elif result.type == "expired":
                out[line.custom_id] = ItemResult(
                    "expired", error=TransientError(f"batch {batch_id} expired (24 h) before this request was processed", 1)
                )
            else:
                out[line.custom_id] = ItemResult(
                    "canceled", error=TransientError(f"batch {batch_id} was canceled before this request was processed", 1)
                )
        return BatchResults(out, unreadable)

    def cancel(self, batch_id: str) -> None:
        self._batches.cancel(batch_id)
