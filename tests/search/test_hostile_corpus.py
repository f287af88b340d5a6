"""Hostile inputs: corpus and text, search runs and progress, and the
locked SQLite index (13). Each issue example is a test, beside other members of the same kind."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import unicodedata
from pathlib import Path

import ir_measures
import numpy as np
import pytest
from ir_measures import RR, P

from judge_runner.corpus.chunk import chunk_text, split_lines
from judge_runner.corpus.formats import chunk_document, chunk_json, line_numbers
from judge_runner.corpus.frontmatter import parse_front_matter
from judge_runner.corpus.read import BinaryContent, decode, scrub_unencodable
from judge_runner.corpus.walk import walk_corpus
from judge_runner.search.base import SearchSettings
from judge_runner.search.indexer import index_tree
from judge_runner.search.sqlite import SQLiteIndex
from tests.support.clitools import invoke

ROOT = Path(__file__).resolve().parents[2]


class HashEmbedder:
    """A fast deterministic stand-in for the sentence model: bag of hashed words, L2-normalised. Like the
    real tokenizer it refuses text that cannot be encoded as UTF-8."""

    name, dimension = "all-MiniLM-L6-v2", 384

    def __init__(self, refuse: str | None = None):
        self.refuse = refuse
        self.calls = 0

    def encode(self, texts, batch_size=32):
        self.calls += 1
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for i, text in enumerate(texts):
            text.encode("utf-8")  # raises UnicodeEncodeError for a lone surrogate, as the tokenizer does
            if self.refuse and self.refuse in text:
                raise RuntimeError("the model refused this text")
            for word in text.lower().split():
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 384] += 1.0
            out[i] /= max(np.linalg.norm(out[i]), 1e-9)
        return out


def encodable(text: str | None) -> bool:
    try:
        (text or "").encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


# -- item 1: text that cannot be encoded ------------------------------------------------------------

SURROGATE_JSON = '{"title": "emoji half \\ud83d here", "body": "Rotating the backup key for postgres"}'


@pytest.mark.hash_embedder  # the CLI's input handling, not search quality: no MiniLM
def test_issue_example_lone_surrogate_json_beside_ok_md_indexes_both(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "bad.json").write_text(SURROGATE_JSON, encoding="utf-8")
    (kb / "ok.md").write_text("# Backups\n\nRotate the backup key every quarter.\n", encoding="utf-8")
    db = tmp_path / "i.sqlite"
    result = invoke(["index", str(kb), "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["documents"] == 2 and report["notes"] == {"unencodable characters replaced by U+FFFD": 1}
    with sqlite3.connect(db) as conn:
        texts = [r[0] for r in conn.execute("SELECT text FROM chunks")]
    assert any("emoji half \ufffd here" in t for t in texts)


@pytest.mark.parametrize(
    "name, data",
    [
        ("a.md", b"# Title \xed\xa0\xbd\n\nbody \xed\xa0\xbd text\n"),  # a surrogate encoded as UTF-8 bytes (WTF-8)
        ("a.txt", b"plain \xed\xb8\x80 text\n"),
        ("a.py", b'def f():\n    return "\xed\xa0\xbd"\n'),
        ("a.yaml", b'title: "emoji half \\ud83d here"\nkey: \xed\xa0\xbd\n'),
        ("a.json", b'{"\\udc80key": "value \\ud83d", "list": ["\\ude00"]}'),
        ("b.json", b'["\\ud83d\\ude80 rocket", "lone \\ud83d"]'),
    ],
)
def test_every_format_yields_encodable_chunks(name, data):
    decoded = decode(data)
    document = chunk_document(decoded.text, name.rsplit(".", 1)[1])
    assert document.chunks
    for chunk in document.chunks:
        assert encodable(chunk.text) and encodable(chunk.anchor), chunk
    assert "\ufffd" in "".join(c.text + (c.anchor or "") for c in document.chunks) or "\\ud83d" in decoded.text


def test_a_valid_surrogate_pair_is_recombined_not_replaced():
    assert scrub_unencodable("\ud83d\ude80 ok") == ("\U0001f680 ok", 0)
    assert scrub_unencodable("half \ud83d") == ("half \ufffd", 1)
    assert chunk_json('["\\ud83d\\ude80 rocket"]').chunks[0].text == '"\U0001f680 rocket"'


def test_one_file_the_model_refuses_never_sinks_the_index(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    for i in range(5):
        (kb / f"doc{i}.md").write_text(f"# Doc {i}\n\nText number {i}.\n")
    (kb / "poison.md").write_text("# Poison\n\nPOISON text.\n")
    with SQLiteIndex(tmp_path / "i.sqlite", embedder=HashEmbedder(refuse="POISON")) as index:
        report = index_tree(index, kb)
        assert report.indexed == 5
        assert report.skipped == {"could not be embedded: RuntimeError": ["poison.md"]}
        assert "poison.md" not in index.document_hashes()


def test_a_chunker_crash_on_one_file_never_sinks_the_index(tmp_path, monkeypatch):
    import judge_runner.corpus.document as document_module

    real = document_module.chunk_document

    def flaky(text, fmt):
        if "CRASH" in text:
            raise IndexError("parser bug")
        return real(text, fmt)

    monkeypatch.setattr(document_module, "chunk_document", flaky)
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# A\n\nFine.\n")
    (kb / "b.md").write_text("# B\n\nCRASH here.\n")
    with SQLiteIndex(tmp_path / "i.sqlite", embedder=HashEmbedder()) as index:
        report = index_tree(index, kb)
        assert report.indexed == 1 and report.skipped == {"could not be chunked: IndexError": ["b.md"]}


@pytest.mark.hash_embedder  # the CLI's input handling, not search quality: no MiniLM
def test_query_with_invalid_bytes_from_the_shell_is_searched(db_copy):
    # Python hands an invalid byte of argv to the program as a lone surrogate (surrogateescape)
    result = invoke(["search", "backup \udce9 key", "--db", str(db_copy), "--mode", "hybrid", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["query"] == "backup \ufffd key"
    assert "became U+FFFD" in result.stderr


def test_search_library_call_with_a_lone_surrogate(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# Backup\n\nRotating the backup key.\n")
    with SQLiteIndex(tmp_path / "i.sqlite", embedder=HashEmbedder()) as index:
        index_tree(index, kb)
        for mode in ("hybrid", "fts", "vector"):
            answer = index.search("backup \ud83d key", mode=mode)
            assert answer.query == "backup \ufffd key" and answer.results


@pytest.mark.hash_embedder  # the CLI's input handling, not search quality: no MiniLM
def test_query_sets_and_batch_queries_with_lone_surrogates(tmp_path, db_copy):
    from judge_runner.core.models import QuerySet

    raw = (
        '{"queries": [{"id": "q\\ud83d", "query": "drain \\ud83d node", "queryIntent": "i \\udc00", '
        '"queryType": "keyword", "expectedSources": ["runbooks/\\ud83d.md"]}]}'
    )
    query = QuerySet.model_validate_json(raw).queries[0]
    assert (query.id, query.query, query.queryIntent, query.expectedSources) == (
        "q\ufffd",
        "drain \ufffd node",
        "i \ufffd",
        ["runbooks/\ufffd.md"],
    )
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "q\\ud83d 1", "text": "drain \\ud83d node"}\n', encoding="utf-8")
    run = tmp_path / "run.txt"
    result = invoke(["search", "--queries", str(queries), "--trec-run", str(run), "--db", str(db_copy), "--mode", "fts"])
    assert result.exit_code == 0, result.output
    assert run.read_text(encoding="utf-8").split("\n")[0].startswith("q\ufffd%201 Q0 ")


# -- item 2: legacy encodings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, text, encoding",
    [
        ("Caf\xe9 men\xfc na\xefve r\xe9sum\xe9\n".encode("latin-1"), "Café menü naïve résumé\n", "cp1252"),
        ("Smart “quotes” – 5 € café\n".encode("cp1252"), "Smart “quotes” – 5 € café\n", "cp1252"),
        (
            "Die Kündigung muss schriftlich erfolgen. Größe.\n".encode("latin-1"),
            "Die Kündigung muss schriftlich erfolgen. Größe.\n",
            "cp1252",
        ),
        ("Привет мир, резервное копирование ключа\n".encode("cp1251"), "Привет мир, резервное копирование ключа\n", "cp1251"),
        ("\ufeffCafé résumé\r\n".encode("utf-16-le"), "Café résumé\n", "utf-16-le"),
        ("\ufeffCafé résumé\r\n".encode("utf-16-be"), "Café résumé\n", "utf-16-be"),
        ("Café résumé backup key\n".encode("utf-16-le"), "Café résumé backup key\n", "utf-16-le"),
        ("Café résumé backup key\n".encode("utf-16-be"), "Café résumé backup key\n", "utf-16-be"),
        ("\ufeffCafé résumé\n".encode("utf-32-le"), "Café résumé\n", "utf-32-le"),
        (b"\xef\xbb\xbf" + "Café résumé\n".encode(), "Café résumé\n", "utf-8-sig"),
        ("Café résumé 索引\n".encode(), "Café résumé 索引\n", "utf-8"),
    ],
)
def test_encodings_are_detected_and_named(data, text, encoding):
    decoded = decode(data)
    assert (decoded.text, decoded.encoding) == (text, encoding)


def test_binary_with_nul_bytes_is_still_binary():
    with pytest.raises(BinaryContent):
        decode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01")


def test_issue_example_latin1_txt_is_found_by_accented_words_and_utf16_is_indexed(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "x.txt").write_bytes(b"Caf\xe9 men\xfc na\xefve r\xe9sum\xe9\n")
    (kb / "ps.txt").write_bytes("\ufeffQuarterly firewall audit checklist\r\n".encode("utf-16-le"))  # PowerShell Out-File
    with SQLiteIndex(tmp_path / "i.sqlite", embedder=HashEmbedder()) as index:
        report = index_tree(index, kb)
        assert report.skipped == {}
        assert report.notes == {"decoded as cp1252": ["x.txt"], "decoded as utf-16-le": ["ps.txt"]}
        for query in ("café", "résumé", "naïve"):
            assert [h.source for h in index.search(query, mode="fts").results] == ["x.txt"], query
        assert index.search("firewall audit", mode="fts").results[0].source == "ps.txt"


# -- item 3: line endings ---------------------------------------------------------------------------

MD_LF = "# Backup runbook\n\nIntro\n\n## Rotating the key\n\nSteps here.\n\n## Restoring\n\nMore steps.\n"


@pytest.mark.parametrize(
    "fmt, text",
    [
        ("md", MD_LF),
        ("yaml", "service: backup\nschedule:\n  cron: daily\n---\nservice: restore\nowner: ops\n"),
        ("txt", "First paragraph.\n\nSecond paragraph.\n\nThird.\n"),
        ("py", "import os\n\n\ndef rotate():\n    return 1\n\n\nclass Restore:\n    pass\n"),
        ("json", '{\n  "a": 1,\n  "b": {"c": 2},\n  "d": [3]\n}\n'),
    ],
)
@pytest.mark.parametrize("ending", ["\r", "\r\n"])
def test_bare_cr_and_crlf_chunk_like_lf(fmt, text, ending):
    expected = [(c.anchor, c.line_start, c.line_end, c.text) for c in chunk_document(text, fmt).chunks]
    got = [(c.anchor, c.line_start, c.line_end, c.text) for c in chunk_document(text.replace("\n", ending), fmt).chunks]
    assert got == expected
    assert all("\r" not in t for *_, t in got)


def test_issue_example_bare_cr_markdown_keeps_every_heading():
    text = "# Backup runbook\r\rIntro\r\r## Rotating the key\r\rRotate it.\r\r## Restoring\r\rRestore it.\r"
    anchors = [c.anchor for c in chunk_document(text, "md").chunks]
    assert anchors == ["Backup runbook", "Backup runbook > Rotating the key", "Backup runbook > Restoring"]
    assert chunk_text(text, "md")[1].line_start == 5
    assert split_lines("a\rb\r\nc\nd\u2028e") == ["a", "b", "c", "d\u2028e"]  # U+2028 is not a line end


# -- item 4: front matter ---------------------------------------------------------------------------

FRONT = "---\ntitle: Changing DNS records\nowner: platform-team\ntags: [dns, network]\n---\n"


def test_issue_example_yaml_front_matter_is_metadata():
    text = FRONT + "\nUse the registrar's console.\n\n## Steps\n\nLower the TTL first.\n"
    chunks = chunk_document(text, "md").chunks
    assert [(c.anchor, c.line_start, c.line_end) for c in chunks] == [("Changing DNS records", 7, 7), ("Steps", 9, 11)]
    assert not any("owner" in c.text or c.text.strip() == "---" or "owner" in (c.anchor or "") for c in chunks)


@pytest.mark.parametrize(
    "text, anchors, first_line",
    [
        ('+++\ntitle = "Changing DNS records"\nowner = "platform"\n+++\n\nBody text.\n', ["Changing DNS records"], 6),  # TOML (Hugo)
        ("---\nowner: platform-team\n---\nBody text.\n", [None], 4),  # no title
        ("---\ntitle: Only metadata\n---\n", [], None),  # front matter only: nothing to index
        ("---\ntitle: Dots close it\n...\n# Heading\ntext\n", ["Heading"], 4),
        ("---\n---\nBody.\n", [None], 3),  # empty front matter
    ],
)
def test_front_matter_members(text, anchors, first_line):
    chunks = chunk_document(text, "markdown").chunks
    assert [c.anchor for c in chunks] == anchors
    if chunks:
        assert chunks[0].line_start == first_line
    assert not any("owner" in c.text or "title" in c.text for c in chunks)


def test_unterminated_front_matter_is_content_with_a_note():
    document = chunk_document("---\ntitle: Never closed\n\nBody text.\n", "md")
    assert "Body text." in " ".join(c.text for c in document.chunks)
    assert document.notes == ["front matter not closed; read as content"]


def test_a_thematic_break_and_setext_heading_are_not_front_matter():
    front, note = parse_front_matter(["---", "Some heading", "---", "text"])
    assert front is None and note is None
    assert chunk_document("---\nSome heading\n---\ntext\n", "md").chunks[0].anchor == "Some heading"


# -- item 5: paths (NFC) and TREC ids ---------------------------------------------------------------

NFD_NAME = unicodedata.normalize("NFD", "Kündigung-Prozess.md")
NFC_NAME = unicodedata.normalize("NFC", "Kündigung-Prozess.md")


@pytest.fixture
def nfd_kb(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / NFD_NAME).write_text("# Kündigung\n\nDie Kündigungsfrist beträgt drei Monate.\n", encoding="utf-8")
    (kb / "other.md").write_text("# Urlaub\n\nUrlaub beantragen im Portal.\n", encoding="utf-8")
    assert NFD_NAME != NFC_NAME
    return kb


def test_issue_example_nfd_file_and_nfc_expected_source(nfd_kb, tmp_path):
    from judge_runner.core.models import Query
    from judge_runner.measures.ir import query_metrics
    from judge_runner.querygen.submitted import filter_queries

    assert [f.source for f in walk_corpus(nfd_kb).files] == [NFC_NAME, "other.md"]
    with SQLiteIndex(tmp_path / "i.sqlite", embedder=HashEmbedder()) as index:
        index_tree(index, nfd_kb)
        assert NFC_NAME in index.document_hashes()
        hits = [h.source for h in index.search("Kündigungsfrist", mode="fts").results]
    assert hits[0] == NFC_NAME
    for written in (NFC_NAME, NFD_NAME):  # the expected source as the model or a person typed it
        query = Query(id="q", query="Kündigungsfrist", queryIntent="i", queryType="keyword", expectedSources=[written])
        metrics = query_metrics(hits, [3] * len(hits), query.expectedSources)
        assert metrics["R@10"] == 1.0 and metrics["RR(rel=2)"] == 1.0
        raw = {
            "queries": [{"id": "q", "query": "Kündigungsfrist", "queryIntent": "i", "queryType": "keyword", "expectedSources": [written]}]
        }
        kept, dropped = filter_queries(raw, nfd_kb)
        assert dropped == [] and kept[0].expectedSources == [NFC_NAME]


def test_sandbox_reads_nfd_files_by_their_nfc_name(nfd_kb):
    from judge_runner.querygen.agent import FileSandbox

    box = FileSandbox(nfd_kb)
    assert box.glob("*.md").split("\n") == [NFC_NAME, "other.md"]
    assert NFC_NAME in box.list_dir(".").split("\n")
    for name in (NFC_NAME, NFD_NAME):
        assert "drei Monate" in box.read_file(name)
    assert box.grep("Kündigungsfrist").startswith(f"{NFC_NAME}:3:")
    folder = nfd_kb / unicodedata.normalize("NFD", "Büro")
    folder.mkdir()
    (folder / "plan.md").write_text("# Plan\n\nRäume.\n")
    box = FileSandbox(nfd_kb)
    assert box.list_dir("Büro") == "Büro/plan.md"
    assert "Räume" in box.read_file("Büro/plan.md")
    assert box.grep("Räume", "Büro") == "Büro/plan.md:3: Räume."


def test_two_names_equal_in_nfc_keep_one_and_say_why(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / NFD_NAME).write_text("a\n")
    (kb / NFC_NAME).write_text("b\n")
    result = walk_corpus(kb)
    assert [f.source for f in result.files] == [NFC_NAME]
    assert result.skipped == [(NFC_NAME, "same name as another file once Unicode-normalised (NFC)")]


def test_issue_example_space_in_file_name_makes_a_readable_trec_run(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "meeting notes 2026.md").write_text("# Meeting\n\nWe decided to rotate the backup key.\n")
    (kb / "tab\tand\u00a0nbsp %20.md").write_text("# Other\n\nThe backup key lives in the vault.\n")
    db = tmp_path / "i.sqlite"
    with SQLiteIndex(db, embedder=HashEmbedder()) as index:
        index_tree(index, kb)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "q 1", "text": "rotate the backup key"}\n')
    run = tmp_path / "run.txt"
    from judge_runner.search import trec

    with SQLiteIndex(db, embedder=HashEmbedder(), readonly=True) as index:
        trec.write_run(index, trec.read_queries(queries), run, "fts", 10)
    lines = run.read_text(encoding="utf-8").splitlines()
    assert all(len(line.split()) == 6 for line in lines)
    parsed = list(ir_measures.read_trec_run(str(run)))
    docids = {trec.decode_id(r.doc_id) for r in parsed}
    assert docids == {"meeting notes 2026.md", "tab\tand\u00a0nbsp %20.md"}
    assert {trec.decode_id(r.query_id) for r in parsed} == {"q 1"}
    qrels = tmp_path / "qrels.txt"
    trec.write_qrels(qrels, {"q 1": {"meeting notes 2026.md": 1}})
    scores = ir_measures.calc_aggregate([P @ 1], ir_measures.read_trec_qrels(str(qrels)), ir_measures.read_trec_run(str(run)))
    assert scores[P @ 1] == 1.0


@pytest.mark.parametrize("value", ["meeting notes 2026.md", "a%20b", "%", "tab\there", "ideo\u3000space", "line\u2028sep", "plain.md"])
def test_trec_ids_encode_reversibly_without_whitespace(value):
    from judge_runner.search.trec import decode_id, encode_id

    encoded = encode_id(value)
    assert not any(c.isspace() for c in encoded)
    assert decode_id(encoded) == value
    if value == "plain.md":
        assert encoded == value


def test_the_one_trec_id_codec_refuses_what_a_trec_line_cannot_hold():
    """Runs and qrels share one codec (search/trec.py): an empty id would shift a line's columns, and a
    malformed escape read back would name another document."""
    from judge_runner.search.trec import decode_id, encode_id

    with pytest.raises(ValueError, match="empty"):
        encode_id("")
    for bad in ("a%2", "%zz", "%C3%28"):
        with pytest.raises(ValueError):
            decode_id(bad)


# -- item 6: nothing to index -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "files",
    [
        {"a.md": "", "b.txt": ""},  # the issue's example: only empty files
        {"a.md": "   \n\n\t\n", "b.yaml": "\n"},  # whitespace only
        {"a.md": "---\ntitle: x\n---\n"},  # front matter only
        {"a.md": b"\x00\x01\x02binary"},  # binary behind a text extension
    ],
)
@pytest.mark.parametrize("command", [["index"], ["generate-and-evaluate", "--provider", "offline"]])
def test_a_folder_without_content_is_a_usage_error(files, command, tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, content in files.items():
        (kb / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    db = tmp_path / "i.sqlite"
    args = [*command, str(kb)] if command == ["index"] else [*command, "--fixtures", str(kb), "--out-dir", str(tmp_path / "r")]
    result = invoke([*args, "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "none has content" in result.stderr
    assert not db.exists()


def test_search_and_evaluate_on_an_empty_index_say_so(tmp_path):
    db = tmp_path / "empty.sqlite"
    SQLiteIndex(db, embedder=HashEmbedder()).close()  # created, never filled
    result = invoke(["search", "anything", "--db", str(db)])
    assert result.exit_code == 2 and "is empty (0 documents)" in result.stderr
    queries = tmp_path / "q.json"
    queries.write_text(
        json.dumps({"queries": [{"id": "q1", "query": "x", "queryIntent": "i", "queryType": "keyword", "expectedSources": ["a.md"]}]})
    )
    result = invoke(["evaluate", "--queries", str(queries), "--db", str(db), "--provider", "offline", "--out-dir", str(tmp_path / "r")])
    assert result.exit_code == 2 and "is empty (0 documents)" in result.stderr


# -- item 7: large minified JSON --------------------------------------------------------------------


class CountingStr(str):
    """A str that counts calls of ``count``, the per-member newline count that made the mapping quadratic."""

    counts = 0

    def count(self, *args):
        CountingStr.counts += 1
        return super().count(*args)


def test_issue_example_50000_member_minified_array_maps_lines_in_one_pass():
    members = [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(50_000)]
    text = json.dumps(members, separators=(",", ":"))
    assert len(text) > 1_500_000
    CountingStr.counts = 0
    document = chunk_json(CountingStr(text))
    assert CountingStr.counts <= 1  # the total line count only; never once per member
    assert document.chunks and all(c.line_start == c.line_end == 1 for c in document.chunks)
    assert sum(c.text.count('"id"') for c in document.chunks) == 50_000


def test_json_line_ranges_on_a_pretty_printed_file():
    text = json.dumps([{"id": i} for i in range(300)], indent=0)  # "[", "{", "\"id\": i", "}," ...
    document = chunk_json(text)
    assert document.chunks[0].line_start == 2
    assert document.chunks[-1].line_end == text.count("\n") + 1
    offsets = [0, 1, text.index("\n") + 1, len(text) - 1]
    assert line_numbers(text, offsets) == [text.count("\n", 0, o) + 1 for o in offsets]


# -- item 16: limit documents, TREC order, fusion depth ---------------------------------------------


@pytest.fixture
def many_chunk_index(tmp_path):
    """30 documents of 4 chunks each, every chunk mentioning "backup"."""
    kb = tmp_path / "kb"
    kb.mkdir()
    for d in range(30):
        sections = "\n\n".join(f"## Part {p}\n\nbackup rotation step {p} of doc {d} " + "filler " * 200 for p in range(4))
        (kb / f"doc{d:02d}.md").write_text(f"# Doc {d}\n\n{sections}\n")
    index = SQLiteIndex(tmp_path / "i.sqlite", settings=SearchSettings(depth=5), embedder=HashEmbedder())
    index_tree(index, kb)
    yield index
    index.close()


@pytest.mark.parametrize("mode", ["fts", "vector", "hybrid"])
def test_limit_documents_come_back_when_the_index_holds_them(many_chunk_index, mode):
    assert many_chunk_index.stats()["chunks"] >= 120
    for limit in (10, 25, 30):
        results = many_chunk_index.search("backup rotation step", mode=mode, limit=limit).results
        assert len(results) == limit, (mode, limit)
        assert len({h.source for h in results}) == limit
    assert len(many_chunk_index.search("backup rotation step", mode=mode, limit=100).results) == 30  # all there are


def test_a_deeper_fetch_embeds_the_query_once(many_chunk_index):
    embedder = many_chunk_index.embedder
    before = embedder.calls
    many_chunk_index.search("backup rotation step", mode="vector", limit=30)
    assert embedder.calls == before + 1


class TiedIndex:
    """A backend answering with tied scores in an order that is not docid order."""

    def search(self, query, mode="hybrid", limit=10, passages=True, intent=""):
        from judge_runner.search.base import HitScores, SearchAnswer, SearchHit

        sources = ["a.md", "b.md", "c.md", "d.md"][:limit]
        scores = [0.0328, 0.0328, 0.0328, 0.01]  # rounded RRF scores tie
        hits = [
            SearchHit(
                rank=i + 1, source=s, anchor=None, lineStart=1, lineEnd=1, snippet="", score=sc, scores=HitScores(), matchedBy=["fts"]
            )
            for i, (s, sc) in enumerate(zip(sources, scores))
        ]
        return SearchAnswer(query=query, mode=mode, results=hits, confident=True, latencyMs=1.0)


def test_trec_scores_keep_the_tools_order(tmp_path):
    from judge_runner.search import trec

    run = tmp_path / "run.txt"
    trec.write_run(TiedIndex(), [("q1", "x")], run, "hybrid", 10)
    # trec_eval breaks score ties by docid (descending): with tied scores b/c.md would come before a.md
    qrels = {"q1": {"a.md": 1}}
    assert ir_measures.calc_aggregate([RR], qrels, ir_measures.read_trec_run(str(run)))[RR] == 1.0
    scores = [float(line.split()[4]) for line in run.read_text().splitlines()]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    for qrel_doc, expected in (("b.md", 0.5), ("c.md", 1 / 3), ("d.md", 0.25)):
        rr = ir_measures.calc_aggregate([RR], {"q1": {qrel_doc: 1}}, ir_measures.read_trec_run(str(run)))[RR]
        assert rr == pytest.approx(expected)


def test_rank_consistent_scores():
    from judge_runner.search.trec import rank_consistent_scores

    assert rank_consistent_scores([]) == []
    written = rank_consistent_scores([3.0, 3.0, 3.0, 2.0, float("nan"), 2.0, 5.0])
    assert all(a > b for a, b in zip(written, written[1:]))
    assert written[0] == 3.0 and written[3] == 2.0


def test_the_docs_state_the_fusion_depth_the_code_uses():
    page = " ".join((ROOT / "docs" / "builtin-search.md").read_text(encoding="utf-8").split())
    assert SearchSettings().depth == 30
    assert "fuses the top 30 chunks of each list (the `[search]` `depth`, or the limit when that is larger)" in page


# -- item 17: progress on stderr, with a rate and an ETA --------------------------------------------


@pytest.mark.hash_embedder  # the CLI's input handling, not search quality: no MiniLM
def test_issue_example_index_json_reports_progress_on_stderr(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# A\n\nAlpha text.\n")
    result = invoke(["index", str(kb), "--db", str(tmp_path / "i.sqlite"), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["documents"] == 1  # stdout is only the JSON
    assert "embedding 1/1 chunks (100%)" in result.stderr and "chunks/s" in result.stderr
    assert "reading 1/1 files" in result.stderr


def test_progress_lines_have_a_rate_and_an_eta():
    import io

    from judge_runner.search.progress import IndexProgress, format_duration

    now = [0.0]
    out = io.StringIO()
    progress = IndexProgress(out, interval_s=5, clock=lambda: now[0], live=False)
    progress("embedding", 0, 1000)
    now[0] = 10.0
    progress("embedding", 256, 1000)
    now[0] = 11.0
    progress("embedding", 512, 1000)  # within the interval: not printed
    now[0] = 40.0
    progress("embedding", 1000, 1000)
    lines = out.getvalue().splitlines()
    assert lines == [
        "  embedding 0/1,000 chunks (0%)",
        "  embedding 256/1,000 chunks (25%), 25.6 chunks/s, ETA 29s",
        "  embedding 1,000/1,000 chunks (100%), 25.0 chunks/s, took 40s",
    ]
    assert format_duration(3725) == "1h02m" and format_duration(125) == "2m05s"


def test_live_progress_bar_on_a_terminal():
    import io

    from judge_runner.search.progress import IndexProgress

    out = io.StringIO()
    with IndexProgress(out, live=True) as progress:
        progress("embedding", 0, 10)
        progress("embedding", 10, 10)
    assert "embedding" in out.getvalue() and "10/10" in out.getvalue()


# -- item 13 (part): a locked SQLite index ----------------------------------------------------------


def test_a_locked_index_waits_then_fails_with_a_clear_message(tmp_path, monkeypatch, hash_embedder):
    import judge_runner.search.sqlite as sqlite_module

    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# A\n\nAlpha text.\n")
    db = tmp_path / "i.sqlite"
    SQLiteIndex(db, embedder=hash_embedder).close()  # the seam's embedder, which the CLI opens it with (no MiniLM)
    assert sqlite_module.BUSY_TIMEOUT_S >= 30  # the documented wait, far over Python's default of 5 s
    monkeypatch.setattr(sqlite_module, "BUSY_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holding the write lock
    try:
        result = invoke(["index", str(kb), "--db", str(db)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 3
    assert "is locked by another process (waited 0.2 s)" in result.stderr
    assert "Traceback" not in result.output
