"""Bringing an index up to date with a fixtures tree: incremental by content hash, pruning deleted files.

Backend-neutral: a backend provides ``document_hashes``, ``replace_document``, ``remove_documents``,
``set_meta``, ``commit`` and ``rollback`` (see :class:`judge_runner.search.sqlite.SQLiteIndex`).
Documents are written in committed batches, each document atomically, so a crash mid-index leaves every
document either as it was or fully updated (see :func:`_write`).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_runner.core.textproc import clean_text
from judge_runner.corpus.chunk import Chunk, chunk_text
from judge_runner.corpus.document import chunk_bytes, read_bytes
from judge_runner.corpus.walk import DEFAULT_EXCLUDES, DEFAULT_EXTENSIONS, DEFAULT_MAX_BYTES, walk_corpus
from judge_runner.embed.base import EmbeddingModelError, TextEmbedder
from judge_runner.search.base import SearchIndex


@dataclass
class IndexReport:
    """Counts per outcome of one ``index`` call. ``skipped`` maps a reason to the sources skipped for it."""

    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks_embedded: int = 0
    skipped: dict[str, list[str]] = field(default_factory=dict)
    # how files were read, e.g. "decoded as cp1252": indexed, but reported ({note: [sources]})
    notes: dict[str, list[str]] = field(default_factory=dict)
    corpus_fingerprint: str = ""
    embed_seconds: float = 0.0

    def skip(self, source: str, reason: str) -> None:
        """Record a file left out of the index and why."""
        self.skipped.setdefault(reason, []).append(source)

    def note(self, source: str, note: str) -> None:
        """Record how a file was read (its parenthesised details dropped, so notes group)."""
        self.notes.setdefault(re.sub(r" \(.*\)", "", note), []).append(source)

    def as_dict(self) -> dict:
        """JSON-ready counts (skipped and notes as ``{reason: count}``)."""
        return {
            "indexed": self.indexed,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "chunksEmbedded": self.chunks_embedded,
            "embedSeconds": round(self.embed_seconds, 3),
            "skipped": {r: len(v) for r, v in sorted(self.skipped.items())},
            "notes": {r: len(v) for r, v in sorted(self.notes.items())},
            "corpusFingerprint": self.corpus_fingerprint,
        }


# Bump when chunking or lexical processing changes: an index written by another version is re-chunked
# and re-embedded in full on the next run, since unchanged file hashes would otherwise keep old chunks.
CHUNKER_VERSION = "3"  # 3: front matter, CR line endings, NFC sources, detected encodings
BATCH_CHUNKS = 256
"""Chunks embedded per call and committed per transaction, about."""


def _reusable_hashes(index: SearchIndex) -> dict[str, str]:
    """Hashes of documents whose chunks can be kept: none when the index was chunked by another version."""
    return index.document_hashes() if index.get_meta("chunker_version") == CHUNKER_VERSION else {}


def corpus_fingerprint(hashes: dict[str, str]) -> str:
    """sha256 over the sorted ``source\\tsha256`` lines of a corpus: equal iff the indexed content is equal."""
    digest = hashlib.sha256()
    for source in sorted(hashes):
        digest.update(f"{source}\t{hashes[source]}\n".encode())
    return digest.hexdigest()


def index_tree(
    index: SearchIndex,
    root: Path,
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS,
    prune: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    excludes: tuple[str, ...] = DEFAULT_EXCLUDES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> IndexReport:
    """Index every corpus file under ``root`` into ``index``; returns an :class:`IndexReport`.
    ``extensions``, ``excludes`` (folder names) and ``max_bytes`` select files as :func:`walk_corpus` does.

    Unchanged files (same sha256) are not re-read into chunks nor re-embedded. Unreadable, binary and
    empty files, and a file whose chunks the model cannot embed, are skipped with their reason and never
    stop the run. A file not in UTF-8 is decoded by detection and noted (``decoded as cp1252``). With
    ``prune``, documents whose file is gone or no longer matches the filter are removed.
    ``progress(stage, done, total)`` is called with stage ``"reading"`` (files) and ``"embedding"``
    (chunks). Raises NotADirectoryError for a missing root.
    """
    root = Path(root)
    walked = walk_corpus(root, extensions=extensions, excludes=excludes, max_bytes=max_bytes)
    report = IndexReport()
    for source, reason in walked.skipped:
        report.skip(source, reason)
    known = index.document_hashes()
    reusable = _reusable_hashes(index)
    pending: list[tuple] = []  # (source, sha, fmt, size, chunks)
    current: dict[str, str] = {}
    for number, file in enumerate(walked.files):
        if progress:
            progress("reading", number, len(walked.files))
        document = read_bytes(file)
        if document.skip:
            report.skip(file.source, document.skip)
            continue
        sha = hashlib.sha256(document.data).hexdigest()
        if reusable.get(file.source) == sha:
            report.unchanged += 1
            current[file.source] = sha
            continue
        chunk_bytes(document)
        for note in document.notes:
            report.note(file.source, note)
        if document.skip:
            report.skip(file.source, document.skip)
            continue
        fmt = file.source.rsplit(".", 1)[-1].lower()
        pending.append((file.source, sha, fmt, file.size, document.chunks))
        current[file.source] = sha
    if progress and walked.files:
        progress("reading", len(walked.files), len(walked.files))

    return _write(index, pending, current, known, report, prune, str(root.resolve()), progress)


def _write(
    index: SearchIndex,
    pending: list[tuple],
    current: dict[str, str],
    known: dict[str, str],
    report: IndexReport,
    prune: bool,
    root_label: str,
    progress: Callable[[str, int, int], None] | None,
) -> IndexReport:
    """Embed and write the pending documents in batches of about :data:`BATCH_CHUNKS` chunks, committing
    after each batch, then prune and record the corpus fingerprint.

    Each document is replaced inside one transaction, so a crash or Ctrl+C leaves every document either
    as it was or fully updated, and the next run re-embeds only what was not committed.
    """
    total = sum(len(chunks) for *_, chunks in pending)
    done = 0
    started = time.perf_counter()
    if progress and total:
        progress("embedding", 0, total)
    try:
        batch: list[tuple] = []
        for i, item in enumerate(pending):
            batch.append(item)
            size = sum(len(b[4]) for b in batch)
            if size < BATCH_CHUNKS and i + 1 < len(pending):
                continue
            texts = [_embedding_text(source, c) for source, _, _, _, chunks in batch for c in chunks]
            for (source, sha, fmt, size_bytes, chunks), vectors in _embed_batch(index.embedder, batch, report, current):
                index.replace_document(source, sha, fmt, size_bytes, chunks, vectors)
                report.indexed += 1
            index.commit()
            done += len(texts)
            report.chunks_embedded = done
            if progress:
                progress("embedding", done, total)
            batch = []
        report.embed_seconds = time.perf_counter() - started
        if prune:
            gone = [s for s in known if s not in current]
            report.removed = index.remove_documents(gone)
        kept = current if prune else {**known, **current}
        report.corpus_fingerprint = corpus_fingerprint(kept)
        index.set_meta("corpus_fingerprint", report.corpus_fingerprint)
        index.set_meta("root", root_label)
        index.set_meta("chunker_version", CHUNKER_VERSION)
        describe = getattr(index.embedder, "describe", None)
        if describe is not None and (done or index.get_meta("embedder") is None):
            # which embedder (backend, quantization, exported graph) made the vectors; the model name it checks
            # on opening is embedding_model
            index.set_meta("embedder", json.dumps(describe(), sort_keys=True))
        index.commit()
    except BaseException:
        index.rollback()
        raise
    return report


def _embed_batch(embedder: TextEmbedder, batch: list[tuple], report: IndexReport, current: dict[str, str]) -> list[tuple[Any, Any]]:
    """``[(item, vectors)]`` for a batch of pending documents, embedded in one call. When that call
    fails, each document is embedded alone and one that still fails is skipped with its reason (and
    dropped from ``current``, so it is retried next time): one file never sinks an index. A model that
    cannot load (EmbeddingModelError) still stops the run, since no document could be embedded."""
    texts = [_embedding_text(source, c) for source, _, _, _, chunks in batch for c in chunks]
    if not texts:
        return []
    try:
        vectors = embedder.encode(texts)
    except EmbeddingModelError:
        raise
    except Exception:
        if len(batch) == 1:
            vectors = None
        else:
            return [pair for item in batch for pair in _embed_batch(embedder, [item], report, current)]
    if vectors is None:
        source = batch[0][0]
        try:
            vectors = embedder.encode([clean_text(t) for t in texts])
        except EmbeddingModelError:
            raise
        except Exception as exc:
            report.skip(source, f"could not be embedded: {type(exc).__name__}")
            current.pop(source, None)
            return []
    pairs, offset = [], 0
    for item in batch:
        pairs.append((item, vectors[offset : offset + len(item[4])]))
        offset += len(item[4])
    return pairs


class BeirFormatError(ValueError):
    """A BEIR corpus file that cannot be read (not JSON lines, or records without ``_id``)."""


def index_beir(
    index: SearchIndex, corpus: Path, prune: bool = True, progress: Callable[[str, int, int], None] | None = None
) -> IndexReport:
    """Index a BEIR-format corpus (JSON lines ``{_id, title, text}``; Thakur et al. 2021): each record
    one document whose source is its ``_id``, its title the anchor of every chunk. Incremental by the
    sha256 of each record's title and text. A line that is not a JSON object, or has no ``_id``, is
    skipped with its reason; raises BeirFormatError when no record at all can be read."""
    corpus = Path(corpus)
    report = IndexReport()
    known = index.document_hashes()
    reusable = _reusable_hashes(index)
    pending: list[tuple] = []
    current: dict[str, str] = {}
    readable = 0
    with open(corpus, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                source = str(record["_id"])
            except (json.JSONDecodeError, KeyError, TypeError):
                report.skip(f"line {number}", "not a BEIR record")
                continue
            readable += 1
            source = clean_text(source)
            title = clean_text(str(record.get("title") or "").strip())
            text = clean_text(str(record.get("text") or "").strip())
            sha = hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()
            if source in current:
                report.skip(source, "duplicate _id")
                continue
            current[source] = sha
            if reusable.get(source) == sha:
                report.unchanged += 1
                continue
            chunks = [Chunk(c.text, title or None, c.line_start, c.line_end) for c in chunk_text(text or title, "txt")]
            if not chunks:
                report.skip(source, "empty")
                del current[source]
                continue
            pending.append((source, sha, "beir", len(line), chunks))
    if readable == 0:
        raise BeirFormatError(f'{corpus} holds no BEIR records ({{"_id", "title", "text"}} per line)')
    return _write(index, pending, current, known, report, prune, f"beir:{corpus.resolve()}", progress)


def _embedding_text(source: str, chunk: Chunk) -> str:
    """What the embedding model sees for a chunk: its anchor (heading path) and its text."""
    return f"{chunk.anchor}\n{chunk.text}" if chunk.anchor else chunk.text
