"""One rule for human qrels: ``qrels import`` and ``calibrate --qrels`` read a file the same
way (one reader, :func:`judge_runner.judging.qrels.read_trec_qrels`) and put it on the judge's 0-3 scale
the same way (:func:`~judge_runner.judging.qrels.on_judge_scale`, ``--rescale`` on both); a qrels file
or a run that matches none or only some of the queries says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from judge_runner.app.calibrate_job import ranked_by_every_run
from judge_runner.calibrate.data import CalibrationQuery, load_files, read_qrels
from judge_runner.core.failures import UsageError
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import QrelsError, human_labels, import_human_qrels
from tests.support.calibration_data import write_collection
from tests.support.clitools import invoke

pytestmark = pytest.mark.hash_embedder
HASH = {"JUDGE_RUNNER_EMBEDDER": "hash"}


def both(path: Path, rescale: dict[int, int] | None = None, tmp: Path | None = None):
    """What calibrate reads and what qrels import stores for ``path``: ``(calibrate, import)``, each the
    ``{(qid, docid): grade}`` read, or the message it was refused with."""
    try:
        calibrate = {(q, d): g for q, docs in read_qrels(path, rescale).items() for d, g in docs.items()}
    except UsageError as exc:
        calibrate = str(exc)
    with JudgmentCache((tmp or path.parent) / f"j-{path.stem}.sqlite") as cache:
        try:
            import_human_qrels(cache, path, "h", rescale)
            stored: dict | str = human_labels(cache)
        except QrelsError as exc:
            stored = str(exc)
    return calibrate, stored


@pytest.mark.parametrize(
    "content",
    [
        "q1 0 a 2\nq1 0 b 1\nq1 0 b 0\n",  # the example: graded 1, then 0 (the last one won in calibrate)
        "q1 0 a 2\nq1 0 b 0\nq1 0 b 1\n",  # the same lines swapped (the verdict used to depend on the order)
        "query-id\tcorpus-id\tscore\nq1\ta\t1\nq1\tb\t1\nq1\tb\t0\n",  # BEIR TSV alike
    ],
)
def test_a_pair_graded_twice_is_refused_by_both(tmp_path, content):
    path = tmp_path / "dup.qrels"
    path.write_text(content, encoding="utf-8")
    calibrate, imported = both(path)
    assert calibrate == imported and isinstance(calibrate, str)
    assert "q1 b is graded twice" in calibrate and "keep one grade per (query, document)" in calibrate


def test_a_pair_repeated_with_the_same_grade_is_a_harmless_repeat_for_both(tmp_path):
    path = tmp_path / "rep.qrels"
    path.write_text("q1 0 a 2\nq1 0 b 1\nq1 0 b 1\n", encoding="utf-8")
    assert both(path) == ({("q1", "a"): 2, ("q1", "b"): 1},) * 2


@pytest.mark.parametrize(
    "content, rescale, expected",
    [
        ("q1 0 a 3\nq1 0 b -2\n", {-2: 0}, {("q1", "a"): 3, ("q1", "b"): 0}),  # TREC's junk grade
        ("q1 0 a 4\nq1 0 b 2\n", {4: 3}, {("q1", "a"): 3, ("q1", "b"): 2}),  # a 0-4 scale (calibrate capped it silently)
        ("q1 0 a 1\nq1 0 b 0\n", None, {("q1", "a"): 3, ("q1", "b"): 0}),  # binary: 1 -> 3 in both (import kept 1)
        ("q1 0 a 1\nq1 0 b 0\n", {1: 1}, {("q1", "a"): 1, ("q1", "b"): 0}),  # 0/1 labels already on 0-3
    ],
)
def test_grades_go_on_the_judge_scale_by_one_rule(tmp_path, content, rescale, expected):
    path = tmp_path / "g.qrels"
    path.write_text(content, encoding="utf-8")
    assert both(path, rescale) == (expected, expected)
    if rescale and -2 in rescale or rescale and 4 in rescale:
        refused = both(path)
        assert refused[0] == refused[1] and f"map it with --rescale {next(iter(rescale))}=" in refused[0]


def test_calibrate_takes_rescale_for_a_negative_grade(tmp_path):
    # regression: a negative grade (TREC's -2, junk) was refused by calibrate with no way to map it
    data = write_collection(tmp_path / "beir", queries=4)
    qrels = tmp_path / "junk.qrels"
    lines = [line.split("\t") for line in (data / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    junk = [(q, d.replace("r0", "x0"), "-2") for q, d, _ in lines if d.endswith("r0")]  # a distractor per query as junk
    qrels.write_text("".join(f"{q} 0 {d} {3 if g == '1' else g}\n" for q, d, g in lines + junk), encoding="utf-8")
    common = ["calibrate", "--qrels", str(qrels), "--queries", str(data / "queries.jsonl"), "--corpus", str(data / "corpus.jsonl")]
    common += [
        "--provider",
        "offline",
        "--systems",
        "fts,hybrid",
        "--probes",
        "none",
        "--bootstrap",
        "0",
        "--db",
        str(tmp_path / "i.sqlite"),
    ]
    refused = invoke([*common, "--out", str(tmp_path / "c.json")], HASH)
    assert refused.exit_code == 2 and "--rescale -2=0" in refused.output
    result = invoke([*common, "--rescale", "-2=0", "--out", str(tmp_path / "c.json"), "--quiet"], HASH)
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "c.json").read_text())["verdict"]["status"]


def test_calibrate_and_import_refuse_the_same_duplicated_file_on_the_command_line(tmp_path):
    data = write_collection(tmp_path / "beir", queries=4)
    dup = tmp_path / "dup.tsv"
    text = (data / "qrels" / "test.tsv").read_text()
    first = text.splitlines()[1].split("\t")
    dup.write_text(text + f"{first[0]}\t{first[1]}\t0\n", encoding="utf-8")
    calibrate = invoke(
        [
            "calibrate",
            "--qrels",
            str(dup),
            "--queries",
            str(data / "queries.jsonl"),
            "--corpus",
            str(data / "corpus.jsonl"),
            "--provider",
            "offline",
        ],
        HASH,
    )
    imported = invoke(["qrels", "import", str(dup), "--name", "h", "--cache", str(tmp_path / "j.sqlite")], HASH)
    assert calibrate.exit_code == imported.exit_code == 2
    message = f"{first[0]} {first[1]} is graded twice, 1 (line 2) and 0"
    assert message in calibrate.output and message in imported.output


# -- qrels and runs that match only some queries ----------------------------------------------------------
def test_qrels_matching_only_some_queries_say_so(tmp_path):
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i:02d}", "text": f"query {i}"}) + "\n" for i in range(1, 6)))
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"_id": "a", "title": "", "text": "x"}) + "\n")
    (tmp_path / "numbers.qrels").write_text("".join(f"{i} 0 a 1\n" for i in range(1, 6)))
    with pytest.raises(UsageError, match=r"the qrels' query ids \(1, 2, 3 \.\.\.\) and the queries' \(q01, q02, q03 \.\.\.\) do not match"):
        load_files(tmp_path / "numbers.qrels", tmp_path / "queries.jsonl", tmp_path / "corpus.jsonl")
    (tmp_path / "some.qrels").write_text("q01 0 a 1\nq02 0 a 1\n7 0 a 1\n")
    collection = load_files(tmp_path / "some.qrels", tmp_path / "queries.jsonl", tmp_path / "corpus.jsonl")
    assert sorted(collection.queries) == ["q01", "q02"]
    assert collection.notes == [
        "1 query id(s) of some.qrels are not in queries.jsonl (7); their qrels are ignored",
        "3 of the 5 queries of queries.jsonl have no positive qrels line (q03, q04, q05); they are left out",
    ]


def test_calibrate_leaves_out_queries_a_run_does_not_rank(tmp_path):
    # regression: calibrate accepted a run missing 14 of 30 sampled queries and scored them as zeros
    data = write_collection(tmp_path / "beir", queries=8)
    collection = load_files(data / "qrels" / "test.tsv", data / "queries.jsonl", data / "corpus.jsonl")
    queries = [CalibrationQuery(q, t) for q, t in collection.queries.items()]
    half = {q.id: ["d"] for q in queries[:4]}
    kept, restricted = ranked_by_every_run(queries, collection, [half])
    assert [q.id for q in kept] == list(half) and sorted(restricted.qrels) == sorted(half)
    with pytest.raises(UsageError, match="only 1 of the 8 sampled queries are ranked by every --run"):
        ranked_by_every_run(queries, collection, [{queries[0].id: ["d"]}])
    run = tmp_path / "half.trec"
    run.write_text("".join(f"{q} Q0 {next(iter(collection.qrels[q]))} 1 1.0 t\n" for q in half), encoding="utf-8")
    common = ["calibrate", "--beir", str(data), "--provider", "offline", "--systems", "fts", "--run", str(run), "--probes", "none"]
    result = invoke([*common, "--bootstrap", "0", "--db", str(tmp_path / "i.sqlite"), "--out", str(tmp_path / "c.json")], HASH)
    assert result.exit_code == 0, result.output
    assert "has no line for 4 of the 8 sampled queries" in result.output
    assert json.loads((tmp_path / "c.json").read_text())["collection"]["queries"] == 4


def test_evaluate_says_when_imported_human_qrels_match_no_query(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(Path(__file__).resolve().parents[2] / "fixtures" / "runbooks", tmp_path / "kb")
    assert invoke(["index", "kb", "--db", "idx.sqlite"], HASH).exit_code == 0
    (tmp_path / "q.json").write_text(
        json.dumps(
            {"queries": [{"id": f"q{i:02d}", "query": f"redis failover {i}", "queryIntent": "i", "queryType": "keyword"} for i in (1, 2)]}
        )
    )
    (tmp_path / "h.qrels").write_text("1 0 redis-cache-failover.md 3\n2 0 redis-cache-failover.md 3\n")
    assert invoke(["qrels", "import", "h.qrels", "--name", "team", "--db", "idx.sqlite"], HASH).exit_code == 0
    result = invoke(["evaluate", "--queries", "q.json", "--db", "idx.sqlite", "--provider", "offline", "--human-qrels", "team"], HASH)
    assert result.exit_code == 0, result.output
    assert "warning: no imported human label applies: their query ids (1, 2) match none of the query set's (q01, q02)" in result.output
