"""Document text by id for systems that do not hold the chunks (``--corpus``, ``evaluate --run``): a
fixtures folder or a BEIR ``corpus.jsonl``, chunked exactly as the indexer chunks them, so a document
judged through a store and through the index is shown the same text.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from judge_runner.core.textproc import clean_text
from judge_runner.corpus.chunk import Chunk, chunk_text
from judge_runner.corpus.document import ReadDocument, chunk_bytes
from judge_runner.corpus.walk import is_hidden
from judge_runner.embed.base import TextEmbedder
from judge_runner.search.passages import Passages, select_passages

MAX_DOCUMENT_BYTES = 2 * 1024 * 1024  # the indexer's default max_file_bytes


class DocumentStoreError(ValueError):
    """A missing folder or an unreadable corpus file."""


class FolderDocuments:
    """Documents of a fixtures folder by relative path; outside, hidden, binary or over 2 MiB: none."""

    def __init__(self, root: Path, embedder: TextEmbedder | None = None):
        self.root = Path(root).resolve()
        self.embedder = embedder
        if not self.root.is_dir():
            raise DocumentStoreError(f"{root} is not a folder")
        self.label = str(root)
        self._chunks = lru_cache(maxsize=512)(self._read)

    def _read(self, source: str) -> tuple[Chunk, ...]:
        if not source or is_hidden(source) or any(is_hidden(p) for p in Path(source).parts):
            return ()
        path = (self.root / source).resolve()
        if not path.is_relative_to(self.root) or not path.is_file():
            return ()
        try:
            if path.stat().st_size > MAX_DOCUMENT_BYTES:
                return ()
            document = chunk_bytes(ReadDocument(source, path.read_bytes()))
        except OSError:
            return ()
        return () if document.skip else tuple(document.chunks)

    def chunks(self, source: str) -> list[Chunk]:
        return list(self._chunks(source))

    def passages(self, source: str, query: str, intent: str = "") -> Passages | None:
        """What the judge is shown of ``source``; None when it is not a document of the folder."""
        return select_passages(query, self.chunks(source), intent=intent, embedder=self.embedder)


class BeirDocuments:
    """Documents of a BEIR ``corpus.jsonl`` (Thakur et al. 2021) by ``_id``. Raises DocumentStoreError when
    the file cannot be read or holds no record."""

    def __init__(self, corpus: Path, embedder: TextEmbedder | None = None):
        self.label = str(corpus)
        self.embedder = embedder
        self._records: dict[str, tuple[str, str]] = {}
        try:
            with open(corpus, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    try:
                        record = json.loads(line)
                        title, text = (clean_text(str(record.get(k) or "").strip()) for k in ("title", "text"))
                        self._records.setdefault(clean_text(str(record["_id"])), (title, text))
                    except (json.JSONDecodeError, KeyError, TypeError):
                        continue
        except OSError as exc:
            raise DocumentStoreError(f"cannot read {corpus}: {exc.strerror or exc}") from None
        if not self._records:
            raise DocumentStoreError(f'{corpus} holds no BEIR records ({{"_id", "title", "text"}} per line)')

    def chunks(self, source: str) -> list[Chunk]:
        if source not in self._records:
            return []
        return record_chunks(*self._records[source])

    def passages(self, source: str, query: str, intent: str = "") -> Passages | None:
        """What the judge is shown of record ``source``; None for an unknown id."""
        return select_passages(query, self.chunks(source), intent=intent, embedder=self.embedder)


class IndexDocuments:
    """The built-in index as the store of a run's other systems: a document any system returns is shown the
    passages the built-in search shows of it. ``index``: anything with ``passages(source, query, intent)``
    (:class:`judge_runner.search.hybrid.ChunkSearch`); ``label``: ``index:<where>``."""

    def __init__(self, index: Any, label: str):
        self.index, self.label = index, label

    def passages(self, source: str, query: str, intent: str = "") -> Passages | None:
        """What the judge is shown of ``source``; None when the index does not hold it."""
        return cast(Passages | None, self.index.passages(source, query, intent))


def record_chunks(title: str, text: str) -> list[Chunk]:
    """A BEIR record's text (else its title) chunked as plain text, the title as every anchor."""
    return [Chunk(c.text, title or None, c.line_start, c.line_end) for c in chunk_text(text or title, "txt")]


def open_documents(path: Path, embedder: TextEmbedder | None = None) -> FolderDocuments | BeirDocuments:
    """A folder as :class:`FolderDocuments`, a file as :class:`BeirDocuments`. Raises DocumentStoreError."""
    path = Path(path)
    if path.is_dir():
        return FolderDocuments(path, embedder)
    if path.is_file():
        return BeirDocuments(path, embedder)
    raise DocumentStoreError(f"{path} does not exist (give a fixtures folder or a BEIR corpus.jsonl)")
