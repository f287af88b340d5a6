"""The built-in search on the sample fixtures: the lexical regression matrix, in fts mode and in hybrid
mode (the default), plus the honesty gate, snippets and the search contract."""

from __future__ import annotations

import pytest

# The shared suite (tests/support/builtin_search_cases.py), collected here over the SQLite index: its tests take
# this module's ``index`` fixture. tests/search/test_postgres.py collects them again over PostgreSQL.
from tests.support.builtin_search_cases import (
    assert_snippets_centred_and_whole_words,
    test_accents_fold_both_ways,  # noqa: F401
    test_any_query_text_is_safe,  # noqa: F401
    test_format_aware_anchors,  # noqa: F401
    test_hidden_files_never_indexed,  # noqa: F401
    test_honesty_gate_abstains_on_off_topic,  # noqa: F401
    test_honesty_gate_confident_on_topic,  # noqa: F401
    test_regression_matrix_first_result,  # noqa: F401
    test_result_contract,  # noqa: F401
    test_the_judge_is_shown_the_documents_passages_not_the_matched_chunk,  # noqa: F401
    test_title_match_outranks_passing_mention,  # noqa: F401
    test_words_beside_syntax_are_not_lost,  # noqa: F401
)


@pytest.fixture(scope="module")
def index(fixtures_index):
    return fixtures_index[0]


def test_snippets_are_centred_and_whole_words(index):
    def chunk_text_of(source, line_start):
        return index.conn.execute(
            "SELECT c.text FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.source = ? AND c.line_start = ?", (source, line_start)
        ).fetchone()[0]

    assert_snippets_centred_and_whole_words(index, chunk_text_of)
