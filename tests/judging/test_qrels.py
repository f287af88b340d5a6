"""judge_runner.judging.qrels: docid encoding, pooling, TREC export read by ir-measures, human qrels import."""

from __future__ import annotations

import io

import ir_measures
import pytest
from ir_measures import nDCG

from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import (
    QrelsError,
    RunLabels,
    human_labels,
    import_human_qrels,
    labels_from_evaluation,
    pool_qrels,
    read_trec_qrels,
    write_trec_qrels,
)
from judge_runner.measures.ir import query_metrics
from judge_runner.search.trec import decode_id, encode_id


@pytest.mark.parametrize(
    "docid",
    [
        "runbooks/x.md",
        "guides/local dev.md",
        "a\tb\nc",
        "100% done.md",
        "%20literal.md",
        "i18n/ja/バックアップ 手順.md",
        "nbsp\u00a0and\u3000ideographic",
        "zw\u200bspace",
        "trailing ",
        "%",
        "a%2",
        "ctrl\x01char",
    ],
)
def test_docid_encoding_is_reversible_and_whitespace_free(docid):
    encoded = encode_id(docid)
    assert not any(ch.isspace() for ch in encoded) and len(encoded.split()) == 1
    assert decode_id(encoded) == docid


def test_docid_encoding_keeps_ordinary_ids_unchanged():
    for docid in ("runbooks/x.md", "DEC-0054", "i18n/zh/search-service-overview.md", "4983"):
        assert encode_id(docid) == docid
    assert encode_id("a b%") == "a%20b%25"


@pytest.mark.parametrize("bad", ["a%2", "a%zz", "%C3%28"])
def test_malformed_escapes_are_refused(bad):
    with pytest.raises(ValueError):
        decode_id(bad)
    with pytest.raises(ValueError):
        encode_id("")


def run(run_id, qid, labels, expected=(), query=None):
    return RunLabels(run_id, qid, query or f"query {qid}", labels, expected)


def test_pooling_takes_the_median_of_runs_best_label_per_run():
    pooled = pool_qrels(
        [
            run("r1", "q1", [("a.md", 3), ("b.md", 0), ("a.md", 1)]),  # a.md twice: its best label, 3
            run("r2", "q1", [("a.md", 1), ("b.md", 2)]),
            run("r3", "q1", [("a.md", 2), ("c.md", 1)]),
            run("r4", "q1", [("b.md", 3)]),
        ]
    )
    # a.md: [3, 1, 2] -> 2; b.md: [0, 2, 3] -> 2; c.md: [1] -> 1
    assert pooled.qrels == {"q1": {"a.md": 2, "b.md": 2, "c.md": 1}}
    assert pooled.counts == {"human": 0, "judge": 3, "expected": 0}
    assert pooled.runs == ["r1", "r2", "r3", "r4"]


def test_pooling_is_independent_of_run_order_and_a_tie_takes_the_lower_label():
    a = [run("r1", "q1", [("a.md", 3)]), run("r2", "q1", [("a.md", 1)])]
    assert pool_qrels(a).qrels == pool_qrels(a[::-1]).qrels == {"q1": {"a.md": 1}}


def test_human_labels_win_and_bring_unreturned_documents():
    pooled = pool_qrels(
        [run("r1", "q1", [("a.md", 3), ("b.md", 0)], expected=["e.md", "b.md"]), run("r1", "q2", [("x.md", 2)])],
        human={("q1", "a.md"): 0, ("q1", "missed.md"): 3, ("q9", "other.md"): 2},
    )
    assert pooled.qrels == {"q1": {"a.md": 0, "b.md": 0, "missed.md": 3, "e.md": 3}, "q2": {"x.md": 2}}
    assert pooled.origin[("q1", "a.md")] == "human" and pooled.origin[("q1", "e.md")] == "expected"
    assert pooled.origin[("q1", "b.md")] == "judge"  # an expected source the judge labelled keeps the label
    assert pooled.counts == {"human": 2, "judge": 2, "expected": 1}  # q9 is in no run: not exported


def test_one_query_id_for_two_queries_is_refused():
    with pytest.raises(QrelsError, match="one query set"):
        pool_qrels([run("r1", "q1", [], query="backups"), run("r2", "q1", [], query="restores")])


def test_labels_from_evaluation_line():
    line = {
        "type": "evaluation",
        "queryId": "q3",
        "query": "drain a node",
        "expectedSources": ["runbooks/k.md"],
        "results": [{"rank": 1, "source": "runbooks/k.md", "relevance": 3}, {"rank": 2, "source": "notes/x.md", "relevance": 0}],
    }
    item = labels_from_evaluation("run-1", line)
    assert item == RunLabels("run-1", "q3", "drain a node", [("runbooks/k.md", 3), ("notes/x.md", 0)], ("runbooks/k.md",))
    with pytest.raises(QrelsError):
        labels_from_evaluation("run-1", {"query": "x"})
    with pytest.raises(QrelsError):
        labels_from_evaluation("run-1", {**line, "results": [{"source": "a", "relevance": 5}]})


def test_export_is_read_by_ir_measures_and_gives_the_runs_own_ndcg(tmp_path):
    # one run of three queries, with a docid holding a space and one holding '%'
    queries = {
        "q1": (["guides/local dev.md", "runbooks/a.md", "notes/b.md", "runbooks/a.md"], [1, 3, 0, 2], ["guides/local dev.md"]),
        "q2": (["x.md", "100% y.md", "z.md"], [0, 0, 2], ["w.md"]),  # an expected source never returned
        "q3": (["k.md"], [3], []),
    }
    items = [run("r1", qid, list(zip(sources, labels)), expected) for qid, (sources, labels, expected) in queries.items()]
    pooled = pool_qrels(items)
    path = tmp_path / "judged.qrels"
    with path.open("w", encoding="utf-8") as out:
        lines = write_trec_qrels(pooled.qrels, out)
    assert lines == sum(len(d) for d in pooled.qrels.values())
    read = list(ir_measures.read_trec_qrels(str(path)))
    assert len(read) == lines and all(" " not in q.doc_id for q in read)
    # score the run (encoded the same way) with ir-measures over the exported file
    trec_run = {encode_id(qid): {} for qid in queries}
    for qid, (sources, _, _) in queries.items():
        for i, source in enumerate(sources):
            trec_run[encode_id(qid)].setdefault(encode_id(source), float(len(sources) - i))
    per_query = {m.query_id: m.value for m in ir_measures.iter_calc([nDCG @ 10], read, trec_run)}
    for qid, (sources, labels, expected) in queries.items():
        own = query_metrics(sources, labels, expected)["nDCG@10"]
        assert per_query[encode_id(qid)] == pytest.approx(own, abs=1e-6), qid
    # and our reader gives back the decoded ids
    assert ("q2", "100% y.md", 0) in read_trec_qrels(path)


def test_write_is_sorted_and_whitespace_separated():
    out = io.StringIO()
    write_trec_qrels({"q2": {"b": 1, "a b": 3}, "q1": {"z": 0}}, out)
    assert out.getvalue() == "q1 0 z 0\nq2 0 a%20b 3\nq2 0 b 1\n"


@pytest.mark.parametrize(
    "content,message",
    [
        ("q1 a.md\n", r"bad\.qrels:1: expected 'qid iter docid grade' \(TREC\) or 'query-id corpus-id score' \(BEIR\), got 2 fields"),
        ("q1 0 a.md\n", r"bad\.qrels:1: grade 'a\.md' is not an integer"),
        ("q1 0 a.md 1\nq1 0 b.md high\n", "bad.qrels:2: grade 'high' is not an integer"),
        ("q1 0 a%zz 1\n", "malformed"),
        ("q1 0 a.md 1\nq1 0 a.md 2\n", "graded twice"),
        ("\n\n", "no qrels lines"),
    ],
)
def test_bad_qrels_files_name_the_line(tmp_path, content, message):
    path = tmp_path / "bad.qrels"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(QrelsError, match=message):
        read_trec_qrels(path)


def test_missing_qrels_file(tmp_path):
    with pytest.raises(QrelsError, match="cannot read"):
        read_trec_qrels(tmp_path / "nope.qrels")


def test_import_human_qrels_into_the_cache_and_precedence(tmp_path):
    qrels = tmp_path / "human.qrels"
    qrels.write_text("q1 0 a.md 1\nq1 0 guides/local%20dev.md 0\nq2 Q0 x.md 1\n", encoding="utf-8")
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        assert import_human_qrels(cache, qrels, "team-2026", rescale={1: 3}) == 3
        assert human_labels(cache) == {("q1", "a.md"): 3, ("q1", "guides/local dev.md"): 0, ("q2", "x.md"): 3}
        other = tmp_path / "other.qrels"
        other.write_text("q1 0 a.md 2\n", encoding="utf-8")
        import_human_qrels(cache, other, "other")
        assert human_labels(cache, ["other", "team-2026"])[("q1", "a.md")] == 2
        assert human_labels(cache, ["team-2026", "other"])[("q1", "a.md")] == 3
        pooled = pool_qrels([run("r1", "q1", [("a.md", 0), ("b.md", 2)])], human_labels(cache, ["team-2026"]))
        assert pooled.qrels["q1"] == {"a.md": 3, "guides/local dev.md": 0, "b.md": 2}
        assert pooled.counts["human"] == 2


@pytest.mark.parametrize("name", ["", "bad name", "x" * 65, "../up"])
def test_import_refuses_bad_names_and_out_of_scale_grades(tmp_path, name):
    qrels = tmp_path / "h.qrels"
    qrels.write_text("q1 0 a.md 4\n", encoding="utf-8")
    with JudgmentCache(tmp_path / "j.sqlite") as cache:
        with pytest.raises(QrelsError, match="name"):
            import_human_qrels(cache, qrels, name)
        with pytest.raises(QrelsError, match="outside 0-3"):
            import_human_qrels(cache, qrels, "ok")
        assert cache.human_qrels() == []
        assert import_human_qrels(cache, qrels, "ok", rescale={4: 3}) == 1


def test_pooled_metrics_equal_the_runs_own_for_one_run_and_share_qrels_across_runs():
    from judge_runner.judging.qrels import pooled_metrics

    a = {"q1": (["x.md", "y.md", "x.md", "z.md"], [0, 3, 2, 1], ["w.md"]), "q2": (["k.md"], [0], []), "q3": ([], [], ["e.md"])}
    pooled = pool_qrels([run("A", q, list(zip(s, l)), e) for q, (s, l, e) in a.items()])
    got = pooled_metrics(pooled.qrels, {q: s for q, (s, _, _) in a.items()})
    for qid in ("q1", "q3"):
        own = query_metrics(*a[qid])
        assert got[qid] == {name: pytest.approx(own[name], abs=1e-6) for name in ("nDCG@10", "R@10", "RR(rel=2)")}
    assert "q2" not in got  # nothing relevant known for q2: it cannot be scored
    # a second configuration that found y.md first is scored against the same qrels
    both = pool_qrels([run("A", "q1", [("x.md", 0), ("y.md", 3)]), run("B", "q1", [("y.md", 3), ("v.md", 2)])])
    first, second = pooled_metrics(both.qrels, {"q1": ["x.md", "y.md"]}), pooled_metrics(both.qrels, {"q1": ["y.md", "v.md"]})
    assert second["q1"]["nDCG@10"] == 1.0 and first["q1"]["nDCG@10"] < 1.0
    assert first["q1"]["RR(rel=2)"] == 0.5 and second["q1"]["RR(rel=2)"] == 1.0
