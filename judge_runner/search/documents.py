"""Document text by id, for results that arrive without it: an external search that returns only ids,
or a TREC run file (``evaluate --run``).

Two stores, one small interface (``label``, ``chunks(source)``, ``best_chunk(source, query)``):

- :class:`FolderDocuments`: a fixtures folder; the id is the path relative to the folder (as the
  built-in search's ``source``), read and chunked the way the indexer does (corpus.formats);
- :class:`BeirDocuments`: a BEIR ``corpus.jsonl``; the id is the record's ``_id``, chunked the way
  ``index --beir-corpus`` does (title as the anchor of every chunk).

The chunk shown for a result is the one that holds most of the query's terms (the honesty gate's
:func:`~judge_runner.search.text.term_coverage` on the same text the full-text index holds), the
first on a tie: a TREC run names documents, not chunks, so this is the nearest stand-in for the
engine's own choice. A document of one chunk (most BEIR records) shows exactly what the built-in
search shows.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from judge_runner.corpus.chunk import Chunk, chunk_text
from judge_runner.corpus.formats import chunk_document
from judge_runner.corpus.read import BinaryContent, decode
from judge_runner.corpus.walk import is_hidden
from judge_runner.search.hybrid import lexical_row_text
from judge_runner.search.text import term_coverage

MAX_DOCUMENT_BYTES = 2 * 1024 * 1024  # the indexer's default max_file_bytes


class DocumentStoreError(ValueError):
    """A document store that cannot be opened (missing folder, unreadable corpus file)."""


def pick_chunk(source: str, chunks: list[Chunk], query: str) -> Chunk | None:
    """The chunk of ``chunks`` holding most of ``query``'s terms (first on a tie), or None when empty."""
    best, best_cover = None, -1.0
    for chunk in chunks:
        cover = term_coverage(query, lexical_row_text(source, chunk.anchor, chunk.text))
        if cover > best_cover:
            best, best_cover = chunk, cover
    return best


class FolderDocuments:
    """Documents of a fixtures folder by relative path. Paths outside the folder, hidden paths, binary
    files and files over 2 MiB are not documents (``chunks`` returns [])."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
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
            text = decode(path.read_bytes()).text
        except (OSError, BinaryContent):
            return ()
        return tuple(chunk_document(text, path.suffix.lstrip(".").lower()).chunks)

    def chunks(self, source: str) -> list[Chunk]:
        """The chunks of document ``source`` ([] when it is not a document of the folder)."""
        return list(self._chunks(source))

    def best_chunk(self, source: str, query: str) -> Chunk | None:
        """See :func:`pick_chunk`; None when ``source`` is not a document of the folder."""
        return pick_chunk(source, self.chunks(source), query)


class BeirDocuments:
    """Documents of a BEIR ``corpus.jsonl`` (``{_id, title, text}`` per line; Thakur et al. 2021) by
    ``_id``. The file is read once; lines that are not records are skipped (as the indexer does).
    Raises DocumentStoreError when the file cannot be read or holds no record."""

    def __init__(self, corpus: Path):
        self.label = str(corpus)
        self._records: dict[str, tuple[str, str]] = {}
        try:
            with open(corpus, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    try:
                        record = json.loads(line)
                        self._records.setdefault(
                            str(record["_id"]), (str(record.get("title") or "").strip(), str(record.get("text") or "").strip())
                        )
                    except (json.JSONDecodeError, KeyError, TypeError):
                        continue
        except OSError as exc:
            raise DocumentStoreError(f"cannot read {corpus}: {exc.strerror or exc}") from None
        if not self._records:
            raise DocumentStoreError(f'{corpus} holds no BEIR records ({{"_id", "title", "text"}} per line)')

    def chunks(self, source: str) -> list[Chunk]:
        """The record's chunks as ``index --beir-corpus`` makes them ([] for an unknown id)."""
        if source not in self._records:
            return []
        title, text = self._records[source]
        return [Chunk(c.text, title or None, c.line_start, c.line_end) for c in chunk_text(text or title, "txt")]

    def best_chunk(self, source: str, query: str) -> Chunk | None:
        """See :func:`pick_chunk`; None for an unknown id."""
        return pick_chunk(source, self.chunks(source), query)


def open_documents(path: Path) -> FolderDocuments | BeirDocuments:
    """A folder as :class:`FolderDocuments`, a file as :class:`BeirDocuments`. Raises DocumentStoreError."""
    path = Path(path)
    if path.is_dir():
        return FolderDocuments(path)
    if path.is_file():
        return BeirDocuments(path)
    raise DocumentStoreError(f"{path} does not exist (give a fixtures folder or a BEIR corpus.jsonl)")
