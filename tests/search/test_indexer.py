"""Incremental indexing: unchanged files are not re-embedded, changed ones are, deleted ones are pruned,
bad files are skipped or indexed as text with their reason, and a chunker change re-chunks everything."""

from __future__ import annotations

import pytest

from judge_runner.search.indexer import index_tree
from judge_runner.search.sqlite import SQLiteIndex

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder


class CountingEmbedder:
    """Wraps an embedder and counts the texts it embeds."""

    def __init__(self, inner):
        self.inner, self.count, self.dimension, self.name = inner, 0, inner.dimension, inner.name

    def encode(self, texts, batch_size=32):
        self.count += len(texts)
        return self.inner.encode(texts, batch_size)


@pytest.fixture
def kb(tmp_path):
    root = tmp_path / "kb"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("# Alpha\n\nAlpha runbook about restarting the ingest worker.\n")
    (root / "docs" / "b.md").write_text("# Beta\n\nBeta notes on cache eviction.\n")
    (root / "config.yaml").write_text("service:\n  port: 8080\nretention_days: 30\n")
    return root


def test_incremental_and_prune(kb, tmp_path, hash_embedder):
    counting = CountingEmbedder(hash_embedder)
    with SQLiteIndex(tmp_path / "i.sqlite", embedder=counting) as index:
        first = index_tree(index, kb)
        assert first.indexed == 3 and counting.count == first.chunks_embedded > 0
        counting.count = 0
        again = index_tree(index, kb)
        assert again.unchanged == 3 and again.indexed == 0 and counting.count == 0
        (kb / "docs" / "b.md").write_text("# Beta\n\nBeta notes on cache eviction and TTLs.\n")
        (kb / "docs" / "a.md").unlink()
        third = index_tree(index, kb)
        assert third.indexed == 1 and third.unchanged == 1 and third.removed == 1
        assert set(index.document_hashes()) == {"docs/b.md", "config.yaml"}
        assert counting.count == third.chunks_embedded
        assert first.corpus_fingerprint != third.corpus_fingerprint


def test_bad_files_never_stop_an_index(kb, tmp_path, hash_embedder):
    (kb / "empty.md").write_text("")
    (kb / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (kb / "latin1.txt").write_bytes("Caf\xe9 au lait, r\xe9sum\xe9".encode("latin-1"))
    (kb / "broken.yaml").write_text("key: [unclosed\n  - x: y\n")
    (kb / "broken.json").write_text('{"a": 1,,}')
    (kb / "broken.py").write_text("def f(:\n    pass\n")
    (kb / "big.txt").write_text("x " * 2000)
    with SQLiteIndex(tmp_path / "i.sqlite", embedder=hash_embedder) as index:
        report = index_tree(index, kb, max_bytes=1000)
        skipped = {reason: sorted(sources) for reason, sources in report.skipped.items()}
        assert skipped["empty"] == ["empty.md"]
        assert skipped["binary content"] == ["binary.md"]
        assert skipped["larger than 1000 bytes"] == ["big.txt"]
        assert report.notes["decoded as cp1252"] == ["latin1.txt"]  # detected, not replaced by U+FFFD
        for fmt, name in (("yaml", "broken.yaml"), ("json", "broken.json"), ("py", "broken.py")):
            assert report.notes[f"{fmt} did not parse; indexed as text"] == [name]
        assert {"broken.yaml", "broken.json", "broken.py", "latin1.txt"} <= set(index.document_hashes())


def test_a_chunker_change_rechunks_everything(kb, tmp_path, hash_embedder):
    with SQLiteIndex(tmp_path / "i.sqlite", embedder=hash_embedder) as index:
        index_tree(index, kb)
        index.set_meta("chunker_version", "0")
        index.commit()
        report = index_tree(index, kb)
        assert report.indexed == 3 and report.unchanged == 0
        assert index_tree(index, kb).unchanged == 3
