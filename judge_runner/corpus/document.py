"""One corpus file from bytes to chunks: decode (:mod:`~judge_runner.corpus.read`), then chunk by format
(:mod:`~judge_runner.corpus.formats`). Shared by the indexer and the pre-index corpus check."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from judge_runner.corpus.formats import chunk_document
from judge_runner.corpus.read import BinaryContent, decode
from judge_runner.corpus.walk import CorpusFile


@dataclass
class ReadDocument:
    """A corpus file read into chunks. ``skip``: why it cannot be indexed, or None; ``notes``: how it was
    read."""

    source: str
    data: bytes = b""
    chunks: list = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    encoding: str | None = None
    skip: str | None = None


def read_bytes(file: CorpusFile) -> ReadDocument:
    try:
        return ReadDocument(file.source, file.path.read_bytes())
    except OSError as exc:
        return ReadDocument(file.source, skip=f"unreadable: {exc.strerror or exc}")


def chunk_bytes(document: ReadDocument) -> ReadDocument:
    """Decode and chunk ``document.data`` in place; returns it."""
    try:
        decoded = decode(document.data)
    except BinaryContent:
        document.skip = "binary content"
        return document
    document.encoding = decoded.encoding
    if decoded.note:
        document.notes.append(decoded.note)
    fmt = document.source.rsplit(".", 1)[-1].lower()
    try:
        chunked = chunk_document(decoded.text, fmt)
    except (Exception, RecursionError) as exc:  # a parser bug on one odd file must not stop the index
        document.skip = f"could not be chunked: {type(exc).__name__}"
        return document
    document.notes.extend(n for n in chunked.notes if n not in document.notes)
    document.chunks = chunked.chunks
    if not document.chunks:
        document.skip = "empty"
    return document


def read_document(file: CorpusFile) -> ReadDocument:
    """Read, decode and chunk one corpus file; never raises for bad content."""
    document = read_bytes(file)
    return document if document.skip else chunk_bytes(document)


def first_with_content(files: Iterable[CorpusFile]) -> CorpusFile | None:
    """The first file that yields a chunk, or None; reads no further."""
    for file in files:
        if read_document(file).chunks:
            return file
    return None
