"""``judge-runner label --budget N --for ranking``: one budget for the ranking of every system of a compare run,
what it buys said first, whole queries pooled as TREC pools them (a document's grade counts for every system that
returned it), and at the end every system's corrected mean with rank sets and the pairs decided by Holm's
procedure; a simulated labeller over many draws holds the intervals and the verdicts to the truth."""

from __future__ import annotations

import json
import signal
from itertools import combinations

import ir_measures
import pytest

from judge_runner.core.failures import UsageError
from judge_runner.human.budget import ask
from judge_runner.human.estimate import estimate_budget
from judge_runner.human.options import Sampling
from judge_runner.human.pace import prepare_budget
from judge_runner.human.ranking import MIN_DEPTH, depth_pool, plan_ranking, pool_of
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import import_human_qrels
from judge_runner.runs.read import read_run_file
from tests.support.budget_runs import doc, ranking, truth_grades, write_compare_run
from tests.support.clitools import invoke
from tests.support.label_client import Job, act, spawn_label, state, stop_process

QUERIES = 40
SYSTEMS = ("hybrid", "fts", "vector", "bm25")


@pytest.fixture
def four(tmp_path):
    return write_compare_run(tmp_path / "runs", QUERIES, systems=SYSTEMS)


def true_means(depth: int = 10) -> dict[str, float]:
    """Each system's people's nDCG@10 against the people's qrels pooled to ``depth`` over the four systems, by
    ir_measures (trec_eval's nDCG@10) on its own: what the ranking estimates."""
    truths = truth_grades(QUERIES)
    qrels, out = {}, {}
    for q in range(QUERIES):
        pooled = {doc(q, d) for s in SYSTEMS for d in ranking(q, s)[:depth]}
        qrels[f"q{q}"] = {d: truths[(f"q{q}", d)] for d in pooled}
    for s in SYSTEMS:
        run = {f"q{q}": {doc(q, d): 10.0 - r for r, d in enumerate(ranking(q, s))} for q in range(QUERIES)}
        out[s] = ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)[ir_measures.nDCG @ 10]
    return out


def _label_all(url, tab="tab-rank-1"):
    truths = truth_grades(QUERIES)
    while (item := state(url, tab)["item"]) is not None:
        assert act(url, "label", tab, item=item["id"], grade=truths[(item["qid"], item["source"])])[0] == 200


def test_a_ranking_budget_through_the_command_says_what_it_buys_and_ends_with_every_systems_exact_figure(tmp_path, four):
    proc = spawn_label(tmp_path, str(four), "--budget", "2000", "--for", "ranking")
    try:
        before: list[str] = []
        while not (line := proc.stdout.readline()).startswith("  http://127.0.0.1:"):
            assert line or proc.poll() is None, proc.stderr.read()
            before.append(line)
        assert any("ranking 4 systems with 40 whole queries pooled to depth 10" in b for b in before), before
        _label_all(line.strip())
        out, err = stop_process(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    closing = out[out.index("corrected the ranking of 4 systems") :].splitlines()
    assert "a census" in closing[0] and "40 of the 40 drawn queries labelled" in closing[0], closing[0]
    truth = true_means()
    order = sorted(SYSTEMS, key=lambda s: -truth[s])
    for place, (line, system) in enumerate(zip(closing[1:5], order), start=1):
        assert line.startswith(f"  {place}. {system} {truth[system]:.3f} ["), (line, truth)
    assert "pairs decided by Holm's procedure (95% together):" in closing[5]


def test_a_small_ranking_budget_goes_to_a_shallower_pool_and_records_its_depth(tmp_path, four):
    job = Job(tmp_path, four, sampling={"budget": 100, "question": "ranking"})
    plan = json.loads((tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()[0])
    record = plan["budget"]
    assert record["question"] == "ranking" and record["systems"] == list(SYSTEMS) and MIN_DEPTH <= record["depth"] < 10
    run = read_run_file(four)
    pool = pool_of(run, ask(run, "ranking", [], "queries"))
    for item in plan["items"]:  # only each system's top `depth`
        assert item["source"] in depth_pool(pool, SYSTEMS, item["qid"], record["depth"])
    [buys] = [line for line in job.lines.out if line.startswith("about ")]
    assert f"pooled to depth {record['depth']} (each system's top {record['depth']})" in buys and "closest pair" in buys
    _label_all(job.url)
    job.stop()
    text = "\n".join(job.lines.out)
    assert f"corrected the ranking of 4 systems by nDCG@10 on qrels pooled to depth {record['depth']}" in text


def test_the_ranking_estimate_covers_the_truth_and_holm_never_decides_a_pair_wrong_over_many_draws(four):
    run = read_run_file(four)
    question = ask(run, "ranking", [], "queries")
    truths = truth_grades(QUERIES)
    covered = total = wrong = decided = 0
    truth: dict[int, dict[str, float]] = {}
    for seed in range(60):
        draw = plan_ranking(run, question, 120, seed, 10.0)
        depth = draw.question.depth
        truth.setdefault(depth, true_means(depth))
        given = {(i.qid, i.source): truths[(i.qid, i.source)] for i in draw.items}
        found = estimate_budget(run, draw.record(seed, 10.0, "test"), given)
        for system in found.ranking.systems:
            low, high = system.found.ci95
            covered += low - 1e-9 <= truth[depth][system.name] <= high + 1e-9
            total += 1
        for pair in found.ranking.pairs:
            if pair.outcome in ("better", "worse"):
                decided += 1
                real = truth[depth][pair.system] - truth[depth][pair.against]
                wrong += (real > 0) != (pair.outcome == "better")
    assert covered / total >= 0.85, covered / total
    assert wrong == 0 and decided > 0


def test_a_ranking_budget_too_small_is_refused_naming_the_smallest_and_pairs_are_no_ranking_unit(tmp_path, four):
    args = ["label", str(four), "--name", "r", "--folder", str(tmp_path / "labels"), "--no-cache", "--for", "ranking"]
    result = invoke([*args, "--budget", "20"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "the smallest budget that works here is --budget" in said and "nothing was started" in said, said
    smallest = int(said.split("the smallest budget that works here is --budget ")[1].split()[0])
    assert not (tmp_path / "labels").exists() or not list((tmp_path / "labels").iterdir())
    runs = [read_run_file(four)]
    with pytest.raises(UsageError, match="the smallest budget that works here"):
        prepare_budget(runs, Sampling(budget=smallest - 1, question="ranking"), "ada", tmp_path / "labels")
    assert prepare_budget(runs, Sampling(budget=smallest, question="ranking"), "ada", tmp_path / "labels").draw.units_drawn >= 10 - 1e-9
    pairs = invoke([*args, "--budget", "100", "--sample", "pairs"])
    assert pairs.exit_code == 2 and "--for ranking needs whole queries" in " ".join(pairs.output.split())


def test_a_ranking_reuses_every_grade_people_gave_before_and_systems_narrow_it(tmp_path, four):
    truths = truth_grades(QUERIES)
    given = [(q, d) for (q, d) in truths if int(q[1:]) < 12]
    qrels = tmp_path / "old.qrels"
    qrels.write_text("".join(f"{q} 0 {d} {truths[(q, d)]}\n" for q, d in given), encoding="utf-8")
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        import_human_qrels(cache, qrels, "old")
    job = Job(tmp_path, four, sampling={"budget": 120, "question": "ranking", "systems": ("hybrid", "fts", "vector")})
    plan = json.loads((tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()[0])
    assert plan["budget"]["systems"] == ["hybrid", "fts", "vector"] and plan["budget"]["reused"] > 0
    assert all(int(i["qid"][1:]) >= 12 for i in plan["items"])  # queries graded before are known, never drawn
    assert all(plan["budget"]["probabilities"][f"q{q}"] == 1 for q in range(12))
    job.stop()


def test_every_pair_of_the_ranking_has_a_verdict_line_or_is_counted_undecided(four):
    run = read_run_file(four)
    draw = plan_ranking(run, ask(run, "ranking", [], "queries"), 2000, 1, 10.0)
    given = {(i.qid, i.source): truth_grades(QUERIES)[(i.qid, i.source)] for i in draw.items}
    found = estimate_budget(run, draw.record(1, 10.0, "test"), given)
    lines = found.lines()
    decided = [line for line in lines if " better than " in line]
    undecided = next(line for line in lines if "cannot tell yet" in line) if len(decided) < 6 else ""
    count = int(undecided.split("cannot tell yet: ")[1].split()[0]) if undecided else 0
    assert len(decided) + count == len(list(combinations(SYSTEMS, 2)))
