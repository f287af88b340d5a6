"""The batch APIs of :class:`tests.support.fakes.fake_llm.FakeLLMServer`: Anthropic Message Batches and OpenAI Batch.

Every item of a batch is answered by the server's brain exactly as the same request sent
synchronously would be (same message or chat completion payload, same usage accounting). Endpoints:

* Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches`` (list),
  ``GET /v1/messages/batches/{id}``, ``GET /v1/messages/batches/{id}/results`` (JSONL),
  ``POST /v1/messages/batches/{id}/cancel``;
* OpenAI: ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}/content``,
  ``POST /v1/batches``, ``GET /v1/batches`` (list), ``GET /v1/batches/{id}``,
  ``POST /v1/batches/{id}/cancel``; results in an output file and an error file.

Shapes follow the SDK types (``anthropic.types.messages.MessageBatch``,
``MessageBatchIndividualResponse``; ``openai.types.Batch``, ``FileObject``) and the API references.

Behaviour (attributes of :class:`FakeBatches`, set before or during a test):

* ``polls_before_done`` -- status checks answered "in progress" before a batch ends (default 1);
  ``polls_by_batch`` -- the same for the n-th batch created (1-based), overriding it;
* ``fail_every`` -- every n-th request of a batch (1-based, in submission order) is errored
  (Anthropic ``invalid_request_error``; OpenAI a 400 in the output file); 0: none;
* ``fail_ids`` -- custom ids (prefixes) that are errored whatever ``fail_every`` says;
* ``fail_type`` / ``fail_status`` -- the Anthropic error type / OpenAI HTTP status of an errored item
  (default ``invalid_request_error`` / 400; ``overloaded_error`` / 529 and 500 are retryable);
  ``fail_once``: a custom id is errored only the first time it is submitted;
* ``expire_every`` / ``cancel_every`` -- every n-th request expired / canceled when the batch ends
  (OpenAI: the error file's ``batch_expired`` / ``batch_cancelled`` lines, batch status ``expired``);
* ``POST .../cancel`` -- the batch ends at its next status check with every request canceled;
* ``available`` -- False: every batch endpoint answers 404, as a local OpenAI-compatible server does;
* ``create_delay_s`` -- seconds a batch creation takes before the server answers (a slow submission);
* ``cut_results`` -- this many result downloads (Anthropic's results JSONL, OpenAI's output file) end in a
  line cut in half, as a dropped connection or a half-written file leaves them;
* ``foreign_ids`` -- in this many of the batches that end next, the first request's result comes back under a
  custom id the client never sent;
* ``forget_created`` -- this many of the batches created next are forgotten by the server right after it
  answered their creation (their status, results and files answer 404), as a server that lost its records does.

``submitted`` lists each batch created (``{"id", "api", "custom_ids"}``), so a test counts batches;
``http`` lists every batch-API request as ``(method, path)``.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.fakes.fake_llm import FakeLLMServer, _Handler

ANTHROPIC_PREFIX = "/v1/messages/batches"
OPENAI_BATCHES = "/v1/batches"
OPENAI_FILES = "/v1/files"


def is_batch_path(path: str) -> bool:
    """Whether ``path`` (no query string) belongs to one of the batch APIs."""
    return path.startswith((ANTHROPIC_PREFIX, OPENAI_BATCHES, OPENAI_FILES))


@dataclass
class _Batch:
    id: str
    api: str
    requests: list[tuple[str, dict]]
    created: float
    polls: int = 0
    cancel: bool = False
    results: dict[str, tuple[str, Any]] | None = None  # custom_id -> (outcome, payload)
    output_file_id: str | None = None
    error_file_id: str | None = None
    input_file_id: str = ""
    foreign: bool = False  # its first result comes back under an unknown custom id


@dataclass
class FakeBatches:
    """Batch state of one fake server (see the module docstring)."""

    server: FakeLLMServer
    polls_before_done: int = 1
    polls_by_batch: dict[int, int] = field(default_factory=dict)
    fail_every: int = 0
    fail_ids: set[str] = field(default_factory=set)
    expire_every: int = 0
    cancel_every: int = 0
    fail_type: str = "invalid_request_error"
    fail_status: int = 400
    fail_once: bool = False
    available: bool = True
    create_delay_s: float = 0.0
    cut_results: int = 0
    foreign_ids: int = 0
    forget_created: int = 0
    submitted: list[dict] = field(default_factory=list)
    http: list[tuple[str, str]] = field(default_factory=list)
    _batches: dict[str, _Batch] = field(default_factory=dict)
    _files: dict[str, bytes] = field(default_factory=dict)
    _output_files: set[str] = field(default_factory=set)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, api: str | None = None) -> int:
        """Batches created, optionally only on one API (``anthropic`` or ``openai``)."""
        return sum(1 for b in self.submitted if api is None or b["api"] == api)

    # -- dispatch ------------------------------------------------------------------------------------

    def handle(self, h: _Handler, method: str) -> None:
        """Answer one batch-API request (after the API-key check)."""
        path = h.path.split("?", 1)[0].rstrip("/")
        raw = h.read_body() if method == "POST" else b""
        with self._lock:
            self.http.append((method, path))
        if not self.available:
            h.send_json(404, {"detail": "Not Found"})
            return
        api = "anthropic" if path.startswith(ANTHROPIC_PREFIX) else "openai"
        key = h.headers.get("x-api-key") or (h.headers.get("authorization") or "")[7:].strip()
        if not key or key in self.server.invalid_keys:
            from tests.support.fakes.fake_llm import _error_body

            h.send_json(401, _error_body(api, 401, "invalid x-api-key" if api == "anthropic" else "Incorrect API key provided."))
            return
        try:
            status, payload, content_type = self._route(method, path, raw, h.headers.get("content-type") or "")
        except KeyError as exc:
            status, payload, content_type = 404, {"error": {"type": "not_found_error", "message": f"not found: {exc}"}}, None
        if isinstance(payload, bytes):
            h.send_raw(status, payload, {"Content-Type": content_type or "application/octet-stream"})
        else:
            h.send_json(status, payload)

    def _route(self, method: str, path: str, raw: bytes, content_type: str) -> tuple[int, Any, str | None]:
        parts = path.split("/")
        if path.startswith(ANTHROPIC_PREFIX):
            rest = parts[4:]  # after /v1/messages/batches
            if method == "POST" and not rest:
                return 200, self._anthropic_create(json.loads(raw or b"{}")), None
            if method == "GET" and not rest:
                return 200, {"data": [], "has_more": False, "first_id": None, "last_id": None}, None
            batch = self._batches[rest[0]]
            if method == "GET" and len(rest) == 1:
                return 200, self._anthropic_view(batch, poll=True), None
            if method == "GET" and rest[1:] == ["results"]:
                return 200, self._anthropic_results(batch), "application/binary"
            if method == "POST" and rest[1:] == ["cancel"]:
                batch.cancel = True
                return 200, self._anthropic_view(batch, poll=False), None
        elif path.startswith(OPENAI_FILES):
            rest = parts[3:]
            if method == "POST" and not rest:
                return 200, self._openai_upload(raw, content_type), None
            if method == "GET" and rest[1:] == ["content"]:
                data = self._files[rest[0]]
                return 200, (self._maybe_cut(data) if rest[0] in self._output_files else data), "application/octet-stream"
        elif path.startswith(OPENAI_BATCHES):
            rest = parts[3:]
            if method == "POST" and not rest:
                return 200, self._openai_create(json.loads(raw or b"{}")), None
            if method == "GET" and not rest:
                return 200, {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}, None
            batch = self._batches[rest[0]]
            if method == "GET" and len(rest) == 1:
                return 200, self._openai_view(batch, poll=True), None
            if method == "POST" and rest[1:] == ["cancel"]:
                batch.cancel = True
                return 200, self._openai_view(batch, poll=False), None
        raise KeyError(path)

    # -- processing ----------------------------------------------------------------------------------

    def _new(self, api: str, requests: list[tuple[str, dict]], prefix: str, input_file_id: str = "") -> _Batch:
        self.server._sleep(self.create_delay_s)
        with self._lock:
            batch = _Batch(f"{prefix}{next(self._ids):08d}", api, requests, time.time(), input_file_id=input_file_id)
            self._batches[batch.id] = batch
            self.submitted.append({"id": batch.id, "api": api, "custom_ids": [c for c, _ in requests], "bodies": [b for _, b in requests]})
        return batch

    def _created(self, batch: _Batch, view: dict) -> dict:
        """The creation's answer; the batch is then forgotten when ``forget_created`` says so."""
        with self._lock:
            if self.forget_created > 0:
                self.forget_created -= 1
                self._batches.pop(batch.id, None)
        return view

    def _returned_id(self, batch: _Batch, k: int, cid: str) -> str:
        """The custom id a result is returned under: a foreign one for the first request of a batch chosen by ``foreign_ids``."""
        return f"jr-foreign{k:06d}" if batch.foreign and k == 1 else cid

    def _maybe_cut(self, data: bytes) -> bytes:
        """``data`` with its last line cut in half while ``cut_results`` downloads are left to cut."""
        with self._lock:
            if self.cut_results <= 0:
                return data
            self.cut_results -= 1
        body = data.rstrip(b"\n")
        start = body.rfind(b"\n") + 1
        return body[: start + (len(body) - start) // 2]

    def _outcome(self, k: int, cid: str, canceled: bool) -> str:
        if canceled or (self.cancel_every and k % self.cancel_every == 0):
            return "canceled"
        if self.expire_every and k % self.expire_every == 0:
            return "expired"
        if (self.fail_every and k % self.fail_every == 0) or any(cid.startswith(p) for p in self.fail_ids):
            earlier = sum(b["custom_ids"].count(cid) for b in self.submitted)
            if not (self.fail_once and earlier > 1):
                return "errored"
        return "succeeded"

    def _advance(self, batch: _Batch, poll: bool) -> bool:
        """Count a status check; True once the batch has ended (its results computed then, once)."""
        if poll:
            batch.polls += 1
        number = next((n for n, b in enumerate(self.submitted, start=1) if b["id"] == batch.id), 0)
        if batch.results is None and (batch.cancel or batch.polls > self.polls_by_batch.get(number, self.polls_before_done)):
            results: dict[str, tuple[str, Any]] = {}
            for k, (cid, body) in enumerate(batch.requests, start=1):
                outcome = self._outcome(k, cid, batch.cancel)
                payload = self.server.batch_reply(batch.api, body) if outcome == "succeeded" else None
                results[cid] = (outcome, payload)
            batch.results = results
            with self._lock:
                if self.foreign_ids > 0:
                    self.foreign_ids -= 1
                    batch.foreign = True
        return batch.results is not None

    def _counts(self, batch: _Batch) -> dict[str, int]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if batch.results is None:
            counts["processing"] = len(batch.requests)
        else:
            for outcome, _ in batch.results.values():
                counts[outcome] += 1
        return counts

    # -- anthropic -----------------------------------------------------------------------------------

    def _anthropic_create(self, body: dict) -> dict:
        requests = [(str(r["custom_id"]), dict(r["params"])) for r in body.get("requests") or []]
        batch = self._new("anthropic", requests, "msgbatch_fake")
        return self._created(batch, self._anthropic_view(batch, poll=False))

    def _anthropic_view(self, batch: _Batch, poll: bool) -> dict:
        ended = self._advance(batch, poll)
        created = datetime.fromtimestamp(batch.created, UTC)
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else ("canceling" if batch.cancel else "in_progress"),
            "request_counts": self._counts(batch),
            "created_at": created.isoformat(),
            "expires_at": (created + timedelta(hours=24)).isoformat(),
            "ended_at": datetime.now(UTC).isoformat() if ended else None,
            "cancel_initiated_at": created.isoformat() if batch.cancel else None,
            "archived_at": None,
            "results_url": f"{self.server.url}{ANTHROPIC_PREFIX}/{batch.id}/results" if ended else None,
        }

    def _anthropic_results(self, batch: _Batch) -> bytes:
        if batch.results is None:
            raise KeyError(f"{batch.id} has not ended")
        lines = []
        for k, (cid, (outcome, payload)) in enumerate(batch.results.items(), start=1):
            cid = self._returned_id(batch, k, cid)
            if outcome == "succeeded":
                result: dict = {"type": "succeeded", "message": payload}
            elif outcome == "errored":
                result = {
                    "type": "errored",
                    "error": {"type": "error", "error": {"type": self.fail_type, "message": "fake: this request was refused"}},
                }
            else:
                result = {"type": outcome}
            lines.append(json.dumps({"custom_id": cid, "result": result}))
        return self._maybe_cut(("\n".join(lines) + "\n").encode("utf-8"))

    # -- openai --------------------------------------------------------------------------------------

    def _file(self, data: bytes, name: str, purpose: str) -> dict:
        with self._lock:
            file_id = f"file-fake{next(self._ids):08d}"
            self._files[file_id] = data
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }

    def _openai_upload(self, raw: bytes, content_type: str) -> dict:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
        if fields.get("purpose", (None, b""))[1].decode() != "batch":
            raise KeyError("purpose must be batch")
        filename, data = fields["file"]
        return self._file(data, filename or "upload.jsonl", "batch")

    def _openai_create(self, body: dict) -> dict:
        lines = [json.loads(line) for line in self._files[body["input_file_id"]].decode("utf-8").splitlines() if line.strip()]
        requests = [(str(line["custom_id"]), dict(line["body"])) for line in lines]
        batch = self._new("openai", requests, "batch_fake", body["input_file_id"])
        return self._created(batch, self._openai_view(batch, poll=False))

    def _openai_view(self, batch: _Batch, poll: bool) -> dict:
        ended = self._advance(batch, poll)
        counts = self._counts(batch)
        if ended and batch.output_file_id is None and batch.results is not None:
            out, err = [], []
            for k, (cid, (outcome, payload)) in enumerate(batch.results.items()):
                rid = f"batch_req_fake{k:06d}"
                cid = self._returned_id(batch, k + 1, cid)
                if outcome == "succeeded":
                    out.append(
                        {"id": rid, "custom_id": cid, "response": {"status_code": 200, "request_id": rid, "body": payload}, "error": None}
                    )
                elif outcome == "errored":
                    error = {"message": "fake: this request was refused", "type": "invalid_request_error", "param": None, "code": None}
                    out.append(
                        {
                            "id": rid,
                            "custom_id": cid,
                            "response": {"status_code": self.fail_status, "request_id": rid, "body": {"error": error}},
                            "error": None,
                        }
                    )
                else:
                    code = "batch_expired" if outcome == "expired" else "batch_cancelled"
                    err.append({"id": rid, "custom_id": cid, "response": None, "error": {"code": code, "message": f"fake: {outcome}"}})
            batch.output_file_id = self._file("".join(json.dumps(x) + "\n" for x in out).encode(), "output.jsonl", "batch_output")["id"]
            self._output_files.add(batch.output_file_id)
            if err:
                batch.error_file_id = self._file("".join(json.dumps(x) + "\n" for x in err).encode(), "errors.jsonl", "batch_output")["id"]
        if not ended:
            status = "cancelling" if batch.cancel else "in_progress"
        elif batch.cancel:
            status = "cancelled"
        elif counts["expired"]:
            status = "expired"
        else:
            status = "completed"
        done = counts["succeeded"] + counts["errored"]
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": status,
            "created_at": int(batch.created),
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "errors": None,
            "request_counts": {"total": len(batch.requests), "completed": counts["succeeded"], "failed": done - counts["succeeded"]},
        }
