"""judge_runner.search.fusion (RRF) and judge_runner.search.text (tokens, FTS5 safety, snippets)."""

from __future__ import annotations

import random
import sqlite3

import pytest

from judge_runner.search.fusion import rrf
from judge_runner.search.text import (
    STOPWORDS,
    cjk_bigrams,
    fts5_match_expression,
    lexical_text,
    make_snippet,
    query_tokens,
)

# -- rrf ------------------------------------------------------------------------------------------


def test_rrf_hand_computed_k60():
    fused = rrf([["a", "b", "c"], ["b", "d"]])
    assert fused == pytest.approx({"a": 1 / 61, "b": 1 / 62 + 1 / 61, "c": 1 / 63, "d": 1 / 62})
    assert max(fused, key=fused.get) == "b"


def test_rrf_single_list_preserves_order():
    fused = rrf([["x", "y", "z"]])
    assert sorted(fused, key=fused.get, reverse=True) == ["x", "y", "z"]
    assert fused["x"] == pytest.approx(1 / 61)


def test_rrf_weights():
    fused = rrf([["a", "b"], ["b", "a"]], weights=[2.0, 0.5])
    assert fused["a"] == pytest.approx(2 / 61 + 0.5 / 62)
    assert fused["b"] == pytest.approx(2 / 62 + 0.5 / 61)
    assert fused["a"] > fused["b"]


def test_rrf_zero_weight_list_contributes_nothing():
    fused = rrf([["a"], ["b"]], weights=[1.0, 0.0])
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == 0.0


def test_rrf_custom_k():
    assert rrf([["a", "b"]], k=0) == pytest.approx({"a": 1.0, "b": 0.5})
    assert rrf([["a"], ["a"]], k=1) == pytest.approx({"a": 1.0})


def test_rrf_duplicate_in_one_list_counted_once_at_best_rank():
    fused = rrf([["a", "b", "a", "a"]])
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)
    # the duplicate counts once per list, but still counts in each list
    fused = rrf([["a", "a"], ["a"]])
    assert fused["a"] == pytest.approx(2 / 61)


def test_rrf_empty_inputs():
    assert rrf([]) == {}
    assert rrf([[], []]) == {}
    assert rrf([[], ["a"]]) == pytest.approx({"a": 1 / 61})


def test_rrf_accepts_tuple_ids():
    fused = rrf([[(1, "x"), (2, "y")], [(2, "y")]])
    assert fused[(2, "y")] == pytest.approx(1 / 62 + 1 / 61)


@pytest.mark.parametrize(
    ("lists", "kwargs"),
    [
        ([["a"]], {"k": -1}),
        ([["a"], ["b"]], {"weights": [1.0]}),
        ([["a"]], {"weights": [1.0, 1.0]}),
        ([], {"weights": [1.0]}),
    ],
)
def test_rrf_value_errors(lists, kwargs):
    with pytest.raises(ValueError):
        rrf(lists, **kwargs)


# -- tokens and CJK -------------------------------------------------------------------------------


def test_cjk_bigrams():
    assert cjk_bigrams("索引服务").split() == ["索引", "引服", "服务"]
    assert cjk_bigrams("中").split() == ["中"]
    assert cjk_bigrams("plain text") == "plain text"
    assert cjk_bigrams("PostgreSQL数据库").split() == ["PostgreSQL", "数据", "据库"]
    assert cjk_bigrams("検索エンジン").split() == ["検索", "索エ", "エン", "ンジ", "ジン"]
    assert cjk_bigrams("검색엔진").split() == ["검색", "색엔", "엔진"]
    # CJK punctuation separates runs and is not part of a bigram
    assert cjk_bigrams("索引。服务").split() == ["索引", "。", "服务"]


def test_lexical_text_is_cjk_bigrams():
    assert lexical_text("搜索 index") == cjk_bigrams("搜索 index")


def test_query_tokens_lowercase_dedup_and_stopwords():
    assert query_tokens("How do I bake Bread bread") == ["bake", "bread"]
    assert query_tokens("索引服务") == ["索引", "引服", "服务"]
    assert query_tokens("Where is the 索引?") == ["索引"]


def test_query_tokens_only_stopwords_are_kept():
    assert query_tokens("how do I") == ["how", "do", "i"]
    assert query_tokens("AND OR NOT") == ["and", "or", "not"]
    assert all(t in STOPWORDS for t in query_tokens("what is it"))


@pytest.mark.parametrize("query", ["", "   ", "\t\n", "!!!", "-", "*", "^", "()", '"', '""', ":", "___", "¿¡", "。、"])
def test_fts5_expression_none_for_no_tokens(query):
    assert fts5_match_expression(query) is None


def test_fts5_expression_is_quoted_or_of_tokens_plus_compound_phrases():
    # identifiers and compounds are split into their words and also kept as a phrase
    assert fts5_match_expression("pgbouncer pool_size") == '"pgbouncer" OR "pool" OR "size" OR "pool size"'
    assert fts5_match_expression('title:"foo bar"') == '"title" OR "foo" OR "bar" OR "title foo"'
    assert fts5_match_expression("a AND b NEAR c") == '"b" OR "near" OR "c"'
    assert fts5_match_expression("索引服务") == '"索引" OR "引服" OR "服务" OR "索引 引服 服务"'
    assert fts5_match_expression("DEC-0054") == '"dec" OR "0054" OR "dec 0054"'
    assert fts5_match_expression("parseConfig") == '"parseconfig" OR "parse" OR "config"'
    assert fts5_match_expression("Kündigung") == '"kündigung" OR "kuendigung"'


# -- every hostile query through a real FTS5 MATCH ------------------------------------------------

HOSTILE = [
    '"',
    'foo"bar',
    '"unbalanced',
    "it's a quote'",
    "title:foo",
    "body:bar anchor:baz",
    "{body anchor}: foo",
    "a AND b",
    "foo OR",
    "NOT foo",
    "NOT",
    "AND",
    "OR",
    "NEAR(foo bar, 3)",
    "NEAR",
    "foo*",
    "*",
    "^foo",
    "^",
    "(foo OR bar",
    "foo)",
    "()",
    "-foo +bar",
    "!!!",
    "...",
    "foo:",
    ":",
    "",
    "   ",
    "c++ c# .net",
    "pool_size=20; DROP TABLE chunks; --",
    "索引服务 AND 数据库",
    "検索エンジン*",
    "\x00nul\x00",
    "emoji 🚀 rocket",
    "x" * 500,
]


@pytest.fixture(scope="module")
def fts():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(body, anchor, path, tokenize = 'porter unicode61 remove_diacritics 2')")
    rows = [
        ("foo bar baz and the title field", "Title", "one.md"),
        ("pgbouncer pool_size is 20 by default", "Pool", "two.md"),
        (lexical_text("搜索服务的索引需要重建，数据库也要备份"), lexical_text("索引"), "zh.md"),
        (lexical_text("検索エンジンの設定"), None, "ja.md"),
        ("rocket launch emoji", None, "three.md"),
    ]
    conn.executemany("INSERT INTO docs(body, anchor, path) VALUES (?, ?, ?)", rows)
    yield conn
    conn.close()


def match(conn, query: str) -> list[str] | None:
    expr = fts5_match_expression(query)
    if expr is None:
        return None
    return [r[0] for r in conn.execute("SELECT path FROM docs WHERE docs MATCH ? ORDER BY rank", (expr,))]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_are_safe_in_fts5(fts, query):
    expr = fts5_match_expression(query)
    if expr is None:
        assert query_tokens(query) == []
        return
    rows = fts.execute("SELECT path FROM docs WHERE docs MATCH ?", (expr,)).fetchall()  # must not raise
    assert isinstance(rows, list)


def test_hostile_queries_still_find_their_words(fts):
    assert "one.md" in match(fts, "title:foo")
    assert "one.md" in match(fts, 'foo"bar')
    assert "one.md" in match(fts, "NEAR(foo bar, 3)")
    assert "one.md" in match(fts, "(foo OR bar")
    assert "one.md" in match(fts, "^foo")
    assert "two.md" in match(fts, "pool_size=20; DROP TABLE chunks; --")
    assert match(fts, "c++ c# .net") == []
    assert match(fts, "") is None


def test_cjk_query_matches_inside_a_sentence(fts):
    assert match(fts, "索引") == ["zh.md"]
    assert match(fts, "数据库") == ["zh.md"]
    assert match(fts, "検索") == ["ja.md"]
    assert match(fts, "索引服务 AND 数据库")[0] == "zh.md"


def test_fts5_raw_syntax_would_have_failed(fts):
    """Guard that the hostile strings really are hostile: passed raw, several break FTS5."""
    broken = 0
    for query in ['"unbalanced', "foo OR", "(foo OR bar", "NOT", "*", "title:foo"]:
        try:
            fts.execute("SELECT 1 FROM docs WHERE docs MATCH ?", (query,)).fetchall()
        except sqlite3.OperationalError:
            broken += 1
    assert broken >= 4


# -- make_snippet ---------------------------------------------------------------------------------

FILLER = (
    "index search latency pgbouncer reindex snapshot rollback tenant shard replica connection pool "
    "vector embedding cursor lag backup restore"
).split()


def filler_text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(n))


def snippet_core(snippet: str) -> str:
    core = snippet
    if core.startswith("… "):
        core = core[2:]
    if core.endswith(" …"):
        core = core[:-2]
    return core


def assert_whole_words(snippet: str, flat: str) -> None:
    core = snippet_core(snippet)
    idx = flat.find(core)
    assert idx != -1, f"snippet core is not a substring of the text: {core[:60]!r}"
    end = idx + len(core)
    assert idx == 0 or flat[idx - 1] == " ", f"snippet starts mid-word: ...{flat[max(0, idx - 15) : idx + 15]!r}"
    assert end == len(flat) or flat[end] == " ", f"snippet ends mid-word: {flat[max(0, end - 15) : end + 15]!r}"
    assert snippet.startswith("… ") == (idx > 0)
    assert snippet.endswith(" …") == (end < len(flat))


def test_short_text_is_returned_flattened():
    assert make_snippet("a  short\n\ntext", "short", width=400) == "a short text"


def test_snippet_centres_on_the_query_term():
    rng = random.Random(5)
    text = filler_text(rng, 200) + " the zebracorn config lives here " + filler_text(rng, 200)
    snip = make_snippet(text, "zebracorn", width=200)
    assert len(snip) <= 200
    assert "zebracorn" in snip
    assert snip.startswith("… ") and snip.endswith(" …")
    assert_whole_words(snip, " ".join(text.split()))


def test_snippet_prefers_the_densest_region():
    rng = random.Random(6)
    text = filler_text(rng, 30) + " alpha " + filler_text(rng, 300) + " alpha beta gamma alpha beta " + filler_text(rng, 300)
    snip = make_snippet(text, "alpha beta gamma", width=120)
    assert "gamma" in snip and "beta" in snip


def test_snippet_without_query_match_starts_at_the_beginning():
    rng = random.Random(7)
    text = filler_text(rng, 300)
    snip = make_snippet(text, "nothingmatches", width=100)
    assert len(snip) <= 100
    assert not snip.startswith("…")
    assert snip.endswith(" …")
    assert_whole_words(snip, text)


def test_snippet_single_long_word_may_be_cut_but_stays_in_width():
    text = "x" * 1000
    snip = make_snippet(text, "x", width=100)
    assert len(snip) <= 100


@pytest.mark.parametrize("seed", range(60))
def test_snippet_width_and_word_boundaries_property(seed):
    rng = random.Random(seed)
    width = rng.choice([40, 50, 80, 120, 200, 400])
    words = [rng.choice(FILLER) for _ in range(rng.randint(20, 400))]
    needle_at = rng.randrange(len(words))
    words[needle_at] = "needleword"
    text = " ".join(words)
    snip = make_snippet(text, "needleword", width=width)
    assert len(snip) <= width, (len(snip), width)
    assert_whole_words(snip, text)
    assert "needleword" in snip
