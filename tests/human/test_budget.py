"""``judge-runner label --budget``: a budget spent on one question (a run's mean, or the difference of two
systems of a compare run), what it buys said first, the draw's probabilities recorded, and the estimate from
them unbiased (a simulated labeller over many seeds), also for single pairs and for a session stopped early;
the uniform-sample correction of evaluate's summary never applied to such a sample."""

from __future__ import annotations

import json
import math
import signal
import statistics

import pytest
from scipy import stats

from judge_runner.analysis.corrected_report import block_lines
from judge_runner.core.failures import UsageError
from judge_runner.embed.registry import instance
from judge_runner.human.budget import ask, pair_coefficients, past_residuals, plan_draw, pool_of, query_values, units_of
from judge_runner.human.estimate import estimate_budget
from judge_runner.human.options import Sampling
from judge_runner.human.pace import DEFAULT_SECONDS_PER_LABEL, measured_pace, prepare_budget
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.heuristic import HeuristicJudge
from judge_runner.judging.qrels import drawn_label_sets, import_human_qrels
from judge_runner.runs.corrected import bias_corrected, drawn_note
from judge_runner.runs.read import read_run_file
from tests.support.budget_runs import ranking, true_scaled_dcg, true_value, truth, truth_grades, write_compare_run
from tests.support.clitools import invoke
from tests.support.label_client import Job, act, spawn_label, state, stop_process
from tests.support.label_runs import write_run
from tests.support.protocol_runs import DOCS, queries, run

QUERIES = 40


@pytest.fixture
def compare_run(tmp_path):
    return write_compare_run(tmp_path / "runs", QUERIES, human_queries=3)


def _simulate(run, question, budget, seeds, *, rho=None, keep=1.0):
    """Estimates over ``seeds`` draws, a labeller giving the people's grades to the first ``keep`` share of
    the items shown (whole units: a stopped session)."""
    truths = truth_grades(QUERIES)
    found = []
    for seed in seeds:
        draw = plan_draw(run, question, budget, seed, 10.0, rho=rho)
        units = draw.drawn[: int(len(draw.drawn) * keep)]
        shown = {u if question.unit == "queries" else u.split("\t")[0] for u in units}
        kept = [u.split("\t", 1)[1] for u in units] if question.unit == "pairs" else None
        given = {
            (i.qid, i.source): truths[(i.qid, i.source)]
            for i in draw.items
            if i.qid in shown and (kept is None or (i.qid, i.source) in {tuple(u.split("\t", 1)) for u in units})
        }
        estimate = estimate_budget(run, draw.record(seed, 10.0, "test"), given)
        if estimate.found is not None:
            found.append(estimate.found)
    return found


def _unbiased(found, truth_value):
    """The mean estimate within 3.5 standard errors of the truth, and the 95% intervals covering it."""
    values = [f.estimate for f in found]
    se = statistics.stdev(values) / math.sqrt(len(values))
    assert abs(statistics.mean(values) - truth_value) <= 3.5 * se + 1e-9, (statistics.mean(values), truth_value, se)
    coverage = sum(f.ci95[0] <= truth_value <= f.ci95[1] for f in found) / len(found)
    assert coverage >= 0.85, coverage


def test_a_budget_on_a_compare_run_spends_it_says_what_it_buys_first_and_records_the_probabilities(tmp_path, compare_run):
    job = Job(tmp_path, compare_run, sampling={"budget": 50, "question": "difference", "systems": ("hybrid", "fts")})
    out = job.lines.out
    buys = next(i for i, line in enumerate(out) if line.startswith("about 50 labels"))
    assert buys < next(i for i, line in enumerate(out) if line.startswith("labelling team"))
    assert "min at 10 s each) for ±" in out[buys] and "on the difference fts - hybrid in nDCG@10" in out[buys]
    plan = json.loads((tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()[0])
    record = plan["budget"]
    assert record["design"] == "uniform" and record["question"] == "difference" and record["systems"] == ["hybrid", "fts"]
    assert len(record["probabilities"]) == QUERIES and len(plan["items"]) == 50  # 10 queries of 5 documents: exactly 50
    free = {"q1", "q2"} | {f"q{q}" for q in range(0, QUERIES, 5)}  # labelled before, or ranked alike
    assert {q for q, p in record["probabilities"].items() if p >= 1} == free
    assert not free & set(record["drawn"]) and {i["qid"] for i in plan["items"]} == set(record["drawn"])
    page = json.dumps(state(job.url, "tab-one1"))
    assert "hybrid" not in page and "fts" not in page  # labels are given blind: the page never names a system
    truths = truth_grades(QUERIES)
    for _ in plan["items"]:
        item = state(job.url, "tab-one1")["item"]
        status, _ = act(job.url, "label", "tab-one1", item=item["id"], grade=truths[(item["qid"], item["source"])])
        assert status == 200
    job.stop()
    last = job.lines.out[-1]
    assert last.startswith("corrected the difference fts - hybrid in nDCG@10: ") and "10 of the 10 drawn queries labelled" in last
    # a new user's trial: a finished session said "50 of 50 labelled by now; run the same command to go on"
    assert "all 50 labelled: the session is done. The labels are in:" in job.lines.text() and "to go on" not in job.lines.text()
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        design = cache.label_designs()["team"]
        assert design["uniform"] is False and design["design"] == "uniform"  # known queries were left out
        assert len(drawn_label_sets(cache)["team"]) == 50


def test_the_command_says_what_the_budget_buys_before_the_url_and_ctrl_c_ends_with_the_estimate(tmp_path, compare_run):
    proc = spawn_label(tmp_path, str(compare_run), "--budget", "50", "--for", "difference", "--systems", "hybrid,fts")
    try:
        before: list[str] = []
        while not (line := proc.stdout.readline()).startswith("  http://127.0.0.1:"):
            assert line or proc.poll() is None, proc.stderr.read()
            before.append(line)
        url = line.strip()
        assert any(b.startswith("about 50 labels (8 min at 10 s each) for ±") for b in before), before
        truths = truth_grades(QUERIES)
        while (item := state(url, "tab-cli-01")["item"]) is not None:
            assert act(url, "label", "tab-cli-01", item=item["id"], grade=truths[(item["qid"], item["source"])])[0] == 200
        out, err = stop_process(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    last = out.strip().splitlines()[-1]
    assert last.startswith("corrected the difference fts - hybrid in nDCG@10: ") and "10 of the 10 drawn queries labelled" in last, out


def test_a_session_stopped_before_enough_labels_says_why_there_is_no_estimate_yet(tmp_path, compare_run):
    job = Job(tmp_path, compare_run, sampling={"budget": 20, "kind": "pairs", "question": "difference"})
    job.stop()
    assert "on the difference fts - hybrid in scaled DCG@10" in job.lines.text()
    assert job.lines.out[-1].startswith(
        "no corrected estimate of the difference fts - hybrid in scaled DCG@10 yet: 0 of the 20 drawn pairs"
    )


def test_pairs_spend_exactly_the_budget_and_skip_documents_both_systems_rank_alike(compare_run):
    run = read_run_file(compare_run)
    question = ask(run, "difference", ["hybrid", "fts"], "pairs")
    draw = plan_draw(run, question, 30, 5, 10.0)
    assert len(draw.items) == 30 and draw.plan.design == "uniform"
    coefficients = pair_coefficients(pool_of(run, question), question)
    assert all(coefficients[(i.qid, i.source)] != 0 for i in draw.items)
    assert all(i.qid not in ("q1", "q2") for i in draw.items)  # labelled before: free


def test_pairs_estimate_scaled_dcg_at_10_the_dcg_of_the_top_10_over_that_of_ten_grade_3_results():
    ideal = sum(3 / math.log2(r + 1) for r in range(1, 11))
    by_hand = statistics.mean(
        sum(truth(q, d) / math.log2(r + 1) for r, d in enumerate(ranking(q, "fts"), start=1)) / ideal
        - sum(truth(q, d) / math.log2(r + 1) for r, d in enumerate(ranking(q, "hybrid"), start=1)) / ideal
        for q in range(QUERIES)
    )
    assert true_scaled_dcg(QUERIES) == pytest.approx(by_hand)
    assert abs(by_hand - true_value(QUERIES)) > 0.01  # another measure than nDCG@10: never reported as it


@pytest.mark.parametrize(
    ("unit", "rho", "keep"),
    [("queries", None, 1.0), ("queries", 1.0, 1.0), ("pairs", None, 1.0), ("pairs", 1.0, 1.0), ("queries", 1.0, 0.6), ("pairs", 1.0, 0.6)],
)
def test_the_estimate_is_unbiased_and_its_interval_covers_over_many_draws(compare_run, unit, rho, keep):
    run = read_run_file(compare_run)
    question = ask(run, "difference", ["hybrid", "fts"], unit)
    found = _simulate(run, question, 110 if keep < 1 else 60, range(120), rho=rho, keep=keep)
    assert len(found) >= 100
    _unbiased(found, true_value(QUERIES) if unit == "queries" else true_scaled_dcg(QUERIES))


def test_one_systems_mean_is_unbiased_too(compare_run):
    run = read_run_file(compare_run)
    question = ask(run, "mean", ["hybrid"], "queries")
    assert question.text() == "the mean nDCG@10 of hybrid"
    found = _simulate(run, question, 60, range(120), rho=1.0)
    _unbiased(found, true_value(QUERIES, "mean"))


def test_earlier_labels_choose_the_robust_mix_as_a_uniform_sample_of_the_open_units(compare_run):
    run = read_run_file(compare_run)
    question = ask(run, "difference", ["hybrid", "fts"], "queries")
    pool = pool_of(run, question)
    units = units_of(pool, question)
    past = past_residuals(pool, question, units)
    assert [u for u, _, _ in past] == ["q1", "q2"]  # q0 is ranked alike: known, no residual
    assert all(p == pytest.approx(2 / 32) for _, _, p in past)  # 2 labelled of the 32 queries not known


def test_the_robust_choice_stays_uniform_without_earlier_labels_and_the_weighted_record_says_so(tmp_path):
    run = read_run_file(write_compare_run(tmp_path, QUERIES))
    question = ask(run, "difference", [], "queries")
    assert question.systems == ("hybrid", "fts")
    assert plan_draw(run, question, 40, 1, 10.0).plan.design == "uniform"
    weighted = plan_draw(run, question, 40, 1, 10.0, rho=1.0)
    record = weighted.record(1, 10.0, "test")
    assert record["design"] == "weighted" and record["rho"] == 1.0 and 0 < min(record["probabilities"].values()) < 1


def test_the_summarys_uniform_correction_is_skipped_for_a_drawn_sample_and_says_why(tmp_path):
    lines = [json.loads(raw) for raw in write_compare_run(tmp_path, QUERIES, human_queries=QUERIES).read_text().splitlines()]
    evaluations = [line for line in lines if line["type"] == "evaluation"]
    assert bias_corrected(evaluations, ["hybrid", "fts"])["differences"]  # labelled at random: corrected as before
    drawn = {"team": {("q3", "docs/q3-d3.md")}}
    note = drawn_note(evaluations, drawn)
    assert note and "'team'" in note and "label --budget" in note and "judge-runner label --name team" in note
    assert drawn_note(evaluations, {"other": {("q3", "nowhere.md")}}) is None
    block = bias_corrected(evaluations, ["hybrid", "fts"], skipped=note)
    assert block["skipped"] == note and block["nDCG@10"] is None and not block["differences"]
    assert block_lines(block) == [f"bias-corrected nDCG@10 not shown: {note}"]


@pytest.mark.parametrize("uniform", [False, True])
def test_evaluate_skips_its_uniform_correction_when_the_labels_were_drawn_with_unequal_probabilities(tmp_path, uniform):
    qrels = tmp_path / "human.qrels"
    rows = [f"q{q} 0 {s.replace(' ', '%20')} {g}" for q in range(1, 12) for (s, _, _), g in zip(DOCS[:3], (3, q % 3, q % 2))]
    qrels.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        import_human_qrels(cache, qrels, "team")
        cache.set_label_design("team", {"design": "weighted", "unit": "queries", "uniform": uniform})
        outcome, _ = run(tmp_path, HeuristicJudge(instance("hash")), queries(13), cache=cache)
    block = outcome.summary["biasCorrected"]
    if uniform:  # a uniform draw of whole queries: corrected as any random sample
        assert block["nDCG@10"] is not None and not block.get("skipped")
    else:
        assert block["nDCG@10"] is None and "label --budget" in block["skipped"] and block["labelledQueries"] == 11


def test_a_uniform_whole_query_mean_is_marked_uniform_for_the_summary(tmp_path):
    run_file = write_compare_run(tmp_path / "runs", QUERIES, systems=("hybrid",))
    job = Job(tmp_path, run_file, sampling={"budget": 40})
    job.stop()
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        assert cache.label_designs() == {} or cache.label_designs()["team"]["uniform"] is True
        assert drawn_label_sets(cache) == {}


def test_the_pace_is_the_median_of_earlier_labels_else_ten_seconds(tmp_path):
    assert measured_pace(tmp_path, "ada") == (DEFAULT_SECONDS_PER_LABEL, pytest.approx(measured_pace(tmp_path, "ada")[1]))
    journal = tmp_path / "old.journal.jsonl"
    lines = [{"type": "plan"}] + [{"type": "label", "labeller": "ada", "seconds": 6.0 if i % 5 else 300.0} for i in range(25)]
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines))
    seconds, source = measured_pace(tmp_path, "ada")
    assert seconds == 6.0 and "ada's 25 earlier labels" in source
    assert measured_pace(tmp_path, "bob")[0] == 6.0  # everyone's when bob has none


def test_labels_flagged_fast_are_no_pace_so_the_pace_is_never_below_the_fast_floor(tmp_path):
    # a new user's trial: 125 labels given by a script in 0.003 s each made the pace 0 s, and --budget-minutes
    # then divided by it (exit 4)
    journal = tmp_path / "scripted.journal.jsonl"
    lines = [{"type": "label", "labeller": "ada", "seconds": 0.003, "fast": True} for _ in range(125)]
    lines += [{"type": "label", "labeller": "ada", "seconds": 0.5} for _ in range(30)]  # unflagged, still below the floor
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines))
    seconds, source = measured_pace(tmp_path, "ada")
    assert seconds == DEFAULT_SECONDS_PER_LABEL and "the default" in source
    # a new user's trial: "fewer than 20 earlier labels" of a folder holding 155, with no word of why
    assert "155 given in under" in source and "left out" in source, source
    untimed = tmp_path / "untimed" / "old.journal.jsonl"  # label lines without a time are no pace, and not "too fast"
    untimed.parent.mkdir()
    untimed.write_text("".join(json.dumps({"type": "label", "labeller": "ada"}) + "\n" for _ in range(7)))
    assert "left out" not in measured_pace(untimed.parent, "ada")[1]
    more = [{"type": "label", "labeller": "ada", "seconds": 4.0} for _ in range(25)]
    journal.write_text(journal.read_text() + "".join(json.dumps(line) + "\n" for line in more))
    assert measured_pace(tmp_path, "ada")[0] == 4.0


@pytest.mark.parametrize(("question", "smallest"), [("difference", 48), ("mean", 38)])
def test_a_budget_too_small_for_an_estimate_is_refused_before_a_session_opens_naming_the_smallest_that_works(
    tmp_path, compare_run, question, smallest
):
    # a new user's trial: --budget 30 drew 3 queries against the 10 an estimate needs, warned, then opened the session,
    # took the name, and on stop said "run the same command to go on", which could never reach 10
    folder = tmp_path / "labels"
    args = ["label", str(compare_run), "--name", "ab", "--folder", str(folder), "--cache", str(tmp_path / "c.sqlite"), "--for", question]
    result = invoke([*args, "--budget", "20"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert "a corrected estimate needs at least 10 drawn queries labelled" in said and f"--budget {smallest} " in said, said
    assert "nothing was started" in said
    assert not folder.exists() or not list(folder.iterdir())  # no lock, no journal, no qrels: the name is not taken
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        assert cache.human_qrels() == [] and cache.label_designs() == {}
    runs = [read_run_file(compare_run)]
    with pytest.raises(UsageError, match=f"the smallest budget that works here is --budget {smallest} "):
        prepare_budget(runs, Sampling(budget=smallest - 1, question=question), "ada", folder)
    job = Job(tmp_path, compare_run, name="ab", sampling={"budget": smallest, "question": question}, folder=folder)
    job.stop()
    assert job.error is None and (folder / "ab.journal.jsonl").is_file()


def test_budget_minutes_buy_labels_at_the_measured_pace(tmp_path, compare_run):
    folder = tmp_path / "labels"
    folder.mkdir()
    lines = [{"type": "label", "labeller": "ada", "seconds": 6.0} for _ in range(30)]
    (folder / "old.journal.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    job = Job(tmp_path, compare_run, sampling={"minutes": 2.0, "kind": "pairs", "question": "difference"})
    job.stop()
    assert "about 20 labels (2 min at 6 s each)" in job.lines.text()


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--budget", "0"], "a budget of 0 buys nothing"),
        (["--budget", "40", "--for", "difference", "--systems", "hybrid,nope"], "no system 'nope'; its systems: hybrid, fts"),
        (["--budget", "40", "--queries", "5"], "--queries cannot go with a budget"),
        (["--budget", "40", "--width", "0.2"], "--width cannot go with a budget"),
        (["--budget", "40", "--budget-minutes", "5"], "give one"),
        (["--systems", "hybrid,fts"], "give --budget N or --budget-minutes M with them"),
        (["--budget", "40", "--for", "difference", "--systems", "hybrid"], "--for difference needs --systems A,B"),
        # a new user's trial: these ended in 'internal error' (exit 4)
        (["--budget-minutes", "nan"], "Invalid value for '--budget-minutes': nan is not a finite number"),
        (["--budget-minutes", "inf"], "Invalid value for '--budget-minutes': inf is not a finite number"),
        # a new user's trial: --width nan ended in "cannot convert float NaN to integer", 1e308 minutes in exit 4
        (["--width", "nan"], "Invalid value for '--width': nan is not a finite number"),
        (["--budget-minutes", "0.001"], "buys no label: give more minutes"),
    ],
)
def test_budget_usage_errors_exit_2_with_a_clear_message(tmp_path, compare_run, extra, says):
    args = ["label", str(compare_run), "--name", "team", "--folder", str(tmp_path / "labels"), "--no-cache", *extra]
    result = invoke(args)
    assert result.exit_code == 2 and says in " ".join(result.output.split()), result.output


def test_a_difference_asked_of_a_run_with_one_system_exits_2(tmp_path):
    run_file = write_run(tmp_path / "runs")
    args = ["label", str(run_file), "--name", "team", "--folder", str(tmp_path / "labels"), "--no-cache", "--budget", "10"]
    result = invoke([*args, "--for", "difference"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "a difference needs two systems" in said and "(SYSTEM-ALPHA-7)" in said, result.output
    # a plain evaluate run names no system: said so, not 'None' (a new user's trial)
    lines = [json.loads(line) for line in run_file.read_text().splitlines()]
    run_file.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "system"}) + "\n" for line in lines))
    said = " ".join(invoke([*args, "--for", "difference"]).output.split())
    assert "(the unnamed system of a single-system run)" in said and "(None)" not in said, said


def test_help_teaches_the_budget(tmp_path):
    text = " ".join(invoke(["label", "--help"]).output.split())
    for phrase in ("--budget-minutes", "--for", "difference B - A", "whole queries", "scaled DCG@10", "probability", "stopped early"):
        assert phrase in text, phrase


# -- resuming: the options given again must agree with the session's own draw --------------------------------
# a new user's trial: `label --name ab --budget 150 --for mean` on a session drawn for the difference hybrid - fts
# resumed it and went on labelling the difference, with no word that --for mean was ignored


@pytest.mark.parametrize(
    ("again", "says"),
    [
        (["--budget", "50", "--for", "mean"], "--for mean (this session: difference)"),
        (["--budget", "50", "--for", "difference", "--systems", "fts,hybrid"], "--systems fts,hybrid (this session: hybrid,fts)"),
        (["--budget", "80", "--for", "difference"], "--budget 80 (this session: 50)"),
        # minutes bought as budget_session buys them (capped, not 'about nan labels' for 1e308)
        (["--budget-minutes", "1e308", "--for", "difference"], "--budget-minutes 1e+308 (about 1000000000 labels) (this session: 50)"),
        (["--budget", "50", "--for", "difference", "--sample", "pairs"], "--sample pairs (this session: queries)"),
        (["--budget", "50", "--for", "difference", "--seed", "7"], "--seed 7 (this session: 13)"),
        (["--queries", "5"], "--queries (this session spends a budget: it has no --queries)"),
    ],
)
def test_resuming_a_budget_session_with_other_sampling_options_exits_2_naming_them(tmp_path, compare_run, again, says):
    first = Job(tmp_path, compare_run, sampling={"budget": 50, "question": "difference", "systems": ("hybrid", "fts")})
    first.stop()
    before = (tmp_path / "labels" / "team.journal.jsonl").read_text()
    args = ["label", str(compare_run), "--name", "team", "--folder", str(tmp_path / "labels"), "--no-cache", *again]
    result = invoke(args)
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and says in said and "judge-runner label --name team" in said and "another --name" in said, said
    assert (tmp_path / "labels" / "team.journal.jsonl").read_text() == before  # nothing drawn, nothing lost


@pytest.mark.parametrize(
    ("again", "says"),
    [
        (["--queries", "3"], "--queries 3 (this session: 4)"),
        (["--sample", "pairs"], "--sample pairs (this session: queries)"),
        (["--width", "0.3"], "--width 0.3 (this session: 0.1)"),
        (["--budget", "20"], "--budget (this session was drawn without a budget)"),
        (["--budget-minutes", "3"], "--budget-minutes (this session was drawn without a budget)"),
    ],
)
def test_resuming_a_plain_session_with_other_sampling_options_exits_2_naming_them(tmp_path, compare_run, again, says):
    first = Job(tmp_path, compare_run)  # --queries 4
    first.stop()
    result = invoke(["label", "--name", "team", "--folder", str(tmp_path / "labels"), "--no-cache", *again])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and says in said, said


def test_the_same_options_given_again_resume_the_session_and_say_its_draw_is_kept(tmp_path, compare_run):
    sampling = {"budget": 50, "question": "difference", "systems": ("hybrid", "fts")}
    Job(tmp_path, compare_run, sampling=sampling).stop()
    given = frozenset({"budget", "question", "systems"})
    again = Job(tmp_path, compare_run, sampling={**sampling, "given": given})
    again.stop()
    assert again.error is None and any("its own draw is kept, and --budget is not spent again" in line for line in again.lines.err)
    minutes = Job(
        tmp_path, compare_run, sampling={"minutes": 50 * 10 / 60, "question": "difference", "given": frozenset({"minutes", "question"})}
    )
    minutes.stop()  # 8.3 minutes at the session's recorded 10 s a label: the same 50 labels
    assert minutes.error is None, minutes.error


@pytest.mark.parametrize(("unit", "question"), [("pairs", "mean"), ("pairs", "difference"), ("queries", "mean"), ("queries", "difference")])
def test_a_budget_too_small_for_an_interval_says_so_instead_of_a_width_past_the_measures_range(compare_run, unit, question):
    # a new user's trial: `--budget 1 --sample pairs` said "about 1 label (0 min at 10 s each) for ±4.66 on ..." of a
    # 0-1 measure; no interval at all comes from 1 label
    run = read_run_file(compare_run)
    draw = plan_draw(run, ask(run, question, [], unit), 1 if unit == "pairs" else 12, 5, 10.0)  # 12: two whole queries
    assert "±" not in draw.text and "too few for an interval" in draw.text and f"at least 10 drawn {unit}" in draw.text, draw.text
    enough = plan_draw(run, ask(run, question, [], unit), 150, 5, 10.0)
    half = float(enough.text.split("±")[1].split()[0])
    assert 0 < half <= (1.0 if question == "difference" else 0.5), enough.text  # within the measure's range


def test_resuming_a_session_whose_width_chose_the_queries_refuses_another_count(tmp_path, compare_run):
    # a new user's trial: the plan line had "queries": null (--width chose 10), and `--queries 5` resumed it
    Job(tmp_path, compare_run, sampling={"queries": None}).stop()
    plan = json.loads((tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()[0])
    drawn = len({item["qid"] for item in plan["items"]})
    result = invoke(["label", "--name", "team", "--folder", str(tmp_path / "labels"), "--no-cache", "--queries", "5", "--seed", "1"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and f"--queries 5 (this session: {drawn})" in said and "--seed 1 (this session: 13)" in said, said


def test_for_and_systems_without_a_budget_are_compared_with_a_budget_session_being_resumed(tmp_path, compare_run):
    # a new user's trial: `label --name b1 --for mean` said only "give --budget N ... with them", naming no session value,
    # and the session's own --for difference --systems fts,hybrid was refused the same way
    sampling = {"budget": 50, "question": "difference", "systems": ("hybrid", "fts")}
    Job(tmp_path, compare_run, sampling=sampling).stop()
    result = invoke(["label", "--name", "team", "--folder", str(tmp_path / "labels"), "--no-cache", "--for", "mean"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "--for mean (this session: difference)" in said, said
    again = Job(
        tmp_path,
        compare_run,
        sampling={"question": "difference", "systems": ("hybrid", "fts"), "given": frozenset({"question", "systems"})},
    )
    again.stop()
    assert again.error is None, again.error


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--sample", "pairs", "--queries", "5"], "--queries cannot go with --sample pairs"),
        (["--sample", "pairs", "--width", "0.2"], "--width cannot go with --sample pairs"),
        (["--per-label", "5"], "--per-label cannot go with --sample queries"),
        (["--for", "mean"], "give --budget N or --budget-minutes M with them"),
    ],
)
def test_a_new_session_refuses_sampling_options_its_draw_would_ignore(tmp_path, compare_run, args, says):
    result = invoke(["label", str(compare_run), "--name", "team", "--folder", str(tmp_path / "labels"), "--no-cache", *args])
    assert result.exit_code == 2 and says in " ".join(result.output.split()), result.output
    assert not (tmp_path / "labels" / "team.journal.jsonl").exists()


def test_a_pairs_session_resumed_with_whole_query_options_says_it_has_none(tmp_path, compare_run):
    Job(tmp_path, compare_run, sampling={"kind": "pairs", "queries": None}).stop()
    result = invoke(["label", "--name", "team", "--folder", str(tmp_path / "labels"), "--no-cache", "--width", "0.5"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "--width (this session draws single pairs: it has no --width)" in said, said


@pytest.mark.parametrize("question", ["mean", "difference"])
def test_a_budget_below_one_whole_query_says_so_and_offers_pairs(tmp_path, compare_run, question):
    # a new user's trial: `--budget 1` printed "about 0 labels", "0 queries drawn", then "nothing to label: the runs
    # hold no scored query with results" of a run with 35 scored queries
    args = [
        "label",
        str(compare_run),
        "--name",
        "tb",
        "--folder",
        str(tmp_path / "labels"),
        "--no-cache",
        "--budget",
        "2",
        "--for",
        question,
    ]
    result = invoke(args)
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "a budget of 2 labels buys no whole query here" in said and "--sample pairs" in said, said
    assert "the smallest budget that works here is --budget" in said
    assert "nothing to label" not in said and not (tmp_path / "labels" / "tb.journal.jsonl").exists()


def test_a_huge_number_of_minutes_buys_every_label_instead_of_an_internal_error(tmp_path, compare_run):
    # a new user's trial: --budget-minutes 1e308 overflowed (minutes * 60 is inf) and ended in exit 4
    job = Job(tmp_path, compare_run, sampling={"minutes": 1e308, "question": "difference"})
    job.stop()
    assert job.error is None and any("the budget covers every one of the" in line for line in job.lines.out), job.lines.out


def _qrels(path, pairs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{q} 0 {d} {truth_grades(QUERIES)[(q, d)]}\n" for q, d in pairs), encoding="utf-8")
    return path


@pytest.mark.parametrize("unit", ["pairs", "queries"])
def test_grades_people_gave_in_another_set_or_the_labels_folder_are_never_bought_again(tmp_path, compare_run, unit):
    # a new user's trial: `label --budget 40 --sample pairs` drew 11 pairs already labelled in another set (in the
    # cache), and another try drew 60 of 60 already-labelled pairs: ten minutes of a person's time, all repeated
    truths = truth_grades(QUERIES)
    in_cache = [pair for pair in truths if int(pair[0][1:]) in range(5, 15)]
    in_folder = [pair for pair in truths if int(pair[0][1:]) in range(15, 20)]
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        import_human_qrels(cache, _qrels(tmp_path / "other.qrels", in_cache), "other")
    _qrels(tmp_path / "labels" / "old.qrels", in_folder)
    job = Job(tmp_path, compare_run, sampling={"budget": 60, "kind": unit, "question": "difference"})
    plan = json.loads((tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()[0])
    known = set(in_cache) | set(in_folder)
    drawn = {(i["qid"], i["source"]) for i in plan["items"]}
    assert drawn and not drawn & known
    record = plan["budget"]
    returned = {(f"q{q}", f"docs/q{q}-d{d}.md") for q in range(QUERIES) for s in ("hybrid", "fts") for d in ranking(q, s)}
    reused = len(known & returned)
    assert record["reused"] == reused and {(q, d) for q, d, _ in record["known"]} == known & returned
    [line] = [out for out in job.lines.out if out.startswith("about ")]
    assert f"{reused} labels people gave before (other sets, the labels folder) reused: free" in line, line
    if unit == "queries":  # a query every document of which people graded is known: probability 1, never drawn
        assert all(record["probabilities"][f"q{q}"] == 1 for q in range(5, 20))
    for _ in plan["items"]:
        item = state(job.url, "tab-one1")["item"]
        act(job.url, "label", "tab-one1", item=item["id"], grade=truths[(item["qid"], item["source"])])
    job.stop()
    assert "known without a draw" in job.lines.out[-1], job.lines.out[-1]  # the estimate counts them as known


def test_a_budget_with_every_label_known_elsewhere_buys_nothing_and_says_so(tmp_path, compare_run):
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        import_human_qrels(cache, _qrels(tmp_path / "all.qrels", list(truth_grades(QUERIES))), "all")
    args = [
        "label",
        str(compare_run),
        "--name",
        "again",
        "--folder",
        str(tmp_path / "labels"),
        "--cache",
        str(tmp_path / "judgments.sqlite"),
    ]
    result = invoke([*args, "--budget", "60", "--sample", "pairs", "--for", "difference"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "every unit is labelled already" in said, said
    assert not (tmp_path / "labels" / "again.journal.jsonl").exists()


@pytest.mark.parametrize("unit", ["queries", "pairs"])
def test_a_census_is_the_peoples_exact_figure_on_the_query_set_with_no_interval_inflation(compare_run, unit):
    run = read_run_file(compare_run)
    question = ask(run, "difference", [], unit)
    draw = plan_draw(run, question, 10_000, 3, 10.0)  # covers every label still open
    assert draw.census and "covers every one of the" in draw.text
    truths = truth_grades(QUERIES)
    given = {(i.qid, i.source): truths[(i.qid, i.source)] for i in draw.items}
    found = estimate_budget(run, draw.record(3, 10.0, "test"), given)
    exact = true_value(QUERIES) if unit == "queries" else true_scaled_dcg(QUERIES)
    assert found.census and found.exact == pytest.approx(exact, abs=1e-9)
    # over queries like these: the people's own t interval of the per-query values, no design term, no judge
    if unit == "queries":
        pool = pool_of(run, question)  # the run's own people's grades count as given too
        values = list(query_values(pool, question, {**pool.human, **given})[1].values())
    else:
        totals = dict.fromkeys(range(QUERIES), 0.0)
        for (q, d), c in pair_coefficients(pool_of(run, question), question).items():
            totals[int(q[1:])] += c * truths[(q, d)]
        values = list(totals.values())
    half = stats.t.ppf(0.975, QUERIES - 1) * statistics.stdev(values) / math.sqrt(QUERIES)
    assert found.found is not None and found.found.weight == 0 and not found.found.judge_informative
    assert found.found.ci95 == pytest.approx((exact - half, exact + half), abs=1e-9)
    [line] = found.lines()
    assert line.startswith(f"the people's exact figure of {question.text()}: {exact:+.3f} on this query set (a census"), line
    assert "over queries like these [" in line and "no sampling error" in line


def test_the_command_never_draws_a_pair_labelled_in_another_set_and_says_how_many_it_reused(tmp_path, compare_run):
    truths = truth_grades(QUERIES)
    labelled = [pair for pair in truths if int(pair[0][1:]) % 2]  # half the queries, every document, in set 'other'
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        import_human_qrels(cache, _qrels(tmp_path / "other.qrels", labelled), "other")
    proc = spawn_label(tmp_path, str(compare_run), "--budget", "40", "--sample", "pairs", "--for", "difference")
    try:
        before: list[str] = []
        while not (line := proc.stdout.readline()).startswith("  http://127.0.0.1:"):
            assert line or proc.poll() is None, proc.stderr.read()
            before.append(line)
        out, err = stop_process(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    [buys] = [b for b in before if b.startswith("about 40 labels")]
    assert "people gave before (other sets, the labels folder) reused: free" in buys, buys
    plan = json.loads((tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()[0])
    assert plan["items"] and not {(i["qid"], i["source"]) for i in plan["items"]} & set(labelled)  # about 40: a weighted draw
