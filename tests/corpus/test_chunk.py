"""judge_runner.corpus.chunk: size cap, word boundaries, heading anchors, fences, line ranges."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from judge_runner.corpus.chunk import MAX_CHUNK_CHARS, Chunk, chunk_text

WORDS = (
    "index",
    "search",
    "latency",
    "pgbouncer",
    "reindex",
    "snapshot",
    "rollback",
    "tenant",
    "shard",
    "replica",
    "a",
    "of",
    "the",
    "connection",
    "pool",
    "vector",
    "embedding",
    "cursor",
    "lag",
    "x",
)


def sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + rng.choice(".!?")


def paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(sentence(rng, rng.randint(3, 18)) for _ in range(sentences))


def locate(chunks: list[Chunk], text: str) -> list[tuple[int, int]]:
    """Find each chunk's span in ``text`` in order, whitespace runs in the chunk matching any
    whitespace run in the original (the chunker re-joins sentences with one space)."""
    spans = []
    pos = 0
    for c in chunks:
        parts = c.text.split()
        assert parts, f"empty chunk {c!r}"
        pattern = re.compile(r"\s+".join(re.escape(p) for p in parts))
        m = pattern.search(text, pos)
        assert m is not None, f"chunk not found in order in the original: {c.text[:80]!r}"
        spans.append((m.start(), m.end()))
        pos = m.end()
    return spans


def assert_on_whitespace(chunks: list[Chunk], text: str) -> None:
    for start, end in locate(chunks, text):
        assert start == 0 or text[start - 1].isspace(), f"chunk starts mid-word at {start}: {text[max(0, start - 20) : start + 20]!r}"
        assert end == len(text) or text[end].isspace(), f"chunk ends mid-word at {end}: {text[max(0, end - 20) : end + 20]!r}"


def assert_words_survive(chunks: list[Chunk], text: str) -> None:
    assert Counter(" ".join(c.text for c in chunks).split()) == Counter(text.split())


def assert_capped(chunks: list[Chunk], cap: int = MAX_CHUNK_CHARS) -> None:
    assert chunks, "expected at least one chunk"
    too_long = [len(c.text) for c in chunks if len(c.text) > cap]
    assert not too_long, f"chunks over the cap {cap}: {too_long}"


# -- size cap ------------------------------------------------------------------------------------


def test_long_paragraphs_are_capped_and_keep_every_word():
    rng = random.Random(1)
    text = "\n\n".join(paragraph(rng, 25) for _ in range(6))  # each paragraph one long line
    chunks = chunk_text(text, "txt")
    assert_capped(chunks)
    assert len(chunks) > 6
    assert_words_survive(chunks, text)
    assert_on_whitespace(chunks, text)


def test_long_multiline_paragraph_is_capped_and_split_between_lines():
    rng = random.Random(2)
    lines = [sentence(rng, 12) for _ in range(200)]  # one paragraph of 200 short lines
    text = "\n".join(lines)
    chunks = chunk_text(text, "md")
    assert_capped(chunks)
    assert len(chunks) >= len(text) // MAX_CHUNK_CHARS
    assert_words_survive(chunks, text)
    # lines shorter than the cap are never split: every chunk is a run of whole lines
    for c in chunks:
        assert c.text.split("\n") == lines[c.line_start - 1 : c.line_end]


def test_single_very_long_line_with_sentences():
    rng = random.Random(3)
    line = paragraph(rng, 400)
    assert len(line) > 10 * MAX_CHUNK_CHARS
    chunks = chunk_text(line, "txt")
    assert_capped(chunks)
    assert_words_survive(chunks, line)
    assert_on_whitespace(chunks, line)
    assert all((c.line_start, c.line_end) == (1, 1) for c in chunks)


def test_single_very_long_line_without_sentence_ends_splits_on_spaces():
    rng = random.Random(4)
    line = " ".join(rng.choice(WORDS) for _ in range(3000))  # no punctuation at all
    chunks = chunk_text(line, "txt")
    assert_capped(chunks)
    assert_words_survive(chunks, line)
    assert_on_whitespace(chunks, line)


def test_long_line_with_no_spaces_is_hard_cut_and_nothing_lost():
    line = "".join(chr(ord("a") + i % 26) for i in range(5000))
    chunks = chunk_text(line, "txt")
    assert_capped(chunks)
    assert "".join(c.text for c in chunks) == line
    assert len(chunks) == -(-5000 // MAX_CHUNK_CHARS)


def test_long_url_between_words_only_cut_inside_the_overlong_token():
    token = "https://example.org/" + "p" * 3000
    text = f"before the link {token} after the link"
    chunks = chunk_text(text, "md")
    assert_capped(chunks)
    assert "".join(text.split()) == "".join("".join(c.text for c in chunks).split())
    assert chunks[0].text.startswith("before the link")
    assert chunks[-1].text.endswith("after the link")


def test_cjk_text_without_spaces_is_capped_and_nothing_lost():
    text = "索引服务需要在每次部署之后重新建立向量数据库的快照" * 120  # 2,880 chars, no spaces, no punctuation
    chunks = chunk_text(text, "md")
    assert_capped(chunks)
    assert "".join(c.text for c in chunks) == text


def test_cjk_sentences_without_spaces_are_capped_and_nothing_lost():
    text = "索引服务需要在每次部署之后重新建立。向量数据库的快照每天备份一次！" * 80
    chunks = chunk_text(text, "md")
    assert_capped(chunks)
    assert len(chunks) > 1
    assert "".join("".join(c.text for c in chunks).split()) == text
    # sentence splitting: each chunk boundary falls after a CJK sentence end
    assert all(c.text.endswith(("。", "！")) for c in chunks)


@pytest.mark.parametrize("seed", range(25))
def test_random_documents_respect_every_invariant(seed):
    rng = random.Random(seed)
    cap = rng.choice([60, 120, 300, MAX_CHUNK_CHARS])
    blocks = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.2:
            blocks.append("#" * rng.randint(1, 4) + " " + sentence(rng, 3)[:-1])
        elif kind < 0.5:
            blocks.append(paragraph(rng, rng.randint(1, 30)))
        else:
            blocks.append("\n".join(sentence(rng, rng.randint(2, 15)) for _ in range(rng.randint(1, 8))))
    text = ("\n" * rng.randint(1, 3)).join(blocks)
    chunks = chunk_text(text, "md", cap=cap)
    assert_capped(chunks, cap)
    assert_words_survive(chunks, text)
    assert_on_whitespace(chunks, text)
    lines = text.splitlines()
    for c in chunks:
        assert 1 <= c.line_start <= c.line_end <= len(lines)
        first, last = c.text.split("\n")[0], c.text.split("\n")[-1]
        assert first.strip() in lines[c.line_start - 1], (c, lines[c.line_start - 1])
        assert last.strip() in lines[c.line_end - 1], (c, lines[c.line_end - 1])


def test_cap_below_minimum_is_refused():
    with pytest.raises(ValueError):
        chunk_text("some text", "txt", cap=19)


# -- markdown headings ----------------------------------------------------------------------------

DOC = """\
Intro line before any heading.

# Alpha

Alpha body.

## Beta

Beta body.

### Gamma

Gamma body.

## Delta

Delta body.

# Epsilon

Epsilon body.
"""


def test_heading_path_anchors():
    chunks = chunk_text(DOC, "md")
    by_body = {c.text.split("\n")[-1]: c.anchor for c in chunks}
    assert by_body == {
        "Intro line before any heading.": None,
        "Alpha body.": "Alpha",
        "Beta body.": "Alpha > Beta",
        "Gamma body.": "Alpha > Beta > Gamma",
        "Delta body.": "Alpha > Delta",
        "Epsilon body.": "Epsilon",
    }
    # each section starts a new chunk that begins with its heading line
    assert [c.text.split("\n")[0] for c in chunks[1:]] == ["# Alpha", "## Beta", "### Gamma", "## Delta", "# Epsilon"]


def test_closing_hashes_are_not_part_of_the_anchor():
    chunks = chunk_text("## Setup ##\n\nbody\n", "md")
    assert [c.anchor for c in chunks] == ["Setup"]


def test_headings_only_count_in_markdown():
    chunks = chunk_text("# not a heading in a text file\n\nbody\n", "txt")
    assert all(c.anchor is None for c in chunks)
    chunks = chunk_text("# a python comment\nx = 1\n", "py")
    assert all(c.anchor is None for c in chunks)


def test_markdown_extension_is_markdown():
    assert [c.anchor for c in chunk_text("# Title\n\nbody\n", "markdown")] == ["Title"]


def test_hash_lines_inside_fenced_code_are_not_headings():
    doc = (
        "# Real\n"
        "\n"
        "Some text.\n"
        "\n"
        "```bash\n"
        "# install the package\n"
        "pip install lantern\n"
        "\n"
        "## also not a heading\n"
        "```\n"
        "\n"
        "~~~\n"
        "# tilde fence comment\n"
        "~~~\n"
        "\n"
        "After the fences.\n"
        "\n"
        "## Next\n"
        "\n"
        "Next body.\n"
    )
    chunks = chunk_text(doc, "md")
    anchors = {c.anchor for c in chunks}
    assert anchors == {"Real", "Real > Next"}
    joined = "\n".join(c.text for c in chunks if c.anchor == "Real")
    assert "# install the package" in joined
    assert "## also not a heading" in joined
    assert "# tilde fence comment" in joined
    assert "After the fences." in joined
    next_chunk = [c for c in chunks if c.anchor == "Real > Next"]
    assert next_chunk and "Next body." in next_chunk[0].text


def test_unclosed_fence_swallows_later_hash_lines():
    doc = "# Top\n\n```\n# inside\n# still inside\n"
    chunks = chunk_text(doc, "md")
    assert {c.anchor for c in chunks} == {"Top"}


# -- line ranges ----------------------------------------------------------------------------------


def test_line_ranges_are_one_based_and_point_at_the_right_lines():
    lines = DOC.splitlines()
    for c in chunk_text(DOC, "md"):
        text_lines = c.text.split("\n")
        assert lines[c.line_start - 1] == text_lines[0]
        assert lines[c.line_end - 1] == text_lines[-1]


def test_line_range_of_a_plain_text_document():
    text = "\n\nfirst paragraph line one\nline two\n\n\nsecond paragraph\n"
    chunks = chunk_text(text, "txt")
    assert len(chunks) == 1
    c = chunks[0]
    assert (c.line_start, c.line_end) == (3, 7)
    assert c.text == "first paragraph line one\nline two\n\nsecond paragraph"


def test_line_ranges_when_a_chunk_boundary_falls_between_paragraphs():
    # Two paragraphs that do not fit one chunk together: each chunk's range must cover exactly its
    # own paragraph's lines, not the blank line between them.
    p1 = ["alpha " * 100, "beta " * 30]  # lines 1-2
    p2 = ["gamma " * 100, "delta " * 30]  # lines 4-5
    text = "\n".join(p1 + [""] + p2) + "\n"
    lines = text.splitlines()
    chunks = chunk_text(text, "txt")
    assert len(chunks) == 2
    for c in chunks:
        assert lines[c.line_start - 1].strip() == c.text.split("\n")[0].strip()
        assert lines[c.line_end - 1].strip() == c.text.split("\n")[-1].strip()
    assert [(c.line_start, c.line_end) for c in chunks] == [(1, 2), (4, 5)]


def test_split_long_line_keeps_its_own_line_number():
    text = "short first line\n\n" + "word " * 600 + "\n\nlast line\n"
    chunks = chunk_text(text, "txt")
    long_pieces = [c for c in chunks if c.text.startswith("word")]
    assert len(long_pieces) >= 3
    assert all((c.line_start, c.line_end) == (3, 3) for c in long_pieces)
    assert chunks[0].line_start == 1 and chunks[-1].line_end == 5


# -- empty documents ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", " ", "\n", "\n\n\n", " \t \n  \n\t", "\r\n\r\n"])
@pytest.mark.parametrize("fmt", ["md", "txt", "py"])
def test_empty_or_whitespace_documents_give_no_chunks(text, fmt):
    assert chunk_text(text, fmt) == []


def test_chunks_are_in_document_order():
    rng = random.Random(9)
    text = "\n\n".join(paragraph(rng, 20) for _ in range(5))
    chunks = chunk_text(text, "txt")
    starts = [s for s, _ in locate(chunks, text)]
    assert starts == sorted(starts)
    assert [c.line_start for c in chunks] == sorted(c.line_start for c in chunks)
