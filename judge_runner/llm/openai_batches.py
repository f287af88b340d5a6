"""The OpenAI Batch API (https://platform.openai.com/docs/api-reference/batch) as a
:class:`~judge_runner.llm.batch_api.BatchBackend`: the requests go up as one JSONL file, results come back
in an output file and an error file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from judge_runner.llm.base import ChatRequest, Completion, ToolSpec
from judge_runner.llm.batch_api import BatchResults, BatchStatus, ItemResult, check_failure, read_jsonl
from judge_runner.llm.errors import AuthError, LLMError, RequestError, SpendLimitError, TransientError
from judge_runner.llm.openai_provider import OpenAIProvider
from judge_runner.llm.retry import classify_status

ENDPOINT: Final = "/v1/chat/completions"
_ENDED = {"completed", "failed", "expired", "cancelled"}


def item_error(batch_id: str, status: int | None, code: str | None, message: str) -> ItemResult:
    """The result of a failed request: ``status`` classified as a synchronous reply's would be;
    ``batch_expired`` and ``batch_cancelled`` expired and canceled."""
    text = f"batch {batch_id}: {f'HTTP {status} ' if status else ''}{code or 'error'}: {message}"[:600]
    if code == "batch_expired":
        return ItemResult("expired", error=TransientError(f"batch {batch_id} expired (24 h) before this request was processed", 1))
    if code == "batch_cancelled":
        return ItemResult("canceled", error=TransientError(f"batch {batch_id} was canceled before this request was processed", 1))
    kind = classify_status(status, (code,)) if status else "bad_request"
    error: LLMError
    if kind == "auth":
        error = AuthError(f"the API key was refused: {text}", 1)
    elif kind == "spend_limit":
        error = SpendLimitError(f"the provider account's spend limit is reached: {text}", 1)
    elif kind == "retryable":
        error = TransientError(text, 1)
        error.retryable = True
    else:
        error = RequestError(f"the provider refused the request: {text}", 1)
    return ItemResult("errored", error=error)


class OpenAIBatches:
    def __init__(self, provider: OpenAIProvider):
        self.provider = provider
        self._client = provider._client

    def check(self) -> None:
        """``GET /v1/batches?limit=1``, free; a local server answers 404 (BatchUnavailable)."""
        try:
            self._client.batches.list(limit=1)
        except Exception as exc:  # noqa: BLE001 - classified: refused key, unreachable, or no batch API
            where = self.provider.base_url or "https://api.openai.com/v1"
            local = " (a local OpenAI-compatible server has no batch API)" if self.provider.local else ""
            raise check_failure(exc, self.provider, "GET /v1/batches", where, f"the server at {where} has no Batch API{local}") from None

    def body(self, request: ChatRequest) -> dict:
        """The synchronous request body (``OpenAIProvider.request_body``)."""
        return self.provider.request_body(request)

    def parse(self, value: Any, tools: list[ToolSpec], force_tool: str | None) -> Completion:
        return self.provider.parse_body(value, tools, force_tool)

    def submit(self, requests: Sequence[tuple[str, dict]]) -> str:
        """Upload the JSONL input file, then create the batch; returns its id."""
        lines = [
            json.dumps({"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}, ensure_ascii=False) for cid, body in requests
        ]
        upload = self._client.files.create(file=("judge-requests.jsonl", ("\n".join(lines) + "\n").encode("utf-8")), purpose="batch")
        batch = self._client.batches.create(input_file_id=upload.id, endpoint=ENDPOINT, completion_window="24h")
        return batch.id

    def status(self, batch_id: str) -> BatchStatus:
        batch = self._client.batches.retrieve(batch_id)
        c = batch.request_counts
        done, total = (c.completed + c.failed, c.total) if c is not None else (0, 0)
        return BatchStatus(batch.status in _ENDED, done, total, batch.status)

    def _lines(self, file_id: str | None) -> tuple[list[dict], int]:
        if not file_id:
            return [], 0
        return read_jsonl(self._client.files.content(file_id).content)

    def results(self, batch_id: str) -> BatchResults:
        """The output and error files' results. Raises RequestError for a batch that failed validation."""
        batch = self._client.batches.retrieve(batch_id)
        if batch.status == "failed":
            problems = "; ".join(str(e.message) for e in (batch.errors.data or [])) if batch.errors else ""
            raise RequestError(f"the provider refused batch {batch_id}: {problems or 'it failed validation'}"[:600], 1)
        out: dict[str, ItemResult] = {}
        output, unreadable = self._lines(batch.output_file_id)
        errors, also = self._lines(batch.error_file_id)
        for line in output + errors:
            cid = str(line.get("custom_id"))
            response = line.get("response") or {}
            error = line.get("error") or {}
            status = response.get("status_code")
            if status == 200 and isinstance(response.get("body"), dict):
                out[cid] = ItemResult("succeeded", response["body"])
                continue
            body_error = (response.get("body") or {}).get("error") if isinstance(response.get("body"), dict) else None
            detail = body_error if isinstance(body_error, dict) else error
            out[cid] = item_error(
                batch_id, status if isinstance(status, int) else None, detail.get("code"), str(detail.get("message") or "")
            )
        return BatchResults(out, unreadable + also)

    def cancel(self, batch_id: str) -> None:
        self._client.batches.cancel(batch_id)
